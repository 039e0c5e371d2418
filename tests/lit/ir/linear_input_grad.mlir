// RUN: transfuse-opt %s -split-input-file | FileCheck %s

// Tests that transfuse.linear_input_grad round-trips with every attribute,
// in both weight layouts, and keeps pre's (dynamic) shape.
// CHECK-LABEL: func.func @round_trip
// CHECK: transfuse.linear_input_grad %arg0, %arg1, %arg2 {activation = #transfuse.activation<relu>, scale = 1.250000e+00 : f64} : (tensor<?x?x8xf32>, tensor<8x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
// CHECK: transfuse.linear_input_grad %arg0, %arg3, %arg2 {activation = #transfuse.activation<gelu_tanh>, transpose_weight} : (tensor<?x?x8xf32>, tensor<4x8xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
func.func @round_trip(%g: tensor<?x?x8xf32>, %w: tensor<8x4xf32>, %pre: tensor<?x?x4xf32>, %wt: tensor<4x8xf32>) -> (tensor<?x?x4xf32>, tensor<?x?x4xf32>) {
  %0 = transfuse.linear_input_grad %g, %w, %pre {activation = #transfuse.activation<relu>, scale = 1.25 : f64} : (tensor<?x?x8xf32>, tensor<8x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %1 = transfuse.linear_input_grad %g, %wt, %pre {activation = #transfuse.activation<gelu_tanh>, transpose_weight} : (tensor<?x?x8xf32>, tensor<4x8xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  return %0, %1 : tensor<?x?x4xf32>, tensor<?x?x4xf32>
}
