// RUN: transfuse-opt %s -split-input-file --transfuse-autodiff --transfuse-cleanup | FileCheck %s
// RUN: not transfuse-opt %s -split-input-file --transfuse-autodiff="function=missing" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING

// Tests that @loss_grad returns the loss and grad.<name> per parameter, a
// linear layer's weight gradient as gᵀ·x (W stored [N, K]), the bias
// gradient summed over the batch, and tanh's rule g - g·y·y.
// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME: -> (tensor<f32> {transfuse.name = "loss"}, tensor<3x4xf32> {transfuse.name = "grad.w"}, tensor<3xf32> {transfuse.name = "grad.b"})
// CHECK: %[[Y:.*]] = transfuse.tanh
// CHECK: %[[L:.*]] = transfuse.reduce_sum %[[Y]]
// CHECK: %[[ONE:.*]] = transfuse.expand
// CHECK: %[[GY:.*]] = transfuse.mul %[[ONE]], %[[Y]]
// CHECK: %[[GYY:.*]] = transfuse.mul %[[GY]], %[[Y]]
// CHECK: %[[G:.*]] = transfuse.sub %[[ONE]], %[[GYY]]
// CHECK: %[[DB:.*]] = transfuse.reduce_sum %[[G]] {axes = array<i64: 0>}
// CHECK: %[[DW:.*]] = transfuse.matmul %[[G]], %arg0 {transpose_lhs = true} : (tensor<?x3xf32>, tensor<?x4xf32>) -> tensor<3x4xf32>
// CHECK: return %[[L]], %[[DW]], %[[DB]]
func.func @loss(%x: tensor<?x4xf32> {transfuse.name = "x"}) -> (tensor<f32> {transfuse.name = "loss"})
    attributes {transfuse.max_batch = 2 : i64} {
  %w = transfuse.param "w" {init = #transfuse.init<zeros>} : tensor<3x4xf32>
  %b = transfuse.param "b" {init = #transfuse.init<zeros>} : tensor<3xf32>
  %y = transfuse.matmul %x, %w {transpose_rhs = true} : (tensor<?x4xf32>, tensor<3x4xf32>) -> tensor<?x3xf32>
  %z = transfuse.add %y, %b : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  %t = transfuse.tanh %z : tensor<?x3xf32>
  %l = transfuse.reduce_sum %t {axes = array<i64: 0, 1>} : (tensor<?x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a weight used twice (tied) is one gradient, the sum of both
// uses' gradients, that a weight under batched rows gets weight_grad (one
// product over batch and sequence), and that cross_entropy's rule is
// cross_entropy_grad.
// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME: -> (tensor<f32> {transfuse.name = "loss"}, tensor<6x4xf32> {transfuse.name = "grad.emb"})
// CHECK: %[[DZ:.*]] = transfuse.cross_entropy_grad
// CHECK-SAME: ignore_index = 0 : i64, label_smoothing = 1.000000e-01 : f64
// CHECK: %[[DH:.*]] = transfuse.matmul %[[DZ]], %{{.*}} : (tensor<?x?x6xf32>, tensor<6x4xf32>) -> tensor<?x?x4xf32>
// CHECK: %[[DOUT:.*]] = transfuse.weight_grad %[[DZ]], %{{.*}} : (tensor<?x?x6xf32>, tensor<?x?x4xf32>) -> tensor<6x4xf32>
// CHECK: %[[DIN:.*]] = transfuse.embedding_grad %arg0, %[[DH]] : (tensor<?x?xi32>, tensor<?x?x4xf32>) -> tensor<6x4xf32>
// CHECK: %[[SUM:.*]] = transfuse.add %[[DIN]], %[[DOUT]]
// CHECK: return %{{.*}}, %[[SUM]]
func.func @loss(%ids: tensor<?x?xi32> {transfuse.name = "ids"}, %labels: tensor<?x?xi32> {transfuse.name = "labels"}) -> (tensor<f32> {transfuse.name = "loss"})
    attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 4 : i64} {
  %e = transfuse.param "emb" {init = #transfuse.init<zeros>} : tensor<6x4xf32>
  %e2 = transfuse.param "emb" {init = #transfuse.init<zeros>} : tensor<6x4xf32>
  %h = transfuse.gather %e, %ids : (tensor<6x4xf32>, tensor<?x?xi32>) -> tensor<?x?x4xf32>
  %z = transfuse.matmul %h, %e2 {transpose_rhs = true} : (tensor<?x?x4xf32>, tensor<6x4xf32>) -> tensor<?x?x6xf32>
  %l = transfuse.cross_entropy %z, %labels {ignore_index = 0 : i64, label_smoothing = 1.0e-01 : f64} : (tensor<?x?x6xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests relu's derivative read from its result (the relu op's and the
// fused linear layer's), or from the dropout that is the result's only
// use, so that no pre-activation is recomputed or kept, and the dropout's
// backward then a scale (cleanup's canonicalization: no second draw); the
// pre-activation recomputed for gelu; the bias gradient summed over batch
// and sequence.
// CHECK-LABEL: func.func @loss_grad
// CHECK: %[[H:.*]] = transfuse.linear %arg0, %{{.*}} bias %{{.*}} {activation = #transfuse.activation<relu>, transpose_weight}
// CHECK: %[[D:.*]] = transfuse.dropout %[[H]]
// CHECK: %[[G:.*]] = transfuse.linear %[[D]], %{{.*}} bias %{{.*}} {activation = #transfuse.activation<gelu>, transpose_weight}
// CHECK: %[[R:.*]] = transfuse.relu %[[G]]
// CHECK: %[[DR:.*]] = transfuse.activation_grad %[[R]], %{{.*}} {activation = #transfuse.activation<relu>}
// CHECK: %[[Z:.*]] = transfuse.matmul %[[D]], %{{.*}} {transpose_rhs = true}
// CHECK: %[[ZB:.*]] = transfuse.add %[[Z]]
// CHECK: %[[DZ2:.*]] = transfuse.activation_grad %[[ZB]], %[[DR]] {activation = #transfuse.activation<gelu>}
// CHECK: %[[DD:.*]] = transfuse.matmul %[[DZ2]]
// CHECK-NOT: transfuse.dropout %[[DD]]
// CHECK: %[[DH:.*]] = transfuse.scale %[[DD]] {factor = 1.1111111111111112 : f64}
// CHECK-NOT: transfuse.matmul %arg0
// CHECK: %[[DZ1:.*]] = transfuse.activation_grad %[[D]], %[[DH]] {activation = #transfuse.activation<relu>}
// CHECK-NOT: transfuse.matmul %arg0
// CHECK: %[[DW1:.*]] = transfuse.weight_grad %[[DZ1]], %arg0
// CHECK: %[[DB1:.*]] = transfuse.reduce_sum %[[DZ1]] {axes = array<i64: 0, 1>}
// CHECK: return
func.func @loss(%x: tensor<?x?x4xf32> {transfuse.name = "x"}) -> (tensor<f32> {transfuse.name = "loss"})
    attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 3 : i64} {
  %w1 = transfuse.param "w1" {init = #transfuse.init<zeros>} : tensor<6x4xf32>
  %b1 = transfuse.param "b1" {init = #transfuse.init<zeros>} : tensor<6xf32>
  %w2 = transfuse.param "w2" {init = #transfuse.init<zeros>} : tensor<5x6xf32>
  %b2 = transfuse.param "b2" {init = #transfuse.init<zeros>} : tensor<5xf32>
  %h = transfuse.linear %x, %w1 bias %b1 {activation = #transfuse.activation<relu>, transpose_weight} : (tensor<?x?x4xf32>, tensor<6x4xf32>, tensor<6xf32>) -> tensor<?x?x6xf32>
  %d = transfuse.dropout %h {rate = 1.0e-01 : f64, seed = 0 : i64, stream = 1 : i64} : tensor<?x?x6xf32>
  %g = transfuse.linear %d, %w2 bias %b2 {activation = #transfuse.activation<gelu>, transpose_weight} : (tensor<?x?x6xf32>, tensor<5x6xf32>, tensor<5xf32>) -> tensor<?x?x5xf32>
  %r = transfuse.relu %g : tensor<?x?x5xf32>
  %l = transfuse.reduce_sum %r {axes = array<i64: 0, 1, 2>} : (tensor<?x?x5xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that silu's derivative is read from its input, alone and in a
// linear layer's epilogue (the pre-activation recomputed, as for gelu).
// CHECK-LABEL: func.func @loss_grad
// CHECK: %[[S:.*]] = transfuse.silu %[[X:[^ ]*]]
// CHECK: transfuse.activation_grad %[[X]], %{{.*}} {activation = #transfuse.activation<silu>}
// CHECK: transfuse.activation_grad %{{.*}}, %{{.*}} {activation = #transfuse.activation<silu>}
// CHECK: return
func.func @loss(%x: tensor<?x4xf32> {transfuse.name = "x"}) -> (tensor<f32> {transfuse.name = "loss"})
    attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 3 : i64} {
  %w = transfuse.param "w" {init = #transfuse.init<zeros>} : tensor<3x4xf32>
  %h = transfuse.linear %x, %w {activation = #transfuse.activation<silu>, transpose_weight} : (tensor<?x4xf32>, tensor<3x4xf32>) -> tensor<?x3xf32>
  %s = transfuse.silu %h : tensor<?x3xf32>
  %l = transfuse.reduce_sum %s {axes = array<i64: 0, 1>} : (tensor<?x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// MISSING: error: transfuse-autodiff: no function @missing
