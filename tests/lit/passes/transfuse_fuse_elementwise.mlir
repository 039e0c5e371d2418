// RUN: transfuse-opt %s -split-input-file --transfuse-fuse-elementwise="remarks=true" -verify-diagnostics | FileCheck %s

// --transfuse-fuse-elementwise groups chains of elementwise ops of one
// result type whose intermediates have a single use into one
// transfuse.fused_elementwise; one-element constants are cloned into the
// body, everything else from outside becomes an input. The remark of each
// chain is reported at its last op.

// Tests that a chain of three ops (scale, add of a broadcast input, tanh)
// becomes one region with exactly that body, the chain's outside values as
// inputs in order of first use.
// CHECK-LABEL: func.func @chain_of_three
// CHECK-SAME: (%[[E:[^:]+]]: {{[^,]+}}, %[[PE:[^:]+]]:
// CHECK-NEXT: %[[F:.+]] = transfuse.fused_elementwise %[[E]], %[[PE]] : (tensor<?x?x64xf32>, tensor<?x64xf32>) -> tensor<?x?x64xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x?x64xf32>, %[[A1:.+]]: tensor<?x64xf32>):
// CHECK-NEXT: %[[S:.+]] = transfuse.scale %[[A0]] {factor = 8.000000e+00 : f64} : tensor<?x?x64xf32>
// CHECK-NEXT: %[[A:.+]] = transfuse.add %[[S]], %[[A1]] : (tensor<?x?x64xf32>, tensor<?x64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: %[[T:.+]] = transfuse.tanh %[[A]] : tensor<?x?x64xf32>
// CHECK-NEXT: transfuse.yield %[[T]] : tensor<?x?x64xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @chain_of_three(%e: tensor<?x?x64xf32>, %pe: tensor<?x64xf32>) -> tensor<?x?x64xf32> {
  %a = transfuse.scale %e {factor = 8.0 : f64} : tensor<?x?x64xf32>
  %b = transfuse.add %a, %pe : (tensor<?x?x64xf32>, tensor<?x64xf32>) -> tensor<?x?x64xf32>
  // expected-remark@+1 {{elementwise: fused}}
  %c = transfuse.tanh %b : tensor<?x?x64xf32>
  return %c : tensor<?x?x64xf32>
}

// -----

// Tests that an intermediate with two uses splits the chain: exp and tanh
// fuse (the tanh result is returned and also feeds relu), and relu stays
// alone with a reason.
// CHECK-LABEL: func.func @two_uses_split_the_chain
// CHECK-SAME: (%[[X:[^:]+]]:
// CHECK-NEXT: %[[F:.+]] = transfuse.fused_elementwise %[[X]] : (tensor<?x64xf32>) -> tensor<?x64xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x64xf32>):
// CHECK-NEXT: %[[E:.+]] = transfuse.exp %[[A0]]
// CHECK-NEXT: %[[T:.+]] = transfuse.tanh %[[E]]
// CHECK-NEXT: transfuse.yield %[[T]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[R:.+]] = transfuse.relu %[[F]] : tensor<?x64xf32>
// CHECK-NEXT: return %[[R]], %[[F]]
// CHECK-NOT: transfuse.fused_elementwise
func.func @two_uses_split_the_chain(%x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %a = transfuse.exp %x : tensor<?x64xf32>
  // expected-remark@+1 {{elementwise: fused}}
  %b = transfuse.tanh %a : tensor<?x64xf32>
  // expected-remark@+1 {{elementwise: not fused: no elementwise producer of the same shape with a single use to fuse with}}
  %c = transfuse.relu %b : tensor<?x64xf32>
  return %c, %b : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// Tests that one-element constants are cloned into the body (once, though
// used twice) instead of becoming inputs, while a constant with more
// elements is an input.
// CHECK-LABEL: func.func @scalar_constants_cloned
// CHECK-SAME: (%[[X:[^:]+]]:
// CHECK: %[[V:.+]] = transfuse.constant dense<{{\[}}[1.000000e+00, 2.000000e+00]]> : tensor<1x2xf32>
// CHECK-NEXT: %[[F:.+]] = transfuse.fused_elementwise %[[X]], %[[V]] : (tensor<?x2xf32>, tensor<1x2xf32>) -> tensor<?x2xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x2xf32>, %[[A1:.+]]: tensor<1x2xf32>):
// CHECK-NEXT: %[[C:.+]] = transfuse.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[M:.+]] = transfuse.mul %[[A0]], %[[C]] : (tensor<?x2xf32>, tensor<f32>) -> tensor<?x2xf32>
// CHECK-NEXT: %[[S:.+]] = transfuse.sub %[[M]], %[[C]] : (tensor<?x2xf32>, tensor<f32>) -> tensor<?x2xf32>
// CHECK-NEXT: %[[A:.+]] = transfuse.add %[[S]], %[[A1]] : (tensor<?x2xf32>, tensor<1x2xf32>) -> tensor<?x2xf32>
// CHECK-NEXT: transfuse.yield %[[A]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @scalar_constants_cloned(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %c = transfuse.constant dense<2.0> : tensor<f32>
  %v = transfuse.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
  %a = transfuse.mul %x, %c : (tensor<?x2xf32>, tensor<f32>) -> tensor<?x2xf32>
  %b = transfuse.sub %a, %c : (tensor<?x2xf32>, tensor<f32>) -> tensor<?x2xf32>
  // expected-remark@+1 {{elementwise: fused}}
  %d = transfuse.add %b, %v : (tensor<?x2xf32>, tensor<1x2xf32>) -> tensor<?x2xf32>
  return %d : tensor<?x2xf32>
}

