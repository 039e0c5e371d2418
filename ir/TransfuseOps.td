//===- TransfuseOps.td - transfuse primitive ops ---------------*- tablegen -*-===//
//
// Primitive ops of a Transformer graph. Conventions:
//  - float tensors are f32 (f16/bf16/f64 accepted); token ids are i32; masks i1
//    (true = keep);
//  - elementwise binary ops broadcast like NumPy (trailing alignment; `?`
//    against a static size takes the static size, `?` against 1 stays `?`);
//  - result types are inferred (InferTypeOpInterface) except where an op's
//    result shape cannot be derived from its operands (param, constant,
//    reshape, masks, positional encodings);
//  - softmax over a row whose inputs are all -inf yields zeros, never NaN.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_OPS_TD
#define TRANSFUSE_OPS_TD

include "ir/TransfuseAttrs.td"
include "ir/TransfuseDialect.td"
include "ir/TransfuseInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def TF_Float : AnyTypeOf<[F32, F16, BF16, F64]>;
def TF_FloatTensor : RankedTensorOf<[F32, F16, BF16, F64]>;
def TF_TokenTensor : RankedTensorOf<[I32]>;
def TF_MaskTensor : RankedTensorOf<[I1]>;
def TF_AnyTensor : RankedTensorOf<[F32, F16, BF16, F64, I32, I1]>;

// The run-time size rule of an op (ir/Sizes.h): TF_Broadcasting for
// elementwise ops (the interface's default), TF_ShapeRule for a rule of the
// op's own, written beside its type inference.
def TF_Broadcasting : DeclareOpInterfaceMethods<Transfuse_ShapeRuleOpInterface>;
def TF_ShapeRule : DeclareOpInterfaceMethods<Transfuse_ShapeRuleOpInterface, ["resultSize"]>;

class Transfuse_Op<string mnemonic, list<Trait> traits = []>
    : Op<Transfuse_Dialect, mnemonic, !listconcat(traits, [Pure])>;

//===----------------------------------------------------------------------===//
// Sources: parameters, constants, dimension sizes
//===----------------------------------------------------------------------===//

