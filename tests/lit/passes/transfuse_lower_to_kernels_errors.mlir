// RUN: transfuse-opt %s -split-input-file -verify-diagnostics --transfuse-lower-to-kernels

// Tests that an element type the kernels do not hold is one error on the op.
func.func @forward(%x: tensor<?x8xf16> {transfuse.name = "x"}) -> tensor<?x8xf16> attributes {transfuse.max_batch = 2 : i64} {
  // expected-error @+1 {{'transfuse.relu': element type f16 is not supported (f32, i32, i1 are)}}
  %y = transfuse.relu %x : tensor<?x8xf16>
  return %y : tensor<?x8xf16>
}

// -----

// Tests that attention with a boolean mask operand is refused by name.
func.func @forward(%q: tensor<2x2x4x8xf32> {transfuse.name = "q"}, %m: tensor<1x2x4x4xi1> {transfuse.name = "m"}) -> tensor<2x2x4x8xf32> {
  // expected-error @+1 {{'transfuse.attention': a boolean mask operand is not supported (causal and key_padding are)}}
  %o = transfuse.attention %q, %q, %q mask %m {scale = 0.125 : f64} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<1x2x4x4xi1>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// Tests that attention's gradient with a boolean mask operand is refused by name.
func.func @forward(%q: tensor<2x2x4x8xf32> {transfuse.name = "q"}, %m: tensor<1x2x4x4xi1> {transfuse.name = "m"}) -> tensor<2x2x4x8xf32> {
  // expected-error @+1 {{'transfuse.attention_grad': a boolean mask operand is not supported (causal and key_padding are)}}
  %dq, %dk, %dv = transfuse.attention_grad %q, %q, %q, %q mask %m {scale = 0.125 : f64} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<1x2x4x4xi1>) -> (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>)
  return %dq : tensor<2x2x4x8xf32>
}

// -----

// Tests that a linear whose residual may broadcast is refused.
func.func @forward(%x: tensor<?x8xf32> {transfuse.name = "x"}, %r: tensor<8xf32> {transfuse.name = "r"}) -> tensor<?x8xf32> attributes {transfuse.max_batch = 2 : i64} {
  %w = transfuse.param "w" {init = #transfuse.init<xavier_uniform>} : tensor<8x8xf32>
  // expected-error @+1 {{'transfuse.linear': a residual that may broadcast is not supported}}
  %y = transfuse.linear %x, %w residual %r : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// Tests that an op a fused region cannot compute is refused on that op.
func.func @forward(%x: tensor<?x8xf32> {transfuse.name = "x"}) -> tensor<?x8xf32> attributes {transfuse.max_batch = 2 : i64} {
  %y = transfuse.fused_elementwise %x : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    // expected-error @+1 {{'transfuse.constant': is not supported in a fused region}}
    %c = transfuse.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>
    %0 = transfuse.add %a, %c : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
    transfuse.yield %0 : tensor<?x8xf32>
  }
  return %y : tensor<?x8xf32>
}

// -----

// Tests that the caches of one call append one count of positions (the
// state has one length).
func.func @step(%a: tensor<?x2x?x4xf32> {transfuse.name = "a"}, %b: tensor<?x2x?x4xf32> {transfuse.name = "b"}) -> (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 6 : i64} {
  %k = transfuse.cache_append "k", %a : (tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  // expected-error @+1 {{'transfuse.cache_append' op appends a1_2 positions but an earlier cache_append appends a0_2 positions: one call advances every cache alike}}
  %v = transfuse.cache_append "v", %b : (tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  return %k, %v : tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>
}

// -----

// Tests that two ops naming one state tensor must agree on its heads.
func.func @step(%a: tensor<?x2x?x4xf32> {transfuse.name = "a"}, %b: tensor<?x4x?x4xf32> {transfuse.name = "b"}) attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 6 : i64} {
  transfuse.state_write "k", %a : tensor<?x2x?x4xf32>
  // expected-error @+1 {{'transfuse.state_write' op names state 'k' as 'tensor<2x4x6x4xf32>' but an earlier op names it 'tensor<2x2x6x4xf32>'}}
  transfuse.state_write "k", %b : tensor<?x4x?x4xf32>
  return
}
