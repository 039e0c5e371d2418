//===- KernelOps.td - the kernel-level IR (tfk) ---------------*- tablegen -*-===//
//
// The kernel-level IR sits between the fused transfuse graph and the
// backends' printers (docs/codegen.md). An entry point is a function with no
// arguments and no results: storage ops name where data lives (the call's
// inputs and outputs, parameters, constants, arena slots) as memrefs, views
// reinterpret them (a reshape, the head view of a projection's output), and
// destination-style kernel ops read and write them, one op per call of
// runtime/kernels or runtime/exec. Every dynamic size is an index value:
// dimension d of input n (`tfk.input_dim`), a sum (`arith.addi`) or a
// broadcast (`tfk.broadcast_dim`), computed once at the top of the entry.
//
// Passes over it: --transfuse-lower-to-kernels (from the fused graph),
// --transfuse-kernel-views (copies around attention become strided views),
// --transfuse-plan-memory (each alloc gets its arena offset and room).
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_KERNEL_OPS_TD
#define TRANSFUSE_KERNEL_OPS_TD

include "ir/TransfuseAttrs.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "ir/KernelInterfaces.td"

def TFK_Dialect : Dialect {
  let name = "tfk";
  let cppNamespace = "::mlir::transfuse::kernel";
  let summary = "kernel-level IR: kernel calls on views of planned storage";
  let description = [{
    Destination-style ops on memrefs, each naming one kernel of
    runtime/kernels or one generic op of runtime/exec. A printer (the CPU
    backend today, CUDA next) turns each op into a call; everything above
    the printers (sizes, views, the memory plan) is shared.
  }];
  // transfuse: its attributes (activation) are the GEMM's defaults.
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::transfuse::TransfuseDialect"];
  // tfk.arena_bytes and tfk.device on entry functions.
  let hasOperationAttrVerify = 1;
}

class TFK_Op<string mnemonic, list<Trait> traits = []>
    : Op<TFK_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Sizes
//===----------------------------------------------------------------------===//

def TFK_InputDimOp : TFK_Op<"input_dim", [Pure]> {
  let summary = "dimension `dim` of the call's input `input` (a<input>_<dim>)";
  let description = [{
    Dimension 0 of every input is the one batch size (docs/ir.md), bounded
    by the function's `transfuse.max_batch`; other dynamic dimensions by
    `transfuse.max_seq_len`.
  }];
  let arguments = (ins I64Attr:$input, I64Attr:$dim);
  let results = (outs Index:$size);
  let assemblyFormat = "$input `,` $dim attr-dict";
}

def TFK_BroadcastDimOp : TFK_Op<"broadcast_dim", [Pure]> {
  let summary = "the size dynamic sizes broadcast into (each must be it or 1)";
  let description = [{
    Their maximum; a printer checks at the start of the call that every
    term is that maximum or 1.
  }];
  let arguments = (ins Variadic<Index>:$terms);
  let results = (outs Index:$size);
  let assemblyFormat = "$terms attr-dict";
}

def TFK_StateLengthOp : TFK_Op<"state_length", [Pure]> {
  let summary = "L: the positions the call's state held when the call started";
  let description = [{
    The entry advances it once, at its end (`tfk.advance`), so every use in
    one call sees the same value.
  }];
  let results = (outs Index:$size);
  let assemblyFormat = "attr-dict";
}

