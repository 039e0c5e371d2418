// RUN: transfuse-opt %s -split-input-file --transfuse-hoist-prepare --transfuse-cleanup | FileCheck %s
// RUN: transfuse-opt %s -split-input-file --transfuse-hoist-prepare --transfuse-hoist-prepare --transfuse-cleanup | FileCheck %s

// Tests that slicing a packed weight and scaling a slice move into @prepare,
// that forward reads exactly the values it used as prepared params (the
// unused third slice is not exported), and that work on activations stays.
// Running the pass twice changes nothing more.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: transfuse.split
// CHECK-NOT: transfuse.scale
// CHECK: %[[P0:.*]] = transfuse.param "prepared.0" {init = #transfuse.init<zeros>, prepared} : tensor<4x2xf32>
// CHECK: %[[P1:.*]] = transfuse.param "prepared.1" {init = #transfuse.init<zeros>, prepared} : tensor<4x2xf32>
// CHECK: transfuse.matmul %arg0, %[[P0]]
// CHECK: transfuse.matmul %arg0, %[[P1]]
// CHECK-LABEL: func.func @prepare() -> (tensor<4x2xf32> {transfuse.name = "prepared.0"}, tensor<4x2xf32> {transfuse.name = "prepared.1"})
// CHECK: %[[W:.*]] = transfuse.param "packed" {init = #transfuse.init<xavier_uniform>} : tensor<4x6xf32>
// CHECK: %[[S:.*]]:3 = transfuse.split %[[W]]
// CHECK: %[[T:.*]] = transfuse.scale %[[S]]#1 {factor = 2.000000e+00 : f64}
// CHECK: return %[[S]]#0, %[[T]]
// CHECK-NOT: func.func @prepare
func.func @forward(%x: tensor<?x4xf32> {transfuse.name = "x"}) -> tensor<?x2xf32> attributes {transfuse.max_batch = 2 : i64} {
  %w = transfuse.param "packed" {init = #transfuse.init<xavier_uniform>} : tensor<4x6xf32>
  %a:3 = transfuse.split %w {axis = 1 : i64, sizes = array<i64: 2, 2, 2>} : (tensor<4x6xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>)
  %t = transfuse.scale %a#1 {factor = 2.0 : f64} : tensor<4x2xf32>
  %y = transfuse.matmul %x, %a#0 : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %z = transfuse.matmul %x, %t : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %s = transfuse.add %y, %z : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  return %s : tensor<?x2xf32>
}

// -----

// Tests that a function whose weights are used as they are gets no @prepare.
// CHECK-LABEL: func.func @forward
// CHECK: transfuse.param "w"
// CHECK-NOT: prepared
// CHECK-NOT: func.func @prepare
func.func @forward(%x: tensor<?x4xf32> {transfuse.name = "x"}) -> tensor<?x4xf32> attributes {transfuse.max_batch = 2 : i64} {
  %w = transfuse.param "w" {init = #transfuse.init<xavier_uniform>} : tensor<4x4xf32>
  %y = transfuse.matmul %x, %w : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

// Tests that a weight shared by forward and a hoisted computation stays a
// param in forward and is also read by @prepare.
// CHECK-LABEL: func.func @forward
// CHECK-DAG: %[[W:.*]] = transfuse.param "w" {init = #transfuse.init<xavier_uniform>} : tensor<4x4xf32>
// CHECK-DAG: %[[P:.*]] = transfuse.param "prepared.0" {init = #transfuse.init<zeros>, prepared} : tensor<4x4xf32>
// CHECK: transfuse.matmul %arg0, %[[W]]
// CHECK: transfuse.matmul %arg0, %[[P]]
// CHECK-LABEL: func.func @prepare
// CHECK: transfuse.param "w"
// CHECK: transfuse.transpose
func.func @forward(%x: tensor<?x4xf32> {transfuse.name = "x"}) -> (tensor<?x4xf32>, tensor<?x4xf32>) attributes {transfuse.max_batch = 2 : i64} {
  %w = transfuse.param "w" {init = #transfuse.init<xavier_uniform>} : tensor<4x4xf32>
  %wt = transfuse.transpose %w {permutation = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %y = transfuse.matmul %x, %w : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  %z = transfuse.matmul %x, %wt : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  return %y, %z : tensor<?x4xf32>, tensor<?x4xf32>
}

// -----

// Tests that entry points computing the same thing from the same weights
// (forward and decode_step slicing one in_proj weight) share one prepared
// tensor, and that a computation only one of them has gets its own.
// CHECK-LABEL: func.func @forward
// CHECK: transfuse.param "prepared.0" {init = #transfuse.init<zeros>, prepared} : tensor<4x4xf32>
// CHECK-LABEL: func.func @decode_step
// CHECK-DAG: transfuse.param "prepared.0" {init = #transfuse.init<zeros>, prepared} : tensor<4x4xf32>
// CHECK-DAG: transfuse.param "prepared.1" {init = #transfuse.init<zeros>, prepared} : tensor<4x4xf32>
// CHECK-LABEL: func.func @prepare() -> (tensor<4x4xf32> {transfuse.name = "prepared.0"}, tensor<4x4xf32> {transfuse.name = "prepared.1"})
// CHECK-COUNT-1: transfuse.param "w"
// CHECK-NOT: transfuse.param
// CHECK-COUNT-1: transfuse.split
// CHECK-NOT: transfuse.split
func.func @forward(%x: tensor<?x4xf32> {transfuse.name = "x"}) -> tensor<?x4xf32> attributes {transfuse.max_batch = 2 : i64} {
  %w = transfuse.param "w" {init = #transfuse.init<xavier_uniform>} : tensor<8x4xf32>
  %a, %b = transfuse.split %w {axis = 0 : i64, sizes = array<i64: 4, 4>} : (tensor<8x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  %y = transfuse.matmul %x, %a : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}
func.func @decode_step(%x: tensor<?x4xf32> {transfuse.name = "x"}) -> (tensor<?x4xf32>, tensor<?x4xf32>) attributes {transfuse.max_batch = 2 : i64} {
  %w = transfuse.param "w" {init = #transfuse.init<xavier_uniform>} : tensor<8x4xf32>
  %a, %b = transfuse.split %w {axis = 0 : i64, sizes = array<i64: 4, 4>} : (tensor<8x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  %y = transfuse.matmul %x, %a : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  %z = transfuse.matmul %x, %b : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  return %y, %z : tensor<?x4xf32>, tensor<?x4xf32>
}
