// RUN: transfuse-opt %s -split-input-file | FileCheck %s

// Tests that weight_grad round-trips: [B, S, K] and [B, S, N] give [K, N].
// CHECK-LABEL: func.func @ok
// CHECK: transfuse.weight_grad %arg0, %arg1 : (tensor<?x?x4xf32>, tensor<?x?x6xf32>) -> tensor<4x6xf32>
func.func @ok(%x: tensor<?x?x4xf32>, %g: tensor<?x?x6xf32>) -> tensor<4x6xf32> {
  %w = transfuse.weight_grad %x, %g : (tensor<?x?x4xf32>, tensor<?x?x6xf32>) -> tensor<4x6xf32>
  return %w : tensor<4x6xf32>
}

// -----

// Tests that linear_weight_grad round-trips in both weight layouts, with
// the bias gradient [N], and lowers to one exec with both outputs.
// RUN: transfuse-opt %s -split-input-file --transfuse-lower-to-kernels | FileCheck %s --check-prefix=KERNEL
// CHECK-LABEL: func.func @linear
// CHECK: transfuse.linear_weight_grad %arg0, %arg1 : (tensor<?x?x4xf32>, tensor<?x?x6xf32>) -> (tensor<4x6xf32>, tensor<6xf32>)
// CHECK: transfuse.linear_weight_grad %arg0, %arg1 {transpose_weight} : (tensor<?x?x4xf32>, tensor<?x?x6xf32>) -> (tensor<6x4xf32>, tensor<6xf32>)
// KERNEL-LABEL: func.func @linear
// KERNEL: tfk.exec "linear_weight_grad"(%{{.+}}, %{{.+}} : memref<?x?x4xf32>, memref<?x?x6xf32>) into(%{{.+}}, %{{.+}} : memref<4x6xf32>, memref<6xf32>)
// KERNEL: tfk.exec "linear_weight_grad"(%{{.+}}, %{{.+}} : memref<?x?x4xf32>, memref<?x?x6xf32>) into(%{{.+}}, %{{.+}} : memref<6x4xf32>, memref<6xf32>) {transpose_weight}
func.func @linear(%x: tensor<?x?x4xf32>, %g: tensor<?x?x6xf32>) -> (tensor<4x6xf32>, tensor<6xf32>, tensor<6x4xf32>, tensor<6xf32>)
    attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 3 : i64} {
  %w, %b = transfuse.linear_weight_grad %x, %g : (tensor<?x?x4xf32>, tensor<?x?x6xf32>) -> (tensor<4x6xf32>, tensor<6xf32>)
  %wt, %bt = transfuse.linear_weight_grad %x, %g {transpose_weight} : (tensor<?x?x4xf32>, tensor<?x?x6xf32>) -> (tensor<6x4xf32>, tensor<6xf32>)
  return %w, %b, %wt, %bt : tensor<4x6xf32>, tensor<6xf32>, tensor<6x4xf32>, tensor<6xf32>
}
