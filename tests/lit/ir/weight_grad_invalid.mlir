// RUN: transfuse-opt %s -split-input-file -verify-diagnostics

// Tests weight_grad's verifier: ranks, leading dimensions and the [K, N] result.
func.func @rank(%x: tensor<4xf32>, %g: tensor<6xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{input and grad must have the same rank, at least 2}}
  %w = transfuse.weight_grad %x, %g : (tensor<4xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  return %w : tensor<4x6xf32>
}

// -----

func.func @lead(%x: tensor<2x3x4xf32>, %g: tensor<2x5x6xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{input and grad differ in leading dimension 1}}
  %w = transfuse.weight_grad %x, %g : (tensor<2x3x4xf32>, tensor<2x5x6xf32>) -> tensor<4x6xf32>
  return %w : tensor<4x6xf32>
}

// -----

func.func @result(%x: tensor<?x4xf32>, %g: tensor<?x6xf32>) -> tensor<6x4xf32> {
  // expected-error @+1 {{the result must be [K, N] = [4, 6]}}
  %w = transfuse.weight_grad %x, %g : (tensor<?x4xf32>, tensor<?x6xf32>) -> tensor<6x4xf32>
  return %w : tensor<6x4xf32>
}
