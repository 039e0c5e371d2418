// RUN: transfuse-opt %s -split-input-file --transfuse-fuse-linear-backward | FileCheck %s
// RUN: transfuse-opt %s -split-input-file --transfuse-fuse-linear-backward --transfuse-lower-to-kernels | FileCheck %s --check-prefix=KERNEL

// --transfuse-fuse-linear-backward (after autodiff): activation_grad of a
// product by a rank-2 weight, scaled or not, becomes linear_input_grad,
// one GEMM whose epilogue scales and applies the derivative.

// Tests the scaled product by a transposed weight (the FFN's backward with
// dropout) and the plain one by a [K, N] weight, and their GEMMs.
// CHECK-LABEL: func.func @fused
// CHECK-SAME: (%[[G:[^:]+]]: tensor<?x?x8xf32>, %[[H:[^:]+]]: tensor<?x?x4xf32>)
// CHECK: %[[W:.+]] = transfuse.param "w2"
// CHECK: %[[V:.+]] = transfuse.param "v"
// CHECK-NEXT: %[[A:.+]] = transfuse.linear_input_grad %[[G]], %[[W]], %[[H]] {activation = #transfuse.activation<relu>, scale = 1.250000e+00 : f64} : (tensor<?x?x8xf32>, tensor<8x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
// CHECK-NEXT: %[[B:.+]] = transfuse.linear_input_grad %[[G]], %[[V]], %[[H]] {activation = #transfuse.activation<gelu_tanh>, transpose_weight}
// CHECK-NEXT: return %[[A]], %[[B]]
// KERNEL-LABEL: func.func @fused
// KERNEL: tfk.gemm %{{.+}}, %{{.+}} derivative_of(%{{.+}} : memref<?x?x4xf32>) into %{{.+}} {derivative = #transfuse.activation<relu>, packed, scale = 1.250000e+00 : f64}
// KERNEL: tfk.gemm %{{.+}}, %{{.+}} derivative_of(%{{.+}} : memref<?x?x4xf32>) into %{{.+}} {derivative = #transfuse.activation<gelu_tanh>, packed, transpose_weight}
func.func @fused(%g: tensor<?x?x8xf32>, %h: tensor<?x?x4xf32>) -> (tensor<?x?x4xf32>, tensor<?x?x4xf32>)
    attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 3 : i64} {
  %w = transfuse.param "w2" {init = #transfuse.init<zeros>} : tensor<8x4xf32>
  %v = transfuse.param "v" {init = #transfuse.init<zeros>} : tensor<4x8xf32>
  %p = transfuse.matmul %g, %w : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %s = transfuse.scale %p {factor = 1.25 : f64} : tensor<?x?x4xf32>
  %a = transfuse.activation_grad %h, %s {activation = #transfuse.activation<relu>} : (tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %q = transfuse.matmul %g, %v {transpose_rhs = true} : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
  %b = transfuse.activation_grad %h, %q {activation = #transfuse.activation<gelu_tanh>} : (tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  return %a, %b : tensor<?x?x4xf32>, tensor<?x?x4xf32>
}

// -----

// Tests what stays: a product with another use, a scale with another use,
// and a product of two activations (no rank-2 weight).
// CHECK-LABEL: func.func @kept
// CHECK-NOT: transfuse.linear_input_grad
// CHECK: return
func.func @kept(%g: tensor<?x8xf32>, %h: tensor<?x4xf32>, %w: tensor<8x4xf32>, %m: tensor<2x?x8xf32>, %n: tensor<2x8x4xf32>, %hb: tensor<2x?x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<2x?x4xf32>) {
  %p = transfuse.matmul %g, %w : (tensor<?x8xf32>, tensor<8x4xf32>) -> tensor<?x4xf32>
  %a = transfuse.activation_grad %h, %p {activation = #transfuse.activation<relu>} : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %q = transfuse.matmul %g, %w : (tensor<?x8xf32>, tensor<8x4xf32>) -> tensor<?x4xf32>
  %s = transfuse.scale %q {factor = 2.0 : f64} : tensor<?x4xf32>
  %b = transfuse.activation_grad %h, %s {activation = #transfuse.activation<relu>} : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %r = transfuse.matmul %m, %n : (tensor<2x?x8xf32>, tensor<2x8x4xf32>) -> tensor<2x?x4xf32>
  %c = transfuse.activation_grad %hb, %r {activation = #transfuse.activation<relu>} : (tensor<2x?x4xf32>, tensor<2x?x4xf32>) -> tensor<2x?x4xf32>
  return %a, %p, %b, %s, %c : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<2x?x4xf32>
}
