// RUN: transfuse-opt %s -split-input-file -verify-diagnostics

// One case per verifier error of transfuse.linear_input_grad and of
// tfk.gemm's derivative epilogue.

// Tests that the activation is one (not none).
func.func @f(%g: tensor<2x8xf32>, %w: tensor<8x4xf32>, %pre: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{needs an activation, not none}}
  %0 = transfuse.linear_input_grad %g, %w, %pre {activation = #transfuse.activation<none>} : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that activation_grad's activation is one (not none).
func.func @f(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{needs an activation, not none}}
  %0 = transfuse.activation_grad %x, %x {activation = #transfuse.activation<none>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that op(W) must map grad's N to pre's K (here the layout flag is wrong).
func.func @f(%g: tensor<2x8xf32>, %w: tensor<8x4xf32>, %pre: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{op(weight) 'tensor<8x4xf32>' transposed does not map grad 'tensor<2x8xf32>' to pre 'tensor<2x4xf32>'}}
  %0 = transfuse.linear_input_grad %g, %w, %pre {activation = #transfuse.activation<relu>, transpose_weight} : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that the result is pre's type.
func.func @f(%g: tensor<2x8xf32>, %w: tensor<8x4xf32>, %pre: tensor<2x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{expects grad [..., N], a rank-2 weight and pre [..., K] of grad's rank, the result pre's type}}
  %0 = transfuse.linear_input_grad %g, %w, %pre {activation = #transfuse.activation<relu>} : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// Tests that grad and pre agree in their leading dimensions.
func.func @f(%g: tensor<3x8xf32>, %w: tensor<8x4xf32>, %pre: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{differ in leading dimension 0}}
  %0 = transfuse.linear_input_grad %g, %w, %pre {activation = #transfuse.activation<relu>} : (tensor<3x8xf32>, tensor<8x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that a tfk.gemm derivative needs its `pre` operand.
func.func @f(%x: memref<?x8xf32>, %w: memref<8x8xf32>, %y: memref<?x8xf32>) {
  // expected-error @+1 {{takes `derivative_of` exactly when it has a derivative}}
  tfk.gemm %x, %w into %y {derivative = #transfuse.activation<relu>} : memref<?x8xf32>, memref<8x8xf32> into memref<?x8xf32>
  return
}

// -----

// Tests that a tfk.gemm derivative excludes the forward epilogue.
func.func @f(%x: memref<?x8xf32>, %w: memref<8x8xf32>, %v: memref<8xf32>, %y: memref<?x8xf32>) {
  // expected-error @+1 {{with a derivative has no bias, activation or residual}}
  tfk.gemm %x, %w bias %v derivative_of(%x : memref<?x8xf32>) into %y {derivative = #transfuse.activation<relu>} : memref<?x8xf32>, memref<8x8xf32>, memref<8xf32> into memref<?x8xf32>
  return
}

// -----

// Tests that only a derivative epilogue scales.
func.func @f(%x: memref<?x8xf32>, %w: memref<8x8xf32>, %y: memref<?x8xf32>) {
  // expected-error @+1 {{scales only with a derivative}}
  tfk.gemm %x, %w into %y {scale = 2.0 : f64} : memref<?x8xf32>, memref<8x8xf32> into memref<?x8xf32>
  return
}
