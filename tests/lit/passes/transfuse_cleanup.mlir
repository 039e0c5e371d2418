// RUN: transfuse-opt %s --transfuse-cleanup -split-input-file | FileCheck %s

// --transfuse-cleanup is canonicalize + cse: the folds of the transfuse ops
// (scale by 1, dropout with rate 0, reshape to the same type, constants) and
// merging of identical pure ops.

// Tests that scale by 1.0 folds away to its input.
// CHECK-LABEL: func.func @scale_by_one
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x512xf32>)
// CHECK-NOT: transfuse.scale
// CHECK: return %[[X]]
func.func @scale_by_one(%x: tensor<?x?x512xf32>) -> tensor<?x?x512xf32> {
  %0 = transfuse.scale %x {factor = 1.0 : f64} : tensor<?x?x512xf32>
  return %0 : tensor<?x?x512xf32>
}

// -----

// Tests that scale by 0.5 stays.
// CHECK-LABEL: func.func @scale_by_half
// CHECK: %[[S:.+]] = transfuse.scale %{{[^ ]+}} {factor = 5.000000e-01 : f64} : tensor<?x?x512xf32>
// CHECK: return %[[S]]
func.func @scale_by_half(%x: tensor<?x?x512xf32>) -> tensor<?x?x512xf32> {
  %0 = transfuse.scale %x {factor = 0.5 : f64} : tensor<?x?x512xf32>
  return %0 : tensor<?x?x512xf32>
}

// -----

// Tests that a chain of scales by 1.0 folds away entirely while a scale by
// -1.0 in the middle stays.
// CHECK-LABEL: func.func @scale_chain
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>)
// CHECK: %[[N:.+]] = transfuse.scale %[[X]] {factor = -1.000000e+00 : f64} : tensor<4xf32>
// CHECK-NOT: transfuse.scale
// CHECK: return %[[N]]
func.func @scale_chain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = transfuse.scale %x {factor = 1.0 : f64} : tensor<4xf32>
  %1 = transfuse.scale %0 {factor = -1.0 : f64} : tensor<4xf32>
  %2 = transfuse.scale %1 {factor = 1.0 : f64} : tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// Tests that dropout with rate 0 folds away, with and without a step.
// CHECK-LABEL: func.func @dropout_rate_zero
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x512xf32>
// CHECK-NOT: transfuse.dropout
// CHECK: return %[[X]], %[[X]]
func.func @dropout_rate_zero(%x: tensor<?x?x512xf32>, %step: index) -> (tensor<?x?x512xf32>, tensor<?x?x512xf32>) {
  %0 = transfuse.dropout %x {rate = 0.0 : f64, seed = 0 : i64, stream = 3 : i64} : tensor<?x?x512xf32>
  %1 = transfuse.dropout %x step %step {rate = 0.0 : f64, seed = 7 : i64, stream = 4 : i64} : tensor<?x?x512xf32>
  return %0, %1 : tensor<?x?x512xf32>, tensor<?x?x512xf32>
}

// -----

// Tests that dropout with rate 0.1 stays.
// CHECK-LABEL: func.func @dropout_rate_nonzero
// CHECK: %[[D:.+]] = transfuse.dropout %{{[^ ]+}} {rate = 1.000000e-01 : f64, seed = 0 : i64, stream = 3 : i64} : tensor<?x?x512xf32>
// CHECK: return %[[D]]
func.func @dropout_rate_nonzero(%x: tensor<?x?x512xf32>) -> tensor<?x?x512xf32> {
  %0 = transfuse.dropout %x {rate = 0.1 : f64, seed = 0 : i64, stream = 3 : i64} : tensor<?x?x512xf32>
  return %0 : tensor<?x?x512xf32>
}

// -----

