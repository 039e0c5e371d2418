// RUN: transfuse-opt %s | transfuse-opt | FileCheck %s
// RUN: transfuse-opt %s -mlir-print-op-generic | transfuse-opt | FileCheck %s

// Round trip of every tfk op (the kernel-level IR) through its assembly
// format and the generic form, with each optional operand and attribute.

// CHECK-LABEL: func.func @storage
func.func @storage() attributes {tfk.arena_bytes = 4096 : i64} {
  // CHECK: %[[B:.*]] = tfk.input_dim 0, 0
  %b = tfk.input_dim 0, 0
  // CHECK: %[[S:.*]] = tfk.input_dim 1, 1
  %s = tfk.input_dim 1, 1
  // CHECK: %[[M:.*]] = tfk.broadcast_dim %[[B]], %[[S]]
  %m = tfk.broadcast_dim %b, %s
  // CHECK: tfk.check "le" %[[B]], %[[M]], "too long"
  tfk.check "le" %b, %m, "too long"
  // CHECK: tfk.input 0[%[[B]], %[[S]]] : memref<?x?xi32>
  %in = tfk.input 0[%b, %s] : memref<?x?xi32>
  // CHECK: tfk.output 1[%[[B]]] : memref<?x8xf32>
  %out = tfk.output 1[%b] : memref<?x8xf32>
  // CHECK: tfk.param "w" {prepared} : memref<8x24xf32>
  %w = tfk.param "w" {prepared} : memref<8x24xf32>
  // CHECK: tfk.constant dense<1.000000e+00> : tensor<4xf32> : memref<4xf32>
  %c = tfk.constant dense<1.0> : tensor<4xf32> : memref<4xf32>
  // CHECK: %[[A:.*]] = tfk.alloc[%[[B]], %[[S]]] {bytes = 1536 : i64, offset = 0 : i64} : memref<?x?x24xf32>
  %a = tfk.alloc[%b, %s] {bytes = 1536 : i64, offset = 0 : i64} : memref<?x?x24xf32>
  // CHECK: tfk.alloc : memref<4xf32>
  %a2 = tfk.alloc : memref<4xf32>
  // CHECK: tfk.reshape %[[A]][%[[B]], %[[S]]] : memref<?x?x24xf32> to memref<?x?x6x4xf32>
  %r = tfk.reshape %a[%b, %s] : memref<?x?x24xf32> to memref<?x?x6x4xf32>
  // CHECK: tfk.heads %[[A]] column 8[%[[B]], %[[S]]] : memref<?x?x24xf32> to memref<?x2x?x4xf32, strided<[?, 4, 24, 1], offset: 8>>
  %h = tfk.heads %a column 8[%b, %s] : memref<?x?x24xf32> to memref<?x2x?x4xf32, strided<[?, 4, 24, 1], offset: 8>>
  return
}

