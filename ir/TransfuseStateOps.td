//===- TransfuseStateOps.td - decoding state: the KV cache -----*- tablegen -*-===//
//
// Ops that read and write the persistent state of a decoding model (ABI 2:
// a tf_state object the caller creates from the model and passes to each
// call). A state tensor is named; every op naming it sees the same tensor,
// whose capacity is [rows, H, positions, D] at the compiled maxima (rows:
// transfuse.max_batch, positions: transfuse.max_seq_len). A call works on
// rows 0..B of it (B: the call's batch). The state's length L is the number
// of target positions cached so far; an entry that appends advances it by
// the count it appended, once, when it returns (ir/State.h).
//
// `keys` marks a tensor attention reads as K: a backend may store it
// transposed ([rows, H, D, positions], keys contiguous) for the decode
// attention kernel; the ops' semantics do not change.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_STATE_OPS_TD
#define TRANSFUSE_STATE_OPS_TD

class Transfuse_StateOp<string mnemonic, list<Trait> traits = []>
    : Op<Transfuse_Dialect, mnemonic, traits>;

def Transfuse_StateLengthOp : Transfuse_StateOp<"state_length",
    [MemoryEffects<[MemRead]>]> {
  let summary = "L: the target positions the state has cached before this call";
  let description = [{
    ```mlir
    %l = transfuse.state_length
    %pe = transfuse.positional_encoding %n offset %l : tensor<?x512xf32>
    ```
  }];
  let results = (outs Index:$result);
  let assemblyFormat = "attr-dict";
}

def Transfuse_CacheAppendOp : Transfuse_StateOp<"cache_append",
    [TF_ShapeRule, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "appends n positions to a cache and yields all L + n of them";
  let description = [{
    `input` [B, H, n, D] is written at positions L..L+n of rows 0..B of state
    tensor `name`; the result [B, H, L + n, D] is positions 0..L+n of those
    rows: the keys or values self-attention reads. L + n beyond the capacity
    is a run-time error naming the state and the limit.

    ```mlir
    %kc = transfuse.cache_append "kv.0.self.k", %k {keys} : (tensor<?x8x?x64xf32>) -> tensor<?x8x?x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, TF_FloatTensor:$input, UnitAttr:$keys);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$name `,` $input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Transfuse_StateWriteOp : Transfuse_StateOp<"state_write",
    [MemoryEffects<[MemWrite]>]> {
  let summary = "writes positions 0..S of state rows 0..B (an encoder's K or V)";
  let description = [{
    `input` [B, H, S, D] becomes positions 0..S of rows 0..B of state tensor
    `name`; `encode` writes each decoder layer's cross-attention K and V
    once per source batch.

    ```mlir
    transfuse.state_write "kv.0.cross.k", %k {keys} : tensor<?x8x?x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, TF_FloatTensor:$input, UnitAttr:$keys);
  let assemblyFormat = "$name `,` $input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Transfuse_StateReadOp : Transfuse_StateOp<"state_read",
    [TF_ShapeRule, MemoryEffects<[MemRead]>]> {
  let summary = "positions 0..S of state rows 0..B, as written by state_write";
  let description = [{
    The result [B, H, S, D] has one `sizes` operand per dynamic dimension,
    in order. A call reads what an earlier call wrote with the same B and S
    (decode_step passes the source tokens encode saw).

    ```mlir
    %k = transfuse.state_read "kv.0.cross.k" [%b, %s] {keys} : tensor<?x8x?x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Variadic<Index>:$sizes, UnitAttr:$keys);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$name `[` $sizes `]` attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // TRANSFUSE_STATE_OPS_TD