def TFK_CheckOp : TFK_Op<"check"> {
  let summary = "a condition on sizes checked at the start of a call";
  let description = [{
    `tfk.check "le" %a, %b, "message"`: the call fails with `message` unless
    a <= b (`"eq"`: a == b). A slice with a dynamic length and an attention
    bias's key dimension carry one.
  }];
  let arguments = (ins StrAttr:$predicate, Index:$lhs, Index:$rhs, StrAttr:$message);
  let assemblyFormat = "$predicate $lhs `,` $rhs `,` $message attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Storage and views
//===----------------------------------------------------------------------===//

class TFK_SizedStorageOp<string mnemonic, list<Trait> traits = []>
    : TFK_Op<mnemonic, !listconcat(traits, [TFK_SizedInterface])> {
  let hasVerifier = 1;
}

def TFK_InputOp : TFK_SizedStorageOp<"input", [Pure]> {
  let summary = "the caller's buffer of input `index` (read only)";
  let arguments = (ins I64Attr:$index, Variadic<Index>:$sizes);
  let results = (outs AnyMemRef:$view);
  let assemblyFormat = "$index (`[` $sizes^ `]`)? attr-dict `:` type($view)";
}

def TFK_OutputOp : TFK_SizedStorageOp<"output", [Pure]> {
  let summary = "the caller's buffer of output `index`, written in place";
  let arguments = (ins I64Attr:$index, Variadic<Index>:$sizes);
  let results = (outs AnyMemRef:$view);
  let assemblyFormat = "$index (`[` $sizes^ `]`)? attr-dict `:` type($view)";
}

def TFK_ParamOp : TFK_Op<"param", [Pure]> {
  let summary = "a parameter of the model by name (a weight or a prepared value)";
  let description = [{
    `prepared`: an output of `@prepare` (docs/codegen.md), not a weight.
    `written`: the entry updates it in place (a training step; docs/codegen.md,
    the ABI plan), so no printer may treat it as constant across calls.
  }];
  let arguments = (ins StrAttr:$name, UnitAttr:$prepared, UnitAttr:$written);
  let results = (outs AnyStaticShapeMemRef:$view);
  let assemblyFormat = "$name attr-dict `:` type($view)";
}

def TFK_ConstantOp : TFK_Op<"constant", [Pure]> {
  let summary = "a constant array of the generated code";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyStaticShapeMemRef:$view);
  let assemblyFormat = "$value attr-dict `:` type($view)";
}