def Transfuse_ParamOp : Transfuse_Op<"param"> {
  let summary = "a named weight, bound by name when a model loads";
  let description = [{
    A model parameter, looked up by `name` in the weights file (safetensors).
    `init` (`#transfuse.init<...>`) names how random weights are drawn when
    no file is given (`zeros`, `ones`, `xavier_uniform`, `normal_0.02`,
    `uniform_fan_in`, the last using `fan_in`). An `optional` parameter absent from the file is zero.
    All params of one name in a module have one type.

    ```mlir
    %w = transfuse.param "generator.bias" {init = #transfuse.init<uniform_fan_in>, fan_in = 512 : i64, optional} : tensor<37000xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, TF_InitKindAttr:$init,
                       OptionalAttr<I64Attr>:$fan_in, UnitAttr:$optional,
                       UnitAttr:$prepared);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Transfuse_ConstantOp : Transfuse_Op<"constant", [ConstantLike,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "a constant tensor";
  let description = [{
    ```mlir
    %c = transfuse.constant dense<0xFF800000> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs TF_AnyTensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

def Transfuse_DimOp : Transfuse_Op<"dim"> {
  let summary = "the size of one dimension of a tensor, as an index";
  let description = [{
    ```mlir
    %t = transfuse.dim %tokens, 1 : tensor<?x?xi32>
    ```
  }];
  let arguments = (ins TF_AnyTensor:$input, I64Attr:$axis);
  let results = (outs Index:$result);
  let assemblyFormat = "$input `,` $axis attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Embedding, matmul
//===----------------------------------------------------------------------===//

def Transfuse_GatherOp : Transfuse_Op<"gather", [TF_ShapeRule,
    InferTypeOpAdaptor]> {
  let summary = "embedding lookup: rows of a table selected by token ids";
  let description = [{
    `result[i..., :] = table[ids[i...], :]` for a table [V, D] and ids of any
    rank; an id outside [0, V) is a run-time error.

    ```mlir
    %e = transfuse.gather %table, %ids : (tensor<1000x512xf32>, tensor<?x?xi32>) -> tensor<?x?x512xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$table, TF_TokenTensor:$ids);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$table `,` $ids attr-dict `:` functional-type(operands, results)";
  let hasCanonicalizer = 1;
}

def Transfuse_MatmulOp : Transfuse_Op<"matmul", [TF_ShapeRule,
    InferTypeOpAdaptor]> {
  let summary = "batched matrix product with transpose flags";
  let description = [{
    `lhs` [..., M, K] (or [..., K, M] with `transpose_lhs`), `rhs` [..., K, N]
    (or [..., N, K] with `transpose_rhs`); the leading batch dimensions
    broadcast like NumPy (a rank-2 weight applies to every batch). Result
    [batch..., M, N].

    ```mlir
    %y = transfuse.matmul %x, %w {transpose_rhs = true} : (tensor<?x?x512xf32>, tensor<2048x512xf32>) -> tensor<?x?x2048xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$lhs, TF_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Transfuse_BinaryOp<string mnemonic, string formula>
    : Transfuse_Op<mnemonic, [TF_Broadcasting, InferTypeOpAdaptor]> {
  let summary = "elementwise " # formula # " with NumPy broadcasting";
  let arguments = (ins TF_FloatTensor:$lhs, TF_FloatTensor:$rhs);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    static constexpr bool kIsBinaryElementwise = true;
  }];
}

def Transfuse_AddOp : Transfuse_BinaryOp<"add", "lhs + rhs">;
def Transfuse_SubOp : Transfuse_BinaryOp<"sub", "lhs - rhs">;
def Transfuse_MulOp : Transfuse_BinaryOp<"mul", "lhs * rhs">;
def Transfuse_DivOp : Transfuse_BinaryOp<"div", "lhs / rhs">;
def Transfuse_PowOp : Transfuse_BinaryOp<"pow", "lhs ^ rhs (std::pow: NaN for lhs < 0 and rhs not an integer)">;

class Transfuse_UnaryOp<string mnemonic, string formula, list<Trait> traits = []>
    : Transfuse_Op<mnemonic, !listconcat(traits,
        [TF_Broadcasting, SameOperandsAndResultType, InferTypeOpInterface])> {
  let summary = "elementwise " # formula;
  let arguments = (ins TF_FloatTensor:$input);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Transfuse_ReluOp : Transfuse_UnaryOp<"relu", "max(x, 0)">;
def Transfuse_ExpOp : Transfuse_UnaryOp<"exp", "exp(x)">;
def Transfuse_TanhOp : Transfuse_UnaryOp<"tanh", "tanh(x)">;
def Transfuse_SiluOp : Transfuse_UnaryOp<"silu", "x · sigmoid(x) = x / (1 + exp(-x))">;
def Transfuse_SigmoidOp : Transfuse_UnaryOp<"sigmoid", "1 / (1 + exp(-x))">;
def Transfuse_SqrtOp : Transfuse_UnaryOp<"sqrt", "sqrt(x)">;
def Transfuse_ErfOp : Transfuse_UnaryOp<"erf", "erf(x)">;

def Transfuse_GeluOp : Transfuse_UnaryOp<"gelu", "gelu(x)"> {
  let description = [{
    `approximate = #transfuse.approximation<none>` (the default):
    0.5·x·(1 + erf(x/√2)); `<tanh>`: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
    The formulas are runtime/kernels/ElementwiseMath.h's.
  }];
  let arguments = (ins TF_FloatTensor:$input,
                       DefaultValuedAttr<TF_GeluApproximationAttr,
                                         "::mlir::transfuse::GeluApproximation::None">:$approximate);
}

def Transfuse_ScaleOp : Transfuse_UnaryOp<"scale", "x * factor"> {
  let arguments = (ins TF_FloatTensor:$input, F64Attr:$factor);
  let hasFolder = 1;
}

def Transfuse_SelectOp : Transfuse_Op<"select", [TF_Broadcasting,
    InferTypeOpAdaptor]> {
  let summary = "cond ? on_true : on_false, with NumPy broadcasting";
  let description = [{
    Masks scores: `select(mask, scores, -inf)`.

    ```mlir
    %s = transfuse.select %m, %x, %ninf : (tensor<?x1x1x?xi1>, tensor<?x8x?x?xf32>, tensor<f32>) -> tensor<?x8x?x?xf32>
    ```
  }];
  let arguments = (ins TF_MaskTensor:$cond, TF_FloatTensor:$on_true,
                       TF_FloatTensor:$on_false);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$cond `,` $on_true `,` $on_false attr-dict `:` functional-type(operands, results)";
}

def Transfuse_CastOp : Transfuse_Op<"cast", [TF_ShapeRule]> {
  let summary = "integers or booleans as floats, elementwise";
  let description = [{
    Each element converted to the result's float type (true is 1, false 0),
    rounded to nearest: a mask given as 0/1 integers made arithmetic.

    ```mlir
    %f = transfuse.cast %m : (tensor<?x1x1x?xi32>) -> tensor<?x1x1x?xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I32, I1]>:$input);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalizations, reductions
//===----------------------------------------------------------------------===//

def Transfuse_SoftmaxOp : Transfuse_Op<"softmax", [TF_Broadcasting,
    SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "softmax over one axis; an all -inf row yields zeros";
  let description = [{
    `y = exp(x - max) / sum(exp(x - max))` along `axis`. A row whose entries
    are all -inf (every key masked) yields 0, never NaN.

    ```mlir
    %p = transfuse.softmax %s {axis = 3 : i64} : tensor<?x8x?x?xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$input, I64Attr:$axis);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Transfuse_LayerNormOp : Transfuse_Op<"layer_norm", [TF_Broadcasting,
    InferTypeOpAdaptor]> {
  let summary = "layer normalization (or RMSNorm) over the trailing dimensions from axis";
  let description = [{
    `y = (x - mean) / sqrt(var + epsilon) * gamma + beta`, mean and biased
    variance over dimensions [axis, rank); gamma and beta have the shape of
    those dimensions, which must be static. `beta` is optional (0).
    With `rms` (RMSNorm, Llama's): no centering, `y = x / sqrt(mean(x²) +
    epsilon) * gamma (+ beta)`.

    ```mlir
    %y = transfuse.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x512xf32>, tensor<512xf32>, tensor<512xf32>) -> tensor<?x?x512xf32>
    %z = transfuse.layer_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-06 : f64, rms} : (tensor<?x?x512xf32>, tensor<512xf32>) -> tensor<?x?x512xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$input, TF_FloatTensor:$gamma,
                       Optional<TF_FloatTensor>:$beta, I64Attr:$axis, F64Attr:$epsilon,
                       UnitAttr:$rms);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$input `,` $gamma (`,` $beta^)? attr-dict `:` functional-type(operands, results)";
}

def Transfuse_PoolOp : Transfuse_Op<"pool", [TF_ShapeRule, InferTypeOpAdaptor]> {
  let summary = "one vector per sequence: its first token, or the mean or maximum of its kept tokens";
  let description = [{
    `input` [B, S, D], `keep` [B, S] (true: a token, false: padding) ->
    [B, D], as sentence-transformers' Pooling module: `cls` takes
    `input[b, 0]` (keep unread); `mean` is `Σ_s keep·input[b, s] / Σ_s keep`;
    `max` the maximum over the kept positions. A sequence with no kept
    token gives zeros for mean and max (sentence-transformers gives 0 and
    -1e9).

    ```mlir
    %e = transfuse.pool %h, %keep {mode = #transfuse.pooling<mean>} : (tensor<?x?x384xf32>, tensor<?x?xi1>) -> tensor<?x384xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$input, TF_MaskTensor:$keep, TF_PoolingAttr:$mode);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$input `,` $keep attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Transfuse_UnfoldOp : Transfuse_Op<"unfold", [TF_ShapeRule, InferTypeOpAdaptor]> {
  let summary = "non-overlapping image patches as rows (a patch embedding's GEMM input)";
  let description = [{
    `input` [B, C, H, W] -> [B, (H/ph)·(W/pw), C·ph·pw] for `patch` =
    [ph, pw]: row p = i·(W/pw) + j holds patch (i, j), its columns in
    (c, y, x) order, which is how a convolution weight [D, C, ph, pw]
    flattens. A convolution of kernel and stride `patch` (the Vision
    Transformer's patch embedding) is unfold followed by one GEMM. H and W
    are static multiples of the patch; B may be dynamic.

    ```mlir
    %p = transfuse.unfold %x {patch = array<i64: 16, 16>} : (tensor<?x3x224x224xf32>) -> tensor<?x196x768xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$input, DenseI64ArrayAttr:$patch);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Transfuse_L2NormalizeOp : Transfuse_Op<"l2_normalize", [TF_Broadcasting,
    SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "rows divided by their Euclidean norm";
  let description = [{
    `y = x / max(||x||₂, epsilon)` along the last axis, as PyTorch's
    `F.normalize(x, p=2, dim=-1, eps=epsilon)` (sentence-transformers'
    Normalize module).

    ```mlir
    %n = transfuse.l2_normalize %e {epsilon = 1.0e-12 : f64} : tensor<?x384xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$input, DefaultValuedAttr<F64Attr, "1e-12">:$epsilon);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

class Transfuse_ReduceOp<string mnemonic, string what>
    : Transfuse_Op<mnemonic, [TF_ShapeRule, InferTypeOpAdaptor]> {
  let summary = what # " over the given axes";
  let arguments = (ins TF_FloatTensor:$input, DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<BoolAttr, "false">:$keep_dims);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Transfuse_ReduceSumOp : Transfuse_ReduceOp<"reduce_sum", "sum">;
def Transfuse_ReduceMeanOp : Transfuse_ReduceOp<"reduce_mean", "mean">;
def Transfuse_ReduceMaxOp : Transfuse_ReduceOp<"reduce_max", "maximum">;

def Transfuse_DropoutOp : Transfuse_Op<"dropout", [TF_Broadcasting,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "inverted dropout drawn from Philox4x32-10";
  let description = [{
    Element i is kept, scaled by 1/(1 - rate), when
    `philoxUniform(seed, step, stream, i) >= rate` (runtime/Philox.h), and
    zeroed otherwise; `step` defaults to 0. The draw depends only on (seed,
    step, stream, element index), so every backend and the backward pass
    regenerate the same mask. Models built for inference emit no dropout.

    ```mlir
    %y = transfuse.dropout %x {rate = 1.0e-01 : f64, seed = 0 : i64, stream = 3 : i64} : tensor<?x?x512xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$input, Optional<Index>:$step,
                       F64Attr:$rate, I64Attr:$seed, I64Attr:$stream);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$input (`step` $step^)? attr-dict `:` type($input)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

def Transfuse_ReshapeOp : Transfuse_Op<"reshape", [TF_ShapeRule]> {
  let summary = "row-major reinterpretation with the same elements";
  let description = [{
    The result type is given. Input and result have the same number of
    dynamic dimensions, and the k-th dynamic dimension of the result equals
    the k-th of the input at run time; the static sizes multiply to the same
    product. This covers splitting and merging heads with dynamic batch and
    sequence lengths.

    ```mlir
    %h = transfuse.reshape %x : (tensor<?x?x512xf32>) -> tensor<?x?x8x64xf32>
    ```
  }];
  let arguments = (ins TF_AnyTensor:$input);
  let results = (outs TF_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Transfuse_TransposeOp : Transfuse_Op<"transpose", [TF_ShapeRule,
    InferTypeOpAdaptor]> {
  let summary = "permutes dimensions: result dim i = input dim permutation[i]";
  let description = [{
    ```mlir
    %t = transfuse.transpose %h {permutation = array<i64: 0, 2, 1, 3>} : (tensor<?x?x8x64xf32>) -> tensor<?x8x?x64xf32>
    ```
  }];
  let arguments = (ins TF_AnyTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs TF_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Transfuse_ConcatOp : Transfuse_Op<"concat", [TF_ShapeRule,
    InferTypeOpAdaptor]> {
  let summary = "concatenation along one axis";
  let arguments = (ins Variadic<TF_AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs TF_AnyTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Transfuse_SplitOp : Transfuse_Op<"split", [TF_ShapeRule,
    InferTypeOpAdaptor]> {
  let summary = "splits one static axis into pieces of the given sizes";
  let description = [{
    ```mlir
    %q, %k, %v = transfuse.split %w {axis = 0 : i64, sizes = array<i64: 512, 512, 512>} : (tensor<1536x512xf32>) -> (tensor<512x512xf32>, tensor<512x512xf32>, tensor<512x512xf32>)
    ```
  }];
  let arguments = (ins TF_AnyTensor:$input, I64Attr:$axis, DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<TF_AnyTensor>:$results);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Transfuse_SliceOp : Transfuse_Op<"slice", [TF_ShapeRule,
    InferTypeOpAdaptor, AttrSizedOperandSegments]> {
  let summary = "a slice [begin, begin + size) of one axis; size may be dynamic";
  let description = [{
    The slice begins at `start`, plus the `offset` operand when given (a
    decode step's positions begin at the cache's length; `start` may then
    be negative: offset = the axis size and start = -1 take the last row).
    With a `length` operand the slice holds `length` elements and the result
    dimension is `?`; otherwise `size` gives it. The bounds are checked
    against the input at run time. Learned positions use it:

    ```mlir
    %p = transfuse.slice %wpe length %t {axis = 0 : i64, start = 0 : i64} : (tensor<1024x768xf32>, index) -> tensor<?x768xf32>
    %q = transfuse.slice %wpe offset %l length %n {axis = 0 : i64, start = 0 : i64} : (tensor<1024x768xf32>, index, index) -> tensor<?x768xf32>
    ```
  }];
  let arguments = (ins TF_AnyTensor:$input, Optional<Index>:$offset, Optional<Index>:$length,
                       I64Attr:$axis, I64Attr:$start, OptionalAttr<I64Attr>:$size);
  let results = (outs TF_AnyTensor:$result);
  let assemblyFormat = [{
    $input (`offset` $offset^)? (`length` $length^)? attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Masks and positions
//===----------------------------------------------------------------------===//

def Transfuse_CausalMaskOp : Transfuse_Op<"causal_mask", [TF_ShapeRule]> {
  let summary = "[Sq, Sk] boolean mask, bottom-right aligned";
  let description = [{
    `mask[i, j] = j <= i + Sk - Sq`: with equal lengths the usual lower
    triangle; with a KV cache (Sk > Sq) each query sees every cached key.

    ```mlir
    %m = transfuse.causal_mask %t, %t : tensor<?x?xi1>
    ```
  }];
  let arguments = (ins Index:$query_len, Index:$key_len);
  let results = (outs TF_MaskTensor:$result);
  let assemblyFormat = "$query_len `,` $key_len attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Transfuse_KeyPaddingMaskOp : Transfuse_Op<"key_padding_mask", [TF_ShapeRule,
    InferTypeOpAdaptor]> {
  let summary = "tokens != pad_id, as a boolean keep-mask";
  let description = [{
    ```mlir
    %m = transfuse.key_padding_mask %src {pad_id = 1 : i64} : (tensor<?x?xi32>) -> tensor<?x?xi1>
    ```
  }];
  let arguments = (ins TF_TokenTensor:$tokens, I64Attr:$pad_id);
  let results = (outs TF_MaskTensor:$result);
  let assemblyFormat = "$tokens attr-dict `:` functional-type(operands, results)";
}

def Transfuse_PositionalEncodingOp : Transfuse_Op<"positional_encoding", [TF_ShapeRule]> {
  let summary = "sinusoidal positions [length, D], interleaved or in halves";
  let description = [{
    `pe[p, 2i] = sin(q / 10000^(2i/D))`, `pe[p, 2i+1] = cos(q / 10000^(2i/D))`
    with `q = p + offset` (`offset` defaults to 0; decoding with a KV cache
    passes the cache length), as in "Attention Is All You Need" and the
    PyTorch translation tutorial. With `halves` (Marian's arrangement) the
    sines fill the first D/2 columns and the cosines the rest:
    `pe[p, i] = sin(q / 10000^(2i/D))`, `pe[p, D/2 + i] = cos(q / 10000^(2i/D))`.

    ```mlir
    %pe = transfuse.positional_encoding %s : tensor<?x512xf32>
    ```
  }];
  let arguments = (ins Index:$length, Optional<Index>:$offset, UnitAttr:$halves);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$length (`offset` $offset^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Transfuse_RotaryOp : Transfuse_Op<"rotary", [TF_ShapeRule]> {
  let summary = "rotary position embedding of each head (Hugging Face's rotate-half)";
  let description = [{
    `input` [..., S, N] holds heads of `head_dim` columns (N a multiple of
    it), row s at position `p = offset + s` (`offset` defaults to 0;
    decoding passes the cache length). With `inv_freq` [R] (R <= head_dim/2
    frequencies), the first 2R columns of each head are rotated in pairs
    (i, i + R), the rest pass through:

      θ = fp32(p · inv_freq[i])            (rounded as Hugging Face forms it)
      out[i]     = x[i]·cos θ - x[i + R]·sin θ
      out[i + R] = x[i + R]·cos θ + x[i]·sin θ

    `inverse` rotates by -θ (the gradient). Llama, Mistral and Qwen2 apply
    it to the Q and K projections before the heads are split.

    ```mlir
    %r = transfuse.rotary %q, %inv_freq offset %len {head_dim = 64 : i64}
        : (tensor<?x?x512xf32>, tensor<32xf32>, index) -> tensor<?x?x512xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$input, TF_FloatTensor:$inv_freq, Optional<Index>:$offset,
                       I64Attr:$head_dim, UnitAttr:$inverse);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $inv_freq (`offset` $offset^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

include "ir/TransfuseFusedOps.td"
include "ir/TransfuseStateOps.td"
include "ir/TransfuseGradOps.td"

#endif // TRANSFUSE_OPS_TD
