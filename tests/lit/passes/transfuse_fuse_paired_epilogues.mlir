// RUN: transfuse-opt %s -split-input-file --transfuse-fuse-linear-epilogue="remarks=true" -verify-diagnostics | FileCheck %s

// The paired epilogues of --transfuse-fuse-linear-epilogue: after the
// matmuls become linears, act(z₁)·z₂ of a product split in two halves
// becomes one linear {gated} (SwiGLU), and transfuse.rotary of the leading
// parts of a product (Q and K of a merged Q/K/V projection, or a lone Q)
// becomes one linear with `rotary`. Remarks are reported at the matmul.

// Tests that silu(gate)·up of a merged gate/up product (the projections
// fusion's split) becomes one gated linear whose result is the up half's.
// CHECK-LABEL: func.func @swiglu
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[W:[^:]+]]: {{[^,]+}})
// CHECK-NEXT: %[[Y:.+]] = transfuse.linear %[[X]], %[[W]] {activation = #transfuse.activation<silu>, gated, transpose_weight} : (tensor<?x?x64xf32>, tensor<256x64xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: return %[[Y]]
func.func @swiglu(%x: tensor<?x?x64xf32>, %w: tensor<256x64xf32>) -> tensor<?x?x128xf32> {
  // expected-remark@+2 {{linear_epilogue: not fused: no bias, activation or residual add follows the matmul}}
  // expected-remark@+1 {{gated_linear: fused}}
  %0 = transfuse.matmul %x, %w {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<256x64xf32>) -> tensor<?x?x256xf32>
  %1:2 = transfuse.split %0 {axis = 2 : i64, sizes = array<i64: 128, 128>} : (tensor<?x?x256xf32>) -> (tensor<?x?x128xf32>, tensor<?x?x128xf32>)
  %2 = transfuse.silu %1#0 : tensor<?x?x128xf32>
  %3 = transfuse.mul %1#1, %2 : (tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  return %3 : tensor<?x?x128xf32>
}

// -----

// Tests that a bias stays with the gated linear and that GeGLU (gelu) fuses
// alike.
// CHECK-LABEL: func.func @geglu_bias
// CHECK: transfuse.linear %{{[^ ,]+}}, %{{[^ ,]+}} bias %{{[^ ]+}} {activation = #transfuse.activation<gelu>, gated} : (tensor<4x8x32xf32>, tensor<32x96xf32>, tensor<96xf32>) -> tensor<4x8x48xf32>
// CHECK-NOT: transfuse.split
func.func @geglu_bias(%x: tensor<4x8x32xf32>, %w: tensor<32x96xf32>, %b: tensor<96xf32>) -> tensor<4x8x48xf32> {
  // expected-remark@+2 {{linear_epilogue: fused}}
  // expected-remark@+1 {{gated_linear: fused}}
  %0 = transfuse.matmul %x, %w : (tensor<4x8x32xf32>, tensor<32x96xf32>) -> tensor<4x8x96xf32>
  %1 = transfuse.add %0, %b : (tensor<4x8x96xf32>, tensor<96xf32>) -> tensor<4x8x96xf32>
  %2:2 = transfuse.split %1 {axis = 2 : i64, sizes = array<i64: 48, 48>} : (tensor<4x8x96xf32>) -> (tensor<4x8x48xf32>, tensor<4x8x48xf32>)
  %3 = transfuse.gelu %2#0 : tensor<4x8x48xf32>
  %4 = transfuse.mul %3, %2#1 : (tensor<4x8x48xf32>, tensor<4x8x48xf32>) -> tensor<4x8x48xf32>
  return %4 : tensor<4x8x48xf32>
}

// -----

