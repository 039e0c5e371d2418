// RUN: transfuse-opt %s -split-input-file --transfuse-fuse-add-layer-norm="remarks=true" -verify-diagnostics | FileCheck %s

// --transfuse-fuse-add-layer-norm rewrites layer_norm(x + r) over the last
// dimension into transfuse.add_layer_norm, whose second result (the sum)
// replaces the add's other uses. The remark of each site is reported at its
// layer norm.

// Tests that a post-LN residual block (the sum has no other use) becomes one
// add_layer_norm with the input, the residual, gamma, beta and epsilon.
// CHECK-LABEL: func.func @post_ln
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[R:[^:]+]]: {{[^,]+}}, %[[G:[^:]+]]: {{[^,]+}}, %[[B:[^:]+]]:
// CHECK-NEXT: %[[Y:.+]], %{{.+}} = transfuse.add_layer_norm %[[X]], %[[R]], %[[G]], %[[B]] {epsilon = 1.000000e-05 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>)
// CHECK-NEXT: return %[[Y]]
// CHECK-NOT: transfuse.layer_norm
func.func @post_ln(%x: tensor<?x?x64xf32>, %r: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %s = transfuse.add %x, %r : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  // expected-remark@+1 {{add_layer_norm: fused}}
  %y = transfuse.layer_norm %s, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// Tests that an RMSNorm (Llama's: rms, no beta) fuses with its residual add
// the same way, keeping rms.
// CHECK-LABEL: func.func @rms_norm
// CHECK-NEXT: transfuse.add_layer_norm %{{[^ ,]+}}, %{{[^ ,]+}}, %{{[^ ,]+}} {epsilon = 9.9999999999999995E-7 : f64, rms} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>)
// CHECK-NOT: transfuse.layer_norm
func.func @rms_norm(%x: tensor<?x?x64xf32>, %r: tensor<?x?x64xf32>, %g: tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %s = transfuse.add %x, %r : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  // expected-remark@+1 {{add_layer_norm: fused}}
  %y = transfuse.layer_norm %s, %g {axis = 2 : i64, epsilon = 1.0e-06 : f64, rms} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y, %s : tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// Tests that in pre-LN, where the sum is also the residual stream that the
// next block adds to, the fused op's `%sum` result replaces the add's other
// uses.
// CHECK-LABEL: func.func @pre_ln_sum_reused
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[R:[^:]+]]: {{[^,]+}}, %[[G:[^:]+]]: {{[^,]+}}, %[[B:[^:]+]]:
// CHECK-NEXT: %[[Y:.+]], %[[SUM:.+]] = transfuse.add_layer_norm %[[X]], %[[R]], %[[G]], %[[B]] {epsilon = 1.000000e-05 : f64}
// CHECK-NEXT: %[[Z:.+]] = transfuse.relu %[[Y]]
// CHECK-NEXT: %[[N:.+]] = transfuse.add %[[SUM]], %[[Z]]
// CHECK-NEXT: return %[[Y]], %[[N]], %[[SUM]]
func.func @pre_ln_sum_reused(%x: tensor<?x?x64xf32>, %r: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %s = transfuse.add %x, %r : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  // expected-remark@+1 {{add_layer_norm: fused}}
  %y = transfuse.layer_norm %s, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %z = transfuse.relu %y : tensor<?x?x64xf32>
  %n = transfuse.add %s, %z : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %y, %n, %s : tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// Tests that a residual that broadcasts (positional embeddings [S, D] added
// to [B, S, D], written on the left of the add) becomes the `residual`
// operand, and the full-shape operand the `input`.
// CHECK-LABEL: func.func @broadcast_residual
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[PE:[^:]+]]: {{[^,]+}}, %[[G:[^:]+]]: {{[^,]+}}, %[[B:[^:]+]]:
// CHECK-NEXT: %[[Y:.+]], %{{.+}} = transfuse.add_layer_norm %[[X]], %[[PE]], %[[G]], %[[B]] {epsilon = 1.000000e-05 : f64} : (tensor<?x?x64xf32>, tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>)
// CHECK-NEXT: return %[[Y]]
func.func @broadcast_residual(%x: tensor<?x?x64xf32>, %pe: tensor<?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %s = transfuse.add %pe, %x : (tensor<?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  // expected-remark@+1 {{add_layer_norm: fused}}
  %y = transfuse.layer_norm %s, %g, %b {axis = -1 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// Tests that parameters defined between the add and the layer norm are fine
// when the sum has no use before the layer norm: the fused op goes at the
// layer norm.
// CHECK-LABEL: func.func @params_after_add
// CHECK: %[[G:.+]] = transfuse.param "g"
// CHECK-NEXT: %[[B:.+]] = transfuse.param "b"
// CHECK-NEXT: %[[Y:.+]], %[[SUM:.+]] = transfuse.add_layer_norm %{{[^ ]+}}, %{{[^ ]+}}, %[[G]], %[[B]]
// CHECK-NEXT: %[[E:.+]] = transfuse.exp %[[SUM]]
// CHECK-NEXT: return %[[Y]], %[[E]]
func.func @params_after_add(%x: tensor<?x?x64xf32>, %r: tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %s = transfuse.add %x, %r : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %g = transfuse.param "g" {init = #transfuse.init<ones>} : tensor<64xf32>
  %b = transfuse.param "b" {init = #transfuse.init<zeros>} : tensor<64xf32>
  // expected-remark@+1 {{add_layer_norm: fused}}
  %y = transfuse.layer_norm %s, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %e = transfuse.exp %s : tensor<?x?x64xf32>
  return %y, %e : tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// Tests that a sum used before the parameters of its layer norm are defined
// is left alone: the fused op could neither go at the add nor at the norm.
// CHECK-LABEL: func.func @sum_used_before_params
// CHECK-NOT: transfuse.add_layer_norm
// CHECK: transfuse.add
// CHECK: transfuse.layer_norm
// CHECK-NOT: transfuse.add_layer_norm
func.func @sum_used_before_params(%x: tensor<?x?x64xf32>, %r: tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %s = transfuse.add %x, %r : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %e = transfuse.exp %s : tensor<?x?x64xf32>
  %g = transfuse.param "g" {init = #transfuse.init<ones>} : tensor<64xf32>
  %b = transfuse.param "b" {init = #transfuse.init<zeros>} : tensor<64xf32>
  // expected-remark@+1 {{add_layer_norm: not fused: the sum is used before the layer norm's parameters are defined}}
  %y = transfuse.layer_norm %s, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y, %e : tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// Tests that a layer norm over the last two dimensions is refused.
// CHECK-LABEL: func.func @two_dims
// CHECK-NOT: transfuse.add_layer_norm
// CHECK: transfuse.add
// CHECK-NEXT: transfuse.layer_norm %{{[^ ]+}}, %{{[^ ]+}}, %{{[^ ]+}} {axis = 1 : i64
// CHECK-NOT: transfuse.add_layer_norm
func.func @two_dims(%x: tensor<?x4x8xf32>, %r: tensor<?x4x8xf32>, %g: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<?x4x8xf32> {
  %s = transfuse.add %x, %r : (tensor<?x4x8xf32>, tensor<?x4x8xf32>) -> tensor<?x4x8xf32>
  // expected-remark@+1 {{add_layer_norm: not fused: normalizes more than the last dimension}}
  %y = transfuse.layer_norm %s, %g, %b {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<?x4x8xf32>
  return %y : tensor<?x4x8xf32>
}

// -----

// Tests that a layer norm whose input is not an add is refused, with the op
// (or the function argument) it comes from named in the reason.
// CHECK-LABEL: func.func @input_not_an_add
// CHECK-NOT: transfuse.add_layer_norm
// CHECK-COUNT-2: transfuse.layer_norm
// CHECK-NOT: transfuse.add_layer_norm
func.func @input_not_an_add(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %s = transfuse.sub %x, %x : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  // expected-remark@+1 {{add_layer_norm: not fused: its input is not a residual add (it comes from 'transfuse.sub')}}
  %y = transfuse.layer_norm %s, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  // expected-remark@+1 {{add_layer_norm: not fused: its input is not a residual add (it is a function argument)}}
  %z = transfuse.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y, %z : tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// Tests that an add whose operands both broadcast ([B, 1, D] + [1, S, D]) is
// refused: add_layer_norm needs one operand of the sum's shape.
// CHECK-LABEL: func.func @both_operands_broadcast
// CHECK-NOT: transfuse.add_layer_norm
// CHECK: transfuse.layer_norm
func.func @both_operands_broadcast(%x: tensor<?x1x64xf32>, %r: tensor<1x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %s = transfuse.add %x, %r : (tensor<?x1x64xf32>, tensor<1x?x64xf32>) -> tensor<?x?x64xf32>
  // expected-remark@+1 {{add_layer_norm: not fused: both operands of the add broadcast}}
  %y = transfuse.layer_norm %s, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// Tests that a residual stretched along a dimension of size 1 ([1, S, D]
// into [B, S, D], learned positions kept as [1, S, D]) is refused, while its
// trailing block [S, D] fuses.
// CHECK-LABEL: func.func @residual_broadcast
// CHECK: transfuse.layer_norm
// CHECK: transfuse.add_layer_norm
func.func @residual_broadcast(%x: tensor<?x5x64xf32>, %r: tensor<1x5x64xf32>, %t: tensor<5x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<?x5x64xf32>, tensor<?x5x64xf32>) {
  %s = transfuse.add %x, %r : (tensor<?x5x64xf32>, tensor<1x5x64xf32>) -> tensor<?x5x64xf32>
  // expected-remark@+1 {{add_layer_norm: not fused: the residual broadcasts along its dimension 0 (size 1; a residual must be the sum's shape or its trailing dimensions)}}
  %y = transfuse.layer_norm %s, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x5x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x5x64xf32>
  %s2 = transfuse.add %x, %t : (tensor<?x5x64xf32>, tensor<5x64xf32>) -> tensor<?x5x64xf32>
  // expected-remark@+1 {{add_layer_norm: fused}}
  %y2 = transfuse.layer_norm %s2, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x5x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x5x64xf32>
  return %y, %y2 : tensor<?x5x64xf32>, tensor<?x5x64xf32>
}

// -----

// Tests that exact counts hold on a chain of three pre-LN blocks plus a norm:
// the first add feeds two layer norms; the first fuses, the second then sees
// the fused op's sum and stays. Three add_layer_norm and one layer_norm.
// CHECK-LABEL: func.func @counts
// CHECK-COUNT-3: transfuse.add_layer_norm
// CHECK-NOT: transfuse.add_layer_norm
// CHECK-NOT: transfuse.add %
// CHECK: transfuse.layer_norm
// CHECK-NOT: transfuse.layer_norm
// CHECK-NOT: transfuse.add_layer_norm
func.func @counts(%x: tensor<?x?x64xf32>, %r: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %s0 = transfuse.add %x, %r : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  // expected-remark@+1 {{add_layer_norm: fused}}
  %y0 = transfuse.layer_norm %s0, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %s1 = transfuse.add %s0, %y0 : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  // expected-remark@+1 {{add_layer_norm: fused}}
  %y1 = transfuse.layer_norm %s1, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %s2 = transfuse.add %s1, %y1 : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  // expected-remark@+1 {{add_layer_norm: fused}}
  %y2 = transfuse.layer_norm %s2, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  // expected-remark@+1 {{add_layer_norm: not fused: its input is not a residual add (it comes from 'transfuse.add_layer_norm')}}
  %f = transfuse.layer_norm %s0, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y2, %f : tensor<?x?x64xf32>, tensor<?x?x64xf32>
}