// Tests that dropouts differing only in stream or step are not merged: they
// draw different masks.
// CHECK-LABEL: func.func @dropout_streams_not_merged
// CHECK-COUNT-3: transfuse.dropout
// CHECK-NOT: transfuse.dropout
func.func @dropout_streams_not_merged(%x: tensor<8xf32>, %s: index) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %0 = transfuse.dropout %x {rate = 0.1 : f64, seed = 0 : i64, stream = 0 : i64} : tensor<8xf32>
  %1 = transfuse.dropout %x {rate = 0.1 : f64, seed = 0 : i64, stream = 1 : i64} : tensor<8xf32>
  %2 = transfuse.dropout %x step %s {rate = 0.1 : f64, seed = 0 : i64, stream = 0 : i64} : tensor<8xf32>
  return %0, %1, %2 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that a reshape to its own type folds away, also with dynamic dims.
// CHECK-LABEL: func.func @reshape_same_type
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x512xf32>
// CHECK-NOT: transfuse.reshape
// CHECK: return %[[X]]
func.func @reshape_same_type(%x: tensor<?x?x512xf32>) -> tensor<?x?x512xf32> {
  %0 = transfuse.reshape %x : (tensor<?x?x512xf32>) -> tensor<?x?x512xf32>
  return %0 : tensor<?x?x512xf32>
}

// -----

// Tests that a reshape to another type stays.
// CHECK-LABEL: func.func @reshape_other_type
// CHECK: %[[R:.+]] = transfuse.reshape %{{[^ ]+}} : (tensor<?x?x512xf32>) -> tensor<?x?x8x64xf32>
// CHECK: return %[[R]]
func.func @reshape_other_type(%x: tensor<?x?x512xf32>) -> tensor<?x?x8x64xf32> {
  %0 = transfuse.reshape %x : (tensor<?x?x512xf32>) -> tensor<?x?x8x64xf32>
  return %0 : tensor<?x?x8x64xf32>
}

// -----

// Tests that dim of a static dimension stays: the dialect has no index
// constants (sizes as values exist for dynamic dimensions; a backend reads a
// static size off the type).
// CHECK-LABEL: func.func @dim_static
// CHECK: %[[D:.+]] = transfuse.dim %{{[^ ]+}}, 1 : tensor<?x512xf32>
// CHECK: return %[[D]]
func.func @dim_static(%x: tensor<?x512xf32>) -> index {
  %0 = transfuse.dim %x, 1 : tensor<?x512xf32>
  return %0 : index
}

// -----

// Tests that dim of a dynamic dimension stays, and that two identical dims are
// merged by CSE while a dim of another axis is kept.
// CHECK-LABEL: func.func @dim_dynamic
// CHECK: %[[D0:.+]] = transfuse.dim %{{[^ ]+}}, 0 : tensor<?x?xi32>
// CHECK-NEXT: %[[D1:.+]] = transfuse.dim %{{[^ ]+}}, 1 : tensor<?x?xi32>
// CHECK-NOT: transfuse.dim
// CHECK: return %[[D0]], %[[D0]], %[[D1]]
func.func @dim_dynamic(%ids: tensor<?x?xi32>) -> (index, index, index) {
  %0 = transfuse.dim %ids, 0 : tensor<?x?xi32>
  %1 = transfuse.dim %ids, 0 : tensor<?x?xi32>
  %2 = transfuse.dim %ids, 1 : tensor<?x?xi32>
  return %0, %1, %2 : index, index, index
}

// -----

