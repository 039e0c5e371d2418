// RUN: transfuse-opt %s -split-input-file --transfuse-raise-decomposed | FileCheck %s

// --transfuse-raise-decomposed replaces what exported graphs write in
// primitives with the dialect's named ops, in any association and operand
// order, and leaves near misses alone.

// Tests that GELU as torch.onnx writes it, x·(1 + erf(x / √2))·0.5, becomes
// gelu(x).
// CHECK-LABEL: func.func @gelu_erf_torch
// CHECK-SAME: (%[[X:[^:]+]]:
// CHECK-NEXT: %[[G:.+]] = transfuse.gelu %[[X]] : tensor<?x?x64xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu_erf_torch(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %sqrt2 = transfuse.constant dense<1.41421354> : tensor<f32>
  %one = transfuse.constant dense<1.0> : tensor<f32>
  %half = transfuse.constant dense<0.5> : tensor<f32>
  %a = transfuse.div %x, %sqrt2 : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %e = transfuse.erf %a : tensor<?x?x64xf32>
  %b = transfuse.add %e, %one : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %c = transfuse.mul %x, %b : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %d = transfuse.mul %c, %half : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  return %d : tensor<?x?x64xf32>
}

// -----

// Tests Hugging Face's association, (x·0.5)·(1 + erf(x·(1/√2))), with the
// constant on the left of the add.
// CHECK-LABEL: func.func @gelu_erf_hf
// CHECK-NEXT: transfuse.gelu %{{[^ ]+}} : tensor<?x64xf32>
// CHECK-NOT: transfuse.erf
func.func @gelu_erf_hf(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = transfuse.constant dense<0.707106769> : tensor<f32>
  %one = transfuse.constant dense<1.0> : tensor<f32>
  %half = transfuse.constant dense<0.5> : tensor<f32>
  %h = transfuse.mul %x, %half : (tensor<?x64xf32>, tensor<f32>) -> tensor<?x64xf32>
  %a = transfuse.mul %x, %r : (tensor<?x64xf32>, tensor<f32>) -> tensor<?x64xf32>
  %e = transfuse.erf %a : tensor<?x64xf32>
  %b = transfuse.add %one, %e : (tensor<f32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %c = transfuse.mul %h, %b : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  return %c : tensor<?x64xf32>
}

// -----

// Tests that a GELU with another constant (x / 2 inside the erf) stays as
// written.
// CHECK-LABEL: func.func @gelu_wrong_constant
// CHECK: transfuse.erf
// CHECK-NOT: transfuse.gelu
func.func @gelu_wrong_constant(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %two = transfuse.constant dense<2.0> : tensor<f32>
  %one = transfuse.constant dense<1.0> : tensor<f32>
  %half = transfuse.constant dense<0.5> : tensor<f32>
  %a = transfuse.div %x, %two : (tensor<?x64xf32>, tensor<f32>) -> tensor<?x64xf32>
  %e = transfuse.erf %a : tensor<?x64xf32>
  %b = transfuse.add %e, %one : (tensor<?x64xf32>, tensor<f32>) -> tensor<?x64xf32>
  %c = transfuse.mul %x, %b : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %d = transfuse.mul %c, %half : (tensor<?x64xf32>, tensor<f32>) -> tensor<?x64xf32>
  return %d : tensor<?x64xf32>
}

// -----

// Tests GPT-2's tanh GELU, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·pow(x, 3)))).
// CHECK-LABEL: func.func @gelu_tanh_pow
// CHECK-NEXT: transfuse.gelu %{{[^ ]+}} {approximate = #transfuse.approximation<tanh>} : tensor<?x64xf32>
// CHECK-NOT: transfuse.tanh
func.func @gelu_tanh_pow(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %three = transfuse.constant dense<3.0> : tensor<f32>
  %c = transfuse.constant dense<0.044715> : tensor<f32>
  %k = transfuse.constant dense<0.797884583> : tensor<f32>
  %one = transfuse.constant dense<1.0> : tensor<f32>
  %half = transfuse.constant dense<0.5> : tensor<f32>
  %p = transfuse.pow %x, %three : (tensor<?x64xf32>, tensor<f32>) -> tensor<?x64xf32>
  %q = transfuse.mul %p, %c : (tensor<?x64xf32>, tensor<f32>) -> tensor<?x64xf32>
  %s = transfuse.add %x, %q : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %u = transfuse.mul %k, %s : (tensor<f32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %t = transfuse.tanh %u : tensor<?x64xf32>
  %b = transfuse.add %t, %one : (tensor<?x64xf32>, tensor<f32>) -> tensor<?x64xf32>
  %h = transfuse.mul %half, %x : (tensor<f32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %y = transfuse.mul %h, %b : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Tests the tanh GELU with the cube as x·x·x and √(2/π) distributed over the
// sum (k·x + k·0.044715·x³).
// CHECK-LABEL: func.func @gelu_tanh_expanded
// CHECK-NEXT: transfuse.gelu %{{[^ ]+}} {approximate = #transfuse.approximation<tanh>}
func.func @gelu_tanh_expanded(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %kc = transfuse.constant dense<0.0356774069> : tensor<f32>
  %k = transfuse.constant dense<0.797884583> : tensor<f32>
  %one = transfuse.constant dense<1.0> : tensor<f32>
  %half = transfuse.constant dense<0.5> : tensor<f32>
  %x2 = transfuse.mul %x, %x : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %x3 = transfuse.mul %x2, %x : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %a = transfuse.mul %x3, %kc : (tensor<?x64xf32>, tensor<f32>) -> tensor<?x64xf32>
  %kx = transfuse.mul %x, %k : (tensor<?x64xf32>, tensor<f32>) -> tensor<?x64xf32>
  %u = transfuse.add %kx, %a : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %t = transfuse.tanh %u : tensor<?x64xf32>
  %b = transfuse.add %t, %one : (tensor<?x64xf32>, tensor<f32>) -> tensor<?x64xf32>
  %c = transfuse.mul %x, %b : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %y = transfuse.scale %c {factor = 0.5 : f64} : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Tests that sigmoid(x)·x becomes silu(x), and that sigmoid(y)·x does not.
// CHECK-LABEL: func.func @silu
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[Y:[^:]+]]:
// CHECK-DAG: transfuse.silu %[[X]]
// CHECK-DAG: transfuse.sigmoid %[[Y]]
func.func @silu(%x: tensor<?x64xf32>, %y: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %s = transfuse.sigmoid %x : tensor<?x64xf32>
  %a = transfuse.mul %s, %x : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %t = transfuse.sigmoid %y : tensor<?x64xf32>
  %b = transfuse.mul %t, %x : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  return %a, %b : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// Tests a LayerNorm written out: (x - mean) / sqrt(mean((x - mean)²) + eps)
// · gamma + beta over the last axis.
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[G:[^:]+]]: {{[^,]+}}, %[[B:[^:]+]]:
// CHECK-NEXT: %[[N:.+]] = transfuse.layer_norm %[[X]], %[[G]], %[[B]] {axis = 2 : i64, epsilon = 9.9999997473787516E-6 : f64}
// CHECK-NEXT: return %[[N]]
func.func @layer_norm(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %two = transfuse.constant dense<2.0> : tensor<f32>
  %eps = transfuse.constant dense<1.0e-05> : tensor<f32>
  %m = transfuse.reduce_mean %x {axes = array<i64: -1>, keep_dims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %d = transfuse.sub %x, %m : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %p = transfuse.pow %d, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %v = transfuse.reduce_mean %p {axes = array<i64: -1>, keep_dims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %e = transfuse.add %v, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %s = transfuse.sqrt %e : tensor<?x?x1xf32>
  %n = transfuse.div %d, %s : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %y = transfuse.mul %n, %g : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %z = transfuse.add %b, %y : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %z : tensor<?x?x64xf32>
}

// -----

// Tests Llama's RMSNorm: gamma · (x · 1/sqrt(mean(x·x) + eps)), gamma on the
// left.
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[G:[^:]+]]:
// CHECK-NEXT: %[[N:.+]] = transfuse.layer_norm %[[X]], %[[G]] {axis = 2 : i64, epsilon = 9.9999999747524271E-7 : f64, rms}
// CHECK-NEXT: return %[[N]]
func.func @rms_norm(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %one = transfuse.constant dense<1.0> : tensor<f32>
  %eps = transfuse.constant dense<1.0e-06> : tensor<f32>
  %p = transfuse.mul %x, %x : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %v = transfuse.reduce_mean %p {axes = array<i64: 2>, keep_dims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %e = transfuse.add %eps, %v : (tensor<f32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %s = transfuse.sqrt %e : tensor<?x?x1xf32>
  %r = transfuse.div %one, %s : (tensor<f32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = transfuse.mul %x, %r : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %y = transfuse.mul %g, %n : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// Tests that a mean over another axis than the last stays as written.
// CHECK-LABEL: func.func @norm_over_axis_1
// CHECK-NOT: transfuse.layer_norm
func.func @norm_over_axis_1(%x: tensor<?x8x64xf32>) -> tensor<?x8x64xf32> {
  %two = transfuse.constant dense<2.0> : tensor<f32>
  %eps = transfuse.constant dense<1.0e-05> : tensor<f32>
  %p = transfuse.pow %x, %two : (tensor<?x8x64xf32>, tensor<f32>) -> tensor<?x8x64xf32>
  %v = transfuse.reduce_mean %p {axes = array<i64: 1>, keep_dims = true} : (tensor<?x8x64xf32>) -> tensor<?x1x64xf32>
  %e = transfuse.add %v, %eps : (tensor<?x1x64xf32>, tensor<f32>) -> tensor<?x1x64xf32>
  %s = transfuse.sqrt %e : tensor<?x1x64xf32>
  %n = transfuse.div %x, %s : (tensor<?x8x64xf32>, tensor<?x1x64xf32>) -> tensor<?x8x64xf32>
  return %n : tensor<?x8x64xf32>
}

// -----

// Tests GPT-2's causal mask: a constant lower triangle sliced to the
// sequence length on both axes, applied by select with finfo(float32).min,
// becomes causal_mask with -inf.
// CHECK-LABEL: func.func @causal_from_tril
// CHECK-DAG: %[[L:.+]] = transfuse.dim %arg1, 1
// CHECK-DAG: %[[NINF:.+]] = transfuse.constant dense<0xFF800000> : tensor<f32>
// CHECK: %[[C:.+]] = transfuse.causal_mask %[[L]], %[[L]] : tensor<?x?xi1>
// CHECK-NEXT: transfuse.select %[[C]], %arg0, %[[NINF]]
func.func @causal_from_tril(%s: tensor<?x2x?x?xf32>, %ids: tensor<?x?xi32>) -> tensor<?x2x?x?xf32> {
  %tri = transfuse.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %min = transfuse.constant dense<-3.40282347E+38> : tensor<f32>
  %l1 = transfuse.dim %ids, 1 : tensor<?x?xi32>
  %a = transfuse.slice %tri length %l1 {axis = 2 : i64, start = 0 : i64} : (tensor<1x1x4x4xi1>, index) -> tensor<1x1x?x4xi1>
  %l2 = transfuse.dim %ids, 1 : tensor<?x?xi32>
  %b = transfuse.slice %a length %l2 {axis = 3 : i64, start = 0 : i64} : (tensor<1x1x?x4xi1>, index) -> tensor<1x1x?x?xi1>
  %r = transfuse.select %b, %s, %min : (tensor<1x1x?x?xi1>, tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  return %r : tensor<?x2x?x?xf32>
}

// -----

// Tests masked_fill's form: the strict upper triangle selects the fill,
// which stays -inf; the select's operands swap.
// CHECK-LABEL: func.func @causal_from_triu
// CHECK: %[[C:.+]] = transfuse.causal_mask
// CHECK-NEXT: transfuse.select %[[C]], %arg0, %{{[^ ]+}} : (tensor<?x?xi1>, tensor<?x2x?x?xf32>, tensor<f32>)
func.func @causal_from_triu(%s: tensor<?x2x?x?xf32>, %ids: tensor<?x?xi32>) -> tensor<?x2x?x?xf32> {
  %tri = transfuse.constant dense<[[false, true, true], [false, false, true], [false, false, false]]> : tensor<3x3xi1>
  %ninf = transfuse.constant dense<0xFF800000> : tensor<f32>
  %l = transfuse.dim %ids, 1 : tensor<?x?xi32>
  %a = transfuse.slice %tri length %l {axis = 0 : i64, start = 0 : i64} : (tensor<3x3xi1>, index) -> tensor<?x3xi1>
  %b = transfuse.slice %a length %l {axis = 1 : i64, start = 0 : i64} : (tensor<?x3xi1>, index) -> tensor<?x?xi1>
  %r = transfuse.select %b, %ninf, %s : (tensor<?x?xi1>, tensor<f32>, tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  return %r : tensor<?x2x?x?xf32>
}

// -----

// Tests that a triangle sliced to two lengths not provably equal (the
// sequence of one input, the batch of another) stays a sliced constant.
// CHECK-LABEL: func.func @triangle_two_lengths
// CHECK-NOT: transfuse.causal_mask
func.func @triangle_two_lengths(%s: tensor<?x2x?x?xf32>, %ids: tensor<?x?xi32>) -> tensor<?x2x?x?xf32> {
  %tri = transfuse.constant dense<[[true, false], [true, true]]> : tensor<2x2xi1>
  %ninf = transfuse.constant dense<0xFF800000> : tensor<f32>
  %l1 = transfuse.dim %ids, 1 : tensor<?x?xi32>
  %l0 = transfuse.dim %ids, 0 : tensor<?x?xi32>
  %a = transfuse.slice %tri length %l1 {axis = 0 : i64, start = 0 : i64} : (tensor<2x2xi1>, index) -> tensor<?x2xi1>
  %b = transfuse.slice %a length %l0 {axis = 1 : i64, start = 0 : i64} : (tensor<?x2xi1>, index) -> tensor<?x?xi1>
  %r = transfuse.select %b, %s, %ninf : (tensor<?x?xi1>, tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  return %r : tensor<?x2x?x?xf32>
}

// -----

// Tests that positions [1, S, D] added to embeddings [B, S, D] are added as
// [S, D] (a residual add_layer_norm takes), and that a [B, 1, D] operand,
// which grows along a non-leading axis, is left alone.
// CHECK-LABEL: func.func @leading_unit_dims
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[P:[^:]+]]: {{[^,]+}}, %[[Q:[^:]+]]:
// CHECK: %[[R:.+]] = transfuse.reshape %[[P]] : (tensor<1x?x64xf32>) -> tensor<?x64xf32>
// CHECK-NEXT: transfuse.add %[[X]], %[[R]] : (tensor<?x?x64xf32>, tensor<?x64xf32>)
// CHECK-NEXT: transfuse.add %{{[^ ]+}}, %[[Q]] : (tensor<?x?x64xf32>, tensor<?x1x64xf32>)
func.func @leading_unit_dims(%x: tensor<?x?x64xf32>, %p: tensor<1x?x64xf32>, %q: tensor<?x1x64xf32>) -> tensor<?x?x64xf32> {
  %a = transfuse.add %x, %p : (tensor<?x?x64xf32>, tensor<1x?x64xf32>) -> tensor<?x?x64xf32>
  %b = transfuse.add %a, %q : (tensor<?x?x64xf32>, tensor<?x1x64xf32>) -> tensor<?x?x64xf32>
  return %b : tensor<?x?x64xf32>
}

// -----

// Tests rotate-half rotary over cos/sin caches sliced to the sequence
// (Hugging Face's apply_rotary_pos_emb as exported): x·cos +
// rotate_half(x)·sin becomes rotary with the frequencies the tables hold
// (1 and 0.01, to the float32s that make six rows of tables), and the
// rotation moves before the head split.
// CHECK-LABEL: func.func @rotary_from_caches
// CHECK-SAME: (%[[X:[^:]+]]:
// CHECK-DAG: %[[F:.+]] = transfuse.constant dense<[1.000000e+00, 0.0099999{{[0-9]+}}]> : tensor<2xf32>
// CHECK: %[[R:.+]] = transfuse.rotary %[[X]], %[[F]] {head_dim = 4 : i64} : (tensor<?x?x8xf32>, tensor<2xf32>) -> tensor<?x?x8xf32>
// CHECK-NEXT: %[[H:.+]] = transfuse.reshape %[[R]] : (tensor<?x?x8xf32>) -> tensor<?x?x2x4xf32>
// CHECK-NEXT: %[[T:.+]] = transfuse.transpose %[[H]] {permutation = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT: return %[[T]]
func.func @rotary_from_caches(%x: tensor<?x?x8xf32>) -> tensor<?x2x?x4xf32> {
  %cos = transfuse.constant dense<[[1.0, 1.0, 1.0, 1.0], [0.540302277, 0.999949992, 0.540302277, 0.999949992], [-0.416146845, 0.999800026, -0.416146845, 0.999800026], [-0.989992499, 0.999550045, -0.989992499, 0.999550045], [-0.653643608, 0.999200106, -0.653643608, 0.999200106], [0.2836622, 0.998750269, 0.2836622, 0.998750269]]> : tensor<6x4xf32>
  %sin = transfuse.constant dense<[[0.0, 0.0, 0.0, 0.0], [0.841470957, 0.00999983307, 0.841470957, 0.00999983307], [0.909297407, 0.0199986659, 0.909297407, 0.0199986659], [0.141120002, 0.0299954992, 0.141120002, 0.0299954992], [-0.756802499, 0.0399893336, -0.756802499, 0.0399893336], [-0.958924294, 0.0499791652, -0.958924294, 0.0499791652]]> : tensor<6x4xf32>
  %h = transfuse.reshape %x : (tensor<?x?x8xf32>) -> tensor<?x?x2x4xf32>
  %q = transfuse.transpose %h {permutation = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %len = transfuse.dim %x, 1 : tensor<?x?x8xf32>
  %c = transfuse.slice %cos length %len {axis = 0 : i64, start = 0 : i64} : (tensor<6x4xf32>, index) -> tensor<?x4xf32>
  %s = transfuse.slice %sin length %len {axis = 0 : i64, start = 0 : i64} : (tensor<6x4xf32>, index) -> tensor<?x4xf32>
  %x2 = transfuse.slice %q {axis = 3 : i64, size = 2 : i64, start = 2 : i64} : (tensor<?x2x?x4xf32>) -> tensor<?x2x?x2xf32>
  %n = transfuse.scale %x2 {factor = -1.0 : f64} : tensor<?x2x?x2xf32>
  %x1 = transfuse.slice %q {axis = 3 : i64, size = 2 : i64, start = 0 : i64} : (tensor<?x2x?x4xf32>) -> tensor<?x2x?x2xf32>
  %rh = transfuse.concat %n, %x1 {axis = 3 : i64} : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %a = transfuse.mul %q, %c : (tensor<?x2x?x4xf32>, tensor<?x4xf32>) -> tensor<?x2x?x4xf32>
  %b = transfuse.mul %s, %rh : (tensor<?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %y = transfuse.add %b, %a : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  return %y : tensor<?x2x?x4xf32>
}

// -----

// Tests that tables that are not cos and sin of p·f (a changed entry) stay
// as written.
// CHECK-LABEL: func.func @rotary_wrong_table
// CHECK-NOT: transfuse.rotary
func.func @rotary_wrong_table(%q: tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32> {
  %cos = transfuse.constant dense<[[1.0, 1.0, 1.0, 1.0], [0.540302277, 0.999949992, 0.540302277, 0.999949992], [-0.416146845, 0.999800026, -0.416146845, 0.5], [-0.989992499, 0.999550045, -0.989992499, 0.999550045]]> : tensor<4x4xf32>
  %sin = transfuse.constant dense<[[0.0, 0.0, 0.0, 0.0], [0.841470957, 0.00999983307, 0.841470957, 0.00999983307], [0.909297407, 0.0199986659, 0.909297407, 0.0199986659], [0.141120002, 0.0299954992, 0.141120002, 0.0299954992]]> : tensor<4x4xf32>
  %len = transfuse.dim %q, 2 : tensor<?x2x?x4xf32>
  %c = transfuse.slice %cos length %len {axis = 0 : i64, start = 0 : i64} : (tensor<4x4xf32>, index) -> tensor<?x4xf32>
  %s = transfuse.slice %sin length %len {axis = 0 : i64, start = 0 : i64} : (tensor<4x4xf32>, index) -> tensor<?x4xf32>
  %x2 = transfuse.slice %q {axis = 3 : i64, size = 2 : i64, start = 2 : i64} : (tensor<?x2x?x4xf32>) -> tensor<?x2x?x2xf32>
  %n = transfuse.scale %x2 {factor = -1.0 : f64} : tensor<?x2x?x2xf32>
  %x1 = transfuse.slice %q {axis = 3 : i64, size = 2 : i64, start = 0 : i64} : (tensor<?x2x?x4xf32>) -> tensor<?x2x?x2xf32>
  %rh = transfuse.concat %n, %x1 {axis = 3 : i64} : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %a = transfuse.mul %q, %c : (tensor<?x2x?x4xf32>, tensor<?x4xf32>) -> tensor<?x2x?x4xf32>
  %b = transfuse.mul %rh, %s : (tensor<?x2x?x4xf32>, tensor<?x4xf32>) -> tensor<?x2x?x4xf32>
  %y = transfuse.add %a, %b : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  return %y : tensor<?x2x?x4xf32>
}
