// RUN: transfuse-opt %s -split-input-file | FileCheck %s
// RUN: transfuse-opt %s -split-input-file --transfuse-lower-to-kernels | FileCheck --check-prefix=KERNELS %s

// Tests that unfold (an image as its patches' rows, [B, C, H, W] ->
// [B, (H/ph)(W/pw), C·ph·pw]) and its gradient round-trip and lower to one
// kernel call each, and that expand (a learned token over the batch) lowers.
// CHECK-LABEL: func.func @forward
// CHECK: transfuse.unfold %arg0 {patch = array<i64: 4, 2>} : (tensor<?x3x8x6xf32>) -> tensor<?x6x24xf32>
// KERNELS-LABEL: func.func @forward
// KERNELS: tfk.unfold(%{{.*}} : memref<?x3x8x6xf32>) into(%{{.*}} : memref<?x6x24xf32>) {patch = array<i64: 4, 2>}
func.func @forward(%x: tensor<?x3x8x6xf32> {transfuse.name = "pixel_values"})
    -> (tensor<?x6x24xf32> {transfuse.name = "patches"})
    attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 4 : i64} {
  %p = transfuse.unfold %x {patch = array<i64: 4, 2>} : (tensor<?x3x8x6xf32>) -> tensor<?x6x24xf32>
  return %p : tensor<?x6x24xf32>
}

// -----

// CHECK-LABEL: func.func @backward
// CHECK: transfuse.unfold_grad %arg0, %arg1 {patch = array<i64: 4, 2>}
// KERNELS-LABEL: func.func @backward
// KERNELS: tfk.unfold_grad(%{{.*}} : memref<?x6x24xf32>) into(%{{.*}} : memref<?x3x8x6xf32>) {patch = array<i64: 4, 2>}
func.func @backward(%x: tensor<?x3x8x6xf32> {transfuse.name = "pixel_values"},
                    %g: tensor<?x6x24xf32> {transfuse.name = "g", transfuse.sizes_of = 0 : i64})
    -> (tensor<?x3x8x6xf32> {transfuse.name = "dx"})
    attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 4 : i64} {
  %dx = transfuse.unfold_grad %x, %g {patch = array<i64: 4, 2>} : (tensor<?x3x8x6xf32>, tensor<?x6x24xf32>) -> tensor<?x3x8x6xf32>
  return %dx : tensor<?x3x8x6xf32>
}