// -----

// Tests that a producer of another shape (a broadcast operand) is not pulled
// into the chain: both ops stay, each with a reason.
// CHECK-LABEL: func.func @different_shapes
// CHECK-NOT: transfuse.fused_elementwise
// CHECK: transfuse.exp
// CHECK-NEXT: transfuse.add
// CHECK-NOT: transfuse.fused_elementwise
func.func @different_shapes(%x: tensor<?x?x64xf32>, %pe: tensor<?x64xf32>) -> tensor<?x?x64xf32> {
  // expected-remark@+1 {{elementwise: not fused: no elementwise producer of the same shape with a single use to fuse with}}
  %a = transfuse.exp %pe : tensor<?x64xf32>
  // expected-remark@+1 {{elementwise: not fused: no elementwise producer of the same shape with a single use to fuse with}}
  %b = transfuse.add %x, %a : (tensor<?x?x64xf32>, tensor<?x64xf32>) -> tensor<?x?x64xf32>
  return %b : tensor<?x?x64xf32>
}

// -----

// Tests that a tree (two producers joining in one op) fuses as one region,
// and that a select's boolean condition becomes an input.
// CHECK-LABEL: func.func @tree_with_select
// CHECK-SAME: (%[[M:[^:]+]]: {{[^,]+}}, %[[X:[^:]+]]: {{[^,]+}}, %[[Y:[^:]+]]:
// CHECK-NEXT: %[[F:.+]] = transfuse.fused_elementwise %[[X]], %[[Y]], %[[M]] : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xi1>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%[[AX:.+]]: tensor<4x8xf32>, %[[AY:.+]]: tensor<4x8xf32>, %[[AM:.+]]: tensor<4x8xi1>):
// CHECK-NEXT: %[[E:.+]] = transfuse.exp %[[AX]]
// CHECK-NEXT: %[[G:.+]] = transfuse.gelu %[[AY]] {approximate = #transfuse.approximation<tanh>}
// CHECK-NEXT: %[[S:.+]] = transfuse.select %[[AM]], %[[E]], %[[G]]
// CHECK-NEXT: transfuse.yield %[[S]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @tree_with_select(%m: tensor<4x8xi1>, %x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = transfuse.exp %x : tensor<4x8xf32>
  %b = transfuse.gelu %y {approximate = #transfuse.approximation<tanh>} : tensor<4x8xf32>
  // expected-remark@+1 {{elementwise: fused}}
  %c = transfuse.select %m, %a, %b : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}

// -----

// Tests that counts are exact: two independent chains, split by a matmul (not
// elementwise), give two regions; no elementwise op is left outside them.
// CHECK-LABEL: func.func @counts
// CHECK-COUNT-2: transfuse.fused_elementwise
// CHECK-NOT: transfuse.fused_elementwise
// CHECK: return
func.func @counts(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = transfuse.exp %x : tensor<4x4xf32>
  // expected-remark@+1 {{elementwise: fused}}
  %b = transfuse.relu %a : tensor<4x4xf32>
  %m = transfuse.matmul %b, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %c = transfuse.scale %m {factor = 0.5 : f64} : tensor<4x4xf32>
  %d = transfuse.tanh %c : tensor<4x4xf32>
  // expected-remark@+1 {{elementwise: fused}}
  %e = transfuse.add %d, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %e : tensor<4x4xf32>
}
