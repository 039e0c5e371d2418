// RUN: transfuse-opt %s -split-input-file --transfuse-merge-projections="remarks=true" -verify-diagnostics | FileCheck %s

// --transfuse-merge-projections merges the plain projections of one input
// (same weight layout, same bias presence, matmul+add or linear) into one
// projection by the concatenated weight, followed by a split. The remark of
// each merged group is reported at its first projection; a projection alone
// in its group is not a candidate and gets no remark.

// Tests that Q, K and V projections of one input with biases and PyTorch's
// [N, K] weight layout become one matmul by the weights concatenated on
// axis 0 (their rows), one bias add by the concatenated biases, and a split
// of the last axis in the original order and sizes.
// CHECK-LABEL: func.func @qkv_transposed
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[WQ:[^:]+]]: {{[^,]+}}, %[[BQ:[^:]+]]: {{[^,]+}}, %[[WK:[^:]+]]: {{[^,]+}}, %[[BK:[^:]+]]: {{[^,]+}}, %[[WV:[^:]+]]: {{[^,]+}}, %[[BV:[^:]+]]:
// CHECK-NEXT: %[[W:.+]] = transfuse.concat %[[WQ]], %[[WK]], %[[WV]] {axis = 0 : i64} : (tensor<64x64xf32>, tensor<32x64xf32>, tensor<16x64xf32>) -> tensor<112x64xf32>
// CHECK-NEXT: %[[B:.+]] = transfuse.concat %[[BQ]], %[[BK]], %[[BV]] {axis = 0 : i64} : (tensor<64xf32>, tensor<32xf32>, tensor<16xf32>) -> tensor<112xf32>
// CHECK-NEXT: %[[M:.+]] = transfuse.matmul %[[X]], %[[W]] {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<112x64xf32>) -> tensor<?x?x112xf32>
// CHECK-NEXT: %[[A:.+]] = transfuse.add %[[M]], %[[B]] : (tensor<?x?x112xf32>, tensor<112xf32>) -> tensor<?x?x112xf32>
// CHECK-NEXT: %[[S:.+]]:3 = transfuse.split %[[A]] {axis = 2 : i64, sizes = array<i64: 64, 32, 16>} : (tensor<?x?x112xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x16xf32>)
// CHECK-NEXT: return %[[S]]#0, %[[S]]#1, %[[S]]#2
func.func @qkv_transposed(%x: tensor<?x?x64xf32>, %wq: tensor<64x64xf32>, %bq: tensor<64xf32>, %wk: tensor<32x64xf32>, %bk: tensor<32xf32>, %wv: tensor<16x64xf32>, %bv: tensor<16xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x16xf32>) {
  // expected-remark@+1 {{projections: fused}}
  %0 = transfuse.matmul %x, %wq {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %1 = transfuse.add %0, %bq : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %2 = transfuse.matmul %x, %wk {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  %3 = transfuse.add %2, %bk : (tensor<?x?x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
  %4 = transfuse.matmul %x, %wv {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<16x64xf32>) -> tensor<?x?x16xf32>
  %5 = transfuse.add %4, %bv : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  return %1, %3, %5 : tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x16xf32>
}

// -----

// Tests that with [K, N] weights (no transpose flag) the weights are
// concatenated on axis 1 (their columns); a bias on the left of its add is
// taken too.
// CHECK-LABEL: func.func @qkv_untransposed
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[WQ:[^:]+]]: {{[^,]+}}, %[[BQ:[^:]+]]: {{[^,]+}}, %[[WK:[^:]+]]: {{[^,]+}}, %[[BK:[^:]+]]: {{[^,]+}}, %[[WV:[^:]+]]: {{[^,]+}}, %[[BV:[^:]+]]:
// CHECK-NEXT: %[[W:.+]] = transfuse.concat %[[WQ]], %[[WK]], %[[WV]] {axis = 1 : i64} : (tensor<64x64xf32>, tensor<64x32xf32>, tensor<64x16xf32>) -> tensor<64x112xf32>
// CHECK-NEXT: %[[B:.+]] = transfuse.concat %[[BQ]], %[[BK]], %[[BV]] {axis = 0 : i64} : (tensor<64xf32>, tensor<32xf32>, tensor<16xf32>) -> tensor<112xf32>
// CHECK-NEXT: %[[M:.+]] = transfuse.matmul %[[X]], %[[W]] : (tensor<?x?x64xf32>, tensor<64x112xf32>) -> tensor<?x?x112xf32>
// CHECK-NEXT: %[[A:.+]] = transfuse.add %[[M]], %[[B]]
// CHECK-NEXT: %[[S:.+]]:3 = transfuse.split %[[A]] {axis = 2 : i64, sizes = array<i64: 64, 32, 16>}
// CHECK-NEXT: return %[[S]]#0, %[[S]]#1, %[[S]]#2
func.func @qkv_untransposed(%x: tensor<?x?x64xf32>, %wq: tensor<64x64xf32>, %bq: tensor<64xf32>, %wk: tensor<64x32xf32>, %bk: tensor<32xf32>, %wv: tensor<64x16xf32>, %bv: tensor<16xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x16xf32>) {
  // expected-remark@+1 {{projections: fused}}
  %0 = transfuse.matmul %x, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %1 = transfuse.add %0, %bq : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %2 = transfuse.matmul %x, %wk : (tensor<?x?x64xf32>, tensor<64x32xf32>) -> tensor<?x?x32xf32>
  %3 = transfuse.add %bk, %2 : (tensor<32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x32xf32>
  %4 = transfuse.matmul %x, %wv : (tensor<?x?x64xf32>, tensor<64x16xf32>) -> tensor<?x?x16xf32>
  %5 = transfuse.add %4, %bv : (tensor<?x?x16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  return %1, %3, %5 : tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x16xf32>
}

// -----

// Tests that projections with and without a bias are not merged together:
// Q and K (with biases) merge, V (without) stays a matmul of its own.
// CHECK-LABEL: func.func @mixed_bias_presence
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[WQ:[^:]+]]: {{[^,]+}}, %[[BQ:[^:]+]]: {{[^,]+}}, %[[WK:[^:]+]]: {{[^,]+}}, %[[BK:[^:]+]]: {{[^,]+}}, %[[WV:[^:]+]]:
// CHECK-NEXT: %[[W:.+]] = transfuse.concat %[[WQ]], %[[WK]] {axis = 0 : i64}
// CHECK-NEXT: %[[B:.+]] = transfuse.concat %[[BQ]], %[[BK]] {axis = 0 : i64}
// CHECK-NEXT: %[[M:.+]] = transfuse.matmul %[[X]], %[[W]] {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<96x64xf32>) -> tensor<?x?x96xf32>
// CHECK-NEXT: %[[A:.+]] = transfuse.add %[[M]], %[[B]]
// CHECK-NEXT: %[[S:.+]]:2 = transfuse.split %[[A]] {axis = 2 : i64, sizes = array<i64: 64, 32>}
// CHECK-NEXT: %[[V:.+]] = transfuse.matmul %[[X]], %[[WV]] {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<16x64xf32>) -> tensor<?x?x16xf32>
// CHECK-NEXT: return %[[S]]#0, %[[S]]#1, %[[V]]
// CHECK-NOT: transfuse.concat
func.func @mixed_bias_presence(%x: tensor<?x?x64xf32>, %wq: tensor<64x64xf32>, %bq: tensor<64xf32>, %wk: tensor<32x64xf32>, %bk: tensor<32xf32>, %wv: tensor<16x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x16xf32>) {
  // expected-remark@+1 {{projections: fused}}
  %0 = transfuse.matmul %x, %wq {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %1 = transfuse.add %0, %bq : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %2 = transfuse.matmul %x, %wk {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  %3 = transfuse.add %2, %bk : (tensor<?x?x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
  %4 = transfuse.matmul %x, %wv {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<16x64xf32>) -> tensor<?x?x16xf32>
  return %1, %3, %4 : tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x16xf32>
}

// -----

// Tests that projections of different inputs are not merged, and that
// neither are projections of one input with different weight layouts.
// CHECK-LABEL: func.func @different_inputs_or_layouts
// CHECK-NOT: transfuse.concat
// CHECK-NOT: transfuse.split
// CHECK-COUNT-3: transfuse.matmul
// CHECK-NOT: transfuse.matmul
// CHECK-NOT: transfuse.concat
func.func @different_inputs_or_layouts(%x: tensor<?x?x64xf32>, %y: tensor<?x?x64xf32>, %wq: tensor<64x64xf32>, %wk: tensor<64x64xf32>, %wv: tensor<64x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %q = transfuse.matmul %x, %wq {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %k = transfuse.matmul %y, %wk {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %v = transfuse.matmul %x, %wv : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  return %q, %k, %v : tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// Tests that linears (after the epilogue pass) merge into one linear; the
// projection of the other input (cross-attention's Q of the decoder state)
// stays separate while K and V of the memory merge.
// CHECK-LABEL: func.func @linears_cross_attention
// CHECK-SAME: (%[[MEM:[^:]+]]: {{[^,]+}}, %[[Y:[^:]+]]: {{[^,]+}}, %[[WQ:[^:]+]]: {{[^,]+}}, %[[BQ:[^:]+]]: {{[^,]+}}, %[[WK:[^:]+]]: {{[^,]+}}, %[[BK:[^:]+]]: {{[^,]+}}, %[[WV:[^:]+]]: {{[^,]+}}, %[[BV:[^:]+]]:
// CHECK-NEXT: %[[Q:.+]] = transfuse.linear %[[Y]], %[[WQ]] bias %[[BQ]] {transpose_weight}
// CHECK-NEXT: %[[W:.+]] = transfuse.concat %[[WK]], %[[WV]] {axis = 0 : i64}
// CHECK-NEXT: %[[B:.+]] = transfuse.concat %[[BK]], %[[BV]] {axis = 0 : i64}
// CHECK-NEXT: %[[KV:.+]] = transfuse.linear %[[MEM]], %[[W]] bias %[[B]] {transpose_weight} : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: %[[S:.+]]:2 = transfuse.split %[[KV]] {axis = 2 : i64, sizes = array<i64: 64, 64>}
// CHECK-NEXT: return %[[Q]], %[[S]]#0, %[[S]]#1
func.func @linears_cross_attention(%mem: tensor<?x?x64xf32>, %y: tensor<?x?x64xf32>, %wq: tensor<64x64xf32>, %bq: tensor<64xf32>, %wk: tensor<64x64xf32>, %bk: tensor<64xf32>, %wv: tensor<64x64xf32>, %bv: tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %q = transfuse.linear %y, %wq bias %bq {transpose_weight} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  // expected-remark@+1 {{projections: fused}}
  %k = transfuse.linear %mem, %wk bias %bk {transpose_weight} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %v = transfuse.linear %mem, %wv bias %bv {transpose_weight} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %q, %k, %v : tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// Tests that a linear with an activation or a residual is not a plain
// projection and is not merged.
// CHECK-LABEL: func.func @linear_with_epilogue_not_merged
// CHECK-NOT: transfuse.concat
// CHECK-COUNT-3: transfuse.linear
// CHECK-NOT: transfuse.split
func.func @linear_with_epilogue_not_merged(%x: tensor<?x?x64xf32>, %w0: tensor<64x64xf32>, %w1: tensor<64x64xf32>, %w2: tensor<64x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %a = transfuse.linear %x, %w0 {transpose_weight} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %b = transfuse.linear %x, %w1 {activation = #transfuse.activation<relu>, transpose_weight} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %c = transfuse.linear %x, %w2 residual %x {transpose_weight} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a, %b, %c : tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// Tests that a weight computed after the first projection (a parameter
// declared late) is moved before it, since it is pure, and the group merges.
// CHECK-LABEL: func.func @weight_hoisted
// CHECK: %[[W:.+]]:2 = transfuse.split %{{[^ ]+}} {axis = 0 : i64
// CHECK-NEXT: %[[P:.+]] = transfuse.param "wk"
// CHECK-NEXT: %[[C:.+]] = transfuse.concat %[[W]]#0, %[[P]] {axis = 0 : i64}
// CHECK-NEXT: %[[M:.+]] = transfuse.matmul %{{[^ ]+}}, %[[C]] {transpose_rhs = true}
// CHECK-NEXT: %[[S:.+]]:2 = transfuse.split %[[M]] {axis = 2 : i64, sizes = array<i64: 64, 64>}
// CHECK-NEXT: %[[R:.+]] = transfuse.relu %[[S]]#0
// CHECK-NEXT: return %[[R]], %[[S]]#1
func.func @weight_hoisted(%x: tensor<?x?x64xf32>, %w: tensor<128x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %w0, %w1 = transfuse.split %w {axis = 0 : i64, sizes = array<i64: 64, 64>} : (tensor<128x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>)
  // expected-remark@+1 {{projections: fused}}
  %q = transfuse.matmul %x, %w0 {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %r = transfuse.relu %q : tensor<?x?x64xf32>
  %p = transfuse.param "wk" {init = #transfuse.init<zeros>} : tensor<64x64xf32>
  %k = transfuse.matmul %x, %p {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  return %r, %k : tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// Tests that a projection whose weight is computed from another projection
// of the same group (x·Wqᵀ, then x·(x·Wqᵀ)ᵀ) is not merged: the merged matmul
// would need its own result. It must stay as it is, with the reason.
// CHECK-LABEL: func.func @weight_depends_on_group
// CHECK-NOT: transfuse.concat
// CHECK-COUNT-2: transfuse.matmul
// CHECK-NOT: transfuse.split
func.func @weight_depends_on_group(%x: tensor<64x64xf32>, %wq: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %q = transfuse.matmul %x, %wq {transpose_rhs = true} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  // expected-remark@+1 {{projections: not fused: its weight or bias depends on values computed after the other projections of the same input start}}
  %k = transfuse.matmul %x, %q {transpose_rhs = true} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  return %q, %k : tensor<64x64xf32>, tensor<64x64xf32>
}

// -----

// Tests that counts are exact on the encoder memory's K/V projections of three
// decoder layers: all six become one matmul, one add and one split.
// CHECK-LABEL: func.func @memory_kv_all_layers
// CHECK-COUNT-1: transfuse.matmul
// CHECK-NOT: transfuse.matmul
// CHECK: transfuse.split %{{[^ ]+}} {axis = 2 : i64, sizes = array<i64: 64, 64, 64, 64, 64, 64>}
// CHECK-NOT: transfuse.matmul
// CHECK-NOT: transfuse.split
func.func @memory_kv_all_layers(%mem: tensor<?x?x64xf32>, %b: tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %w0 = transfuse.param "l0.k" {init = #transfuse.init<zeros>} : tensor<64x64xf32>
  %w1 = transfuse.param "l0.v" {init = #transfuse.init<zeros>} : tensor<64x64xf32>
  %w2 = transfuse.param "l1.k" {init = #transfuse.init<zeros>} : tensor<64x64xf32>
  %w3 = transfuse.param "l1.v" {init = #transfuse.init<zeros>} : tensor<64x64xf32>
  %w4 = transfuse.param "l2.k" {init = #transfuse.init<zeros>} : tensor<64x64xf32>
  %w5 = transfuse.param "l2.v" {init = #transfuse.init<zeros>} : tensor<64x64xf32>
  // expected-remark@+1 {{projections: fused}}
  %0 = transfuse.matmul %mem, %w0 {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %1 = transfuse.add %0, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %2 = transfuse.matmul %mem, %w1 {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %3 = transfuse.add %2, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %4 = transfuse.matmul %mem, %w2 {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %5 = transfuse.add %4, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %6 = transfuse.matmul %mem, %w3 {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %7 = transfuse.add %6, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %8 = transfuse.matmul %mem, %w4 {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %9 = transfuse.add %8, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %10 = transfuse.matmul %mem, %w5 {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %11 = transfuse.add %10, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %1, %3, %5, %7, %9, %11 : tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>
}
