// RUN: transfuse-opt %s -split-input-file --transfuse-plan-memory | FileCheck %s
// RUN: transfuse-opt %s -split-input-file --transfuse-plan-memory | transfuse-opt -split-input-file | FileCheck %s

// Tests that buffers are sized at the maxima (B <= 2, S <= 4: 2·4·8 floats
// = 256 bytes; a [4] mask 64, the alignment), that buffers whose live
// ranges do not overlap share an offset, that a view keeps its buffer live
// until the view's last reader, that an alloc no kernel touches goes, and
// that the function states its arena.
// CHECK-LABEL: func.func @forward()
// Live ranges by kernel: a [0, 3] (through its view), b [1, 3], m [2, 5],
// t [3, 4], c [4, 5]; the largest first at the lowest free offset.
// CHECK-SAME: tfk.arena_bytes = 832 : i64
// CHECK: tfk.alloc[%{{.*}}, %{{.*}}] {bytes = 256 : i64, offset = 0 : i64} : memref<?x?x8xf32>
// CHECK: tfk.alloc[%{{.*}}, %{{.*}}] {bytes = 256 : i64, offset = 256 : i64} : memref<?x?x8xf32>
// CHECK: tfk.alloc[%{{.*}}] {bytes = 64 : i64, offset = 768 : i64} : memref<?xi1>
// CHECK-NOT: memref<?x8xf32>
// CHECK: tfk.alloc[%{{.*}}, %{{.*}}] {bytes = 256 : i64, offset = 512 : i64} : memref<?x?x2x4xf32>
// CHECK: tfk.alloc[%{{.*}}, %{{.*}}] {bytes = 256 : i64, offset = 0 : i64} : memref<?x?x8xf32>
// CHECK-NOT: tfk.alloc
func.func @forward() attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 4 : i64} {
  %0 = tfk.input_dim 0, 0
  %1 = tfk.input_dim 0, 1
  %x = tfk.input 0[%0, %1] : memref<?x?x8xf32>
  %a = tfk.alloc[%0, %1] : memref<?x?x8xf32>
  tfk.unary(%x : memref<?x?x8xf32>) into(%a : memref<?x?x8xf32>) {kind = "kRelu"}
  %av = tfk.reshape %a[%0, %1] : memref<?x?x8xf32> to memref<?x?x2x4xf32>
  %b = tfk.alloc[%0, %1] : memref<?x?x8xf32>
  tfk.unary(%x : memref<?x?x8xf32>) into(%b : memref<?x?x8xf32>) {kind = "kExp"}
  %m = tfk.alloc[%1] : memref<?xi1>
  tfk.causal_mask(%1, %1 : index, index) into(%m : memref<?xi1>)
  %unused = tfk.alloc[%0] : memref<?x8xf32>
  %t = tfk.alloc[%0, %1] : memref<?x?x2x4xf32>
  tfk.binary(%av, %b : memref<?x?x2x4xf32>, memref<?x?x8xf32>) into(%t : memref<?x?x2x4xf32>) {kind = "kAdd"}
  %c = tfk.alloc[%0, %1] : memref<?x?x8xf32>
  tfk.unary(%t : memref<?x?x2x4xf32>) into(%c : memref<?x?x8xf32>) {kind = "kTanh"}
  %y = tfk.output 0[%0, %1] : memref<?x?x8xf32>
  tfk.binary(%c, %m : memref<?x?x8xf32>, memref<?xi1>) into(%y : memref<?x?x8xf32>) {kind = "kMul"}
  return
}
