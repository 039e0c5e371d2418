// RUN: transfuse-opt %s -split-input-file --transfuse-kernel-views | FileCheck %s
// RUN: transfuse-opt %s -split-input-file --transfuse-kernel-views | transfuse-opt -split-input-file | FileCheck %s

// Tests that Q, K and V sliced out of the projection GEMM's [B, S, 24]
// output, reshaped and transposed to [B, H, S, D], are read through head
// views of the GEMM output (the slices, transposes and their buffers go),
// and that the attention output transposed back to [B, S, H, D] is written
// there through a view.
// CHECK-LABEL: func.func @forward()
// CHECK: %[[B:.*]] = tfk.input_dim 0, 0
// CHECK: %[[S:.*]] = tfk.input_dim 0, 1
// CHECK: %[[P:.*]] = tfk.alloc[%[[B]], %[[S]]] : memref<?x?x24xf32>
// CHECK-NEXT: tfk.gemm
// CHECK-NEXT: %[[Q:.*]] = tfk.heads %[[P]] column 0[%[[B]], %[[S]]] : memref<?x?x24xf32> to memref<?x2x?x4xf32, strided<[?, 4, 24, 1]>>
// CHECK-NEXT: %[[K:.*]] = tfk.heads %[[P]] column 8[%[[B]], %[[S]]] : memref<?x?x24xf32> to memref<?x2x?x4xf32, strided<[?, 4, 24, 1], offset: 8>>
// CHECK-NEXT: %[[V:.*]] = tfk.heads %[[P]] column 16[%[[B]], %[[S]]] : memref<?x?x24xf32> to memref<?x2x?x4xf32, strided<[?, 4, 24, 1], offset: 16>>
// CHECK-NEXT: %[[T:.*]] = tfk.alloc[%[[B]], %[[S]]] : memref<?x?x2x4xf32>
// CHECK-NEXT: %[[O:.*]] = tfk.heads %[[T]] column 0[%[[B]], %[[S]]] : memref<?x?x2x4xf32> to memref<?x2x?x4xf32, strided<[?, 4, 8, 1]>>
// CHECK-NEXT: tfk.attention %[[Q]], %[[K]], %[[V]] into %[[O]]
// CHECK-NEXT: %[[R:.*]] = tfk.reshape %[[T]]
// CHECK-NOT: "slice"
// CHECK-NOT: "transpose"
// CHECK: tfk.unary(%[[R]]
func.func @forward() attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 4 : i64} {
  %0 = tfk.input_dim 0, 0
  %1 = tfk.input_dim 0, 1
  %2 = tfk.input 0[%0, %1] : memref<?x?x8xf32>
  %3 = tfk.param "w" : memref<8x24xf32>
  %4 = tfk.alloc[%0, %1] : memref<?x?x24xf32>
  tfk.gemm %2, %3 into %4 {packed} : memref<?x?x8xf32>, memref<8x24xf32> into memref<?x?x24xf32>
  %5 = tfk.alloc[%0, %1] : memref<?x?x8xf32>
  tfk.slice(%4 : memref<?x?x24xf32>) into(%5 : memref<?x?x8xf32>) {axis = 2 : i64, start = 0 : i64}
  %6 = tfk.alloc[%0, %1] : memref<?x?x8xf32>
  tfk.slice(%4 : memref<?x?x24xf32>) into(%6 : memref<?x?x8xf32>) {axis = 2 : i64, start = 8 : i64}
  %7 = tfk.alloc[%0, %1] : memref<?x?x8xf32>
  tfk.slice(%4 : memref<?x?x24xf32>) into(%7 : memref<?x?x8xf32>) {axis = 2 : i64, start = 16 : i64}
  %8 = tfk.reshape %5[%0, %1] : memref<?x?x8xf32> to memref<?x?x2x4xf32>
  %9 = tfk.reshape %6[%0, %1] : memref<?x?x8xf32> to memref<?x?x2x4xf32>
  %10 = tfk.reshape %7[%0, %1] : memref<?x?x8xf32> to memref<?x?x2x4xf32>
  %11 = tfk.alloc[%0, %1] : memref<?x2x?x4xf32>
  tfk.transpose(%8 : memref<?x?x2x4xf32>) into(%11 : memref<?x2x?x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %12 = tfk.alloc[%0, %1] : memref<?x2x?x4xf32>
  tfk.transpose(%9 : memref<?x?x2x4xf32>) into(%12 : memref<?x2x?x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %13 = tfk.alloc[%0, %1] : memref<?x2x?x4xf32>
  tfk.transpose(%10 : memref<?x?x2x4xf32>) into(%13 : memref<?x2x?x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %14 = tfk.alloc[%0, %1] : memref<?x2x?x4xf32>
  tfk.attention %11, %12, %13 into %14 {scale = 5.000000e-01 : f64} : memref<?x2x?x4xf32>, memref<?x2x?x4xf32>, memref<?x2x?x4xf32> into memref<?x2x?x4xf32>
  %15 = tfk.alloc[%0, %1] : memref<?x?x2x4xf32>
  tfk.transpose(%14 : memref<?x2x?x4xf32>) into(%15 : memref<?x?x2x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %16 = tfk.reshape %15[%0, %1] : memref<?x?x2x4xf32> to memref<?x?x8xf32>
  %17 = tfk.output 0[%0, %1] : memref<?x?x8xf32>
  tfk.unary(%16 : memref<?x?x8xf32>) into(%17 : memref<?x?x8xf32>) {kind = "kRelu"}
  return
}

// -----

// Tests that nothing is viewed when the Q buffer has another reader (a
// copy), when K and V are one buffer sliced along the batch axis, or when
// the output's transpose is not {0,2,1,3}: the copies stay.
// CHECK-LABEL: func.func @forward()
// CHECK-NOT: tfk.heads
// CHECK: tfk.transpose
// CHECK: tfk.copy
// CHECK: tfk.slice
// CHECK: tfk.transpose
// CHECK: tfk.attention
// CHECK: tfk.transpose{{.*}}permutation = array<i64: 0, 1, 3, 2>
// CHECK-NOT: tfk.heads
func.func @forward() attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 4 : i64} {
  %0 = tfk.input_dim 0, 0
  %1 = tfk.input_dim 0, 1
  %2 = tfk.input 0[%0, %1] : memref<?x?x8xf32>
  %3 = tfk.param "w" : memref<8x24xf32>
  %4 = tfk.alloc[%0, %1] : memref<?x?x24xf32>
  tfk.gemm %2, %3 into %4 {packed} : memref<?x?x8xf32>, memref<8x24xf32> into memref<?x?x24xf32>
  %r = tfk.reshape %4[%0, %1] : memref<?x?x24xf32> to memref<?x?x6x4xf32>
  %q = tfk.alloc[%0, %1] : memref<?x6x?x4xf32>
  tfk.transpose(%r : memref<?x?x6x4xf32>) into(%q : memref<?x6x?x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %copy = tfk.output 1[%0, %1] : memref<?x6x?x4xf32>
  tfk.copy(%q : memref<?x6x?x4xf32>) into(%copy : memref<?x6x?x4xf32>)
  %s = tfk.alloc[%1] : memref<1x?x24xf32>
  tfk.slice(%4 : memref<?x?x24xf32>) into(%s : memref<1x?x24xf32>) {axis = 0 : i64, start = 0 : i64}
  %sr = tfk.reshape %s[%1] : memref<1x?x24xf32> to memref<1x?x6x4xf32>
  %k = tfk.alloc[%1] : memref<1x6x?x4xf32>
  tfk.transpose(%sr : memref<1x?x6x4xf32>) into(%k : memref<1x6x?x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %o = tfk.alloc[%0, %1] : memref<?x6x?x4xf32>
  tfk.attention %q, %k, %k into %o {scale = 5.000000e-01 : f64} : memref<?x6x?x4xf32>, memref<1x6x?x4xf32>, memref<1x6x?x4xf32> into memref<?x6x?x4xf32>
  %t = tfk.output 0[%0, %1] : memref<?x6x4x?xf32>
  tfk.transpose(%o : memref<?x6x?x4xf32>) into(%t : memref<?x6x4x?xf32>) {permutation = array<i64: 0, 1, 3, 2>}
  return
}

// -----

// Tests that attention over K and V read back out of a decoding state
// (K stored transposed) becomes decode attention reading the state in
// place, with the key length of the read and the query and output as head
// views, and that the K and V a step appends are written into the state
// straight from the projection's output; the copies and their buffers go.
// CHECK-LABEL: func.func @step()
// CHECK-DAG: %[[L:.*]] = tfk.state_length
// CHECK-DAG: %[[END:.*]] = arith.addi
// CHECK-DAG: %[[K:.*]] = tfk.state "k" : memref<2x2x4x6xf32>
// CHECK-DAG: %[[V:.*]] = tfk.state "v" : memref<2x2x6x4xf32>
// CHECK: %[[Q:.*]] = tfk.heads %[[P:.*]] column 0
// CHECK: %[[KV:.*]] = tfk.heads %[[P]] column 8[{{.*}}] : memref<?x?x24xf32> to memref<?x2x?x4xf32, strided<[?, 4, 24, 1], offset: 8>>
// CHECK: tfk.state_write %[[KV]] into %[[K]] at %[[L]] {keys}
// CHECK: tfk.decode_attention %[[Q]], %[[K]], %[[V]] keys %[[END]] into %{{.*}} {causal, scale = 5.000000e-01 : f64}
// CHECK-NOT: tfk.state_read
// CHECK-NOT: tfk.transpose
func.func @step() attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 6 : i64} {
  %b = tfk.input_dim 0, 0
  %n = tfk.input_dim 0, 1
  %l = tfk.state_length
  %end = arith.addi %l, %n : index
  %K = tfk.state "k" : memref<2x2x4x6xf32>
  %V = tfk.state "v" : memref<2x2x6x4xf32>
  %x = tfk.input 0[%b, %n] : memref<?x?x8xf32>
  %w = tfk.param "w" : memref<8x24xf32>
  %p = tfk.alloc[%b, %n] : memref<?x?x24xf32>
  tfk.gemm %x, %w into %p {packed} : memref<?x?x8xf32>, memref<8x24xf32> into memref<?x?x24xf32>
  %qs = tfk.alloc[%b, %n] : memref<?x?x8xf32>
  tfk.slice(%p : memref<?x?x24xf32>) into(%qs : memref<?x?x8xf32>) {axis = 2 : i64, start = 0 : i64}
  %qr = tfk.reshape %qs[%b, %n] : memref<?x?x8xf32> to memref<?x?x2x4xf32>
  %q = tfk.alloc[%b, %n] : memref<?x2x?x4xf32>
  tfk.transpose(%qr : memref<?x?x2x4xf32>) into(%q : memref<?x2x?x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %ks = tfk.alloc[%b, %n] : memref<?x?x8xf32>
  tfk.slice(%p : memref<?x?x24xf32>) into(%ks : memref<?x?x8xf32>) {axis = 2 : i64, start = 8 : i64}
  %kr = tfk.reshape %ks[%b, %n] : memref<?x?x8xf32> to memref<?x?x2x4xf32>
  %k = tfk.alloc[%b, %n] : memref<?x2x?x4xf32>
  tfk.transpose(%kr : memref<?x?x2x4xf32>) into(%k : memref<?x2x?x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  tfk.state_write %k into %K at %l {keys} : memref<?x2x?x4xf32> into memref<2x2x4x6xf32>
  %kc = tfk.alloc[%b, %end] : memref<?x2x?x4xf32>
  tfk.state_read %K into %kc {keys} : memref<2x2x4x6xf32> into memref<?x2x?x4xf32>
  %vc = tfk.alloc[%b, %end] : memref<?x2x?x4xf32>
  tfk.state_read %V into %vc : memref<2x2x6x4xf32> into memref<?x2x?x4xf32>
  %o = tfk.output 0[%b, %n] : memref<?x2x?x4xf32>
  tfk.attention %q, %kc, %vc into %o {causal, scale = 5.000000e-01 : f64} : memref<?x2x?x4xf32>, memref<?x2x?x4xf32>, memref<?x2x?x4xf32> into memref<?x2x?x4xf32>
  tfk.advance %n
  return
}

// -----

// Tests a train step's attention: Q, K and V, read by the attention and by
// attention_grad, are both read through one view each of the projection's
// output; attention_grad reads dO through a view of the [B, S, 8] gradient
// and writes dQ, dK and dV into the fused projection's gradient [B, S, 24]
// at columns 0, 8 and 16 (the transposes back, their buffers and the
// concat go).
// CHECK-LABEL: func.func @train()
// CHECK: %[[P:.*]] = tfk.alloc[%[[B:.*]], %[[S:.*]]] : memref<?x?x24xf32>
// CHECK-NEXT: tfk.gemm
// CHECK-NEXT: %[[Q:.*]] = tfk.heads %[[P]] column 0
// CHECK-NEXT: %[[K:.*]] = tfk.heads %[[P]] column 8
// CHECK-NEXT: %[[V:.*]] = tfk.heads %[[P]] column 16
// CHECK: tfk.attention %[[Q]], %[[K]], %[[V]] into
// CHECK: %[[G:.*]] = tfk.input 1[%[[B]], %[[S]]] : memref<?x?x8xf32>
// CHECK-NEXT: %[[DO:.*]] = tfk.heads %[[G]] column 0[%[[B]], %[[S]]] : memref<?x?x8xf32> to memref<?x2x?x4xf32, strided<[?, 4, 8, 1]>>
// CHECK-NEXT: %[[C:.*]] = tfk.output 1[%[[B]], %[[S]]] : memref<?x?x24xf32>
// CHECK-NEXT: %[[DQ:.*]] = tfk.heads %[[C]] column 0[%[[B]], %[[S]]] : memref<?x?x24xf32> to memref<?x2x?x4xf32, strided<[?, 4, 24, 1]>>
// CHECK-NEXT: %[[DK:.*]] = tfk.heads %[[C]] column 8[%[[B]], %[[S]]] : memref<?x?x24xf32> to memref<?x2x?x4xf32, strided<[?, 4, 24, 1], offset: 8>>
// CHECK-NEXT: %[[DV:.*]] = tfk.heads %[[C]] column 16[%[[B]], %[[S]]] : memref<?x?x24xf32> to memref<?x2x?x4xf32, strided<[?, 4, 24, 1], offset: 16>>
// CHECK-NEXT: tfk.attention_grad(%[[Q]], %[[K]], %[[V]], %[[DO]] : {{.*}}) into(%[[DQ]], %[[DK]], %[[DV]] :
// CHECK-NEXT: return
// CHECK-NOT: tfk.{{concat|transpose|slice}}
func.func @train() attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 4 : i64} {
  %0 = tfk.input_dim 0, 0
  %1 = tfk.input_dim 0, 1
  %2 = tfk.input 0[%0, %1] : memref<?x?x8xf32>
  %3 = tfk.param "w" : memref<8x24xf32>
  %4 = tfk.alloc[%0, %1] : memref<?x?x24xf32>
  tfk.gemm %2, %3 into %4 {packed} : memref<?x?x8xf32>, memref<8x24xf32> into memref<?x?x24xf32>
  %5 = tfk.alloc[%0, %1] : memref<?x?x8xf32>
  tfk.slice(%4 : memref<?x?x24xf32>) into(%5 : memref<?x?x8xf32>) {axis = 2 : i64, start = 0 : i64}
  %6 = tfk.alloc[%0, %1] : memref<?x?x8xf32>
  tfk.slice(%4 : memref<?x?x24xf32>) into(%6 : memref<?x?x8xf32>) {axis = 2 : i64, start = 8 : i64}
  %7 = tfk.alloc[%0, %1] : memref<?x?x8xf32>
  tfk.slice(%4 : memref<?x?x24xf32>) into(%7 : memref<?x?x8xf32>) {axis = 2 : i64, start = 16 : i64}
  %8 = tfk.reshape %5[%0, %1] : memref<?x?x8xf32> to memref<?x?x2x4xf32>
  %9 = tfk.reshape %6[%0, %1] : memref<?x?x8xf32> to memref<?x?x2x4xf32>
  %10 = tfk.reshape %7[%0, %1] : memref<?x?x8xf32> to memref<?x?x2x4xf32>
  %11 = tfk.alloc[%0, %1] : memref<?x2x?x4xf32>
  tfk.transpose(%8 : memref<?x?x2x4xf32>) into(%11 : memref<?x2x?x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %12 = tfk.alloc[%0, %1] : memref<?x2x?x4xf32>
  tfk.transpose(%9 : memref<?x?x2x4xf32>) into(%12 : memref<?x2x?x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %13 = tfk.alloc[%0, %1] : memref<?x2x?x4xf32>
  tfk.transpose(%10 : memref<?x?x2x4xf32>) into(%13 : memref<?x2x?x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %14 = tfk.output 0[%0, %1] : memref<?x2x?x4xf32>
  tfk.attention %11, %12, %13 into %14 {scale = 5.000000e-01 : f64} : memref<?x2x?x4xf32>, memref<?x2x?x4xf32>, memref<?x2x?x4xf32> into memref<?x2x?x4xf32>
  %g = tfk.input 1[%0, %1] : memref<?x?x8xf32>
  %gr = tfk.reshape %g[%0, %1] : memref<?x?x8xf32> to memref<?x?x2x4xf32>
  %gt = tfk.alloc[%0, %1] : memref<?x2x?x4xf32>
  tfk.transpose(%gr : memref<?x?x2x4xf32>) into(%gt : memref<?x2x?x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %dq = tfk.alloc[%0, %1] : memref<?x2x?x4xf32>
  %dk = tfk.alloc[%0, %1] : memref<?x2x?x4xf32>
  %dv = tfk.alloc[%0, %1] : memref<?x2x?x4xf32>
  tfk.attention_grad(%11, %12, %13, %gt : memref<?x2x?x4xf32>, memref<?x2x?x4xf32>, memref<?x2x?x4xf32>, memref<?x2x?x4xf32>) into(%dq, %dk, %dv : memref<?x2x?x4xf32>, memref<?x2x?x4xf32>, memref<?x2x?x4xf32>) {scale = 5.000000e-01 : f64, dropout_rate = 0.0 : f64, dropout_seed = 0 : i64, dropout_stream = 0 : i64}
  %tq = tfk.alloc[%0, %1] : memref<?x?x2x4xf32>
  tfk.transpose(%dq : memref<?x2x?x4xf32>) into(%tq : memref<?x?x2x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %rq = tfk.reshape %tq[%0, %1] : memref<?x?x2x4xf32> to memref<?x?x8xf32>
  %tk = tfk.alloc[%0, %1] : memref<?x?x2x4xf32>
  tfk.transpose(%dk : memref<?x2x?x4xf32>) into(%tk : memref<?x?x2x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %rk = tfk.reshape %tk[%0, %1] : memref<?x?x2x4xf32> to memref<?x?x8xf32>
  %tv = tfk.alloc[%0, %1] : memref<?x?x2x4xf32>
  tfk.transpose(%dv : memref<?x2x?x4xf32>) into(%tv : memref<?x?x2x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %rv = tfk.reshape %tv[%0, %1] : memref<?x?x2x4xf32> to memref<?x?x8xf32>
  %c = tfk.output 1[%0, %1] : memref<?x?x24xf32>
  tfk.concat(%rq, %rk, %rv : memref<?x?x8xf32>, memref<?x?x8xf32>, memref<?x?x8xf32>) into(%c : memref<?x?x24xf32>) {axis = 2 : i64}
  return
}

// -----

// Tests what stays: a concat one of whose inputs was not written through a
// head view (dV is also read by a copy, so its transpose back stays), and
// a concat along another axis.
// CHECK-LABEL: func.func @partial()
// CHECK: tfk.attention_grad
// CHECK: tfk.copy
// CHECK: tfk.transpose
// CHECK: tfk.concat{{.*}}axis = 2
// CHECK: tfk.concat{{.*}}axis = 1
func.func @partial() attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 4 : i64} {
  %0 = tfk.input_dim 0, 0
  %1 = tfk.input_dim 0, 1
  %q = tfk.input 0[%0, %1] : memref<?x2x?x4xf32>
  %g = tfk.input 1[%0, %1] : memref<?x2x?x4xf32>
  %dq = tfk.alloc[%0, %1] : memref<?x2x?x4xf32>
  %dk = tfk.alloc[%0, %1] : memref<?x2x?x4xf32>
  %dv = tfk.alloc[%0, %1] : memref<?x2x?x4xf32>
  tfk.attention_grad(%q, %q, %q, %g : memref<?x2x?x4xf32>, memref<?x2x?x4xf32>, memref<?x2x?x4xf32>, memref<?x2x?x4xf32>) into(%dq, %dk, %dv : memref<?x2x?x4xf32>, memref<?x2x?x4xf32>, memref<?x2x?x4xf32>) {scale = 5.000000e-01 : f64, dropout_rate = 0.0 : f64, dropout_seed = 0 : i64, dropout_stream = 0 : i64}
  %cp = tfk.output 2[%0, %1] : memref<?x2x?x4xf32>
  tfk.copy(%dv : memref<?x2x?x4xf32>) into(%cp : memref<?x2x?x4xf32>)
  %tq = tfk.alloc[%0, %1] : memref<?x?x2x4xf32>
  tfk.transpose(%dq : memref<?x2x?x4xf32>) into(%tq : memref<?x?x2x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %rq = tfk.reshape %tq[%0, %1] : memref<?x?x2x4xf32> to memref<?x?x8xf32>
  %tv = tfk.alloc[%0, %1] : memref<?x?x2x4xf32>
  tfk.transpose(%dv : memref<?x2x?x4xf32>) into(%tv : memref<?x?x2x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %rv = tfk.reshape %tv[%0, %1] : memref<?x?x2x4xf32> to memref<?x?x8xf32>
  %c = tfk.output 0[%0, %1] : memref<?x?x16xf32>
  tfk.concat(%rq, %rv : memref<?x?x8xf32>, memref<?x?x8xf32>) into(%c : memref<?x?x16xf32>) {axis = 2 : i64}
  %tk = tfk.alloc[%0, %1] : memref<?x?x2x4xf32>
  tfk.transpose(%dk : memref<?x2x?x4xf32>) into(%tk : memref<?x?x2x4xf32>) {permutation = array<i64: 0, 2, 1, 3>}
  %rk = tfk.reshape %tk[%0, %1] : memref<?x?x2x4xf32> to memref<?x?x8xf32>
  %n = arith.addi %1, %1 : index
  %c3 = tfk.output 1[%0, %n] : memref<?x?x8xf32>
  tfk.concat(%rk, %rk : memref<?x?x8xf32>, memref<?x?x8xf32>) into(%c3 : memref<?x?x8xf32>) {axis = 1 : i64}
  return
}
