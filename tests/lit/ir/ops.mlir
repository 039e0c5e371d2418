// RUN: transfuse-opt %s | transfuse-opt | FileCheck %s
// RUN: transfuse-opt %s -mlir-print-op-generic | transfuse-opt | FileCheck %s

// Round trip of every transfuse op through the custom assembly format and
// through the generic form, with each attribute and optional operand, and
// dynamic (`?`) batch and sequence dimensions wherever the op allows them.

// CHECK-LABEL: func.func @sources
func.func @sources(%tokens: tensor<?x?xi32>) -> (tensor<37000xf32>, tensor<512x512xf32>, tensor<8xf16>, tensor<4xbf16>, tensor<f32>, tensor<2x3xi32>, tensor<2xi1>, index, index) {
  // CHECK: transfuse.param "generator.bias" {fan_in = 512 : i64, init = #transfuse.init<uniform_fan_in>, optional} : tensor<37000xf32>
  %b = transfuse.param "generator.bias" {init = #transfuse.init<uniform_fan_in>, fan_in = 512 : i64, optional} : tensor<37000xf32>
  // CHECK: transfuse.param "layers.0.w" {init = #transfuse.init<xavier_uniform>} : tensor<512x512xf32>
  %w = transfuse.param "layers.0.w" {init = #transfuse.init<xavier_uniform>} : tensor<512x512xf32>
  // CHECK: transfuse.param "ln.gamma" {init = #transfuse.init<ones>} : tensor<8xf16>
  %g = transfuse.param "ln.gamma" {init = #transfuse.init<ones>} : tensor<8xf16>
  // CHECK: transfuse.param "emb" {init = #transfuse.init<normal_0.02>} : tensor<4xbf16>
  %e = transfuse.param "emb" {init = #transfuse.init<normal_0.02>} : tensor<4xbf16>
  // CHECK: transfuse.constant dense<0xFF800000> : tensor<f32>
  %ninf = transfuse.constant dense<0xFF800000> : tensor<f32>
  // CHECK: transfuse.constant dense<{{\[}}[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  %ci = transfuse.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
  // CHECK: transfuse.constant dense<[true, false]> : tensor<2xi1>
  %cb = transfuse.constant dense<[true, false]> : tensor<2xi1>
  // CHECK: transfuse.dim %{{[^ ,]+}}, 1 : tensor<?x?xi32>
  %t = transfuse.dim %tokens, 1 : tensor<?x?xi32>
  // CHECK: transfuse.dim %{{[^ ,]+}}, -2 : tensor<?x?xi32>
  %n = transfuse.dim %tokens, -2 : tensor<?x?xi32>
  return %b, %w, %g, %e, %ninf, %ci, %cb, %t, %n : tensor<37000xf32>, tensor<512x512xf32>, tensor<8xf16>, tensor<4xbf16>, tensor<f32>, tensor<2x3xi32>, tensor<2xi1>, index, index
}

// CHECK-LABEL: func.func @gather
func.func @gather(%table: tensor<1000x512xf32>, %ids: tensor<?x?xi32>, %id: tensor<i32>, %dyn: tensor<?x64xf64>) -> (tensor<?x?x512xf32>, tensor<512xf32>, tensor<?x?x64xf64>) {
  // CHECK: transfuse.gather %{{[^ ,]+}}, %{{[^ ,]+}} : (tensor<1000x512xf32>, tensor<?x?xi32>) -> tensor<?x?x512xf32>
  %0 = transfuse.gather %table, %ids : (tensor<1000x512xf32>, tensor<?x?xi32>) -> tensor<?x?x512xf32>
  // CHECK: transfuse.gather %{{[^ ,]+}}, %{{[^ ,]+}} : (tensor<1000x512xf32>, tensor<i32>) -> tensor<512xf32>
  %1 = transfuse.gather %table, %id : (tensor<1000x512xf32>, tensor<i32>) -> tensor<512xf32>
  // CHECK: transfuse.gather %{{[^ ,]+}}, %{{[^ ,]+}} : (tensor<?x64xf64>, tensor<?x?xi32>) -> tensor<?x?x64xf64>
  %2 = transfuse.gather %dyn, %ids : (tensor<?x64xf64>, tensor<?x?xi32>) -> tensor<?x?x64xf64>
  return %0, %1, %2 : tensor<?x?x512xf32>, tensor<512xf32>, tensor<?x?x64xf64>
}

// CHECK-LABEL: func.func @matmul
func.func @matmul(%x: tensor<?x?x512xf32>, %w: tensor<512x2048xf32>, %wt: tensor<2048x512xf32>,
                  %q: tensor<?x8x?x64xf32>, %k: tensor<?x8x?x64xf32>, %xt: tensor<?x512x?xf32>,
                  %b1: tensor<1x8x?x64xf32>, %b2: tensor<4x1x64x16xf32>)
    -> (tensor<?x?x2048xf32>, tensor<?x?x2048xf32>, tensor<?x8x?x?xf32>, tensor<?x?x2048xf32>, tensor<?x?x2048xf32>, tensor<4x8x?x16xf32>) {
  // CHECK: transfuse.matmul %{{[^ ,]+}}, %{{[^ ,]+}} : (tensor<?x?x512xf32>, tensor<512x2048xf32>) -> tensor<?x?x2048xf32>
  %0 = transfuse.matmul %x, %w : (tensor<?x?x512xf32>, tensor<512x2048xf32>) -> tensor<?x?x2048xf32>
  // CHECK: transfuse.matmul %{{[^ ,]+}}, %{{[^ ,]+}} {transpose_rhs = true} : (tensor<?x?x512xf32>, tensor<2048x512xf32>) -> tensor<?x?x2048xf32>
  %1 = transfuse.matmul %x, %wt {transpose_rhs = true} : (tensor<?x?x512xf32>, tensor<2048x512xf32>) -> tensor<?x?x2048xf32>
  // CHECK: transfuse.matmul %{{[^ ,]+}}, %{{[^ ,]+}} {transpose_rhs = true} : (tensor<?x8x?x64xf32>, tensor<?x8x?x64xf32>) -> tensor<?x8x?x?xf32>
  %2 = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<?x8x?x64xf32>, tensor<?x8x?x64xf32>) -> tensor<?x8x?x?xf32>
  // CHECK: transfuse.matmul %{{[^ ,]+}}, %{{[^ ,]+}} {transpose_lhs = true} : (tensor<?x512x?xf32>, tensor<512x2048xf32>) -> tensor<?x?x2048xf32>
  %3 = transfuse.matmul %xt, %w {transpose_lhs = true} : (tensor<?x512x?xf32>, tensor<512x2048xf32>) -> tensor<?x?x2048xf32>
  // CHECK: transfuse.matmul %{{[^ ,]+}}, %{{[^ ,]+}} {transpose_lhs = true, transpose_rhs = true} : (tensor<?x512x?xf32>, tensor<2048x512xf32>) -> tensor<?x?x2048xf32>
  %4 = transfuse.matmul %xt, %wt {transpose_lhs = true, transpose_rhs = true} : (tensor<?x512x?xf32>, tensor<2048x512xf32>) -> tensor<?x?x2048xf32>
  // Batch dimensions broadcast both ways: [1, 8] with [4, 1] gives [4, 8].
  // CHECK: transfuse.matmul %{{[^ ,]+}}, %{{[^ ,]+}} : (tensor<1x8x?x64xf32>, tensor<4x1x64x16xf32>) -> tensor<4x8x?x16xf32>
  %5 = transfuse.matmul %b1, %b2 : (tensor<1x8x?x64xf32>, tensor<4x1x64x16xf32>) -> tensor<4x8x?x16xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<?x?x2048xf32>, tensor<?x?x2048xf32>, tensor<?x8x?x?xf32>, tensor<?x?x2048xf32>, tensor<?x?x2048xf32>, tensor<4x8x?x16xf32>
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%x: tensor<?x?x512xf32>, %b: tensor<512xf32>, %s: tensor<f32>, %c: tensor<?x1x1xf32>, %one: tensor<?x1x512xf32>, %h: tensor<4x?xf16>)
    -> (tensor<?x?x512xf32>, tensor<?x?x512xf32>, tensor<?x?x512xf32>, tensor<?x?x512xf32>, tensor<?x?x512xf32>, tensor<4x?xf16>) {
  // CHECK: transfuse.add %{{[^ ,]+}}, %{{[^ ,]+}} : (tensor<?x?x512xf32>, tensor<512xf32>) -> tensor<?x?x512xf32>
  %0 = transfuse.add %x, %b : (tensor<?x?x512xf32>, tensor<512xf32>) -> tensor<?x?x512xf32>
  // CHECK: transfuse.sub %{{[^ ,]+}}, %{{[^ ,]+}} : (tensor<?x?x512xf32>, tensor<f32>) -> tensor<?x?x512xf32>
  %1 = transfuse.sub %0, %s : (tensor<?x?x512xf32>, tensor<f32>) -> tensor<?x?x512xf32>
  // CHECK: transfuse.mul %{{[^ ,]+}}, %{{[^ ,]+}} : (tensor<?x1x1xf32>, tensor<?x?x512xf32>) -> tensor<?x?x512xf32>
  %2 = transfuse.mul %c, %1 : (tensor<?x1x1xf32>, tensor<?x?x512xf32>) -> tensor<?x?x512xf32>
  // `?` against 1 stays `?`; 1 against 512 gives 512.
  // CHECK: transfuse.div %{{[^ ,]+}}, %{{[^ ,]+}} : (tensor<?x1x512xf32>, tensor<?x1x1xf32>) -> tensor<?x1x512xf32>
  %d = transfuse.div %one, %c : (tensor<?x1x512xf32>, tensor<?x1x1xf32>) -> tensor<?x1x512xf32>
  // CHECK: transfuse.div %{{[^ ,]+}}, %{{[^ ,]+}} : (tensor<?x?x512xf32>, tensor<?x1x512xf32>) -> tensor<?x?x512xf32>
  %3 = transfuse.div %2, %d : (tensor<?x?x512xf32>, tensor<?x1x512xf32>) -> tensor<?x?x512xf32>
  // CHECK: transfuse.relu %{{[^ ,]+}} : tensor<?x?x512xf32>
  %4 = transfuse.relu %3 : tensor<?x?x512xf32>
  // CHECK: transfuse.exp %{{[^ ,]+}} : tensor<?x?x512xf32>
  %5 = transfuse.exp %4 : tensor<?x?x512xf32>
  // CHECK: transfuse.tanh %{{[^ ,]+}} : tensor<?x?x512xf32>
  %6 = transfuse.tanh %5 : tensor<?x?x512xf32>
  // The default `approximate = #transfuse.approximation<none>` is elided when printed.
  // CHECK: transfuse.gelu %{{[^ ,]+}} : tensor<?x?x512xf32>
  %7 = transfuse.gelu %6 : tensor<?x?x512xf32>
  // CHECK: transfuse.gelu %{{[^ ,]+}} : tensor<?x?x512xf32>
  %8 = transfuse.gelu %7 {approximate = #transfuse.approximation<none>} : tensor<?x?x512xf32>
  // CHECK: transfuse.gelu %{{[^ ,]+}} {approximate = #transfuse.approximation<tanh>} : tensor<?x?x512xf32>
  %9 = transfuse.gelu %8 {approximate = #transfuse.approximation<tanh>} : tensor<?x?x512xf32>
  // CHECK: transfuse.scale %{{[^ ,]+}} {factor = 1.250000e-01 : f64} : tensor<?x?x512xf32>
  %10 = transfuse.scale %9 {factor = 0.125 : f64} : tensor<?x?x512xf32>
  // CHECK: transfuse.scale %{{[^ ,]+}} {factor = -2.000000e+00 : f64} : tensor<4x?xf16>
  %11 = transfuse.scale %h {factor = -2.0 : f64} : tensor<4x?xf16>
  return %0, %1, %7, %8, %10, %11 : tensor<?x?x512xf32>, tensor<?x?x512xf32>, tensor<?x?x512xf32>, tensor<?x?x512xf32>, tensor<?x?x512xf32>, tensor<4x?xf16>
}

// CHECK-LABEL: func.func @select
func.func @select(%m: tensor<?x1x1x?xi1>, %x: tensor<?x8x?x?xf32>, %ninf: tensor<f32>, %c: tensor<?x?xi1>, %a: tensor<4xf32>)
    -> (tensor<?x8x?x?xf32>, tensor<?x?x4xf32>) {
  // CHECK: transfuse.select %{{[^ ,]+}}, %{{[^ ,]+}}, %{{[^ ,]+}} : (tensor<?x1x1x?xi1>, tensor<?x8x?x?xf32>, tensor<f32>) -> tensor<?x8x?x?xf32>
  %0 = transfuse.select %m, %x, %ninf : (tensor<?x1x1x?xi1>, tensor<?x8x?x?xf32>, tensor<f32>) -> tensor<?x8x?x?xf32>
  // The condition may have more dimensions than the values: [?, ?, 1] with [4] and [] gives [?, ?, 4].
  %c3 = transfuse.reshape %c : (tensor<?x?xi1>) -> tensor<?x?x1xi1>
  // CHECK: transfuse.select %{{[^ ,]+}}, %{{[^ ,]+}}, %{{[^ ,]+}} : (tensor<?x?x1xi1>, tensor<4xf32>, tensor<f32>) -> tensor<?x?x4xf32>
  %1 = transfuse.select %c3, %a, %ninf : (tensor<?x?x1xi1>, tensor<4xf32>, tensor<f32>) -> tensor<?x?x4xf32>
  return %0, %1 : tensor<?x8x?x?xf32>, tensor<?x?x4xf32>
}

// CHECK-LABEL: func.func @normalizations
func.func @normalizations(%s: tensor<?x8x?x?xf32>, %x: tensor<?x?x512xf32>, %g: tensor<512xf32>, %b: tensor<512xf32>,
                          %y: tensor<?x4x8xf64>, %g2: tensor<4x8xf64>, %b2: tensor<4x8xf64>)
    -> (tensor<?x8x?x?xf32>, tensor<?x8x?x?xf32>, tensor<?x?x512xf32>, tensor<?x4x8xf64>) {
  // CHECK: transfuse.softmax %{{[^ ,]+}} {axis = 3 : i64} : tensor<?x8x?x?xf32>
  %0 = transfuse.softmax %s {axis = 3 : i64} : tensor<?x8x?x?xf32>
  // CHECK: transfuse.softmax %{{[^ ,]+}} {axis = -1 : i64} : tensor<?x8x?x?xf32>
  %1 = transfuse.softmax %s {axis = -1 : i64} : tensor<?x8x?x?xf32>
  // CHECK: transfuse.layer_norm %{{[^ ,]+}}, %{{[^ ,]+}}, %{{[^ ,]+}} {axis = 2 : i64, epsilon = 1.000000e-05 : f64} : (tensor<?x?x512xf32>, tensor<512xf32>, tensor<512xf32>) -> tensor<?x?x512xf32>
  %2 = transfuse.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x512xf32>, tensor<512xf32>, tensor<512xf32>) -> tensor<?x?x512xf32>
  // Normalizing over the last two dimensions, with a negative axis and epsilon 0.
  // CHECK: transfuse.layer_norm %{{[^ ,]+}}, %{{[^ ,]+}}, %{{[^ ,]+}} {axis = -2 : i64, epsilon = 0.000000e+00 : f64} : (tensor<?x4x8xf64>, tensor<4x8xf64>, tensor<4x8xf64>) -> tensor<?x4x8xf64>
  %3 = transfuse.layer_norm %y, %g2, %b2 {axis = -2 : i64, epsilon = 0.0 : f64} : (tensor<?x4x8xf64>, tensor<4x8xf64>, tensor<4x8xf64>) -> tensor<?x4x8xf64>
  return %0, %1, %2, %3 : tensor<?x8x?x?xf32>, tensor<?x8x?x?xf32>, tensor<?x?x512xf32>, tensor<?x4x8xf64>
}

// RMSNorm (no beta) and the rotary embedding of Q at the cache's length.
// CHECK-LABEL: func.func @llama_ops
func.func @llama_ops(%x: tensor<?x?x512xf32>, %g: tensor<512xf32>, %f: tensor<32xf32>, %len: index)
    -> (tensor<?x?x512xf32>, tensor<?x?x512xf32>) {
  // CHECK: transfuse.layer_norm %{{[^ ,]+}}, %{{[^ ,]+}} {axis = 2 : i64, epsilon = 9.9999999999999995E-7 : f64, rms} : (tensor<?x?x512xf32>, tensor<512xf32>) -> tensor<?x?x512xf32>
  %0 = transfuse.layer_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-06 : f64, rms} : (tensor<?x?x512xf32>, tensor<512xf32>) -> tensor<?x?x512xf32>
  // CHECK: transfuse.rotary %{{[^ ,]+}}, %{{[^ ,]+}} offset %{{[^ ,]+}} {head_dim = 64 : i64} : (tensor<?x?x512xf32>, tensor<32xf32>, index) -> tensor<?x?x512xf32>
  %1 = transfuse.rotary %0, %f offset %len {head_dim = 64 : i64} : (tensor<?x?x512xf32>, tensor<32xf32>, index) -> tensor<?x?x512xf32>
  return %0, %1 : tensor<?x?x512xf32>, tensor<?x?x512xf32>
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<?x?x512xf32>)
    -> (tensor<?x?xf32>, tensor<?x?x1xf32>, tensor<?xf32>, tensor<1x?x1xf32>, tensor<512xf32>) {
  // CHECK: transfuse.reduce_sum %{{[^ ,]+}} {axes = array<i64: 2>} : (tensor<?x?x512xf32>) -> tensor<?x?xf32>
  %0 = transfuse.reduce_sum %x {axes = array<i64: 2>} : (tensor<?x?x512xf32>) -> tensor<?x?xf32>
  // CHECK: transfuse.reduce_mean %{{[^ ,]+}} {axes = array<i64: -1>, keep_dims = true} : (tensor<?x?x512xf32>) -> tensor<?x?x1xf32>
  %1 = transfuse.reduce_mean %x {axes = array<i64: -1>, keep_dims = true} : (tensor<?x?x512xf32>) -> tensor<?x?x1xf32>
  // CHECK: transfuse.reduce_max %{{[^ ,]+}} {axes = array<i64: 0, 2>} : (tensor<?x?x512xf32>) -> tensor<?xf32>
  %2 = transfuse.reduce_max %x {axes = array<i64: 0, 2>} : (tensor<?x?x512xf32>) -> tensor<?xf32>
  // CHECK: transfuse.reduce_max %{{[^ ,]+}} {axes = array<i64: 2, 0>, keep_dims = true} : (tensor<?x?x512xf32>) -> tensor<1x?x1xf32>
  %3 = transfuse.reduce_max %x {axes = array<i64: 2, 0>, keep_dims = true} : (tensor<?x?x512xf32>) -> tensor<1x?x1xf32>
  // The default `keep_dims = false` is elided when printed.
  // CHECK: transfuse.reduce_sum %{{[^ ,]+}} {axes = array<i64: 0, 1>} : (tensor<?x?x512xf32>) -> tensor<512xf32>
  %4 = transfuse.reduce_sum %x {axes = array<i64: 0, 1>, keep_dims = false} : (tensor<?x?x512xf32>) -> tensor<512xf32>
  return %0, %1, %2, %3, %4 : tensor<?x?xf32>, tensor<?x?x1xf32>, tensor<?xf32>, tensor<1x?x1xf32>, tensor<512xf32>
}

// CHECK-LABEL: func.func @dropout
func.func @dropout(%x: tensor<?x?x512xf32>, %step: index) -> (tensor<?x?x512xf32>, tensor<?x?x512xf32>) {
  // CHECK: transfuse.dropout %{{[^ ,]+}} {rate = 1.000000e-01 : f64, seed = 0 : i64, stream = 3 : i64} : tensor<?x?x512xf32>
  %0 = transfuse.dropout %x {rate = 1.0e-01 : f64, seed = 0 : i64, stream = 3 : i64} : tensor<?x?x512xf32>
  // CHECK: transfuse.dropout %{{[^ ,]+}} step %{{[^ ,]+}} {rate = 5.000000e-01 : f64, seed = 42 : i64, stream = 7 : i64} : tensor<?x?x512xf32>
  %1 = transfuse.dropout %0 step %step {rate = 0.5 : f64, seed = 42 : i64, stream = 7 : i64} : tensor<?x?x512xf32>
  return %0, %1 : tensor<?x?x512xf32>, tensor<?x?x512xf32>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<?x?x512xf32>, %ids: tensor<?x?xi32>, %w: tensor<1536x512xf32>, %a: tensor<2x?x3xf32>, %b: tensor<2x5x?xf32>)
    -> (tensor<?x8x?x64xf32>, tensor<?x?x512xf32>, tensor<?x?xi32>, tensor<512x512xf32>, tensor<512x512xf32>, tensor<512x512xf32>, tensor<2x?x3xf32>, tensor<2x?x3xf32>, tensor<2x10x3xf32>) {
  // CHECK: transfuse.reshape %{{[^ ,]+}} : (tensor<?x?x512xf32>) -> tensor<?x?x8x64xf32>
  %h = transfuse.reshape %x : (tensor<?x?x512xf32>) -> tensor<?x?x8x64xf32>
  // CHECK: transfuse.transpose %{{[^ ,]+}} {permutation = array<i64: 0, 2, 1, 3>} : (tensor<?x?x8x64xf32>) -> tensor<?x8x?x64xf32>
  %t = transfuse.transpose %h {permutation = array<i64: 0, 2, 1, 3>} : (tensor<?x?x8x64xf32>) -> tensor<?x8x?x64xf32>
  // CHECK: transfuse.transpose %{{[^ ,]+}} {permutation = array<i64: 0, 2, 1, 3>} : (tensor<?x8x?x64xf32>) -> tensor<?x?x8x64xf32>
  %u = transfuse.transpose %t {permutation = array<i64: 0, 2, 1, 3>} : (tensor<?x8x?x64xf32>) -> tensor<?x?x8x64xf32>
  // CHECK: transfuse.reshape %{{[^ ,]+}} : (tensor<?x?x8x64xf32>) -> tensor<?x?x512xf32>
  %m = transfuse.reshape %u : (tensor<?x?x8x64xf32>) -> tensor<?x?x512xf32>
  // Reshape and transpose also take integer tensors.
  // CHECK: transfuse.transpose %{{[^ ,]+}} {permutation = array<i64: 1, 0>} : (tensor<?x?xi32>) -> tensor<?x?xi32>
  %it = transfuse.transpose %ids {permutation = array<i64: 1, 0>} : (tensor<?x?xi32>) -> tensor<?x?xi32>
  // CHECK: transfuse.reshape %{{[^ ,]+}} : (tensor<?x?xi32>) -> tensor<?x?x1xi32>
  %ir = transfuse.reshape %it : (tensor<?x?xi32>) -> tensor<?x?x1xi32>
  // CHECK: transfuse.reshape %{{[^ ,]+}} : (tensor<2x?x3xf32>) -> tensor<?x6xf32>
  %fl = transfuse.reshape %a : (tensor<2x?x3xf32>) -> tensor<?x6xf32>
  // CHECK: transfuse.split %{{[^ ,]+}} {axis = 0 : i64, sizes = array<i64: 512, 512, 512>} : (tensor<1536x512xf32>) -> (tensor<512x512xf32>, tensor<512x512xf32>, tensor<512x512xf32>)
  %q, %k, %v = transfuse.split %w {axis = 0 : i64, sizes = array<i64: 512, 512, 512>} : (tensor<1536x512xf32>) -> (tensor<512x512xf32>, tensor<512x512xf32>, tensor<512x512xf32>)
  // CHECK: transfuse.split %{{[^ ,]+}} {axis = -1 : i64, sizes = array<i64: 1, 2>} : (tensor<2x?x3xf32>) -> (tensor<2x?x1xf32>, tensor<2x?x2xf32>)
  %s0, %s1 = transfuse.split %a {axis = -1 : i64, sizes = array<i64: 1, 2>} : (tensor<2x?x3xf32>) -> (tensor<2x?x1xf32>, tensor<2x?x2xf32>)
  // CHECK: transfuse.concat %{{[^ ,]+}}, %{{[^ ,]+}} {axis = 2 : i64} : (tensor<2x?x1xf32>, tensor<2x?x2xf32>) -> tensor<2x?x3xf32>
  %c0 = transfuse.concat %s0, %s1 {axis = 2 : i64} : (tensor<2x?x1xf32>, tensor<2x?x2xf32>) -> tensor<2x?x3xf32>
  // Concatenation along a dynamic axis stays dynamic; a `?` beside a static size takes it.
  // CHECK: transfuse.concat %{{[^ ,]+}}, %{{[^ ,]+}}, %{{[^ ,]+}} {axis = 1 : i64} : (tensor<2x?x3xf32>, tensor<2x?x3xf32>, tensor<2x?x3xf32>) -> tensor<2x?x3xf32>
  %c1 = transfuse.concat %a, %c0, %a {axis = 1 : i64} : (tensor<2x?x3xf32>, tensor<2x?x3xf32>, tensor<2x?x3xf32>) -> tensor<2x?x3xf32>
  // CHECK: transfuse.concat %{{[^ ,]+}}, %{{[^ ,]+}} {axis = -2 : i64} : (tensor<2x5x?xf32>, tensor<2x5x?xf32>) -> tensor<2x10x?xf32>
  %c2 = transfuse.concat %b, %b {axis = -2 : i64} : (tensor<2x5x?xf32>, tensor<2x5x?xf32>) -> tensor<2x10x?xf32>
  // CHECK: transfuse.concat %{{[^ ,]+}}, %{{[^ ,]+}} {axis = 1 : i64} : (tensor<2x5x?xf32>, tensor<2x5x3xf32>) -> tensor<2x10x3xf32>
  %s2 = transfuse.slice %b {axis = 2 : i64, start = 0 : i64, size = 3 : i64} : (tensor<2x5x?xf32>) -> tensor<2x5x3xf32>
  %c3 = transfuse.concat %b, %s2 {axis = 1 : i64} : (tensor<2x5x?xf32>, tensor<2x5x3xf32>) -> tensor<2x10x3xf32>
  // CHECK: transfuse.concat %{{[^ ,]+}} {axis = 0 : i64} : (tensor<?x?xi32>) -> tensor<?x?xi32>
  %c4 = transfuse.concat %ids {axis = 0 : i64} : (tensor<?x?xi32>) -> tensor<?x?xi32>
  return %t, %m, %c4, %q, %k, %v, %c0, %c1, %c3 : tensor<?x8x?x64xf32>, tensor<?x?x512xf32>, tensor<?x?xi32>, tensor<512x512xf32>, tensor<512x512xf32>, tensor<512x512xf32>, tensor<2x?x3xf32>, tensor<2x?x3xf32>, tensor<2x10x3xf32>
}

// CHECK-LABEL: func.func @slice
func.func @slice(%wpe: tensor<1024x768xf32>, %x: tensor<?x?x768xf32>, %t: index, %mask: tensor<?x?xi1>)
    -> (tensor<?x768xf32>, tensor<?x?x768xf32>, tensor<16x768xf32>, tensor<?x?x256xf32>, tensor<0x768xf32>, tensor<?x?xi1>) {
  // CHECK: transfuse.slice %{{[^ ,]+}} length %{{[^ ,]+}} {axis = 0 : i64, start = 0 : i64} : (tensor<1024x768xf32>, index) -> tensor<?x768xf32>
  %0 = transfuse.slice %wpe length %t {axis = 0 : i64, start = 0 : i64} : (tensor<1024x768xf32>, index) -> tensor<?x768xf32>
  // CHECK: transfuse.slice %{{[^ ,]+}} length %{{[^ ,]+}} {axis = 1 : i64, start = 5 : i64} : (tensor<?x?x768xf32>, index) -> tensor<?x?x768xf32>
  %1 = transfuse.slice %x length %t {axis = 1 : i64, start = 5 : i64} : (tensor<?x?x768xf32>, index) -> tensor<?x?x768xf32>
  // CHECK: transfuse.slice %{{[^ ,]+}} {axis = 0 : i64, size = 16 : i64, start = 1008 : i64} : (tensor<1024x768xf32>) -> tensor<16x768xf32>
  %2 = transfuse.slice %wpe {axis = 0 : i64, start = 1008 : i64, size = 16 : i64} : (tensor<1024x768xf32>) -> tensor<16x768xf32>
  // A static slice of a static axis of a tensor with dynamic batch dimensions.
  // CHECK: transfuse.slice %{{[^ ,]+}} {axis = -1 : i64, size = 256 : i64, start = 512 : i64} : (tensor<?x?x768xf32>) -> tensor<?x?x256xf32>
  %3 = transfuse.slice %x {axis = -1 : i64, start = 512 : i64, size = 256 : i64} : (tensor<?x?x768xf32>) -> tensor<?x?x256xf32>
  // An empty slice at the very end is valid.
  // CHECK: transfuse.slice %{{[^ ,]+}} {axis = 0 : i64, size = 0 : i64, start = 1024 : i64} : (tensor<1024x768xf32>) -> tensor<0x768xf32>
  %4 = transfuse.slice %wpe {axis = 0 : i64, start = 1024 : i64, size = 0 : i64} : (tensor<1024x768xf32>) -> tensor<0x768xf32>
  // CHECK: transfuse.slice %{{[^ ,]+}} length %{{[^ ,]+}} {axis = 1 : i64, start = 0 : i64} : (tensor<?x?xi1>, index) -> tensor<?x?xi1>
  %5 = transfuse.slice %mask length %t {axis = 1 : i64, start = 0 : i64} : (tensor<?x?xi1>, index) -> tensor<?x?xi1>
  return %0, %1, %2, %3, %4, %5 : tensor<?x768xf32>, tensor<?x?x768xf32>, tensor<16x768xf32>, tensor<?x?x256xf32>, tensor<0x768xf32>, tensor<?x?xi1>
}

// CHECK-LABEL: func.func @masks_and_positions
func.func @masks_and_positions(%src: tensor<?x?xi32>, %tok: tensor<4x16xi32>, %q: index, %k: index)
    -> (tensor<?x?xi1>, tensor<8x8xi1>, tensor<?x?xi1>, tensor<4x16xi1>, tensor<?x512xf32>, tensor<?x512xf32>, tensor<16x64xf16>) {
  // CHECK: transfuse.causal_mask %[[Q:[^ ,]+]], %[[Q]] : tensor<?x?xi1>
  %0 = transfuse.causal_mask %q, %q : tensor<?x?xi1>
  // CHECK: transfuse.causal_mask %{{[^ ,]+}}, %{{[^ ,]+}} : tensor<8x8xi1>
  %1 = transfuse.causal_mask %q, %k : tensor<8x8xi1>
  // CHECK: transfuse.key_padding_mask %{{[^ ,]+}} {pad_id = 1 : i64} : (tensor<?x?xi32>) -> tensor<?x?xi1>
  %2 = transfuse.key_padding_mask %src {pad_id = 1 : i64} : (tensor<?x?xi32>) -> tensor<?x?xi1>
  // CHECK: transfuse.key_padding_mask %{{[^ ,]+}} {pad_id = 0 : i64} : (tensor<4x16xi32>) -> tensor<4x16xi1>
  %3 = transfuse.key_padding_mask %tok {pad_id = 0 : i64} : (tensor<4x16xi32>) -> tensor<4x16xi1>
  // CHECK: transfuse.positional_encoding %{{[^ ,]+}} : tensor<?x512xf32>
  %4 = transfuse.positional_encoding %q : tensor<?x512xf32>
  // CHECK: transfuse.positional_encoding %{{[^ ,]+}} offset %{{[^ ,]+}} : tensor<?x512xf32>
  %5 = transfuse.positional_encoding %q offset %k : tensor<?x512xf32>
  // CHECK: transfuse.positional_encoding %{{[^ ,]+}} offset %{{[^ ,]+}} : tensor<16x64xf16>
  %6 = transfuse.positional_encoding %q offset %k : tensor<16x64xf16>
  // CHECK: transfuse.positional_encoding %{{[^ ,]+}} {halves} : tensor<?x512xf32>
  %h = transfuse.positional_encoding %q {halves} : tensor<?x512xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<?x?xi1>, tensor<8x8xi1>, tensor<?x?xi1>, tensor<4x16xi1>, tensor<?x512xf32>, tensor<?x512xf32>, tensor<16x64xf16>
}

// CHECK-LABEL: func.func @decoding_state
func.func @decoding_state(%k: tensor<?x8x?x64xf32>, %b: index, %s: index) -> (tensor<?x8x?x64xf32>, tensor<?x8x?x64xf32>, index) {
  // CHECK: %[[L:.*]] = transfuse.state_length
  %l = transfuse.state_length
  // CHECK: transfuse.cache_append "kv.0.self.k", %{{[^ ]+}} {keys} : (tensor<?x8x?x64xf32>) -> tensor<?x8x?x64xf32>
  %c = transfuse.cache_append "kv.0.self.k", %k {keys} : (tensor<?x8x?x64xf32>) -> tensor<?x8x?x64xf32>
  // CHECK: transfuse.state_write "kv.0.cross.v", %{{[^ ]+}} : tensor<?x8x?x64xf32>
  transfuse.state_write "kv.0.cross.v", %k : tensor<?x8x?x64xf32>
  // CHECK: transfuse.state_read "kv.0.cross.k"[%{{[^ ,]+}}, %{{[^ ,]+}}] {keys} : tensor<?x8x?x64xf32>
  %r = transfuse.state_read "kv.0.cross.k" [%b, %s] {keys} : tensor<?x8x?x64xf32>
  return %c, %r, %l : tensor<?x8x?x64xf32>, tensor<?x8x?x64xf32>, index
}
