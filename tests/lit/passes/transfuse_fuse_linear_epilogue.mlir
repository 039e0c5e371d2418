// RUN: transfuse-opt %s -split-input-file --transfuse-fuse-linear-epilogue="remarks=true" -verify-diagnostics | FileCheck %s

// --transfuse-fuse-linear-epilogue turns each matmul of activations by a
// rank-2 weight into transfuse.linear and absorbs what follows it with one
// use: a bias add ([N]), then relu / gelu / gelu_tanh / silu, then a residual add
// that no layer norm consumes. The remark of each site is reported at its
// matmul.

// Tests that a bias add of an [N] vector is absorbed, with the PyTorch
// weight layout ([N, K], transpose_rhs) kept as transpose_weight.
// CHECK-LABEL: func.func @bias
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[W:[^:]+]]: {{[^,]+}}, %[[B:[^:]+]]:
// CHECK-NEXT: %[[Y:.+]] = transfuse.linear %[[X]], %[[W]] bias %[[B]] {transpose_weight} : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: return %[[Y]]
func.func @bias(%x: tensor<?x?x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>) -> tensor<?x?x128xf32> {
  // expected-remark@+1 {{linear_epilogue: fused}}
  %0 = transfuse.matmul %x, %w {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  %1 = transfuse.add %0, %b : (tensor<?x?x128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  return %1 : tensor<?x?x128xf32>
}

// -----

// Tests that a weight in [K, N] layout (no transpose flag) gives a linear
// without transpose_weight, and that a bias on the left of the add is taken.
// CHECK-LABEL: func.func @bias_untransposed
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[W:[^:]+]]: {{[^,]+}}, %[[B:[^:]+]]:
// CHECK-NEXT: %[[Y:.+]] = transfuse.linear %[[X]], %[[W]] bias %[[B]] : (tensor<?x?x64xf32>, tensor<64x128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: return %[[Y]]
func.func @bias_untransposed(%x: tensor<?x?x64xf32>, %w: tensor<64x128xf32>, %b: tensor<128xf32>) -> tensor<?x?x128xf32> {
  // expected-remark@+1 {{linear_epilogue: fused}}
  %0 = transfuse.matmul %x, %w : (tensor<?x?x64xf32>, tensor<64x128xf32>) -> tensor<?x?x128xf32>
  %1 = transfuse.add %b, %0 : (tensor<128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  return %1 : tensor<?x?x128xf32>
}

// -----

// Tests that bias then relu becomes activation = #transfuse.activation<relu>.
// CHECK-LABEL: func.func @bias_relu
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[W:[^:]+]]: {{[^,]+}}, %[[B:[^:]+]]:
// CHECK-NEXT: %[[Y:.+]] = transfuse.linear %[[X]], %[[W]] bias %[[B]] {activation = #transfuse.activation<relu>, transpose_weight} : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: return %[[Y]]
func.func @bias_relu(%x: tensor<?x?x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>) -> tensor<?x?x128xf32> {
  // expected-remark@+1 {{linear_epilogue: fused}}
  %0 = transfuse.matmul %x, %w {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  %1 = transfuse.add %0, %b : (tensor<?x?x128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  %2 = transfuse.relu %1 : tensor<?x?x128xf32>
  return %2 : tensor<?x?x128xf32>
}

// -----

// Tests that bias then exact gelu becomes activation = #transfuse.activation<gelu>.
// CHECK-LABEL: func.func @bias_gelu
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[W:[^:]+]]: {{[^,]+}}, %[[B:[^:]+]]:
// CHECK-NEXT: %[[Y:.+]] = transfuse.linear %[[X]], %[[W]] bias %[[B]] {activation = #transfuse.activation<gelu>} : (tensor<?x?x64xf32>, tensor<64x128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: return %[[Y]]
func.func @bias_gelu(%x: tensor<?x?x64xf32>, %w: tensor<64x128xf32>, %b: tensor<128xf32>) -> tensor<?x?x128xf32> {
  // expected-remark@+1 {{linear_epilogue: fused}}
  %0 = transfuse.matmul %x, %w : (tensor<?x?x64xf32>, tensor<64x128xf32>) -> tensor<?x?x128xf32>
  %1 = transfuse.add %0, %b : (tensor<?x?x128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  %2 = transfuse.gelu %1 : tensor<?x?x128xf32>
  return %2 : tensor<?x?x128xf32>
}

// -----

// Tests that bias then tanh-approximated gelu becomes activation = #transfuse.activation<gelu_tanh>
// (GPT-2's MLP).
// CHECK-LABEL: func.func @bias_gelu_tanh
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[W:[^:]+]]: {{[^,]+}}, %[[B:[^:]+]]:
// CHECK-NEXT: %[[Y:.+]] = transfuse.linear %[[X]], %[[W]] bias %[[B]] {activation = #transfuse.activation<gelu_tanh>} : (tensor<?x?x64xf32>, tensor<64x128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: return %[[Y]]
func.func @bias_gelu_tanh(%x: tensor<?x?x64xf32>, %w: tensor<64x128xf32>, %b: tensor<128xf32>) -> tensor<?x?x128xf32> {
  // expected-remark@+1 {{linear_epilogue: fused}}
  %0 = transfuse.matmul %x, %w : (tensor<?x?x64xf32>, tensor<64x128xf32>) -> tensor<?x?x128xf32>
  %1 = transfuse.add %0, %b : (tensor<?x?x128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  %2 = transfuse.gelu %1 {approximate = #transfuse.approximation<tanh>} : tensor<?x?x128xf32>
  return %2 : tensor<?x?x128xf32>
}

// -----

// Tests that silu without a bias becomes activation = #transfuse.activation<silu>
// (a SwiGLU gate's projection).
// CHECK-LABEL: func.func @silu
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[W:[^:]+]]:
// CHECK-NEXT: %[[Y:.+]] = transfuse.linear %[[X]], %[[W]] {activation = #transfuse.activation<silu>} : (tensor<?x?x64xf32>, tensor<64x128xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: return %[[Y]]
func.func @silu(%x: tensor<?x?x64xf32>, %w: tensor<64x128xf32>) -> tensor<?x?x128xf32> {
  // expected-remark@+1 {{linear_epilogue: fused}}
  %0 = transfuse.matmul %x, %w : (tensor<?x?x64xf32>, tensor<64x128xf32>) -> tensor<?x?x128xf32>
  %1 = transfuse.silu %0 : tensor<?x?x128xf32>
  return %1 : tensor<?x?x128xf32>
}

// -----

// Tests that an activation without a bias is absorbed too.
// CHECK-LABEL: func.func @relu_no_bias
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[W:[^:]+]]:
// CHECK-NEXT: %[[Y:.+]] = transfuse.linear %[[X]], %[[W]] {activation = #transfuse.activation<relu>, transpose_weight} : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: return %[[Y]]
func.func @relu_no_bias(%x: tensor<?x?x64xf32>, %w: tensor<128x64xf32>) -> tensor<?x?x128xf32> {
  // expected-remark@+1 {{linear_epilogue: fused}}
  %0 = transfuse.matmul %x, %w {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  %1 = transfuse.relu %0 : tensor<?x?x128xf32>
  return %1 : tensor<?x?x128xf32>
}

// -----

// Tests that bias, relu and a residual add that no layer norm consumes all
// go into one linear; the residual is computed after the matmul, so the linear is
// built where the residual add was. (%s has %x's sizes: sizes_of.)
// CHECK-LABEL: func.func @bias_relu_residual
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[W:[^:]+]]: {{[^,]+}}, %[[B:[^:]+]]: {{[^,]+}}, %[[S:[^:]+]]:
// CHECK-NEXT: %[[R:.+]] = transfuse.exp %[[S]]
// CHECK-NEXT: %[[Y:.+]] = transfuse.linear %[[X]], %[[W]] bias %[[B]] residual %[[R]] {activation = #transfuse.activation<relu>, transpose_weight} : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: return %[[Y]]
func.func @bias_relu_residual(%x: tensor<?x?x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>, %s: tensor<?x?x128xf32> {transfuse.sizes_of = 0 : i64}) -> tensor<?x?x128xf32> {
  // expected-remark@+1 {{linear_epilogue: fused}}
  %0 = transfuse.matmul %x, %w {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  %1 = transfuse.add %0, %b : (tensor<?x?x128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  %2 = transfuse.relu %1 : tensor<?x?x128xf32>
  %r = transfuse.exp %s : tensor<?x?x128xf32>
  %3 = transfuse.add %r, %2 : (tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  return %3 : tensor<?x?x128xf32>
}

// -----

// Tests that a full-shape add straight after the matmul is a residual, not
// a bias (%r has %x's sizes: sizes_of).
// CHECK-LABEL: func.func @residual_only
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[W:[^:]+]]: {{[^,]+}}, %[[R:[^:]+]]:
// CHECK-NEXT: %[[Y:.+]] = transfuse.linear %[[X]], %[[W]] residual %[[R]] {transpose_weight}
// CHECK-NEXT: return %[[Y]]
func.func @residual_only(%x: tensor<?x?x64xf32>, %w: tensor<64x64xf32>, %r: tensor<?x?x64xf32> {transfuse.sizes_of = 0 : i64}) -> tensor<?x?x64xf32> {
  // expected-remark@+1 {{linear_epilogue: fused}}
  %0 = transfuse.matmul %x, %w {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %1 = transfuse.add %0, %r : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %1 : tensor<?x?x64xf32>
}

// -----

// Tests that a residual add whose result feeds a layer norm is NOT taken: it
// belongs to add_layer_norm. The linear keeps only its bias, and the add
// and the layer norm stay as they are.
// CHECK-LABEL: func.func @residual_feeding_layer_norm
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[W:[^:]+]]: {{[^,]+}}, %[[B:[^:]+]]: {{[^,]+}}, %[[R:[^:]+]]:
// CHECK-NEXT: %[[Y:.+]] = transfuse.linear %[[X]], %[[W]] bias %[[B]] {transpose_weight} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: %[[S:.+]] = transfuse.add %[[R]], %[[Y]]
// CHECK-NEXT: %[[N:.+]] = transfuse.layer_norm %[[S]]
// CHECK-NEXT: return %[[N]]
func.func @residual_feeding_layer_norm(%x: tensor<?x?x64xf32>, %w: tensor<64x64xf32>, %b: tensor<64xf32>, %r: tensor<?x?x64xf32>, %g: tensor<64xf32>, %beta: tensor<64xf32>) -> tensor<?x?x64xf32> {
  // expected-remark@+1 {{linear_epilogue: fused}}
  %0 = transfuse.matmul %x, %w {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %1 = transfuse.add %0, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %2 = transfuse.add %r, %1 : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %3 = transfuse.layer_norm %2, %g, %beta {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %3 : tensor<?x?x64xf32>
}

// -----

// Tests that a residual add feeding a layer norm among other users is not
// taken either (the layer norm is not its only consumer).
// CHECK-LABEL: func.func @residual_feeding_layer_norm_and_more
// CHECK: %[[Y:.+]] = transfuse.linear %{{[^ ]+}}, %{{[^ ]+}} {transpose_weight}
// CHECK-NEXT: %[[S:.+]] = transfuse.add %[[Y]], %{{[^ ]+}}
// CHECK-NEXT: transfuse.layer_norm %[[S]]
func.func @residual_feeding_layer_norm_and_more(%x: tensor<?x?x64xf32>, %w: tensor<64x64xf32>, %r: tensor<?x?x64xf32>, %g: tensor<64xf32>, %beta: tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  // expected-remark@+1 {{linear_epilogue: not fused: no bias, activation or residual add follows the matmul (it runs as a plain linear)}}
  %0 = transfuse.matmul %x, %w {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %1 = transfuse.add %0, %r : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %2 = transfuse.layer_norm %1, %g, %beta {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %2, %1 : tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// Tests that a matmul whose result has a second consumer absorbs nothing:
// it becomes a plain linear and the bias add stays.
// CHECK-LABEL: func.func @matmul_second_consumer
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[W:[^:]+]]: {{[^,]+}}, %[[B:[^:]+]]:
// CHECK-NEXT: %[[Y:.+]] = transfuse.linear %[[X]], %[[W]] {transpose_weight} : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: %[[A:.+]] = transfuse.add %[[Y]], %[[B]]
// CHECK-NEXT: return %[[A]], %[[Y]]
func.func @matmul_second_consumer(%x: tensor<?x?x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>) -> (tensor<?x?x128xf32>, tensor<?x?x128xf32>) {
  // expected-remark@+1 {{linear_epilogue: not fused: no bias, activation or residual add follows the matmul}}
  %0 = transfuse.matmul %x, %w {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  %1 = transfuse.add %0, %b : (tensor<?x?x128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  return %1, %0 : tensor<?x?x128xf32>, tensor<?x?x128xf32>
}

// -----

// Tests that a bias add with a second consumer is absorbed but stops the
// chain there: the relu after it stays outside, and both consumers read the
// linear.
// CHECK-LABEL: func.func @bias_add_second_consumer
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[W:[^:]+]]: {{[^,]+}}, %[[B:[^:]+]]:
// CHECK-NEXT: %[[Y:.+]] = transfuse.linear %[[X]], %[[W]] bias %[[B]] {transpose_weight} : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: %[[R:.+]] = transfuse.relu %[[Y]]
// CHECK-NEXT: return %[[R]], %[[Y]]
func.func @bias_add_second_consumer(%x: tensor<?x?x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>) -> (tensor<?x?x128xf32>, tensor<?x?x128xf32>) {
  // expected-remark@+1 {{linear_epilogue: fused}}
  %0 = transfuse.matmul %x, %w {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  %1 = transfuse.add %0, %b : (tensor<?x?x128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  %2 = transfuse.relu %1 : tensor<?x?x128xf32>
  return %2, %1 : tensor<?x?x128xf32>, tensor<?x?x128xf32>
}

// -----

// Tests that an add of a [1] vector (not [N]) right after the matmul is
// neither the bias nor a residual: it broadcasts to the result, which the
// GEMM epilogue does not (it reads a residual element for element).
// CHECK-LABEL: func.func @one_element_add_is_not_absorbed
// CHECK-NOT: residual
// CHECK: transfuse.add
// CHECK-NEXT: return
func.func @one_element_add_is_not_absorbed(%x: tensor<?x?x64xf32>, %w: tensor<128x64xf32>, %c: tensor<1xf32>) -> tensor<?x?x128xf32> {
  // expected-remark@+1 {{linear_epilogue: not fused: no bias, activation or residual add follows the matmul (it runs as a plain linear)}}
  %0 = transfuse.matmul %x, %w {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  %1 = transfuse.add %0, %c : (tensor<?x?x128xf32>, tensor<1xf32>) -> tensor<?x?x128xf32>
  return %1 : tensor<?x?x128xf32>
}

// -----

// Tests that a batched matmul (rank-4 right operand, as in attention) is not
// a candidate: no linear, no remark.
// CHECK-LABEL: func.func @batched_matmul_not_a_candidate
// CHECK-NOT: transfuse.linear
// CHECK: transfuse.matmul
func.func @batched_matmul_not_a_candidate(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32> {
  %0 = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %1 = transfuse.relu %0 : tensor<2x4x8x8xf32>
  return %1 : tensor<2x4x8x8xf32>
}

// -----

// Tests that counts are exact on a feed-forward block: linear + relu, then linear +
// residual (no layer norm): two linears, no matmul, no add, no relu left.
// CHECK-LABEL: func.func @feed_forward
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[W1:[^:]+]]: {{[^,]+}}, %[[B1:[^:]+]]: {{[^,]+}}, %[[W2:[^:]+]]: {{[^,]+}}, %[[B2:[^:]+]]:
// CHECK-NEXT: %[[H:.+]] = transfuse.linear %[[X]], %[[W1]] bias %[[B1]] {activation = #transfuse.activation<relu>, transpose_weight}
// CHECK-NEXT: %[[Y:.+]] = transfuse.linear %[[H]], %[[W2]] bias %[[B2]] residual %[[X]] {transpose_weight}
// CHECK-NEXT: return %[[Y]]
// CHECK-NOT: transfuse.matmul
// CHECK-NOT: transfuse.linear
func.func @feed_forward(%x: tensor<?x?x64xf32>, %w1: tensor<256x64xf32>, %b1: tensor<256xf32>, %w2: tensor<64x256xf32>, %b2: tensor<64xf32>) -> tensor<?x?x64xf32> {
  // expected-remark@+1 {{linear_epilogue: fused}}
  %0 = transfuse.matmul %x, %w1 {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<256x64xf32>) -> tensor<?x?x256xf32>
  %1 = transfuse.add %0, %b1 : (tensor<?x?x256xf32>, tensor<256xf32>) -> tensor<?x?x256xf32>
  %2 = transfuse.relu %1 : tensor<?x?x256xf32>
  // expected-remark@+1 {{linear_epilogue: fused}}
  %3 = transfuse.matmul %2, %w2 {transpose_rhs = true} : (tensor<?x?x256xf32>, tensor<64x256xf32>) -> tensor<?x?x64xf32>
  %4 = transfuse.add %3, %b2 : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %5 = transfuse.add %4, %x : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %5 : tensor<?x?x64xf32>
}
