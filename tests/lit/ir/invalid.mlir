// RUN: transfuse-opt %s -split-input-file -verify-diagnostics

// One case per verifier and shape-inference error of ir/TransfuseOps.cpp,
// plus ODS type-constraint failures and declared result types that contradict
// the inferred ones. An error from shape inference is followed by the
// generic "failed to infer returned types" error on the same op.

// Tests that a param needs a non-empty name.
func.func @f() {
  // expected-error @+1 {{needs a non-empty parameter name}}
  %0 = transfuse.param "" {init = #transfuse.init<zeros>} : tensor<4xf32>
  return
}

// -----

// Tests that a param rejects an unknown init kind.
func.func @f() {
  // expected-error @+2 {{expected ::mlir::transfuse::InitKind to be one of: zeros, ones, xavier_uniform, normal_0.02, uniform_fan_in}}
  // expected-error @+1 {{failed to parse TF_InitKindAttr parameter 'value'}}
  %0 = transfuse.param "w" {init = #transfuse.init<glorot>} : tensor<4x4xf32>
  return
}

// -----

// Tests that a param must have a static shape.
func.func @f() {
  // expected-error @+1 {{parameter 'w' must have a static shape, got 'tensor<?x512xf32>'}}
  %0 = transfuse.param "w" {init = #transfuse.init<zeros>} : tensor<?x512xf32>
  return
}

// -----

// Tests that init uniform_fan_in needs a fan_in.
func.func @f() {
  // expected-error @+1 {{init 'uniform_fan_in' needs a positive fan_in}}
  %0 = transfuse.param "b" {init = #transfuse.init<uniform_fan_in>} : tensor<512xf32>
  return
}

// -----

// Tests that init uniform_fan_in needs a positive fan_in.
func.func @f() {
  // expected-error @+1 {{init 'uniform_fan_in' needs a positive fan_in}}
  %0 = transfuse.param "b" {init = #transfuse.init<uniform_fan_in>, fan_in = 0 : i64} : tensor<512xf32>
  return
}

// -----

// Tests that init xavier_uniform needs a parameter of rank >= 2.
func.func @f() {
  // expected-error @+1 {{init 'xavier_uniform' needs a parameter of rank >= 2}}
  %0 = transfuse.param "b" {init = #transfuse.init<xavier_uniform>} : tensor<512xf32>
  return
}

// -----

// Tests that a param must be a float tensor (ODS type constraint).
func.func @f() {
  // expected-error @+1 {{result #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = transfuse.param "w" {init = #transfuse.init<zeros>} : tensor<4xi32>
  return
}

// -----

// Tests that a param needs an init attribute (ODS).
func.func @f() {
  // expected-error @+1 {{requires attribute 'init'}}
  %0 = transfuse.param "w" : tensor<4xf32>
  return
}

// -----

// Tests that a constant's value and result types match (ODS AllTypesMatch).
func.func @f() {
  // expected-error @+1 {{failed to verify that all of {value, result} have same type}}
  %0 = "transfuse.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<3xf32>
  return
}

// -----

// Tests that a constant must have an element type of the dialect (ODS type constraint).
func.func @f() {
  // expected-error @+1 {{result #0 must be ranked tensor of}}
  %0 = transfuse.constant dense<1> : tensor<2xi64>
  return
}

// -----

// Tests that dim rejects an axis past the rank.
func.func @f(%x: tensor<?x?xi32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = transfuse.dim %x, 2 : tensor<?x?xi32>
  return
}

// -----

// Tests that dim rejects a negative axis below -rank, naming the axis as written.
func.func @f(%x: tensor<?x?xi32>) {
  // expected-error @+1 {{axis -3 is out of range for rank 2}}
  %0 = transfuse.dim %x, -3 : tensor<?x?xi32>
  return
}

// -----

// Tests that dim has no axis on a rank-0 tensor.
func.func @f(%x: tensor<f32>) {
  // expected-error @+1 {{axis 0 is out of range for rank 0}}
  %0 = transfuse.dim %x, 0 : tensor<f32>
  return
}

// -----

// Tests that gather needs a rank-2 table.
func.func @f(%t: tensor<2x3x4xf32>, %ids: tensor<?xi32>) {
  // expected-error @+2 {{table must be [vocab, dim] with a static dim, got 2x3x4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.gather %t, %ids : (tensor<2x3x4xf32>, tensor<?xi32>) -> tensor<?x4xf32>
  return
}

// -----

// Tests that gather needs a static embedding dimension.
func.func @f(%t: tensor<1000x?xf32>, %ids: tensor<?xi32>) {
  // expected-error @+2 {{table must be [vocab, dim] with a static dim, got 1000x?}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.gather %t, %ids : (tensor<1000x?xf32>, tensor<?xi32>) -> tensor<?x?xf32>
  return
}

// -----

// Tests that gather takes i32 ids, not f32 (ODS type constraint).
func.func @f(%t: tensor<1000x64xf32>, %ids: tensor<?xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit signless integer values, but got 'tensor<?xf32>'}}
  %0 = transfuse.gather %t, %ids : (tensor<1000x64xf32>, tensor<?xf32>) -> tensor<?x64xf32>
  return
}

// -----

// Tests that gather's declared result type must equal the inferred one.
func.func @f(%t: tensor<1000x64xf32>, %ids: tensor<?x?xi32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<?x?x64xf32>' are incompatible with return type(s) of operation 'tensor<?x64xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.gather %t, %ids : (tensor<1000x64xf32>, tensor<?x?xi32>) -> tensor<?x64xf32>
  return
}

// -----

// Tests that matmul takes float tensors, not i32 (ODS type constraint).
func.func @f(%a: tensor<4x4xi32>, %b: tensor<4x4xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float values, but got 'tensor<4x4xi32>'}}
  %0 = transfuse.matmul %a, %b : (tensor<4x4xi32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

// Tests that matmul operands have one element type.
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x4xf16>) {
  // expected-error @+2 {{element types differ: 'f32' vs 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.matmul %a, %b : (tensor<4x8xf32>, tensor<8x4xf16>) -> tensor<4x4xf32>
  return
}

// -----

// Tests that matmul operands need rank >= 2.
func.func @f(%a: tensor<512xf32>, %b: tensor<512x64xf32>) {
  // expected-error @+2 {{operands need rank >= 2, got 512 and 512x64}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.matmul %a, %b : (tensor<512xf32>, tensor<512x64xf32>) -> tensor<64xf32>
  return
}

// -----

// Tests that matmul contraction sizes must agree.
func.func @f(%a: tensor<?x?x512xf32>, %b: tensor<256x64xf32>) {
  // expected-error @+2 {{contraction sizes differ: lhs ?x?x512 has K=512, rhs 256x64 has K=256}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.matmul %a, %b : (tensor<?x?x512xf32>, tensor<256x64xf32>) -> tensor<?x?x64xf32>
  return
}

// -----

// Tests that transpose_rhs changes which rhs dimension is contracted.
func.func @f(%a: tensor<?x512xf32>, %b: tensor<512x2048xf32>) {
  // expected-error @+2 {{contraction sizes differ: lhs ?x512 has K=512, rhs 512x2048 has K=2048}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.matmul %a, %b {transpose_rhs = true} : (tensor<?x512xf32>, tensor<512x2048xf32>) -> tensor<?x512xf32>
  return
}

// -----

// Tests that transpose_lhs changes which lhs dimension is contracted.
func.func @f(%a: tensor<16x512xf32>, %b: tensor<512x64xf32>) {
  // expected-error @+2 {{contraction sizes differ: lhs 16x512 has K=16, rhs 512x64 has K=512}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.matmul %a, %b {transpose_lhs = true} : (tensor<16x512xf32>, tensor<512x64xf32>) -> tensor<512x64xf32>
  return
}

// -----

// Tests that matmul batch dimensions must broadcast.
func.func @f(%a: tensor<2x8x?x64xf32>, %b: tensor<3x8x64x?xf32>) {
  // expected-error @+2 {{batch dimensions do not broadcast: dimension 0 of the broadcast result: 2 vs 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.matmul %a, %b : (tensor<2x8x?x64xf32>, tensor<3x8x64x?xf32>) -> tensor<2x8x?x?xf32>
  return
}

// -----

// Tests that matmul's declared result type must equal the inferred one.
func.func @f(%a: tensor<?x?x512xf32>, %b: tensor<2048x512xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<?x?x2048xf32>' are incompatible with return type(s) of operation 'tensor<?x?x512xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.matmul %a, %b {transpose_rhs = true} : (tensor<?x?x512xf32>, tensor<2048x512xf32>) -> tensor<?x?x512xf32>
  return
}

// -----

// Tests that a declared static size where the inferred one is `?` is rejected (types must be equal).
func.func @f(%a: tensor<?x512xf32>, %b: tensor<512x64xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<?x64xf32>' are incompatible with return type(s) of operation 'tensor<8x64xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.matmul %a, %b : (tensor<?x512xf32>, tensor<512x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

// Tests that add operands have one element type.
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+2 {{element types differ: 'f32' vs 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.add %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

// Tests that sub operands must broadcast.
func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+2 {{operands 2x3 and 2x4 do not broadcast: dimension 1 of the broadcast result: 3 vs 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.sub %a, %b : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that mul's declared result type must equal the broadcast shape.
func.func @f(%a: tensor<?x1x512xf32>, %b: tensor<8x1xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<?x8x512xf32>' are incompatible with return type(s) of operation 'tensor<?x1x512xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.mul %a, %b : (tensor<?x1x512xf32>, tensor<8x1xf32>) -> tensor<?x1x512xf32>
  return
}

// -----

// Tests that div takes float tensors, not i32 (ODS type constraint).
func.func @f(%a: tensor<4xi32>, %b: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = transfuse.div %a, %b : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

// Tests that elementwise ops reject unranked tensors (ODS type constraint).
func.func @f(%a: tensor<*xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of}}
  %0 = "transfuse.add"(%a, %b) : (tensor<*xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that relu takes float tensors, not i32 (ODS type constraint).
func.func @f(%a: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = transfuse.relu %a : tensor<4xi32>
  return
}

// -----

// Tests that a unary op's result type equals its operand type.
func.func @f(%a: tensor<?x4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<?x4xf32>' are incompatible with return type(s) of operation 'tensor<2x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "transfuse.exp"(%a) : (tensor<?x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that gelu's approximation is an enum of none or tanh.
func.func @f(%a: tensor<4xf32>) {
  // expected-error @+2 {{expected ::mlir::transfuse::GeluApproximation to be one of: none, tanh}}
  // expected-error @+1 {{failed to parse TF_GeluApproximationAttr parameter 'value'}}
  %0 = transfuse.gelu %a {approximate = #transfuse.approximation<fast>} : tensor<4xf32>
  return
}

// -----

// Tests that gelu's approximation is not a string.
func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'approximate' failed to satisfy constraint: how gelu is computed}}
  %0 = transfuse.gelu %a {approximate = "tanh"} : tensor<4xf32>
  return
}

// -----

// Tests that a linear op's activation is one of the enum's.
func.func @f(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>) {
  // expected-error @+2 {{expected ::mlir::transfuse::Activation to be one of: none, relu, gelu, gelu_tanh}}
  // expected-error @+1 {{failed to parse TF_ActivationAttr parameter 'value'}}
  %0 = transfuse.linear %x, %w {activation = #transfuse.activation<swish>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that scale needs a factor (ODS).
func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{requires attribute 'factor'}}
  %0 = transfuse.scale %a : tensor<4xf32>
  return
}

// -----

// Tests that scale's factor is an f64 attribute (ODS).
func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'factor' failed to satisfy constraint: 64-bit float attribute}}
  %0 = transfuse.scale %a {factor = 2 : i64} : tensor<4xf32>
  return
}

// -----

// Tests that select's condition is an i1 mask (ODS type constraint).
func.func @f(%c: tensor<4xf32>, %a: tensor<4xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = transfuse.select %c, %a, %a : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that select's values have one element type.
func.func @f(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<f16>) {
  // expected-error @+2 {{element types differ: 'f32' vs 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.select %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<f16>) -> tensor<4xf32>
  return
}

// -----

// Tests that select's values must broadcast.
func.func @f(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{operands 4 and 3 do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.select %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that select's condition must broadcast to the values.
func.func @f(%c: tensor<2x3xi1>, %a: tensor<2x4xf32>, %b: tensor<f32>) {
  // expected-error @+2 {{condition 2x3 does not broadcast to values 2x4: dimension 1 of the broadcast result: 3 vs 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.select %c, %a, %b : (tensor<2x3xi1>, tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that select's declared result includes the condition's broadcast dimensions.
func.func @f(%c: tensor<?x1x1x?xi1>, %a: tensor<8x?x?xf32>, %b: tensor<f32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<?x8x?x?xf32>' are incompatible with return type(s) of operation 'tensor<8x?x?xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.select %c, %a, %b : (tensor<?x1x1x?xi1>, tensor<8x?x?xf32>, tensor<f32>) -> tensor<8x?x?xf32>
  return
}

// -----

// Tests that softmax rejects an axis past the rank.
func.func @f(%a: tensor<?x8x?x?xf32>) {
  // expected-error @+1 {{softmax axis 4 is out of range for rank 4}}
  %0 = transfuse.softmax %a {axis = 4 : i64} : tensor<?x8x?x?xf32>
  return
}

// -----

// Tests that softmax rejects a negative axis below -rank, naming the axis as written.
func.func @f(%a: tensor<?x8x?x?xf32>) {
  // expected-error @+1 {{softmax axis -5 is out of range for rank 4}}
  %0 = transfuse.softmax %a {axis = -5 : i64} : tensor<?x8x?x?xf32>
  return
}

// -----

// Tests that softmax needs an axis (ODS).
func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{requires attribute 'axis'}}
  %0 = transfuse.softmax %a : tensor<4xf32>
  return
}

// -----

// Tests that rotary's head_dim divides the width.
func.func @f(%x: tensor<?x?x96xf32>, %f: tensor<16xf32>) {
  // expected-error @+1 {{head_dim 64 does not divide the input's last dimension 96}}
  %0 = transfuse.rotary %x, %f {head_dim = 64 : i64} : (tensor<?x?x96xf32>, tensor<16xf32>) -> tensor<?x?x96xf32>
  return
}

// -----

// Tests that a gated linear's result is half the product's columns.
func.func @f(%x: tensor<2x4xf32>, %w: tensor<4x8xf32>) {
  // expected-error @+1 {{result must be 'tensor<2x4xf32>', got 'tensor<2x8xf32>'}}
  %0 = transfuse.linear %x, %w {activation = #transfuse.activation<silu>, gated} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that a gated linear has an even N.
func.func @f(%x: tensor<2x4xf32>, %w: tensor<4x7xf32>) {
  // expected-error @+1 {{gated needs an even N (gate, then up columns) and no residual, got N=7}}
  %0 = transfuse.linear %x, %w {gated} : (tensor<2x4xf32>, tensor<4x7xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests that a rotary linear's columns are whole heads within N.
func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<4x32xf32>, %f: tensor<4xf32>) {
  // expected-error @+1 {{rotary needs an even head_dim and rotary_columns a multiple of it within N=32, got head_dim 8 and rotary_columns 12}}
  %0 = transfuse.linear %x, %w rotary %f {head_dim = 8 : i64, rotary_columns = 12 : i64} : (tensor<2x3x4xf32>, tensor<4x32xf32>, tensor<4xf32>) -> tensor<2x3x32xf32>
  return
}

// -----

// Tests that a rotary linear rotates whole heads (head_dim / 2 frequencies).
func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<4x32xf32>, %f: tensor<2xf32>) {
  // expected-error @+1 {{inv_freq must be f32 [head_dim/2 = 4], got 'tensor<2xf32>'}}
  %0 = transfuse.linear %x, %w rotary %f {head_dim = 8 : i64, rotary_columns = 16 : i64} : (tensor<2x3x4xf32>, tensor<4x32xf32>, tensor<2xf32>) -> tensor<2x3x32xf32>
  return
}

// -----

// Tests that a rotary linear has no activation.
func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<4x32xf32>, %f: tensor<4xf32>) {
  // expected-error @+1 {{rotary has no activation, gating or residual}}
  %0 = transfuse.linear %x, %w rotary %f {activation = #transfuse.activation<relu>, head_dim = 8 : i64, rotary_columns = 16 : i64} : (tensor<2x3x4xf32>, tensor<4x32xf32>, tensor<4xf32>) -> tensor<2x3x32xf32>
  return
}

// -----

// Tests that rotary_columns come with the rotary's frequencies.
func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<4x32xf32>) {
  // expected-error @+1 {{rotary_columns, head_dim and offset come with `rotary` inv_freq}}
  %0 = transfuse.linear %x, %w {head_dim = 8 : i64, rotary_columns = 16 : i64} : (tensor<2x3x4xf32>, tensor<4x32xf32>) -> tensor<2x3x32xf32>
  return
}

// -----

// Tests that rotary rotates at most head_dim / 2 pairs.
func.func @f(%x: tensor<?x?x128xf32>, %f: tensor<40xf32>) {
  // expected-error @+1 {{inv_freq must be f32 [R] with 2R <= head_dim}}
  %0 = transfuse.rotary %x, %f {head_dim = 64 : i64} : (tensor<?x?x128xf32>, tensor<40xf32>) -> tensor<?x?x128xf32>
  return
}

// -----

// Tests that layer_norm rejects an axis past the rank.
func.func @f(%x: tensor<?x?x512xf32>, %g: tensor<512xf32>) {
  // expected-error @+2 {{layer_norm axis 3 is out of range for rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.layer_norm %x, %g, %g {axis = 3 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x512xf32>, tensor<512xf32>, tensor<512xf32>) -> tensor<?x?x512xf32>
  return
}

// -----

// Tests that layer_norm's normalized dimensions are static.
func.func @f(%x: tensor<?x?x512xf32>, %g: tensor<512xf32>) {
  // expected-error @+2 {{normalized dimensions ?x512 must be static}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.layer_norm %x, %g, %g {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x512xf32>, tensor<512xf32>, tensor<512xf32>) -> tensor<?x?x512xf32>
  return
}

// -----

// Tests that gamma has the normalized shape.
func.func @f(%x: tensor<?x?x512xf32>, %g: tensor<256xf32>, %b: tensor<512xf32>) {
  // expected-error @+2 {{gamma has shape 256, expected the normalized shape 512}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x512xf32>, tensor<256xf32>, tensor<512xf32>) -> tensor<?x?x512xf32>
  return
}

// -----

// Tests that beta has the normalized shape.
func.func @f(%x: tensor<?x4x8xf32>, %g: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+2 {{beta has shape 8, expected the normalized shape 4x8}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<?x4x8xf32>
  return
}

// -----

// Tests that gamma has the input's element type.
func.func @f(%x: tensor<?x512xf32>, %g: tensor<512xf16>, %b: tensor<512xf32>) {
  // expected-error @+2 {{gamma element type 'f16' differs from input 'f32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x512xf32>, tensor<512xf16>, tensor<512xf32>) -> tensor<?x512xf32>
  return
}

// -----

// Tests that beta has the input's element type.
func.func @f(%x: tensor<?x512xf32>, %g: tensor<512xf32>, %b: tensor<512xbf16>) {
  // expected-error @+2 {{beta element type 'bf16' differs from input 'f32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x512xf32>, tensor<512xf32>, tensor<512xbf16>) -> tensor<?x512xf32>
  return
}

// -----

// Tests that layer_norm's epsilon is not negative.
func.func @f(%x: tensor<?x512xf32>, %g: tensor<512xf32>) {
  // expected-error @+2 {{epsilon must be >= 0, got -1.000000e-05}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.layer_norm %x, %g, %g {axis = 1 : i64, epsilon = -1.0e-05 : f64} : (tensor<?x512xf32>, tensor<512xf32>, tensor<512xf32>) -> tensor<?x512xf32>
  return
}

// -----

// Tests that layer_norm's epsilon is not NaN.
func.func @f(%x: tensor<?x512xf32>, %g: tensor<512xf32>) {
  // expected-error @+2 {{epsilon must be >= 0, got}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.layer_norm %x, %g, %g {axis = 1 : i64, epsilon = 0x7FF8000000000000 : f64} : (tensor<?x512xf32>, tensor<512xf32>, tensor<512xf32>) -> tensor<?x512xf32>
  return
}

// -----

// Tests that a reduction needs at least one axis.
func.func @f(%x: tensor<?x?x512xf32>) {
  // expected-error @+2 {{needs at least one axis}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.reduce_sum %x {axes = array<i64>} : (tensor<?x?x512xf32>) -> tensor<?x?x512xf32>
  return
}

// -----

// Tests that a reduction rejects an axis past the rank.
func.func @f(%x: tensor<?x?x512xf32>) {
  // expected-error @+2 {{reduction axis 3 is out of range for rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.reduce_mean %x {axes = array<i64: 3>} : (tensor<?x?x512xf32>) -> tensor<?x?xf32>
  return
}

// -----

// Tests that a reduction rejects an axis named twice, also through a negative alias.
func.func @f(%x: tensor<?x?x512xf32>) {
  // expected-error @+2 {{axis 2 appears twice}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.reduce_max %x {axes = array<i64: 2, -1>} : (tensor<?x?x512xf32>) -> tensor<?x?xf32>
  return
}

// -----

// Tests that keep_dims keeps reduced dimensions as 1 in the declared result.
func.func @f(%x: tensor<?x?x512xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<?x?x1xf32>' are incompatible with return type(s) of operation 'tensor<?x?xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.reduce_mean %x {axes = array<i64: 2>, keep_dims = true} : (tensor<?x?x512xf32>) -> tensor<?x?xf32>
  return
}

// -----

// Tests that a reduction takes float tensors (ODS type constraint).
func.func @f(%x: tensor<?x4xi1>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float}}
  %0 = transfuse.reduce_sum %x {axes = array<i64: 1>} : (tensor<?x4xi1>) -> tensor<?xi1>
  return
}

// -----

// Tests that dropout rejects rate 1.
func.func @f(%x: tensor<?x512xf32>) {
  // expected-error @+1 {{rate must be in [0, 1), got 1.000000e+00}}
  %0 = transfuse.dropout %x {rate = 1.0 : f64, seed = 0 : i64, stream = 0 : i64} : tensor<?x512xf32>
  return
}

// -----

// Tests that dropout rejects a negative rate.
func.func @f(%x: tensor<?x512xf32>) {
  // expected-error @+1 {{rate must be in [0, 1), got -1.000000e-01}}
  %0 = transfuse.dropout %x {rate = -0.1 : f64, seed = 0 : i64, stream = 0 : i64} : tensor<?x512xf32>
  return
}

// -----

// Tests that dropout rejects a NaN rate.
func.func @f(%x: tensor<?x512xf32>) {
  // expected-error @+1 {{rate must be in [0, 1), got nan}}
  %0 = transfuse.dropout %x {rate = 0x7FF8000000000000 : f64, seed = 0 : i64, stream = 0 : i64} : tensor<?x512xf32>
  return
}

// -----

// Tests that dropout's result has its input's type (ODS AllTypesMatch).
func.func @f(%x: tensor<?x512xf32>) {
  // expected-error @+1 {{failed to verify that all of {input, result} have same type}}
  %0 = "transfuse.dropout"(%x) <{rate = 0.1 : f64, seed = 0 : i64, stream = 0 : i64}> : (tensor<?x512xf32>) -> tensor<4x512xf32>
  return
}

// -----

// Tests that dropout's step is an index (ODS type constraint).
func.func @f(%x: tensor<?x512xf32>, %s: i64) {
  // expected-error @+1 {{operand #1 must be index, but got 'i64'}}
  %0 = "transfuse.dropout"(%x, %s) <{rate = 0.1 : f64, seed = 0 : i64, stream = 0 : i64}> : (tensor<?x512xf32>, i64) -> tensor<?x512xf32>
  return
}

// -----

// Tests that dropout needs a seed (ODS).
func.func @f(%x: tensor<?x512xf32>) {
  // expected-error @+1 {{requires attribute 'seed'}}
  %0 = transfuse.dropout %x {rate = 0.1 : f64, stream = 0 : i64} : tensor<?x512xf32>
  return
}

// -----

// Tests that reshape keeps the element type.
func.func @f(%x: tensor<?x512xf32>) {
  // expected-error @+1 {{element type changes from 'f32' to 'f16'}}
  %0 = transfuse.reshape %x : (tensor<?x512xf32>) -> tensor<?x8x64xf16>
  return
}

// -----

// Tests that reshape keeps the number of dynamic dimensions.
func.func @f(%x: tensor<?x?x512xf32>) {
  // expected-error @+1 {{input ?x?x512 and result ?x512 must have the same number of dynamic dimensions}}
  %0 = transfuse.reshape %x : (tensor<?x?x512xf32>) -> tensor<?x512xf32>
  return
}

// -----

// Tests that reshape keeps the product of the static sizes.
func.func @f(%x: tensor<?x?x512xf32>) {
  // expected-error @+1 {{input ?x?x512 and result ?x?x8x32 hold different numbers of elements}}
  %0 = transfuse.reshape %x : (tensor<?x?x512xf32>) -> tensor<?x?x8x32xf32>
  return
}

// -----

// Tests that reshape names a rank-0 shape `scalar` in its message.
func.func @f(%x: tensor<2xf32>) {
  // expected-error @+1 {{input 2 and result scalar hold different numbers of elements}}
  %0 = transfuse.reshape %x : (tensor<2xf32>) -> tensor<f32>
  return
}

// -----

// Tests that a permutation has one entry per dimension.
func.func @f(%x: tensor<?x?x512xf32>) {
  // expected-error @+2 {{permutation has 2 entries for an input of rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.transpose %x {permutation = array<i64: 1, 0>} : (tensor<?x?x512xf32>) -> tensor<?x?x512xf32>
  return
}

// -----

// Tests that a permutation names each dimension once.
func.func @f(%x: tensor<?x?x512xf32>) {
  // expected-error @+2 {{permutation is not a permutation of 0..2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.transpose %x {permutation = array<i64: 0, 0, 2>} : (tensor<?x?x512xf32>) -> tensor<?x?x512xf32>
  return
}

// -----

// Tests that a permutation has no entry past the rank.
func.func @f(%x: tensor<?x?x512xf32>) {
  // expected-error @+2 {{permutation is not a permutation of 0..2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.transpose %x {permutation = array<i64: 0, 3, 1>} : (tensor<?x?x512xf32>) -> tensor<?x512x?xf32>
  return
}

// -----

// Tests that a permutation has no negative entry.
func.func @f(%x: tensor<?x?x512xf32>) {
  // expected-error @+2 {{permutation is not a permutation of 0..2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.transpose %x {permutation = array<i64: 0, -1, 1>} : (tensor<?x?x512xf32>) -> tensor<?x512x?xf32>
  return
}

// -----

// Tests that transpose's declared result type must equal the permuted shape.
func.func @f(%x: tensor<?x?x8x64xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<?x8x?x64xf32>' are incompatible with return type(s) of operation 'tensor<?x?x8x64xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.transpose %x {permutation = array<i64: 0, 2, 1, 3>} : (tensor<?x?x8x64xf32>) -> tensor<?x?x8x64xf32>
  return
}

// -----

// Tests that concat needs at least one input.
func.func @f() {
  // expected-error @+2 {{needs at least one input}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.concat {axis = 0 : i64} : () -> tensor<2xf32>
  return
}

// -----

// Tests that concat rejects an axis past the rank.
func.func @f(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{concat axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.concat %a, %a {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

// Tests that concat inputs have one rank.
func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x3x1xf32>) {
  // expected-error @+2 {{input 1 has type 'tensor<2x3x1xf32>', incompatible with input 0 'tensor<2x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3x1xf32>) -> tensor<4x3xf32>
  return
}

// -----

// Tests that concat inputs have one element type.
func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) {
  // expected-error @+2 {{input 2 has type 'tensor<2x3xf16>', incompatible with input 0 'tensor<2x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.concat %a, %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<6x3xf32>
  return
}

// -----

// Tests that concat inputs agree off the concatenation axis.
func.func @f(%a: tensor<2x?xf32>, %b: tensor<4x3xf32>) {
  // expected-error @+2 {{input 1 has size 4 in dimension 0, expected 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.concat %a, %b {axis = 1 : i64} : (tensor<2x?xf32>, tensor<4x3xf32>) -> tensor<2x?xf32>
  return
}

// -----

// Tests that a later input is checked against the sizes refined by earlier ones.
func.func @f(%a: tensor<?x3xf32>, %b: tensor<2x3xf32>, %c: tensor<4x3xf32>) {
  // expected-error @+2 {{input 2 has size 4 in dimension 0, expected 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.concat %a, %b, %c {axis = 1 : i64} : (tensor<?x3xf32>, tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x9xf32>
  return
}

// -----

// Tests that concat's declared result sums the axis sizes.
func.func @f(%a: tensor<?x3xf32>, %b: tensor<?x5xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<?x8xf32>' are incompatible with return type(s) of operation 'tensor<?x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.concat %a, %b {axis = -1 : i64} : (tensor<?x3xf32>, tensor<?x5xf32>) -> tensor<?x3xf32>
  return
}

// -----

// Tests that split rejects an axis past the rank.
func.func @f(%w: tensor<1536x512xf32>) {
  // expected-error @+2 {{split axis -3 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = transfuse.split %w {axis = -3 : i64, sizes = array<i64: 768, 768>} : (tensor<1536x512xf32>) -> (tensor<768x512xf32>, tensor<768x512xf32>)
  return
}

// -----

// Tests that split's axis is static.
func.func @f(%x: tensor<?x512xf32>) {
  // expected-error @+2 {{split axis 0 must be static}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = transfuse.split %x {axis = 0 : i64, sizes = array<i64: 1, 1>} : (tensor<?x512xf32>) -> (tensor<1x512xf32>, tensor<1x512xf32>)
  return
}

// -----

// Tests that split sizes are positive.
func.func @f(%w: tensor<1536x512xf32>) {
  // expected-error @+2 {{split sizes must be positive, got 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = transfuse.split %w {axis = 0 : i64, sizes = array<i64: 1536, 0>} : (tensor<1536x512xf32>) -> (tensor<1536x512xf32>, tensor<0x512xf32>)
  return
}

// -----

// Tests that split sizes sum to the axis size.
func.func @f(%w: tensor<1536x512xf32>) {
  // expected-error @+2 {{split sizes sum to 1024 but axis 0 has size 1536}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = transfuse.split %w {axis = 0 : i64, sizes = array<i64: 512, 512>} : (tensor<1536x512xf32>) -> (tensor<512x512xf32>, tensor<512x512xf32>)
  return
}

// -----

// Tests that split has one result per size.
func.func @f(%w: tensor<1536x512xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<512x512xf32>', 'tensor<512x512xf32>', 'tensor<512x512xf32>' are incompatible with return type(s) of operation 'tensor<512x512xf32>', 'tensor<1024x512xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = transfuse.split %w {axis = 0 : i64, sizes = array<i64: 512, 512, 512>} : (tensor<1536x512xf32>) -> (tensor<512x512xf32>, tensor<1024x512xf32>)
  return
}

// -----

// Tests that slice rejects an axis past the rank.
func.func @f(%x: tensor<1024x768xf32>) {
  // expected-error @+2 {{slice axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.slice %x {axis = 2 : i64, start = 0 : i64, size = 1 : i64} : (tensor<1024x768xf32>) -> tensor<1024x1xf32>
  return
}

// -----

// Tests that slice needs a length operand or a size attribute.
func.func @f(%x: tensor<1024x768xf32>) {
  // expected-error @+2 {{needs exactly one of a `length` operand or a `size` attribute}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.slice %x {axis = 0 : i64, start = 0 : i64} : (tensor<1024x768xf32>) -> tensor<?x768xf32>
  return
}

// -----

// Tests that slice takes a length operand or a size attribute, not both.
func.func @f(%x: tensor<1024x768xf32>, %t: index) {
  // expected-error @+2 {{needs exactly one of a `length` operand or a `size` attribute}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.slice %x length %t {axis = 0 : i64, start = 0 : i64, size = 4 : i64} : (tensor<1024x768xf32>, index) -> tensor<4x768xf32>
  return
}

// -----

// Tests that slice's start is not negative, also on a dynamic axis.
func.func @f(%x: tensor<?x768xf32>) {
  // expected-error @+2 {{slice start -1 must be >= 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.slice %x {axis = 0 : i64, start = -1 : i64, size = 2 : i64} : (tensor<?x768xf32>) -> tensor<2x768xf32>
  return
}

// -----

// Tests that slice's size is not negative.
func.func @f(%x: tensor<?x768xf32>) {
  // expected-error @+2 {{slice size -2 must be >= 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.slice %x {axis = 0 : i64, start = 1 : i64, size = -2 : i64} : (tensor<?x768xf32>) -> tensor<?x768xf32>
  return
}

// -----

// Tests that slice's start lies within a static axis.
func.func @f(%x: tensor<1024x768xf32>, %t: index) {
  // expected-error @+2 {{start 1025 is outside axis 0 of size 1024}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.slice %x length %t {axis = 0 : i64, start = 1025 : i64} : (tensor<1024x768xf32>, index) -> tensor<?x768xf32>
  return
}

// -----

// Tests that slice's end lies within a static axis.
func.func @f(%x: tensor<1024x768xf32>) {
  // expected-error @+2 {{slice [1000, 1040) is outside axis 0 of size 1024}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.slice %x {axis = 0 : i64, start = 1000 : i64, size = 40 : i64} : (tensor<1024x768xf32>) -> tensor<40x768xf32>
  return
}

// -----

// Tests that a slice with a length operand has a dynamic result dimension.
func.func @f(%x: tensor<1024x768xf32>, %t: index) {
  // expected-error @+2 {{inferred type(s) 'tensor<?x768xf32>' are incompatible with return type(s) of operation 'tensor<16x768xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.slice %x length %t {axis = 0 : i64, start = 0 : i64} : (tensor<1024x768xf32>, index) -> tensor<16x768xf32>
  return
}

// -----

// Tests that slice's length is an index (ODS type constraint).
func.func @f(%x: tensor<1024x768xf32>, %t: i32) {
  // expected-error @+1 {{operand #1 must be index, but got 'i32'}}
  %0 = "transfuse.slice"(%x, %t) <{axis = 0 : i64, start = 0 : i64, operandSegmentSizes = array<i32: 1, 0, 1>}> : (tensor<1024x768xf32>, i32) -> tensor<?x768xf32>
  return
}

// -----

// Tests that causal_mask's result has rank 2.
func.func @f(%t: index) {
  // expected-error @+1 {{result must be a rank-2 [query, key] mask, got 'tensor<1x?x?xi1>'}}
  %0 = transfuse.causal_mask %t, %t : tensor<1x?x?xi1>
  return
}

// -----

// Tests that causal_mask's result is an i1 mask (ODS type constraint).
func.func @f(%t: index) {
  // expected-error @+1 {{result #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<?x?xf32>'}}
  %0 = transfuse.causal_mask %t, %t : tensor<?x?xf32>
  return
}

// -----

// Tests that key_padding_mask takes i32 tokens, not f32 (ODS type constraint).
func.func @f(%x: tensor<?x?xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit signless integer values, but got 'tensor<?x?xf32>'}}
  %0 = transfuse.key_padding_mask %x {pad_id = 1 : i64} : (tensor<?x?xf32>) -> tensor<?x?xi1>
  return
}

// -----

// Tests that key_padding_mask's declared result has the tokens' shape.
func.func @f(%x: tensor<?x?xi32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<?x?xi1>' are incompatible with return type(s) of operation 'tensor<?x1x1x?xi1>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = transfuse.key_padding_mask %x {pad_id = 1 : i64} : (tensor<?x?xi32>) -> tensor<?x1x1x?xi1>
  return
}

// -----

// Tests that positional_encoding's result has rank 2.
func.func @f(%t: index) {
  // expected-error @+1 {{result must be [length, D] with a static D, got 'tensor<?xf32>'}}
  %0 = transfuse.positional_encoding %t : tensor<?xf32>
  return
}

// -----

// Tests that positional_encoding's D is static.
func.func @f(%t: index) {
  // expected-error @+1 {{result must be [length, D] with a static D, got 'tensor<?x?xf32>'}}
  %0 = transfuse.positional_encoding %t offset %t : tensor<?x?xf32>
  return
}

// -----

// Tests that positional_encoding's halves (Marian's arrangement) need an even D.
func.func @f(%t: index) {
  // expected-error @+1 {{halves needs an even D, got 5}}
  %0 = transfuse.positional_encoding %t {halves} : tensor<?x5xf32>
  return
}

// -----

// Tests that positional_encoding's result is a float tensor (ODS type constraint).
func.func @f(%t: index) {
  // expected-error @+1 {{result #0 must be ranked tensor of 32-bit float}}
  %0 = transfuse.positional_encoding %t : tensor<?x512xi32>
  return
}

// -----

// Tests that a tfk storage op holds one size per dynamic dimension.
func.func @f() {
  %b = tfk.input_dim 0, 0
  // expected-error @+1 {{'tfk.alloc' op has 1 sizes for 2 dynamic dimensions}}
  %a = tfk.alloc[%b] : memref<?x?xf32>
  return
}

// -----

// Tests that a kernel call reads as many operands as its kernel takes.
func.func @f(%x: memref<4xf32>) {
  // expected-error @+1 {{'tfk.softmax' op reads 2 operands; it takes 1}}
  tfk.softmax (%x, %x : memref<4xf32>, memref<4xf32>) into (%x : memref<4xf32>) {axis = 0 : i64}
  return
}

// -----

// Tests that a kernel call writes as many buffers as its kernel writes.
func.func @f(%x: memref<4xf32>) {
  // expected-error @+1 {{'tfk.layer_norm_grad' op writes 1 buffers; it writes 3}}
  tfk.layer_norm_grad (%x, %x, %x : memref<4xf32>, memref<4xf32>, memref<4xf32>) into (%x : memref<4xf32>) {axis = 0 : i64, epsilon = 1.0e-05 : f64}
  return
}

// -----

// Tests that a kernel call's attributes are typed.
func.func @f(%x: memref<4xf32>) {
  // expected-error @+1 {{'tfk.softmax' op requires attribute 'axis'}}
  tfk.softmax (%x : memref<4xf32>) into (%x : memref<4xf32>) {dim = 0 : i64}
  return
}

// -----

// Tests that tfk.binary names a formula of two operands.
func.func @f(%x: memref<4xf32>) {
  // expected-error @+1 {{'tfk.binary' op kind 'kExp' is no formula of 2 operand(s)}}
  tfk.binary (%x, %x : memref<4xf32>, memref<4xf32>) into (%x : memref<4xf32>) {kind = "kExp"}
  return
}

// -----

// Tests that tfk.reduce names a sum, a mean or a maximum.
func.func @f(%x: memref<4xf32>) {
  // expected-error @+1 {{'tfk.reduce' op kind 'kMin' is not kSum, kMean or kMax}}
  tfk.reduce (%x : memref<4xf32>) into (%x : memref<4xf32>) {axes_mask = 1 : i64, kind = "kMin"}
  return
}

// -----

// Tests that tfk.activation_grad names an activation.
func.func @f(%x: memref<4xf32>) {
  // expected-error @+1 {{'tfk.activation_grad' op needs an activation}}
  tfk.activation_grad (%x, %x : memref<4xf32>, memref<4xf32>) into (%x : memref<4xf32>) {activation = #transfuse.activation<none>}
  return
}

// -----

// Tests that a head view stays inside its source's columns.
func.func @f(%x: memref<2x3x24xf32>) {
  // expected-error @+1 {{'tfk.heads' op reads columns past the source's 24}}
  %h = tfk.heads %x column 20 : memref<2x3x24xf32> to memref<2x2x3x4xf32, strided<[72, 4, 24, 1], offset: 20>>
  return
}

// -----

// Tests that tfk.elementwise says how each input is read.
func.func @f(%x: memref<4xf32>) {
  // expected-error @+1 {{'tfk.elementwise' op input kind "diagonal" is not full, trailing, splat or strided}}
  tfk.elementwise %x into %x {kinds = ["diagonal"]} : memref<4xf32> into memref<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    tfk.yield %a : tensor<4xf32>
  }
  return
}

// -----

// Tests that tfk.check knows its predicate.
func.func @f() {
  %b = tfk.input_dim 0, 0
  // expected-error @+1 {{'tfk.check' op predicate must be "le" or "eq"}}
  tfk.check "lt" %b, %b, "message"
  return
}

// -----

// Tests that an entry's device is one tfk knows.
// expected-error @+1 {{'tfk.device' must be "cpu" or "cuda"}}
func.func @f() attributes {tfk.device = "tpu"} {
  return
}

// -----

// Tests that state has a name.
func.func @f() {
  // expected-error @+1 {{'tfk.state' op needs a name}}
  %s = tfk.state "" : memref<4xf32>
  return
}

// -----

// Tests that a state tensor is [B, H, positions, D] with static H and D.
func.func @f(%k: tensor<?x?x?x64xf32>) {
  // expected-error @+1 {{'transfuse.state_write' op input must be [B, H, positions, D] with static H and D, got 'tensor<?x?x?x64xf32>'}}
  transfuse.state_write "kv", %k : tensor<?x?x?x64xf32>
  return
}

// -----

// Tests that a cache's result is the input's heads with a dynamic length.
func.func @f(%k: tensor<?x8x1x64xf32>) -> tensor<?x8x4x64xf32> {
  // expected-error @+1 {{'transfuse.cache_append' op result must be the input's [B, H, ?, D], got 'tensor<?x8x4x64xf32>'}}
  %c = transfuse.cache_append "kv", %k : (tensor<?x8x1x64xf32>) -> tensor<?x8x4x64xf32>
  return %c : tensor<?x8x4x64xf32>
}

// -----

// Tests that a state read has one size per dynamic dimension.
func.func @f(%b: index) -> tensor<?x8x?x64xf32> {
  // expected-error @+1 {{'transfuse.state_read' op needs one size per dynamic dimension of 'tensor<?x8x?x64xf32>', got 1}}
  %r = transfuse.state_read "kv" [%b] : tensor<?x8x?x64xf32>
  return %r : tensor<?x8x?x64xf32>
}

// -----

// Tests that a negative slice start needs an offset to count from.
func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{slice start -1 must be >= 0 (or have an offset)}}
  // expected-error @+1 {{'transfuse.slice' op failed to infer returned types}}
  %0 = transfuse.slice %x {axis = 0 : i64, start = -1 : i64, size = 1 : i64} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  return
}

// -----

func.func @pool_rank(%h: tensor<2x8xf32>, %keep: tensor<2x3xi1>) {
  // expected-error @+1 {{input must be [B, S, D], got 'tensor<2x8xf32>'}}
  %p = transfuse.pool %h, %keep {mode = #transfuse.pooling<cls>} : (tensor<2x8xf32>, tensor<2x3xi1>) -> tensor<2x8xf32>
  return
}

// -----

func.func @pool_keep(%h: tensor<2x3x8xf32>, %keep: tensor<2x4xi1>) {
  // expected-error @+1 {{keep 'tensor<2x4xi1>' does not match the input 'tensor<2x3x8xf32>'}}
  %p = transfuse.pool %h, %keep {mode = #transfuse.pooling<max>} : (tensor<2x3x8xf32>, tensor<2x4xi1>) -> tensor<2x8xf32>
  return
}

// -----

func.func @pool_mode(%h: tensor<2x3x8xf32>, %keep: tensor<2x3xi1>) {
  // expected-error @+2 {{expected ::mlir::transfuse::Pooling to be one of: cls, mean, max}}
  // expected-error @+1 {{failed to parse TF_PoolingAttr parameter 'value'}}
  %p = transfuse.pool %h, %keep {mode = #transfuse.pooling<sum>} : (tensor<2x3x8xf32>, tensor<2x3xi1>) -> tensor<2x8xf32>
  return
}

// -----

func.func @l2_epsilon(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{epsilon must be positive, got 0}}
  %n = transfuse.l2_normalize %x {epsilon = 0.0 : f64} : tensor<2x8xf32>
  return
}

// -----

func.func @unfold_partial_patches(%x: tensor<2x3x10x8xf32>) {
  // expected-error @+1 {{the image 10x8 is not a whole number of 4x4 patches}}
  %p = transfuse.unfold %x {patch = array<i64: 4, 4>} : (tensor<2x3x10x8xf32>) -> tensor<2x4x48xf32>
  return
}

// -----

func.func @unfold_dynamic_image(%x: tensor<2x3x?x8xf32>) {
  // expected-error @+1 {{C, H and W must be static, got 'tensor<2x3x?x8xf32>'}}
  %p = transfuse.unfold %x {patch = array<i64: 4, 4>} : (tensor<2x3x?x8xf32>) -> tensor<2x?x48xf32>
  return
}

// -----

func.func @unfold_rank(%x: tensor<3x8x8xf32>) {
  // expected-error @+1 {{input must be [B, C, H, W] and patch [ph, pw] >= 1, got 'tensor<3x8x8xf32>'}}
  %p = transfuse.unfold %x {patch = array<i64: 4, 4>} : (tensor<3x8x8xf32>) -> tensor<3x4x16xf32>
  return
}
