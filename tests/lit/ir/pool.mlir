// RUN: transfuse-opt %s -split-input-file | FileCheck %s
// RUN: transfuse-opt %s -split-input-file --transfuse-lower-to-kernels | FileCheck --check-prefix=KERNELS %s

// Tests that pool, l2_normalize and their gradients round-trip (pool's
// result [B, D] inferred from [B, S, D]) and lower to one kernel call each.
// CHECK-LABEL: func.func @forward
// CHECK: transfuse.pool %arg0, %arg1 {mode = #transfuse.pooling<mean>} : (tensor<?x?x8xf32>, tensor<?x?xi1>) -> tensor<?x8xf32>
// CHECK: transfuse.l2_normalize %{{.*}} : tensor<?x8xf32>
// KERNELS-LABEL: func.func @forward
// KERNELS: tfk.pool(%{{.*}}, %{{.*}} : memref<?x?x8xf32>, memref<?x?xi1>) into(%[[P:.*]] : memref<?x8xf32>) {mode = #transfuse.pooling<mean>}
// KERNELS: tfk.l2_normalize(%[[P]] : memref<?x8xf32>) into(%{{.*}} : memref<?x8xf32>) {epsilon = 9.9999999999999998E-13 : f64}
func.func @forward(%h: tensor<?x?x8xf32> {transfuse.name = "h"}, %keep: tensor<?x?xi1> {transfuse.name = "keep"})
    -> (tensor<?x8xf32> {transfuse.name = "e"})
    attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 4 : i64} {
  %p = transfuse.pool %h, %keep {mode = #transfuse.pooling<mean>} : (tensor<?x?x8xf32>, tensor<?x?xi1>) -> tensor<?x8xf32>
  %n = transfuse.l2_normalize %p : tensor<?x8xf32>
  return %n : tensor<?x8xf32>
}

// -----

// CHECK-LABEL: func.func @backward
// CHECK: transfuse.pool_grad %arg0, %arg1, %arg2 {mode = #transfuse.pooling<max>}
// CHECK: transfuse.l2_normalize_grad %arg3, %arg2 {epsilon = 9.9999999999999995E-7 : f64}
// KERNELS-LABEL: func.func @backward
// KERNELS: tfk.pool_grad({{.*}} : memref<?x?x8xf32>, memref<?x?xi1>, memref<?x8xf32>) into({{.*}} : memref<?x?x8xf32>) {mode = #transfuse.pooling<max>}
// KERNELS: tfk.l2_normalize_grad({{.*}} : memref<?x8xf32>, memref<?x8xf32>) into({{.*}} : memref<?x8xf32>) {epsilon = 9.9999999999999995E-7 : f64}
func.func @backward(%h: tensor<?x?x8xf32> {transfuse.name = "h"}, %keep: tensor<?x?xi1> {transfuse.name = "keep"},
                    %g: tensor<?x8xf32> {transfuse.name = "g", transfuse.sizes_of = 0 : i64}, %e: tensor<?x8xf32> {transfuse.name = "e", transfuse.sizes_of = 0 : i64})
    -> (tensor<?x?x8xf32> {transfuse.name = "dh"}, tensor<?x8xf32> {transfuse.name = "de"})
    attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 4 : i64} {
  %dh = transfuse.pool_grad %h, %keep, %g {mode = #transfuse.pooling<max>} : (tensor<?x?x8xf32>, tensor<?x?xi1>, tensor<?x8xf32>) -> tensor<?x?x8xf32>
  %de = transfuse.l2_normalize_grad %e, %g {epsilon = 1.0e-06 : f64} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  return %dh, %de : tensor<?x?x8xf32>, tensor<?x8xf32>
}
