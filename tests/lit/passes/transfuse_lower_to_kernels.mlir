// RUN: transfuse-opt %s -split-input-file --transfuse-lower-to-kernels | FileCheck %s
// RUN: transfuse-opt %s -split-input-file --transfuse-lower-to-kernels | transfuse-opt -split-input-file | FileCheck %s

// Tests that an entry point becomes a function without arguments or
// results: sizes at the top (one value per distinct size, the seq lengths
// of x and ids broadcast where they meet), inputs as tfk.input, a GEMM by a
// parameter packed with its epilogue, a result computed by an op written
// straight into its output (through a view when a reshape of it is
// returned), and a returned input copied.
// CHECK-LABEL: func.func @forward()
// CHECK-SAME: transfuse.max_batch = 2
// CHECK-DAG: %[[B:.*]] = tfk.input_dim 0, 0
// CHECK-DAG: %[[SI:.*]] = tfk.input_dim 1, 1
// CHECK-DAG: %[[SX:.*]] = tfk.input_dim 0, 1
// CHECK: %[[S:.*]] = tfk.broadcast_dim %[[SI]], %[[SX]]
// CHECK: %[[X:.*]] = tfk.input 0[%[[B]], %[[SX]]] : memref<?x?x8xf32>
// CHECK: %[[IDS:.*]] = tfk.input 1[%[[B]], %[[SI]]] : memref<?x?xi32>
// CHECK: %[[W:.*]] = tfk.param "w" : memref<8x8xf32>
// CHECK: %[[BIAS:.*]] = tfk.param "b" : memref<8xf32>
// CHECK: %[[T:.*]] = tfk.param "table" : memref<5x8xf32>
// CHECK: %[[E:.*]] = tfk.alloc[%[[B]], %[[SI]]] : memref<?x?x8xf32>
// CHECK: tfk.gather(%[[T]], %[[IDS]] : {{.*}}) into(%[[E]] : {{.*}}) {what = "input 'ids'"}
// CHECK: %[[Y:.*]] = tfk.output 0[%[[B]], %[[SI]]] : memref<?x?x8xf32>
// CHECK: tfk.gemm %[[E]], %[[W]] bias %[[BIAS]] into %[[Y]] {activation = #transfuse.activation<relu>, packed}
// CHECK: %[[O2:.*]] = tfk.output 2[%[[B]], %[[S]]] : memref<?x?x2x4xf32>
// CHECK: %[[V:.*]] = tfk.reshape %[[O2]][%[[B]], %[[S]]] : memref<?x?x2x4xf32> to memref<?x?x8xf32>
// CHECK: tfk.binary(%[[Y]], %[[X]] : {{.*}}) into(%[[V]] : memref<?x?x8xf32>) {kind = "kAdd"}
// CHECK: %[[O1:.*]] = tfk.output 1[%[[B]], %[[SI]]] : memref<?x?xi32>
// CHECK: tfk.copy(%[[IDS]] : memref<?x?xi32>) into(%[[O1]] : memref<?x?xi32>)
// CHECK-NEXT: return
// CHECK-NOT: transfuse.
func.func @forward(%x: tensor<?x?x8xf32> {transfuse.name = "x"}, %ids: tensor<?x?xi32> {transfuse.name = "ids"}) -> (tensor<?x?x8xf32>, tensor<?x?xi32>, tensor<?x?x2x4xf32>) attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 4 : i64} {
  %w = transfuse.param "w" {init = #transfuse.init<xavier_uniform>} : tensor<8x8xf32>
  %b = transfuse.param "b" {init = #transfuse.init<zeros>} : tensor<8xf32>
  %t = transfuse.param "table" {init = #transfuse.init<normal_0.02>} : tensor<5x8xf32>
  %e = transfuse.gather %t, %ids : (tensor<5x8xf32>, tensor<?x?xi32>) -> tensor<?x?x8xf32>
  %y = transfuse.linear %e, %w bias %b {activation = #transfuse.activation<relu>} : (tensor<?x?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %s = transfuse.add %y, %x : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %r = transfuse.reshape %s : (tensor<?x?x8xf32>) -> tensor<?x?x2x4xf32>
  return %y, %ids, %r : tensor<?x?x8xf32>, tensor<?x?xi32>, tensor<?x?x2x4xf32>
}

// -----

// Tests that add_layer_norm keeps a residual that is a trailing block of
// the output (positions), without a sum nobody reads, and that fused
// regions say how each input is read: full, trailing, one value (Highway,
// `vector`), or strided (a select with a broadcast, scalar code).
// CHECK-LABEL: func.func @forward()
// CHECK-DAG: %[[S:.*]] = tfk.input_dim 0, 1
// CHECK-DAG: %[[B:.*]] = tfk.input_dim 0, 0
// CHECK: %[[X:.*]] = tfk.input 0
// CHECK: %[[P:.*]] = tfk.alloc[%[[S]]] : memref<?x8xf32>
// CHECK: tfk.positional_encoding(%[[S]] : index) into(%[[P]] : memref<?x8xf32>)
// CHECK: %[[Y:.*]] = tfk.output 2[%[[B]], %[[S]]]
// CHECK: tfk.add_layer_norm %[[X]], %[[P]], %{{.*}}, %{{.*}} into %[[Y]] {epsilon = 1.000000e-05 : f64} :
// CHECK-NOT: sum
// CHECK: %[[C:.*]] = tfk.constant dense<2.000000e+00> : tensor<1xf32> : memref<1xf32>
// CHECK: tfk.elementwise %[[Y]], %[[P]], %[[C]] into %{{.*}} {kinds = ["full", "trailing", "splat"], vector}
// CHECK: transfuse.add
// CHECK: transfuse.mul
// CHECK: tfk.yield
// CHECK: tfk.elementwise {{.*}} {kinds = ["strided", "strided", "strided"]} :
// CHECK: transfuse.select
func.func @forward(%x: tensor<?x?x8xf32> {transfuse.name = "x"}, %m: tensor<?x?x8xi1> {transfuse.name = "m"}) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 4 : i64} {
  %n = transfuse.dim %x, 1 : tensor<?x?x8xf32>
  %pos = transfuse.positional_encoding %n : tensor<?x8xf32>
  %g = transfuse.param "g" {init = #transfuse.init<ones>} : tensor<8xf32>
  %b = transfuse.param "b" {init = #transfuse.init<zeros>} : tensor<8xf32>
  %y, %sum = transfuse.add_layer_norm %x, %pos, %g, %b {epsilon = 1.0e-05 : f64} : (tensor<?x?x8xf32>, tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  %c = transfuse.constant dense<2.0> : tensor<1xf32>
  %v = transfuse.fused_elementwise %y, %pos, %c : (tensor<?x?x8xf32>, tensor<?x8xf32>, tensor<1xf32>) -> tensor<?x?x8xf32> {
  ^bb0(%a: tensor<?x?x8xf32>, %p: tensor<?x8xf32>, %k: tensor<1xf32>):
    %0 = transfuse.add %a, %p : (tensor<?x?x8xf32>, tensor<?x8xf32>) -> tensor<?x?x8xf32>
    %1 = transfuse.mul %0, %k : (tensor<?x?x8xf32>, tensor<1xf32>) -> tensor<?x?x8xf32>
    transfuse.yield %1 : tensor<?x?x8xf32>
  }
  %w = transfuse.fused_elementwise %m, %x, %y : (tensor<?x?x8xi1>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  ^bb0(%mm: tensor<?x?x8xi1>, %a: tensor<?x?x8xf32>, %bb: tensor<?x?x8xf32>):
    %0 = transfuse.select %mm, %a, %bb : (tensor<?x?x8xi1>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    transfuse.yield %0 : tensor<?x?x8xf32>
  }
  return %v, %w, %y : tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

// -----

// Tests that a split becomes one slice per used result (the unused middle
// one costs nothing), and that a slice whose length is a size gets a check
// that it stays inside its axis.
// CHECK-LABEL: func.func @forward()
// CHECK-DAG: %[[S:.*]] = tfk.input_dim 0, 1
// CHECK-DAG: %[[N:.*]] = tfk.input_dim 1, 1
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : index
// CHECK: %[[END:.*]] = arith.addi %[[N]], %[[ONE]] : index
// CHECK: %[[X:.*]] = tfk.input 0
// CHECK: %[[O0:.*]] = tfk.output 0
// CHECK: tfk.slice(%[[X]] : memref<?x?x24xf32>) into(%[[O0]] : memref<?x?x8xf32>) {axis = 2 : i64, start = 0 : i64}
// CHECK-NOT: start = 8
// CHECK: %[[A2:.*]] = tfk.alloc
// CHECK: tfk.slice(%[[X]] : memref<?x?x24xf32>) into(%[[A2]] : memref<?x?x8xf32>) {axis = 2 : i64, start = 16 : i64}
// CHECK: tfk.check "le" %[[END]], %[[S]], "a slice past the end of its axis (a length over the table?)"
// CHECK: tfk.slice(%[[A2]] : {{.*}}) into({{.*}}) {axis = 1 : i64, start = 1 : i64}
func.func @forward(%x: tensor<?x?x24xf32> {transfuse.name = "x"}, %t: tensor<?x?xi32> {transfuse.name = "t"}) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>) attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 4 : i64} {
  %a:3 = transfuse.split %x {axis = 2 : i64, sizes = array<i64: 8, 8, 8>} : (tensor<?x?x24xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
  %n = transfuse.dim %t, 1 : tensor<?x?xi32>
  %s = transfuse.slice %a#2 length %n {axis = 1 : i64, start = 1 : i64} : (tensor<?x?x8xf32>, index) -> tensor<?x?x8xf32>
  return %a#0, %s : tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

// -----

// Tests that attention keeps its masks and scale, that an additive bias
// gets a check that its last dimension is the key length, and that a
// matmul of two activations is exec's matmul, not the GEMM by a weight.
// CHECK-LABEL: func.func @forward()
// CHECK: tfk.matmul %{{.*}}, %{{.*}} into %{{.*}} {transpose_rhs}
// CHECK: tfk.check "eq" %{{.*}}, %{{.*}}, "an attention bias whose last dimension is not the key length"
// CHECK: tfk.attention %{{.*}}, %{{.*}}, %{{.*}} key_padding %{{.*}} bias %{{.*}} into %{{.*}} {causal, scale = 1.250000e-01 : f64}
func.func @forward(%q: tensor<?x2x?x8xf32> {transfuse.name = "q"}, %kp: tensor<?x?xi1> {transfuse.name = "kp"}, %bias: tensor<?x?xf32> {transfuse.name = "bias"}) -> (tensor<?x2x?x8xf32>, tensor<?x2x?x?xf32>) attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 4 : i64} {
  %s = transfuse.matmul %q, %q {transpose_rhs = true} : (tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x2x?x?xf32>
  %o = transfuse.attention %q, %q, %q key_padding %kp bias %bias {scale = 0.125 : f64, causal} : (tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x?xi1>, tensor<?x?xf32>) -> tensor<?x2x?x8xf32>
  return %o, %s : tensor<?x2x?x8xf32>, tensor<?x2x?x?xf32>
}

// -----

// Tests that a decode step's cache appends become state writes at the
// state's length L into tfk.state at its capacity (K transposed: [rows, H,
// D, T]), each checked against the capacity before the call starts, with
// the L + n positions read back for attention, and that the entry ends by
// advancing L by the n it appended.
// CHECK-LABEL: func.func @step()
// CHECK-DAG: %[[N:.*]] = tfk.input_dim 0, 2
// CHECK-DAG: %[[L:.*]] = tfk.state_length
// CHECK-DAG: %[[END:.*]] = arith.addi %[[L]], %[[N]] : index
// CHECK-DAG: %[[K:.*]] = tfk.state "k" : memref<2x2x4x6xf32>
// CHECK-DAG: %[[V:.*]] = tfk.state "v" : memref<2x2x6x4xf32>
// CHECK-DAG: %[[CAP:.*]] = arith.constant 6 : index
// CHECK: %[[X:.*]] = tfk.input 0
// CHECK: tfk.check "le" %[[END]], %[[CAP]], "more positions than decoding state 'k' holds (max_seq_len 6)"
// CHECK: tfk.state_write %[[X]] into %[[K]] at %[[L]] {keys}
// CHECK: %[[KC:.*]] = tfk.alloc[%{{.*}}, %[[END]]] : memref<?x2x?x4xf32>
// CHECK: tfk.state_read %[[K]] into %[[KC]] {keys}
// CHECK: tfk.state_write %[[X]] into %[[V]] at %[[L]] :
// CHECK: tfk.state_read %[[V]] into %[[VC:[^ ]+]] :
// CHECK: tfk.attention %[[X]], %[[KC]], %[[VC]] into
// CHECK-NEXT: tfk.advance %[[N]]
// CHECK-NEXT: return
func.func @step(%x: tensor<?x2x?x4xf32> {transfuse.name = "x"}) -> (tensor<?x2x?x4xf32> {transfuse.name = "y"}) attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 6 : i64} {
  %k = transfuse.cache_append "k", %x {keys} : (tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %v = transfuse.cache_append "v", %x : (tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %y = transfuse.attention %x, %k, %v {causal, scale = 5.000000e-01 : f64} : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  return %y : tensor<?x2x?x4xf32>
}

// -----

// Tests that an encoder's K is written at position 0 and read back by a
// later call with the sizes it is given; an entry that appends nothing
// does not advance.
// CHECK-LABEL: func.func @encode()
// CHECK: tfk.state_write %{{.*}} into %{{.*}} at %{{.*}} {keys} : memref<?x2x?x4xf32> into memref<2x2x4x6xf32>
// CHECK-NOT: tfk.advance
// CHECK-LABEL: func.func @read()
// CHECK: tfk.state_read %{{.*}} into %{{.*}} {keys} : memref<2x2x4x6xf32> into memref<?x2x?x4xf32>
// CHECK-NOT: tfk.advance
func.func @encode(%x: tensor<?x2x?x4xf32> {transfuse.name = "x"}) attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 6 : i64} {
  transfuse.state_write "cross.k", %x {keys} : tensor<?x2x?x4xf32>
  return
}
func.func @read(%t: tensor<?x?xi32> {transfuse.name = "t"}) -> (tensor<?x2x?x4xf32> {transfuse.name = "k"}) attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 6 : i64} {
  %b = transfuse.dim %t, 0 : tensor<?x?xi32>
  %s = transfuse.dim %t, 1 : tensor<?x?xi32>
  %k = transfuse.state_read "cross.k" [%b, %s] {keys} : tensor<?x2x?x4xf32>
  return %k : tensor<?x2x?x4xf32>
}

// -----

// Tests that cross_entropy (a training build's loss) is the exec kernel of
// the same name into a scalar, naming its labels input for errors.
// CHECK-LABEL: func.func @forward
// CHECK: tfk.cross_entropy(%{{.*}}, %{{.*}} : memref<?x?x37xf32>, memref<?x?xi32>) into(%{{.*}} : memref<f32>) {ignore_index = 1 : i64, label_smoothing = 1.000000e-01 : f64, what = "input 'labels'"}
func.func @forward(%z: tensor<?x?x37xf32> {transfuse.name = "logits"}, %y: tensor<?x?xi32> {transfuse.name = "labels"}) -> (tensor<f32> {transfuse.name = "loss"}) attributes {transfuse.max_batch = 3 : i64, transfuse.max_seq_len = 5 : i64} {
  %l = transfuse.cross_entropy %z, %y {ignore_index = 1 : i64, label_smoothing = 1.0e-01 : f64} : (tensor<?x?x37xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that dropout (a training graph) is the exec kernel of the same name
// with its rate, seed and stream (the call adds its own seed and step), and
// that attention with dropout keeps it on tfk.attention.
// CHECK-LABEL: func.func @forward
// CHECK: tfk.dropout(%{{.*}} : memref<?x8xf32>) into(%{{.*}} : memref<?x8xf32>) {rate = 1.000000e-01 : f64, seed = 1 : i64, stream = 3 : i64}
// CHECK: tfk.attention {{.*}} {dropout_rate = 2.000000e-01 : f64, dropout_seed = 5 : i64, dropout_stream = 7 : i64, scale = 1.250000e-01 : f64}
func.func @forward(%x: tensor<?x8xf32> {transfuse.name = "x"}, %q: tensor<2x2x4x8xf32> {transfuse.name = "q"}) -> (tensor<?x8xf32> {transfuse.name = "y"}, tensor<2x2x4x8xf32> {transfuse.name = "o"}) attributes {transfuse.max_batch = 2 : i64} {
  %y = transfuse.dropout %x {rate = 0.1 : f64, seed = 1 : i64, stream = 3 : i64} : tensor<?x8xf32>
  %o = transfuse.attention %q, %q, %q {scale = 0.125 : f64, dropout_rate = 0.2 : f64, dropout_seed = 5 : i64, dropout_stream = 7 : i64} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %y, %o : tensor<?x8xf32>, tensor<2x2x4x8xf32>
}

// -----

// Tests that attention's gradient is the exec kernel attention_grad with its
// key padding, scale, mask and dropout, writing dQ, dK and dV.
// CHECK-LABEL: func.func @forward
// CHECK: tfk.attention_grad(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<2x2x4x8xf32>, memref<2x2x6x8xf32>, memref<2x2x6x8xf32>, memref<2x2x4x8xf32>, memref<2x6xi1>) into(%{{.*}}, %{{.*}}, %{{.*}} : memref<2x2x4x8xf32>, memref<2x2x6x8xf32>, memref<2x2x6x8xf32>) {causal, dropout_rate = 1.000000e-01 : f64, dropout_seed = 0 : i64, dropout_stream = 2 : i64, scale = 1.250000e-01 : f64}
func.func @forward(%q: tensor<2x2x4x8xf32> {transfuse.name = "q"}, %k: tensor<2x2x6x8xf32> {transfuse.name = "k"}, %p: tensor<2x6xi1> {transfuse.name = "p"}) -> (tensor<2x2x4x8xf32> {transfuse.name = "dq"}, tensor<2x2x6x8xf32> {transfuse.name = "dk"}, tensor<2x2x6x8xf32> {transfuse.name = "dv"}) {
  %dq, %dk, %dv = transfuse.attention_grad %q, %k, %k, %q key_padding %p {scale = 0.125 : f64, causal, dropout_rate = 0.1 : f64, dropout_stream = 2 : i64} : (tensor<2x2x4x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x4x8xf32>, tensor<2x6xi1>) -> (tensor<2x2x4x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>)
  return %dq, %dk, %dv : tensor<2x2x4x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>
}