// Tests that CSE merges duplicate params, matmuls and elementwise ops, so
// only one of each survives.
// CHECK-LABEL: func.func @cse_duplicates
// CHECK-COUNT-1: transfuse.param "w"
// CHECK-NOT: transfuse.param
// CHECK-COUNT-1: transfuse.matmul
// CHECK-NOT: transfuse.matmul
// CHECK: %[[G:.+]] = transfuse.gelu
// CHECK-NOT: transfuse.gelu
// CHECK: return %[[G]], %[[G]]
func.func @cse_duplicates(%x: tensor<?x?x512xf32>) -> (tensor<?x?x2048xf32>, tensor<?x?x2048xf32>) {
  %w0 = transfuse.param "w" {init = #transfuse.init<xavier_uniform>} : tensor<2048x512xf32>
  %w1 = transfuse.param "w" {init = #transfuse.init<xavier_uniform>} : tensor<2048x512xf32>
  %0 = transfuse.matmul %x, %w0 {transpose_rhs = true} : (tensor<?x?x512xf32>, tensor<2048x512xf32>) -> tensor<?x?x2048xf32>
  %1 = transfuse.matmul %x, %w1 {transpose_rhs = true} : (tensor<?x?x512xf32>, tensor<2048x512xf32>) -> tensor<?x?x2048xf32>
  %2 = transfuse.gelu %0 {approximate = #transfuse.approximation<tanh>} : tensor<?x?x2048xf32>
  %3 = transfuse.gelu %1 {approximate = #transfuse.approximation<tanh>} : tensor<?x?x2048xf32>
  return %2, %3 : tensor<?x?x2048xf32>, tensor<?x?x2048xf32>
}

// -----

// Tests that ops differing in an attribute are not merged: a matmul with and
// without transpose_rhs, gelu with each approximation, params of different names.
// CHECK-LABEL: func.func @cse_distinct_attrs
// CHECK-COUNT-2: transfuse.param
// CHECK-COUNT-2: transfuse.matmul
// CHECK-COUNT-2: transfuse.gelu
// CHECK-NOT: transfuse.gelu
func.func @cse_distinct_attrs(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %a = transfuse.param "a" {init = #transfuse.init<zeros>} : tensor<4x4xf32>
  %b = transfuse.param "b" {init = #transfuse.init<zeros>} : tensor<4x4xf32>
  %0 = transfuse.matmul %x, %a : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = transfuse.matmul %x, %b {transpose_rhs = true} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = transfuse.gelu %x : tensor<4x4xf32>
  %3 = transfuse.gelu %x {approximate = #transfuse.approximation<tanh>} : tensor<4x4xf32>
  return %0, %1, %2, %3 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Tests that identical constants are merged into one.
// CHECK-LABEL: func.func @constants_merged
// CHECK: %[[C:.+]] = transfuse.constant dense<0xFF800000> : tensor<f32>
// CHECK-NOT: transfuse.constant
// CHECK: transfuse.select %{{[^ ]+}}, %{{[^ ]+}}, %[[C]]
// CHECK: transfuse.select %{{[^ ]+}}, %{{[^ ]+}}, %[[C]]
func.func @constants_merged(%m: tensor<?x?xi1>, %x: tensor<?x?xf32>, %y: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %c0 = transfuse.constant dense<0xFF800000> : tensor<f32>
  %0 = transfuse.select %m, %x, %c0 : (tensor<?x?xi1>, tensor<?x?xf32>, tensor<f32>) -> tensor<?x?xf32>
  %c1 = transfuse.constant dense<0xFF800000> : tensor<f32>
  %1 = transfuse.select %m, %y, %c1 : (tensor<?x?xi1>, tensor<?x?xf32>, tensor<f32>) -> tensor<?x?xf32>
  return %0, %1 : tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

// Tests that folds compose: once scale by 1.0, dropout 0 and the identity
// reshape are gone, the two remaining adds of the same operands are merged
// and dead ops disappear.
// CHECK-LABEL: func.func @folds_then_cse
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x512xf32>, %[[B:[^:]+]]: tensor<512xf32>)
// CHECK-NEXT: %[[A:.+]] = transfuse.add %[[X]], %[[B]]
// CHECK-NEXT: return %[[A]], %[[A]]
func.func @folds_then_cse(%x: tensor<?x512xf32>, %b: tensor<512xf32>) -> (tensor<?x512xf32>, tensor<?x512xf32>) {
  %0 = transfuse.scale %x {factor = 1.0 : f64} : tensor<?x512xf32>
  %1 = transfuse.dropout %x {rate = 0.0 : f64, seed = 0 : i64, stream = 0 : i64} : tensor<?x512xf32>
  %2 = transfuse.reshape %1 : (tensor<?x512xf32>) -> tensor<?x512xf32>
  %3 = transfuse.add %0, %b : (tensor<?x512xf32>, tensor<512xf32>) -> tensor<?x512xf32>
  %4 = transfuse.add %2, %b : (tensor<?x512xf32>, tensor<512xf32>) -> tensor<?x512xf32>
  %dead = transfuse.exp %4 : tensor<?x512xf32>
  return %3, %4 : tensor<?x512xf32>, tensor<?x512xf32>
}

// -----

// Tests that relu's derivative read from a dropout's output, of that same
// dropout's backward, becomes the derivative of the gradient before it
// scaled by 1/(1 - rate) (no second draw of the mask), and that a dropout
// with another key (stream), another step or a gelu derivative stays.
// CHECK-LABEL: func.func @relu_grad_through_dropout
// CHECK-SAME: (%[[H:[^:]+]]: tensor<?x8xf32>, %[[G:[^:]+]]: tensor<?x8xf32>, %[[S:[^:]+]]: index)
// CHECK: %[[D:.+]] = transfuse.dropout %[[H]] step %[[S]] {rate = 2.000000e-01 : f64, seed = 3 : i64, stream = 1 : i64}
// CHECK: %[[B:.+]] = transfuse.dropout %[[G]] step %[[S]] {rate = 2.000000e-01 : f64, seed = 3 : i64, stream = 1 : i64}
// CHECK: %[[K:.+]] = transfuse.scale %[[G]] {factor = 1.250000e+00 : f64}
// CHECK: %[[R:.+]] = transfuse.activation_grad %[[D]], %[[K]] {activation = #transfuse.activation<relu>}
// CHECK: %[[O:.+]] = transfuse.dropout %[[G]] step %[[S]] {rate = 2.000000e-01 : f64, seed = 3 : i64, stream = 2 : i64}
// CHECK: transfuse.activation_grad %[[D]], %[[O]] {activation = #transfuse.activation<relu>}
// CHECK: %[[T:.+]] = transfuse.dropout %[[G]] {rate = 2.000000e-01 : f64, seed = 3 : i64, stream = 1 : i64}
// CHECK: transfuse.activation_grad %[[D]], %[[T]] {activation = #transfuse.activation<relu>}
// CHECK: transfuse.activation_grad %[[D]], %[[B]] {activation = #transfuse.activation<gelu>}
func.func @relu_grad_through_dropout(%h: tensor<?x8xf32>, %g: tensor<?x8xf32>, %s: index) -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %d = transfuse.dropout %h step %s {rate = 2.0e-01 : f64, seed = 3 : i64, stream = 1 : i64} : tensor<?x8xf32>
  %back = transfuse.dropout %g step %s {rate = 2.0e-01 : f64, seed = 3 : i64, stream = 1 : i64} : tensor<?x8xf32>
  %r = transfuse.activation_grad %d, %back {activation = #transfuse.activation<relu>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  %other = transfuse.dropout %g step %s {rate = 2.0e-01 : f64, seed = 3 : i64, stream = 2 : i64} : tensor<?x8xf32>
  %r2 = transfuse.activation_grad %d, %other {activation = #transfuse.activation<relu>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  %nostep = transfuse.dropout %g {rate = 2.0e-01 : f64, seed = 3 : i64, stream = 1 : i64} : tensor<?x8xf32>
  %r3 = transfuse.activation_grad %d, %nostep {activation = #transfuse.activation<relu>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  %r4 = transfuse.activation_grad %d, %back {activation = #transfuse.activation<gelu>} : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  return %r, %r2, %r3, %r4 : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}