def TFK_StateOp : TFK_SizedStorageOp<"state", [Pure]> {
  let summary = "a persistent state tensor by name (a KV cache), kept between calls";
  let description = [{
    Storage of a `tf_state` object (the ABI plan of docs/codegen.md), read
    and written by the entries that take that state; the memory plan never
    places it in the arena. Its sizes are its current extent (the capacity
    comes from the compiled maxima).

    ```mlir
    %k = tfk.state "kv.decoder.0.self.k" [%b, %t] : memref<?x8x?x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Variadic<Index>:$sizes);
  let results = (outs AnyMemRef:$view);
  let assemblyFormat = "$name (`[` $sizes^ `]`)? attr-dict `:` type($view)";
}

def TFK_AllocOp : TFK_SizedStorageOp<"alloc", [MemoryEffects<[MemAlloc]>]> {
  let summary = "an intermediate buffer of the call, a slot of its arena";
  let description = [{
    `--transfuse-plan-memory` sets `offset` and `bytes`: the slot's place in
    the call's arena and its room at the compiled maxima (a call whose sizes
    need more is refused before any kernel runs).
  }];
  let arguments = (ins Variadic<Index>:$sizes, OptionalAttr<I64Attr>:$offset,
                   OptionalAttr<I64Attr>:$bytes);
  let results = (outs AnyMemRef:$view);
  let assemblyFormat = "(`[` $sizes^ `]`)? attr-dict `:` type($view)";
}

def TFK_ReshapeOp : TFK_SizedStorageOp<"reshape", [Pure]> {
  let summary = "the same contiguous elements under another shape";
  let arguments = (ins AnyMemRef:$source, Variadic<Index>:$sizes);
  let results = (outs AnyMemRef:$view);
  let assemblyFormat = [{
    $source (`[` $sizes^ `]`)? attr-dict `:` type($source) `to` type($view)
  }];
}

def TFK_HeadsOp : TFK_SizedStorageOp<"heads", [Pure]> {
  let summary = "a [B, H, S, D] view of columns of a [B, S, N] buffer";
  let description = [{
    Element (b, h, s, d) is element (b, s, column + h·D + d) of the source;
    a rank-4 source [B, S, H', D] is read as [B, S, H'·D]. Attention reads
    Q, K and V out of the projection GEMM's output this way, and writes its
    output into the [B, S, H, D] buffer the next GEMM reads.

    ```mlir
    %q = tfk.heads %qkv column 512 [%b, %s] : memref<?x?x1536xf32> to memref<?x8x?x64xf32, strided<[?, 64, 1536, 1], offset: 512>>
    ```
  }];
  let arguments = (ins AnyMemRef:$source, I64Attr:$column, Variadic<Index>:$sizes);
  let results = (outs AnyMemRef:$view);
  let assemblyFormat = [{
    $source `column` $column (`[` $sizes^ `]`)? attr-dict `:` type($source) `to` type($view)
  }];
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

def TFK_StateWriteOp : TFK_Op<"state_write"> {
  let summary = "exec::stateWrite: positions pos..pos+n of state rows 0..B from input";
  let description = [{
    `input` [B, H, n, D] (any strides: a head view of a projection) goes to
    positions `position`..`position`+n of rows 0..B of `state`, whose type
    is its capacity: [R, H, T, D], or with `keys` [R, H, D, T] (K stored
    transposed for tfk.decode_attention). The lowering checks B <= R and
    position + n <= T before the call starts.
    ```mlir
    tfk.state_write %k into %cache at %l {keys} : memref<?x8x1x64xf32> into memref<32x8x64x512xf32>
    ```
  }];
  let arguments = (ins AnyMemRef:$input, AnyStaticShapeMemRef:$state, Index:$position,
                   UnitAttr:$keys);
  let assemblyFormat = [{
    $input `into` $state `at` $position attr-dict `:` type($input) `into` type($state)
  }];
}

def TFK_StateReadOp : TFK_Op<"state_read"> {
  let summary = "exec::stateRead: positions 0..S of state rows 0..B into a dense buffer";
  let description = [{
    `out` [B, H, S, D] (its sizes say how much) from `state` as in
    tfk.state_write. Kernels that read a state in place (decode attention)
    need none; --transfuse-kernel-views removes the ones they replace.
  }];
  let arguments = (ins AnyStaticShapeMemRef:$state, AnyMemRef:$out, UnitAttr:$keys);
  let assemblyFormat = "$state `into` $out attr-dict `:` type($state) `into` type($out)";
}

def TFK_AdvanceOp : TFK_Op<"advance"> {
  let summary = "the state's length grows by `count`: the entry's last act";
  let arguments = (ins Index:$count);
  let assemblyFormat = "$count attr-dict";
}

def TFK_DecodeAttentionOp : TFK_Op<"decode_attention"> {
  let summary = "kernels::decodeAttention: a few queries against a KV cache in place";
  let description = [{
    Q [B, H, Sq, D] and the output are views as for tfk.attention; `key`
    and `value` are state tensors at their capacity, K transposed ([R, H,
    D, T]: keys contiguous) and V [R, H, T, D], of which the first
    `key_len` positions of rows 0..B are read. `key_padding` [B, key_len]
    (i1, true = keep) and `causal` (bottom-right aligned) as for attention.
    ```mlir
    tfk.decode_attention %q, %k, %v keys %len into %o {causal, scale = 0.125 : f64} : memref<?x8x1x64xf32>, memref<32x8x64x512xf32>, memref<32x8x512x64xf32> into memref<?x8x1x64xf32>
    ```
  }];
  let arguments = (ins AnyMemRef:$query, AnyStaticShapeMemRef:$key, AnyStaticShapeMemRef:$value,
                   Optional<AnyMemRef>:$key_padding, Index:$key_len, AnyMemRef:$out,
                   F64Attr:$scale, UnitAttr:$causal);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`key_padding` $key_padding^)? `keys` $key_len `into` $out
    attr-dict `:` type($query) `,` type($key) `,` type($value)
    (`,` type($key_padding)^)? `into` type($out)
  }];
}

def TFK_GemmOp : TFK_Op<"gemm", [AttrSizedOperandSegments]> {
  let summary = "kernels::gemm: out = act(input · W + bias) + residual";
  let description = [{
    `input` is [.., K], `out` [.., N] (the leading dimensions are the rows);
    W is [K, N], or [N, K] with `transpose_weight`. `packed`: W is a
    parameter and the GEMM reads the panels packed from it at load.
    With `derivative_of` `pre` ([.., N], transfuse.linear_input_grad):
    out = (scale · input·W) · f'(pre), f' the derivative of `derivative`
    (no bias, activation or residual then). `gated` and `rotary` are
    transfuse.linear's paired epilogues (out is [.., N/2] when gated; the
    rotary's positions are along out's dimension -2, from `offset`).
  }];
  let arguments = (ins AnyMemRef:$input, AnyMemRef:$weight, Optional<AnyMemRef>:$bias,
                   Optional<AnyMemRef>:$residual, Optional<AnyMemRef>:$pre,
                   Optional<AnyMemRef>:$inv_freq, Optional<Index>:$offset, AnyMemRef:$out,
                   UnitAttr:$transpose_weight, UnitAttr:$packed,
                   DefaultValuedAttr<TF_ActivationAttr, "::mlir::transfuse::Activation::None">:$activation,
                   DefaultValuedAttr<TF_ActivationAttr, "::mlir::transfuse::Activation::None">:$derivative,
                   DefaultValuedAttr<F64Attr, "1.0">:$scale,
                   UnitAttr:$gated,
                   DefaultValuedAttr<I64Attr, "0">:$rotary_columns,
                   DefaultValuedAttr<I64Attr, "0">:$head_dim);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? (`residual` $residual^)?
    (`derivative_of` `(` $pre^ `:` type($pre) `)`)?
    (`rotary` `(` $inv_freq^ `:` type($inv_freq) `)`)? (`offset` $offset^)? `into` $out attr-dict `:`
    type($input) `,` type($weight) (`,` type($bias)^)? (`,` type($residual)^)? `into` type($out)
  }];
  let hasVerifier = 1;
}

def TFK_MatmulOp : TFK_Op<"matmul"> {
  let summary = "exec::matmul: a batched matmul of two activations";
  let arguments = (ins AnyMemRef:$lhs, AnyMemRef:$rhs, AnyMemRef:$out,
                   UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let assemblyFormat = [{
    $lhs `,` $rhs `into` $out attr-dict `:` type($lhs) `,` type($rhs) `into` type($out)
  }];
}

def TFK_AttentionOp : TFK_Op<"attention", [AttrSizedOperandSegments]> {
  let summary = "kernels::attention: softmax(scale·Q·Kᵀ + masks)·V";
  let description = [{
    Q [B, H, Sq, D], K and V [B, H, Sk, D] and the output [B, H, Sq, D]
    are views with any batch, head and row strides (`tfk.heads`);
    `key_padding` is [B, Sk] (i1, true = a padded key), `bias` an
    additive mask broadcast to [B, H, Sq, Sk]. A `dropout_rate` > 0
    drops probabilities as transfuse.attention defines it, keyed by
    `dropout_seed` plus the call's seed, the call's step and
    `dropout_stream` (training).
  }];
  let arguments = (ins AnyMemRef:$query, AnyMemRef:$key, AnyMemRef:$value,
                   Optional<AnyMemRef>:$key_padding, Optional<AnyMemRef>:$bias,
                   AnyMemRef:$out, F64Attr:$scale, UnitAttr:$causal,
                   DefaultValuedAttr<F64Attr, "0.0">:$dropout_rate,
                   DefaultValuedAttr<I64Attr, "0">:$dropout_seed,
                   DefaultValuedAttr<I64Attr, "0">:$dropout_stream);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`key_padding` $key_padding^)? (`bias` $bias^)? `into` $out
    attr-dict `:` type($query) `,` type($key) `,` type($value)
    (`,` type($key_padding)^)? (`,` type($bias)^)? `into` type($out)
  }];
}

def TFK_AddLayerNormOp : TFK_Op<"add_layer_norm", [AttrSizedOperandSegments]> {
  let summary = "kernels::addLayerNorm: out = layer_norm(input + residual), sum = the sum";
  let description = [{
    Over the last dimension. `input` has the output's sizes; `residual`
    has them too, or is a trailing block of them ([T, D] into [B, T, D]),
    which the printer runs as one call per block.
  }];
  let arguments = (ins AnyMemRef:$input, AnyMemRef:$residual, AnyMemRef:$gamma,
                   Optional<AnyMemRef>:$beta, AnyMemRef:$out, Optional<AnyMemRef>:$sum,
                   F64Attr:$epsilon, UnitAttr:$rms);
  let assemblyFormat = [{
    $input `,` $residual `,` $gamma (`,` $beta^)? `into` $out (`sum` $sum^)? attr-dict `:`
    type($input) `,` type($residual) `,` type($gamma) (`,` type($beta)^)? `into` type($out)
    (`,` type($sum)^)?
  }];
}

def TFK_LayerNormOp : TFK_Op<"layer_norm"> {
  let summary = "kernels::layerNorm (or rmsNorm with `rms`) over dimensions [axis, rank)";
  let arguments = (ins AnyMemRef:$input, AnyMemRef:$gamma, Optional<AnyMemRef>:$beta,
                   AnyMemRef:$out, I64Attr:$axis, F64Attr:$epsilon, UnitAttr:$rms);
  let assemblyFormat = [{
    $input `,` $gamma (`,` $beta^)? `into` $out attr-dict `:` type($input) `,` type($gamma)
    (`,` type($beta)^)? `into` type($out)
  }];
}

def TFK_ElementwiseOp : TFK_Op<"elementwise", [IsolatedFromAbove, SingleBlock]> {
  let summary = "one generated loop over the output computing a region of elementwise ops";
  let description = [{
    The body is the fused_elementwise region it came from (transfuse ops on
    tensors of the inputs' types). `kinds` says how each input is read:
    `full` (the output's sizes), `trailing` (a trailing block repeated over
    the leading rows), `splat` (one value), `strided` (any other broadcast).
    With `vector` the printer writes Highway code over rows of the last
    dimension, otherwise a scalar loop with broadcast strides.
  }];
  let arguments = (ins Variadic<AnyMemRef>:$inputs, AnyMemRef:$out, StrArrayAttr:$kinds,
                   UnitAttr:$vector);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $inputs `into` $out attr-dict `:` type($inputs) `into` type($out) $body
  }];
  let hasVerifier = 1;
}

def TFK_YieldOp : TFK_Op<"yield", [Terminator, HasParent<"ElementwiseOp">]> {
  let summary = "yields the value a tfk.elementwise body computes";
  let arguments = (ins AnyRankedTensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// Calls of runtime/exec (the generic primitives) and of the training kernels
//===----------------------------------------------------------------------===//

// The operand counts a call takes: `ins` between minIns and maxIns (-1: any
// number), `outs` exactly numOuts (KernelDialect.h, CallArity).
class TFK_CallArity<int minIns, int maxIns, int numOuts>
    : ParamNativeOpTrait<"CallArity", minIns # ", " # maxIns # ", " # numOuts> {
  let cppNamespace = "::mlir::transfuse::kernel";
}

// One call: reads `ins` (memrefs, or index values such as a positional
// table's offset) and writes `outs`; its other arguments are the typed
// attributes `attrs`. Every call prints the same way:
//   tfk.softmax (%x : memref<?x8x?x?xf32>) into (%y : memref<?x8x?x?xf32>) {axis = 3 : i64}
class TFK_CallOp<string mnemonic, string callSummary, int minIns, int maxIns, int numOuts,
                 dag attrs = (ins)>
    : TFK_Op<mnemonic, [AttrSizedOperandSegments, TFK_CallInterface,
                        TFK_CallArity<minIns, maxIns, numOuts>]> {
  let summary = callSummary;
  let arguments = !con((ins Variadic<AnyType>:$ins, Variadic<AnyMemRef>:$outs), attrs);
  let assemblyFormat = [{
    (`(` $ins^ `:` type($ins) `)`)? `into` `(` $outs `:` type($outs) `)` attr-dict
  }];
}

def TFK_GatherOp : TFK_CallOp<"gather", "rows of a table [V, D] by ids; `what` names the ids",
                              2, 2, 1, (ins DefaultValuedStrAttr<StrAttr, "an operand">:$what)>;
def TFK_BinaryOp : TFK_CallOp<"binary",
    "an elementwise formula of two operands broadcast as NumPy does (`kind`: kAdd, ...)",
    2, 2, 1, (ins StrAttr:$kind)> {
  let hasVerifier = 1;
}
def TFK_UnaryOp : TFK_CallOp<"unary", "an elementwise formula of one operand (`kind`: kExp, ...)",
                             1, 1, 1, (ins StrAttr:$kind)> {
  let hasVerifier = 1;
}
def TFK_ScaleOp : TFK_CallOp<"scale", "out = input · factor", 1, 1, 1, (ins F64Attr:$factor)>;
def TFK_SelectOp : TFK_CallOp<"select", "out = cond ? a : b, broadcast as NumPy does", 3, 3, 1>;
def TFK_SoftmaxOp : TFK_CallOp<"softmax", "softmax along `axis` (all-masked rows give zeros)",
                               1, 1, 1, (ins I64Attr:$axis)>;
def TFK_TransposeOp : TFK_CallOp<"transpose", "out = input with its dimensions permuted",
                                 1, 1, 1, (ins DenseI64ArrayAttr:$permutation)>;
def TFK_ConcatOp : TFK_CallOp<"concat", "the inputs joined along `axis`", 1, -1, 1,
                              (ins I64Attr:$axis)>;
def TFK_SliceOp : TFK_CallOp<"slice",
    "rows [start (+ the optional index operand), + out's extent) of `axis`",
    1, 2, 1, (ins I64Attr:$axis, I64Attr:$start)>;
def TFK_ReduceOp : TFK_CallOp<"reduce",
    "a sum, mean or max (`kind`: kSum, kMean, kMax) over the axes set in `axes_mask`",
    1, 1, 1, (ins StrAttr:$kind, I64Attr:$axes_mask)> {
  let hasVerifier = 1;
}
def TFK_KeyPaddingMaskOp : TFK_CallOp<"key_padding_mask", "tokens != pad_id as an i1 keep-mask",
                                      1, 1, 1, (ins I64Attr:$pad_id)>;
def TFK_CausalMaskOp : TFK_CallOp<"causal_mask",
    "the [Sq, Sk] causal keep-mask (bottom-right aligned) from two index operands", 2, 2, 1>;
def TFK_PositionalEncodingOp : TFK_CallOp<"positional_encoding",
    "the sinusoidal table's rows [offset, offset + length) (index operands)", 1, 2, 1,
    (ins UnitAttr:$halves)>;
def TFK_RotaryOp : TFK_CallOp<"rotary",
    "the rotary embedding of transfuse.rotary (input, inv_freq, an optional offset)", 2, 3, 1,
    (ins I64Attr:$head_dim, UnitAttr:$inverse)>;
def TFK_CopyOp : TFK_CallOp<"copy", "out = input, byte for byte", 1, 1, 1>;
def TFK_DropoutOp : TFK_CallOp<"dropout",
    "Philox dropout keyed by seed + the call's seed, the call's step (+ an index operand), stream",
    1, 2, 1, (ins F64Attr:$rate, I64Attr:$seed, I64Attr:$stream)>;
def TFK_CrossEntropyOp : TFK_CallOp<"cross_entropy",
    "the mean cross-entropy of logits [.., V] against labels; `what` names the labels",
    2, 2, 1, (ins StrAttr:$what, F64Attr:$label_smoothing, I64Attr:$ignore_index)>;
def TFK_CrossEntropyGradOp : TFK_CallOp<"cross_entropy_grad",
    "d(cross_entropy)/d(logits) times the incoming scalar gradient",
    3, 3, 1, (ins StrAttr:$what, F64Attr:$label_smoothing, I64Attr:$ignore_index)>;
def TFK_EmbeddingGradOp : TFK_CallOp<"embedding_grad",
    "the table's gradient: rows of the gradient summed by id", 2, 2, 1, (ins StrAttr:$what)>;
def TFK_ActivationGradOp : TFK_CallOp<"activation_grad", "out = grad · f'(input)", 2, 2, 1,
    (ins TF_ActivationAttr:$activation)> {
  let hasVerifier = 1;
}
def TFK_LayerNormGradOp : TFK_CallOp<"layer_norm_grad",
    "dx, dgamma, dbeta of layer_norm (RMSNorm with `rms`) over [axis, rank) (input, gamma, grad)",
    3, 3, 3, (ins I64Attr:$axis, F64Attr:$epsilon, UnitAttr:$rms)>;
def TFK_AttentionGradOp : TFK_CallOp<"attention_grad",
    "dQ, dK, dV of tfk.attention (Q, K, V, dO and an optional key padding)",
    4, 5, 3, (ins F64Attr:$scale, UnitAttr:$causal, F64Attr:$dropout_rate,
                  I64Attr:$dropout_seed, I64Attr:$dropout_stream)>;
def TFK_ExpandOp : TFK_CallOp<"expand", "input broadcast to out's sizes", 1, 1, 1>;
def TFK_WeightGradOp : TFK_CallOp<"weight_grad", "out [K, N] = inputᵀ · grad over all rows",
                                  2, 2, 1>;
def TFK_SliceGradOp : TFK_CallOp<"slice_grad",
    "zeros with the gradient at rows [start (+ an index operand), ..) of `axis`",
    1, 2, 1, (ins I64Attr:$axis, I64Attr:$start)>;
def TFK_PoolOp : TFK_CallOp<"pool",
    "out [B, D] from input [B, S, D] and keep [B, S] (cls, mean or max)", 2, 2, 1,
    (ins TF_PoolingAttr:$mode)>;
def TFK_PoolGradOp : TFK_CallOp<"pool_grad",
    "the input's gradient of pool (input, keep, grad)", 3, 3, 1, (ins TF_PoolingAttr:$mode)>;
def TFK_UnfoldOp : TFK_CallOp<"unfold",
    "patch rows [B, N, C·ph·pw] of an image [B, C, H, W]", 1, 1, 1,
    (ins DenseI64ArrayAttr:$patch)>;
def TFK_UnfoldGradOp : TFK_CallOp<"unfold_grad",
    "the image's gradient [B, C, H, W] from the patch rows' (grad)", 1, 1, 1,
    (ins DenseI64ArrayAttr:$patch)>;
def TFK_L2NormalizeOp : TFK_CallOp<"l2_normalize",
    "rows over their Euclidean norm, clamped below at epsilon", 1, 1, 1, (ins F64Attr:$epsilon)>;
def TFK_L2NormalizeGradOp : TFK_CallOp<"l2_normalize_grad",
    "the input's gradient of l2_normalize (input, grad)", 2, 2, 1, (ins F64Attr:$epsilon)>;

#endif // TRANSFUSE_KERNEL_OPS_TD
