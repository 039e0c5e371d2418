// RUN: transfuse-opt %s -split-input-file | FileCheck %s

// Tests that weight_grad round-trips: [B, S, K] and [B, S, N] give [K, N].
// CHECK-LABEL: func.func @ok
// CHECK: transfuse.weight_grad %arg0, %arg1 : (tensor<?x?x4xf32>, tensor<?x?x6xf32>) -> tensor<4x6xf32>
func.func @ok(%x: tensor<?x?x4xf32>, %g: tensor<?x?x6xf32>) -> tensor<4x6xf32> {
  %w = transfuse.weight_grad %x, %g : (tensor<?x?x4xf32>, tensor<?x?x6xf32>) -> tensor<4x6xf32>
  return %w : tensor<4x6xf32>
}