// CHECK-LABEL: func.func @kernels
func.func @kernels(%x: memref<?x8xf32>, %w: memref<8x8xf32>, %v: memref<8xf32>, %y: memref<?x8xf32>, %q: memref<2x2x4x4xf32>, %kp: memref<2x4xi1>, %bias: memref<4x4xf32>, %i: index) {
  // CHECK: tfk.gemm %{{.*}}, %{{.*}} bias %{{.*}} residual %{{.*}} into %{{.*}} {activation = #transfuse.activation<gelu_tanh>, packed, transpose_weight} : memref<?x8xf32>, memref<8x8xf32>, memref<8xf32>, memref<?x8xf32> into memref<?x8xf32>
  tfk.gemm %x, %w bias %v residual %x into %y {activation = #transfuse.activation<gelu_tanh>, packed, transpose_weight} : memref<?x8xf32>, memref<8x8xf32>, memref<8xf32>, memref<?x8xf32> into memref<?x8xf32>
  // CHECK: tfk.gemm %{{.*}}, %{{.*}} into %{{.*}} : memref<?x8xf32>, memref<8x8xf32> into memref<?x8xf32>
  tfk.gemm %x, %w into %y : memref<?x8xf32>, memref<8x8xf32> into memref<?x8xf32>
  // CHECK: tfk.gemm %{{.*}}, %{{.*}} derivative_of(%{{.*}} : memref<?x8xf32>) into %{{.*}} {derivative = #transfuse.activation<gelu>, packed, scale = 1.250000e+00 : f64} : memref<?x8xf32>, memref<8x8xf32> into memref<?x8xf32>
  tfk.gemm %x, %w derivative_of(%x : memref<?x8xf32>) into %y {derivative = #transfuse.activation<gelu>, packed, scale = 1.25 : f64} : memref<?x8xf32>, memref<8x8xf32> into memref<?x8xf32>
  // CHECK: tfk.matmul %{{.*}}, %{{.*}} into %{{.*}} {transpose_lhs, transpose_rhs}
  tfk.matmul %w, %w into %w {transpose_lhs, transpose_rhs} : memref<8x8xf32>, memref<8x8xf32> into memref<8x8xf32>
  // CHECK: tfk.attention %{{.*}}, %{{.*}}, %{{.*}} key_padding %{{.*}} bias %{{.*}} into %{{.*}} {causal, scale = 5.000000e-01 : f64}
  tfk.attention %q, %q, %q key_padding %kp bias %bias into %q {causal, scale = 0.5 : f64} : memref<2x2x4x4xf32>, memref<2x2x4x4xf32>, memref<2x2x4x4xf32>, memref<2x4xi1>, memref<4x4xf32> into memref<2x2x4x4xf32>
  // CHECK: tfk.attention %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} {scale = 5.000000e-01 : f64} :
  tfk.attention %q, %q, %q into %q {scale = 0.5 : f64} : memref<2x2x4x4xf32>, memref<2x2x4x4xf32>, memref<2x2x4x4xf32> into memref<2x2x4x4xf32>
  // CHECK: tfk.add_layer_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} sum %{{.*}} {epsilon = 1.000000e-05 : f64}
  tfk.add_layer_norm %x, %x, %v, %v into %y sum %x {epsilon = 1.0e-05 : f64} : memref<?x8xf32>, memref<?x8xf32>, memref<8xf32>, memref<8xf32> into memref<?x8xf32>, memref<?x8xf32>
  // CHECK: tfk.layer_norm %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}} {axis = 1 : i64, epsilon = 1.000000e-05 : f64}
  tfk.layer_norm %x, %v, %v into %y {axis = 1 : i64, epsilon = 1.0e-05 : f64} : memref<?x8xf32>, memref<8xf32>, memref<8xf32> into memref<?x8xf32>
  // CHECK: tfk.elementwise %{{.*}}, %{{.*}} into %{{.*}} {kinds = ["full", "trailing"], vector}
  // CHECK: transfuse.add
  // CHECK: tfk.yield
  tfk.elementwise %x, %v into %y {kinds = ["full", "trailing"], vector} : memref<?x8xf32>, memref<8xf32> into memref<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>, %b: tensor<8xf32>):
    %0 = transfuse.add %a, %b : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
    tfk.yield %0 : tensor<?x8xf32>
  }
  // CHECK: tfk.binary(%{{.*}}, %{{.*}} : memref<?x8xf32>, memref<8xf32>) into(%{{.*}} : memref<?x8xf32>) {kind = "kAdd"}
  tfk.binary(%x, %v : memref<?x8xf32>, memref<8xf32>) into(%y : memref<?x8xf32>) {kind = "kAdd"}
  // CHECK: tfk.positional_encoding(%{{.*}} : index) into(%{{.*}} : memref<?x8xf32>)
  tfk.positional_encoding(%i : index) into(%y : memref<?x8xf32>)
  return
}

// The room the IR keeps for later issues: persistent state (decoding), a
// parameter an entry writes (training), and the device of an entry (CUDA).
// CHECK-LABEL: func.func @room
// CHECK-SAME: tfk.device = "cuda"
func.func @room() attributes {tfk.device = "cuda"} {
  %b = tfk.input_dim 0, 0
  %t = tfk.input_dim 0, 1
  // CHECK: tfk.state "kv.decoder.0.self.k"[%{{.*}}, %{{.*}}] : memref<?x8x?x64xf32>
  %k = tfk.state "kv.decoder.0.self.k" [%b, %t] : memref<?x8x?x64xf32>
  // CHECK: tfk.param "w" {written} : memref<8x8xf32>
  %w = tfk.param "w" {written} : memref<8x8xf32>
  return
}