// Tests that separate gate and up products of one input are not gated here
// (the projections fusion merges them first), with the reason.
// CHECK-LABEL: func.func @separate_gate_up
// CHECK-NOT: gated
func.func @separate_gate_up(%x: tensor<?x?x64xf32>, %wg: tensor<128x64xf32>, %wu: tensor<128x64xf32>) -> tensor<?x?x128xf32> {
  // expected-remark@+2 {{linear_epilogue: fused}}
  // expected-remark@+1 {{gated_linear: not fused: its gate and up products are separate (the projections fusion merges them into one)}}
  %0 = transfuse.matmul %x, %wg {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  %1 = transfuse.silu %0 : tensor<?x?x128xf32>
  // expected-remark@+1 {{linear_epilogue: not fused: no bias, activation or residual add follows the matmul}}
  %2 = transfuse.matmul %x, %wu {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  %3 = transfuse.mul %1, %2 : (tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  return %3 : tensor<?x?x128xf32>
}

// -----

// Tests that an activation of the second half (the gate last) is not gated,
// with the reason.
// CHECK-LABEL: func.func @gate_second
// CHECK-NOT: gated
func.func @gate_second(%x: tensor<?x?x64xf32>, %w: tensor<256x64xf32>) -> tensor<?x?x128xf32> {
  // expected-remark@+2 {{linear_epilogue: not fused: no bias, activation or residual add follows the matmul}}
  // expected-remark@+1 {{gated_linear: not fused: the activation reads the second half (the gate must be the first half of the merged product)}}
  %0 = transfuse.matmul %x, %w {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<256x64xf32>) -> tensor<?x?x256xf32>
  %1:2 = transfuse.split %0 {axis = 2 : i64, sizes = array<i64: 128, 128>} : (tensor<?x?x256xf32>) -> (tensor<?x?x128xf32>, tensor<?x?x128xf32>)
  %2 = transfuse.silu %1#1 : tensor<?x?x128xf32>
  %3 = transfuse.mul %1#0, %2 : (tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  return %3 : tensor<?x?x128xf32>
}

// -----

// Tests that Q and K of a merged Q/K/V product (with the Qwen2 bias),
// rotated at the cache's length, become one linear rotating its first 96
// columns; V stays a plain part of the split.
// CHECK-LABEL: func.func @qkv_rotary
// CHECK-SAME: (%[[X:[^:]+]]: {{[^,]+}}, %[[W:[^:]+]]: {{[^,]+}}, %[[B:[^:]+]]: {{[^,]+}}, %[[F:[^:]+]]: {{[^,]+}}, %[[N:[^:]+]]: index)
// CHECK-NEXT: %[[Y:.+]] = transfuse.linear %[[X]], %[[W]] bias %[[B]] rotary %[[F]] offset %[[N]] {head_dim = 16 : i64, rotary_columns = 96 : i64, transpose_weight} : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>, tensor<8xf32>, index) -> tensor<?x?x128xf32>
// CHECK-NEXT: %[[S:.+]]:3 = transfuse.split %[[Y]] {axis = 2 : i64, sizes = array<i64: 64, 32, 32>}
// CHECK-NEXT: return %[[S]]#0, %[[S]]#1, %[[S]]#2
func.func @qkv_rotary(%x: tensor<?x?x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>, %f: tensor<8xf32>, %n: index) -> (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) {
  // expected-remark@+2 {{linear_epilogue: fused}}
  // expected-remark@+1 {{rotary_linear: fused}}
  %0 = transfuse.matmul %x, %w {transpose_rhs = true} : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  %1 = transfuse.add %0, %b : (tensor<?x?x128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  %2:3 = transfuse.split %1 {axis = 2 : i64, sizes = array<i64: 64, 32, 32>} : (tensor<?x?x128xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>)
  %q = transfuse.rotary %2#0, %f offset %n {head_dim = 16 : i64} : (tensor<?x?x64xf32>, tensor<8xf32>, index) -> tensor<?x?x64xf32>
  %k = transfuse.rotary %2#1, %f offset %n {head_dim = 16 : i64} : (tensor<?x?x32xf32>, tensor<8xf32>, index) -> tensor<?x?x32xf32>
  return %q, %k, %2#2 : tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>
}

// -----

// Tests that a lone rotated projection (no merge) rotates all its columns,
// positions from 0 without an offset.
// CHECK-LABEL: func.func @lone_rotary
// CHECK-NEXT: %[[Y:.+]] = transfuse.linear %{{[^ ,]+}}, %{{[^ ,]+}} rotary %{{[^ ]+}} {head_dim = 8 : i64, rotary_columns = 32 : i64} : (tensor<2x5x16xf32>, tensor<16x32xf32>, tensor<4xf32>) -> tensor<2x5x32xf32>
// CHECK-NEXT: return %[[Y]]
func.func @lone_rotary(%x: tensor<2x5x16xf32>, %w: tensor<16x32xf32>, %f: tensor<4xf32>) -> tensor<2x5x32xf32> {
  // expected-remark@+2 {{linear_epilogue: not fused: no bias, activation or residual add follows the matmul}}
  // expected-remark@+1 {{rotary_linear: fused}}
  %0 = transfuse.matmul %x, %w : (tensor<2x5x16xf32>, tensor<16x32xf32>) -> tensor<2x5x32xf32>
  %1 = transfuse.rotary %0, %f {head_dim = 8 : i64} : (tensor<2x5x32xf32>, tensor<4xf32>) -> tensor<2x5x32xf32>
  return %1 : tensor<2x5x32xf32>
}

// -----

// Tests that a partial rotary (2 of each head's 8 columns in pairs, GPT-NeoX's
// rotary_pct) is not fused, with the reason.
// CHECK-LABEL: func.func @partial_rotary
// CHECK: transfuse.rotary
func.func @partial_rotary(%x: tensor<2x5x16xf32>, %w: tensor<16x32xf32>, %f: tensor<2xf32>) -> tensor<2x5x32xf32> {
  // expected-remark@+1 {{linear_epilogue: not fused: no bias, activation or residual add follows the matmul}}
  %0 = transfuse.matmul %x, %w : (tensor<2x5x16xf32>, tensor<16x32xf32>) -> tensor<2x5x32xf32>
  // expected-remark@+1 {{rotary_linear: not fused: a partial rotary (fewer rotated columns than head_dim) is not fused}}
  %1 = transfuse.rotary %0, %f {head_dim = 8 : i64} : (tensor<2x5x32xf32>, tensor<2xf32>) -> tensor<2x5x32xf32>
  return %1 : tensor<2x5x32xf32>
}

// -----

// Tests that a rotated part after an unrotated one is not fused (the rotary
// columns are the leading ones), with the reason.
// CHECK-LABEL: func.func @rotated_not_leading
// CHECK: transfuse.rotary
func.func @rotated_not_leading(%x: tensor<2x5x16xf32>, %w: tensor<16x48xf32>, %f: tensor<4xf32>) -> (tensor<2x5x16xf32>, tensor<2x5x32xf32>) {
  // expected-remark@+2 {{linear_epilogue: not fused: no bias, activation or residual add follows the matmul}}
  // expected-remark@+1 {{rotary_linear: not fused: the rotated parts are not the product's leading columns}}
  %0 = transfuse.matmul %x, %w : (tensor<2x5x16xf32>, tensor<16x48xf32>) -> tensor<2x5x48xf32>
  %1:2 = transfuse.split %0 {axis = 2 : i64, sizes = array<i64: 16, 32>} : (tensor<2x5x48xf32>) -> (tensor<2x5x16xf32>, tensor<2x5x32xf32>)
  %2 = transfuse.rotary %1#1, %f {head_dim = 8 : i64} : (tensor<2x5x32xf32>, tensor<4xf32>) -> tensor<2x5x32xf32>
  return %1#0, %2 : tensor<2x5x16xf32>, tensor<2x5x32xf32>
}
