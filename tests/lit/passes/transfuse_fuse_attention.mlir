// RUN: transfuse-opt %s -split-input-file --transfuse-fuse-attention="remarks=true" -verify-diagnostics | FileCheck %s
// RUN: transfuse-opt %s -split-input-file --transfuse-fusion="strategy=attention" | FileCheck %s --check-prefix=PIPE

// --transfuse-fuse-attention rewrites softmax(mask((Q·Kᵀ)·scale + bias))·V
// into transfuse.attention, and leaves alone, with a remark giving the
// reason, whatever it cannot prove is exactly that. The remark of each site
// is reported at its softmax. The PIPE prefix checks the strategy pipeline
// (fusion, then canonicalize + CSE) where the cleanup matters: the
// transposes the pass puts in front of `key` compose with those of the graph.

// Tests that the canonical form, Kᵀ by the matmul flag and the scores scaled
// by `transfuse.scale`, becomes one attention op with that scale and nothing
// of the unfused graph is left.
// CHECK-LABEL: func.func @scale_op
// CHECK-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[K:[^:]+]]: {{[^,]+}}, %[[V:[^:]+]]:
// CHECK-NEXT: %[[O:.+]] = transfuse.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT: return %[[O]]
func.func @scale_op(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %t = transfuse.scale %s {factor = 0.25 : f64} : tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: fused}}
  %p = transfuse.softmax %t {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that a mul by a one-element constant (on the left of the mul here)
// is taken as the scale, and that a softmax over axis -1 is over the keys.
// CHECK-LABEL: func.func @scale_by_mul
// CHECK-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[K:[^:]+]]: {{[^,]+}}, %[[V:[^:]+]]:
// CHECK-NOT: transfuse.mul
// CHECK: %[[O:.+]] = transfuse.attention %[[Q]], %[[K]], %[[V]] {scale = 5.000000e-01 : f64}
// CHECK-NOT: transfuse.softmax
// CHECK-NOT: transfuse.matmul
// CHECK: return %[[O]]
func.func @scale_by_mul(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %c = transfuse.constant dense<0.5> : tensor<f32>
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %t = transfuse.mul %c, %s : (tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: fused}}
  %p = transfuse.softmax %t {axis = -1 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that a div by a one-element constant of any rank of ones is taken as
// the scale 1/c.
// CHECK-LABEL: func.func @scale_by_div
// CHECK-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[K:[^:]+]]: {{[^,]+}}, %[[V:[^:]+]]:
// CHECK-NOT: transfuse.div
// CHECK: %[[O:.+]] = transfuse.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f64}
// CHECK-NOT: transfuse.softmax
// CHECK: return %[[O]]
func.func @scale_by_div(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %c = transfuse.constant dense<4.0> : tensor<1x1x1x1xf32>
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %t = transfuse.div %s, %c : (tensor<2x4x8x8xf32>, tensor<1x1x1x1xf32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: fused}}
  %p = transfuse.softmax %t {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that constant scales applied to Q (by mul) and to K (by scale) before
// the matmul are absorbed: the attention takes the unscaled Q and K and the
// product of the factors, 0.5 * 0.5.
// CHECK-LABEL: func.func @scale_before_matmul
// CHECK-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[K:[^:]+]]: {{[^,]+}}, %[[V:[^:]+]]:
// CHECK-NOT: transfuse.mul
// CHECK-NOT: transfuse.scale
// CHECK: %[[O:.+]] = transfuse.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[O]]
func.func @scale_before_matmul(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %c = transfuse.constant dense<0.5> : tensor<f32>
  %qs = transfuse.mul %q, %c : (tensor<2x4x8x16xf32>, tensor<f32>) -> tensor<2x4x8x16xf32>
  %ks = transfuse.scale %k {factor = 0.5 : f64} : tensor<2x4x8x16xf32>
  %s = transfuse.matmul %qs, %ks {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: fused}}
  %p = transfuse.softmax %s {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that a select of the scores against a -inf constant by a boolean
// mask that is neither causal nor key padding stays unfused: the attention
// kernels take only those two masks.
// CHECK-LABEL: func.func @mask_by_select
// CHECK: transfuse.select
// CHECK-NOT: transfuse.attention
func.func @mask_by_select(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %m: tensor<1x4x8x8xi1>) -> tensor<2x4x8x16xf32> {
  %ninf = transfuse.constant dense<0xFF800000> : tensor<f32>
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %t = transfuse.scale %s {factor = 0.25 : f64} : tensor<2x4x8x8xf32>
  %a = transfuse.select %m, %t, %ninf : (tensor<1x4x8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: not fused: a boolean mask that is neither causal nor key padding (the attention kernels take only those)}}
  %p = transfuse.softmax %a {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that an additive float mask applied after the scale becomes the
// `bias` operand unchanged.
// CHECK-LABEL: func.func @mask_by_add
// CHECK-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[K:[^:]+]]: {{[^,]+}}, %[[V:[^:]+]]: {{[^,]+}}, %[[B:[^:]+]]:
// CHECK-NOT: transfuse.add
// CHECK-NOT: transfuse.scale
// CHECK: %[[O:.+]] = transfuse.attention %[[Q]], %[[K]], %[[V]] bias %[[B]] {scale = 2.500000e-01 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x1x8x8xf32>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT: return %[[O]]
func.func @mask_by_add(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %b: tensor<2x1x8x8xf32>) -> tensor<2x4x8x16xf32> {
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %t = transfuse.scale %s {factor = 0.25 : f64} : tensor<2x4x8x8xf32>
  %a = transfuse.add %t, %b : (tensor<2x4x8x8xf32>, tensor<2x1x8x8xf32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: fused}}
  %p = transfuse.softmax %a {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that an additive mask applied before a scale is scaled by it:
// ((Q·Kᵀ) + b)·0.25 = (Q·Kᵀ)·0.25 + b·0.25, so the bias operand is b·0.25.
// CHECK-LABEL: func.func @bias_before_scale
// CHECK-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[K:[^:]+]]: {{[^,]+}}, %[[V:[^:]+]]: {{[^,]+}}, %[[B:[^:]+]]:
// CHECK-NEXT: %[[SB:.+]] = transfuse.scale %[[B]] {factor = 2.500000e-01 : f64} : tensor<2x1x8x8xf32>
// CHECK-NEXT: %[[O:.+]] = transfuse.attention %[[Q]], %[[K]], %[[V]] bias %[[SB]] {scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[O]]
func.func @bias_before_scale(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %b: tensor<2x1x8x8xf32>) -> tensor<2x4x8x16xf32> {
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %a = transfuse.add %b, %s : (tensor<2x1x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %t = transfuse.scale %a {factor = 0.25 : f64} : tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: fused}}
  %p = transfuse.softmax %t {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that Kᵀ written as a transpose op with permutation [0, 1, 3, 2] (no
// matmul flag, as exporters write k.transpose(-1, -2)) fuses, and that the
// key operand is exactly K: the pass reads through the transpose, which the
// cleanup then removes.
// CHECK-LABEL: func.func @k_transposed_by_op
// CHECK-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[K:[^:]+]]: {{[^,]+}}, %[[V:[^:]+]]:
// CHECK: %[[O:.+]] = transfuse.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[O]]
// PIPE-LABEL: func.func @k_transposed_by_op
// PIPE-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[K:[^:]+]]: {{[^,]+}}, %[[V:[^:]+]]:
// PIPE-NEXT: %[[O:.+]] = transfuse.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f64}
// PIPE-NEXT: return %[[O]]
func.func @k_transposed_by_op(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %kt = transfuse.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x16xf32>) -> tensor<2x4x16x8xf32>
  %s = transfuse.matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %t = transfuse.scale %s {factor = 0.25 : f64} : tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: fused}}
  %p = transfuse.softmax %t {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that the Inductor bug cannot happen: K permuted with [0, 2, 1, 3]
// (heads and sequence swapped, which type-checks here because every size is
// 4) is NOT Kᵀ. The
// matmul's right operand P = permute(K) is [B, H, D, Sk] as the matmul reads
// it, so the key must be Pᵀ = transpose(K, [0, 2, 3, 1]); taking K itself as
// the key would silently give wrong results.
// CHECK-LABEL: func.func @k_permuted_not_transposed
// CHECK-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[K:[^:]+]]: {{[^,]+}}, %[[V:[^:]+]]:
// CHECK-NEXT: %[[P:.+]] = transfuse.transpose %[[K]] {permutation = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT: %[[KK:.+]] = transfuse.transpose %[[P]] {permutation = array<i64: 0, 1, 3, 2>}
// CHECK-NEXT: %[[O:.+]] = transfuse.attention %[[Q]], %[[KK]], %[[V]] {scale = 5.000000e-01 : f64}
// CHECK-NOT: transfuse.attention %[[Q]], %[[K]],
// CHECK: return %[[O]]
// PIPE-LABEL: func.func @k_permuted_not_transposed
// PIPE-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[K:[^:]+]]: {{[^,]+}}, %[[V:[^:]+]]:
// PIPE-NEXT: %[[KK:.+]] = transfuse.transpose %[[K]] {permutation = array<i64: 0, 2, 3, 1>}
// PIPE-NEXT: %[[O:.+]] = transfuse.attention %[[Q]], %[[KK]], %[[V]] {scale = 5.000000e-01 : f64}
// PIPE-NEXT: return %[[O]]
func.func @k_permuted_not_transposed(%q: tensor<2x4x4x4xf32>, %k: tensor<2x4x4x4xf32>, %v: tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32> {
  %kp = transfuse.transpose %k {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %s = transfuse.matmul %q, %kp : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %t = transfuse.scale %s {factor = 0.5 : f64} : tensor<2x4x4x4xf32>
  // expected-remark@+1 {{attention: fused}}
  %p = transfuse.softmax %t {axis = 3 : i64} : tensor<2x4x4x4xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  return %o : tensor<2x4x4x4xf32>
}

// -----

// Tests that the same trap with the matmul's transpose flag set is avoided:
// matmul(Q, permute(K, [0, 2, 1, 3]), transpose_rhs) reads keys from the
// permuted tensor, so the key operand is the permuted tensor, not K.
// CHECK-LABEL: func.func @k_permuted_with_flag
// CHECK-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[K:[^:]+]]: {{[^,]+}}, %[[V:[^:]+]]:
// CHECK-NEXT: %[[P:.+]] = transfuse.transpose %[[K]] {permutation = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT: %[[O:.+]] = transfuse.attention %[[Q]], %[[P]], %[[V]] {scale = 1.000000e+00 : f64}
// CHECK-NEXT: return %[[O]]
func.func @k_permuted_with_flag(%q: tensor<2x4x4x4xf32>, %k: tensor<2x4x4x4xf32>, %v: tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32> {
  %kp = transfuse.transpose %k {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %s = transfuse.matmul %q, %kp {transpose_rhs = true} : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // expected-remark@+1 {{attention: fused}}
  %p = transfuse.softmax %s {axis = 3 : i64} : tensor<2x4x4x4xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  return %o : tensor<2x4x4x4xf32>
}

// -----

// Tests that dropout after the softmax is absorbed with its rate, seed and
// stream.
// CHECK-LABEL: func.func @dropout_after_softmax
// CHECK-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[K:[^:]+]]: {{[^,]+}}, %[[V:[^:]+]]:
// CHECK-NOT: transfuse.dropout
// CHECK: %[[O:.+]] = transfuse.attention %[[Q]], %[[K]], %[[V]] {dropout_rate = 1.000000e-01 : f64, dropout_seed = 5 : i64, dropout_stream = 2 : i64, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[O]]
func.func @dropout_after_softmax(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %t = transfuse.scale %s {factor = 0.25 : f64} : tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: fused}}
  %p = transfuse.softmax %t {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %d = transfuse.dropout %p {rate = 0.1 : f64, seed = 5 : i64, stream = 2 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %d, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that a causal_mask built from the dynamic query and key lengths of
// the inputs becomes the `causal` flag (K and V are one tensor split in two,
// so their lengths are provably one).
// CHECK-LABEL: func.func @causal
// CHECK-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[KV:[^:]+]]:
// CHECK: %[[K:.+]]:2 = transfuse.split %[[KV]]
// CHECK-NOT: transfuse.select
// CHECK: %[[O:.+]] = transfuse.attention %[[Q]], %[[K]]#0, %[[K]]#1 {causal, scale = 2.500000e-01 : f64} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
// CHECK-NEXT: return %[[O]]
func.func @causal(%q: tensor<?x4x?x16xf32>, %kv: tensor<?x4x?x32xf32>) -> tensor<?x4x?x16xf32> {
  %ninf = transfuse.constant dense<0xFF800000> : tensor<f32>
  %k, %v = transfuse.split %kv {axis = 3 : i64, sizes = array<i64: 16, 16>} : (tensor<?x4x?x32xf32>) -> (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>)
  %sq = transfuse.dim %q, 2 : tensor<?x4x?x16xf32>
  %sk = transfuse.dim %k, 2 : tensor<?x4x?x16xf32>
  %c = transfuse.causal_mask %sq, %sk : tensor<?x?xi1>
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %t = transfuse.scale %s {factor = 0.25 : f64} : tensor<?x4x?x?xf32>
  %m = transfuse.select %c, %t, %ninf : (tensor<?x?xi1>, tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  // expected-remark@+1 {{attention: fused}}
  %p = transfuse.softmax %m {axis = 3 : i64} : tensor<?x4x?x?xf32>
  %o = transfuse.matmul %p, %v : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %o : tensor<?x4x?x16xf32>
}

// -----

// Tests that a causal_mask whose lengths are not provably the inputs' (here
// two index arguments) is not taken as `causal`: as a general boolean mask
// it leaves the pattern unfused, which keeps the result exact.
// CHECK-LABEL: func.func @causal_of_other_lengths
// CHECK: transfuse.causal_mask
// CHECK-NOT: transfuse.attention
func.func @causal_of_other_lengths(%q: tensor<?x4x?x16xf32>, %kv: tensor<?x4x?x32xf32>, %n: index, %m: index) -> tensor<?x4x?x16xf32> {
  %ninf = transfuse.constant dense<0xFF800000> : tensor<f32>
  %k, %v = transfuse.split %kv {axis = 3 : i64, sizes = array<i64: 16, 16>} : (tensor<?x4x?x32xf32>) -> (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>)
  %c = transfuse.causal_mask %n, %m : tensor<?x?xi1>
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %t = transfuse.scale %s {factor = 0.25 : f64} : tensor<?x4x?x?xf32>
  %a = transfuse.select %c, %t, %ninf : (tensor<?x?xi1>, tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  // expected-remark@+1 {{attention: not fused: a boolean mask that is neither causal nor key padding (the attention kernels take only those)}}
  %p = transfuse.softmax %a {axis = 3 : i64} : tensor<?x4x?x?xf32>
  %o = transfuse.matmul %p, %v : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %o : tensor<?x4x?x16xf32>
}

// -----

// Tests that a static [B, 1, 1, Sk] boolean mask becomes `key_padding`,
// reshaped to [B, Sk].
// CHECK-LABEL: func.func @key_padding_static
// CHECK-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[K:[^:]+]]: {{[^,]+}}, %[[V:[^:]+]]: {{[^,]+}}, %[[M:[^:]+]]:
// CHECK: %[[KP:.+]] = transfuse.reshape %[[M]] : (tensor<2x1x1x8xi1>) -> tensor<2x8xi1>
// CHECK-NEXT: %[[O:.+]] = transfuse.attention %[[Q]], %[[K]], %[[V]] key_padding %[[KP]] {scale = 2.500000e-01 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x8xi1>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT: return %[[O]]
func.func @key_padding_static(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %m: tensor<2x1x1x8xi1>) -> tensor<2x4x8x16xf32> {
  %ninf = transfuse.constant dense<0xFF800000> : tensor<f32>
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %t = transfuse.scale %s {factor = 0.25 : f64} : tensor<2x4x8x8xf32>
  %a = transfuse.select %m, %t, %ninf : (tensor<2x1x1x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: fused}}
  %p = transfuse.softmax %a {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that in self-attention as a model writes it (heads split by reshape
// and permute, dynamic batch and length), the key padding mask of the tokens
// ([B, 1, 1, S]) becomes `key_padding` and the causal mask `causal`, both at
// once, because every length is provably the tokens' length.
// CHECK-LABEL: func.func @self_attention_padding_and_causal
// CHECK: %[[KPM:.+]] = transfuse.key_padding_mask
// CHECK: %[[M4:.+]] = transfuse.reshape %[[KPM]] : (tensor<?x?xi1>) -> tensor<?x1x1x?xi1>
// CHECK: %[[Q:.+]] = transfuse.transpose {{.*}} -> tensor<?x4x?x16xf32>
// CHECK-NOT: transfuse.select
// CHECK-NOT: transfuse.softmax
// CHECK: %[[KP:.+]] = transfuse.reshape %[[M4]] : (tensor<?x1x1x?xi1>) -> tensor<?x?xi1>
// CHECK-NEXT: %[[O:.+]] = transfuse.attention %[[Q]], %[[Q]], %[[Q]] key_padding %[[KP]] {causal, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[O]]
func.func @self_attention_padding_and_causal(%tok: tensor<?x?xi32>, %emb: tensor<100x64xf32>) -> tensor<?x4x?x16xf32> {
  %ninf = transfuse.constant dense<0xFF800000> : tensor<f32>
  %kpm = transfuse.key_padding_mask %tok {pad_id = 0 : i64} : (tensor<?x?xi32>) -> tensor<?x?xi1>
  %m4 = transfuse.reshape %kpm : (tensor<?x?xi1>) -> tensor<?x1x1x?xi1>
  %x = transfuse.gather %emb, %tok : (tensor<100x64xf32>, tensor<?x?xi32>) -> tensor<?x?x64xf32>
  %h = transfuse.reshape %x : (tensor<?x?x64xf32>) -> tensor<?x?x4x16xf32>
  %qkv = transfuse.transpose %h {permutation = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %n = transfuse.dim %tok, 1 : tensor<?x?xi32>
  %c = transfuse.causal_mask %n, %n : tensor<?x?xi1>
  %s = transfuse.matmul %qkv, %qkv {transpose_rhs = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %t = transfuse.scale %s {factor = 0.25 : f64} : tensor<?x4x?x?xf32>
  %a = transfuse.select %m4, %t, %ninf : (tensor<?x1x1x?xi1>, tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %b = transfuse.select %c, %a, %ninf : (tensor<?x?xi1>, tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  // expected-remark@+1 {{attention: fused}}
  %p = transfuse.softmax %b {axis = 3 : i64} : tensor<?x4x?x?xf32>
  %o = transfuse.matmul %p, %qkv : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %o : tensor<?x4x?x16xf32>
}

// -----

// Tests that a softmax over axis 2 (the queries) is refused.
// CHECK-LABEL: func.func @softmax_wrong_axis
// CHECK-NOT: transfuse.attention
// CHECK: transfuse.softmax %{{[^ ]+}} {axis = 2 : i64}
// CHECK-NOT: transfuse.attention
func.func @softmax_wrong_axis(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: not fused: softmax over axis 2, not the last (key) axis}}
  %p = transfuse.softmax %s {axis = 2 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that a scale by a function argument (not a constant) is refused.
// CHECK-LABEL: func.func @scale_not_constant
// CHECK-NOT: transfuse.attention
// CHECK: transfuse.mul
// CHECK: transfuse.softmax
// CHECK-NOT: transfuse.attention
func.func @scale_not_constant(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %c: tensor<f32>) -> tensor<2x4x8x16xf32> {
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %t = transfuse.mul %s, %c : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: not fused: the scale is not a constant}}
  %p = transfuse.softmax %t {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that a select mask that grows the scores (scores [1, ...] selected
// into [2, ...]) is refused: attention computes one row of scores per batch.
// CHECK-LABEL: func.func @select_mask_grows_scores
// CHECK-NOT: transfuse.attention
// CHECK: transfuse.select
// CHECK-NOT: transfuse.attention
func.func @select_mask_grows_scores(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %m: tensor<2x4x8x8xi1>) -> tensor<2x4x8x16xf32> {
  %ninf = transfuse.constant dense<0xFF800000> : tensor<f32>
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x8xf32>
  %a = transfuse.select %m, %s, %ninf : (tensor<2x4x8x8xi1>, tensor<1x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: not fused: a mask that does not broadcast to the scores without growing them}}
  %p = transfuse.softmax %a {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that an additive mask that grows the scores is refused with the
// reason naming the mask.
// CHECK-LABEL: func.func @add_mask_grows_scores
// CHECK-NOT: transfuse.attention
// CHECK: transfuse.add
// CHECK-NOT: transfuse.attention
func.func @add_mask_grows_scores(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %b: tensor<2x4x8x8xf32>) -> tensor<2x4x8x16xf32> {
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x8xf32>
  %a = transfuse.add %s, %b : (tensor<1x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: not fused: an additive mask that does not broadcast to the scores without growing them}}
  %p = transfuse.softmax %a {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that scores with a second consumer are refused: the fused op would
// not produce them.
// CHECK-LABEL: func.func @scores_second_consumer
// CHECK-NOT: transfuse.attention
// CHECK: transfuse.softmax
// CHECK-NOT: transfuse.attention
func.func @scores_second_consumer(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>) {
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %t = transfuse.scale %s {factor = 0.25 : f64} : tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: not fused: an intermediate of the scores has a second consumer}}
  %p = transfuse.softmax %t {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o, %s : tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>
}

// -----

// Tests that probabilities with a second consumer (returned attention
// weights) are refused.
// CHECK-LABEL: func.func @probabilities_second_consumer
// CHECK-NOT: transfuse.attention
// CHECK: transfuse.softmax
// CHECK-NOT: transfuse.attention
func.func @probabilities_second_consumer(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>) {
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: not fused: the softmax result has a second consumer}}
  %p = transfuse.softmax %s {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o, %p : tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>
}

// -----

// Tests that a select with a finite fill (-1e9, as some exporters write) is
// refused: attention masks with -inf, and a fully masked row would differ.
// CHECK-LABEL: func.func @select_finite_fill
// CHECK-NOT: transfuse.attention
// CHECK: transfuse.select
// CHECK-NOT: transfuse.attention
func.func @select_finite_fill(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %m: tensor<2x1x1x8xi1>) -> tensor<2x4x8x16xf32> {
  %fill = transfuse.constant dense<-1.0e+09> : tensor<f32>
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %a = transfuse.select %m, %s, %fill : (tensor<2x1x1x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: not fused: a select that does not set masked scores to -inf}}
  %p = transfuse.softmax %a {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that a negative scale after a -inf mask is refused: it would turn
// the masked scores into +inf.
// CHECK-LABEL: func.func @negative_scale_after_mask
// CHECK-NOT: transfuse.attention
// CHECK: transfuse.softmax
// CHECK-NOT: transfuse.attention
func.func @negative_scale_after_mask(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %m: tensor<2x1x1x8xi1>) -> tensor<2x4x8x16xf32> {
  %ninf = transfuse.constant dense<0xFF800000> : tensor<f32>
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %a = transfuse.select %m, %s, %ninf : (tensor<2x1x1x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %t = transfuse.scale %a {factor = -0.25 : f64} : tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: not fused: a non-positive scale after masking}}
  %p = transfuse.softmax %t {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that a negative scale before the mask is fine: the scale applies to
// Q·Kᵀ before masking in the fused op too.
// CHECK-LABEL: func.func @negative_scale_before_mask
// CHECK: transfuse.attention %{{[^ ]+}}, %{{[^ ]+}}, %{{[^ ]+}} key_padding %{{[^ ]+}} {scale = -2.500000e-01 : f64}
// CHECK-NOT: transfuse.softmax
func.func @negative_scale_before_mask(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %m: tensor<2x1x1x8xi1>) -> tensor<2x4x8x16xf32> {
  %ninf = transfuse.constant dense<0xFF800000> : tensor<f32>
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %t = transfuse.scale %s {factor = -0.25 : f64} : tensor<2x4x8x8xf32>
  %a = transfuse.select %m, %t, %ninf : (tensor<2x1x1x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: fused}}
  %p = transfuse.softmax %a {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that a scale by zero is refused (every score would be equal; the
// pass leaves such a graph alone rather than fold the math).
// CHECK-LABEL: func.func @zero_scale
// CHECK-NOT: transfuse.attention
// CHECK: transfuse.softmax
func.func @zero_scale(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %t = transfuse.scale %s {factor = 0.0 : f64} : tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: not fused: a zero scale}}
  %p = transfuse.softmax %t {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that a causal_mask of static lengths, built from the dims of Q and K
// (which prove them), becomes `causal` like a dynamic one.
// CHECK-LABEL: func.func @causal_static
// CHECK-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[K:[^:]+]]: {{[^,]+}}, %[[V:[^:]+]]:
// CHECK-NOT: transfuse.select
// CHECK: %[[O:.+]] = transfuse.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[O]]
func.func @causal_static(%q: tensor<2x4x6x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x6x16xf32> {
  %ninf = transfuse.constant dense<0xFF800000> : tensor<f32>
  %sq = transfuse.dim %q, 2 : tensor<2x4x6x16xf32>
  %sk = transfuse.dim %k, 2 : tensor<2x4x8x16xf32>
  %c = transfuse.causal_mask %sq, %sk : tensor<6x8xi1>
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x6x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x6x8xf32>
  %t = transfuse.scale %s {factor = 0.25 : f64} : tensor<2x4x6x8xf32>
  %a = transfuse.select %c, %t, %ninf : (tensor<6x8xi1>, tensor<2x4x6x8xf32>, tensor<f32>) -> tensor<2x4x6x8xf32>
  // expected-remark@+1 {{attention: fused}}
  %p = transfuse.softmax %a {axis = 3 : i64} : tensor<2x4x6x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x6x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x6x16xf32>
  return %o : tensor<2x4x6x16xf32>
}

// -----

// Tests that K and V from different arguments with dynamic lengths are
// refused: nothing proves that V has one row per key.
// CHECK-LABEL: func.func @value_length_unproven
// CHECK-NOT: transfuse.attention
// CHECK: transfuse.softmax
// CHECK-NOT: transfuse.attention
func.func @value_length_unproven(%q: tensor<?x4x?x16xf32>, %k: tensor<?x4x?x16xf32>, %v: tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32> {
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  // expected-remark@+1 {{attention: not fused: V's length is not provably K's length}}
  %p = transfuse.softmax %s {axis = 3 : i64} : tensor<?x4x?x?xf32>
  %o = transfuse.matmul %p, %v : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %o : tensor<?x4x?x16xf32>
}

// -----

// Tests that batch dimensions made by a broadcasting matmul (K has batch 1)
// are refused.
// CHECK-LABEL: func.func @broadcasting_batch
// CHECK-NOT: transfuse.attention
// CHECK: transfuse.softmax
// CHECK-NOT: transfuse.attention
func.func @broadcasting_batch(%q: tensor<2x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: not fused: the batch or head dimensions of Q, K and V are not provably equal (a broadcasting matmul)}}
  %p = transfuse.softmax %s {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Tests that counts are exact: of three softmaxes, two feed attention and
// fuse, the third (over the query axis) stays.
// CHECK-LABEL: func.func @counts
// CHECK-COUNT-2: transfuse.attention
// CHECK-NOT: transfuse.attention
// CHECK-COUNT-1: transfuse.softmax
// CHECK-NOT: transfuse.softmax
// CHECK-NOT: transfuse.attention
func.func @counts(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) {
  %s0 = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: fused}}
  %p0 = transfuse.softmax %s0 {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o0 = transfuse.matmul %p0, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %s1 = transfuse.matmul %o0, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: fused}}
  %p1 = transfuse.softmax %s1 {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o1 = transfuse.matmul %p1, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %s2 = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: not fused: softmax over axis 2}}
  %p2 = transfuse.softmax %s2 {axis = 2 : i64} : tensor<2x4x8x8xf32>
  %o2 = transfuse.matmul %p2, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o0, %o1, %o2 : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
}

// -----

// Tests grouped K/V heads repeated as Hugging Face's repeat_kv exports it
// (reshape to [B, Hkv, 1, S, D], expand axis 2 by a constant, reshape to
// [B, H, S, D]): the fused op reads the 2 K/V heads as they are.
// CHECK-LABEL: func.func @repeat_kv_by_expand
// CHECK-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[K:[^:]+]]: {{[^,]+}}, %[[V:[^:]+]]:
// CHECK: %[[O:.+]] = transfuse.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x4x8x16xf32>
func.func @repeat_kv_by_expand(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %g = transfuse.constant dense<0.0> : tensor<1x1x2x1x1xf32>
  %k1 = transfuse.reshape %k : (tensor<2x2x8x16xf32>) -> tensor<2x2x1x8x16xf32>
  %k2 = transfuse.expand %k1, %g : (tensor<2x2x1x8x16xf32>, tensor<1x1x2x1x1xf32>) -> tensor<2x2x2x8x16xf32>
  %kr = transfuse.reshape %k2 : (tensor<2x2x2x8x16xf32>) -> tensor<2x4x8x16xf32>
  %v1 = transfuse.reshape %v : (tensor<2x2x8x16xf32>) -> tensor<2x2x1x8x16xf32>
  %v2 = transfuse.expand %v1, %g : (tensor<2x2x1x8x16xf32>, tensor<1x1x2x1x1xf32>) -> tensor<2x2x2x8x16xf32>
  %vr = transfuse.reshape %v2 : (tensor<2x2x2x8x16xf32>) -> tensor<2x4x8x16xf32>
  %s = transfuse.matmul %q, %kr {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %t = transfuse.scale %s {factor = 0.25 : f64} : tensor<2x4x8x8xf32>
  // expected-remark@+1 {{attention: fused}}
  %p = transfuse.softmax %t {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = transfuse.matmul %p, %vr : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}
