//===- TransfuseFusedOps.td - fused ops made by the fusion passes -*- tablegen -*-===//
//
// The patterns that dominate Transformer cost, each as one op that a backend
// lowers to one kernel. Each is defined as the unfused primitives it replaces
// (see the descriptions); tests check exactly that equivalence.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_FUSED_OPS_TD
#define TRANSFUSE_FUSED_OPS_TD

def Transfuse_AttentionOp : Transfuse_Op<"attention", [TF_ShapeRule, AttrSizedOperandSegments]> {
  let summary = "softmax((Q·Kᵀ)·scale + bias, masked)·V over heads, as one op";
  let description = [{
    Heads are split: `query` [B, H, Sq, D], `key` [B, Hkv, Sk, D], `value`
    [B, Hkv, Sk, Dv]; the result is [B, H, Sq, Dv]. Hkv divides H
    (grouped-query attention): query head h reads K/V head h / (H / Hkv),
    as if each K/V head were repeated H / Hkv times:

      s = (Q·Kᵀ)·scale (+ bias)                   bias broadcasts to [B,H,Sq,Sk]
      s[b,h,i,j] = -inf unless every mask keeps it:
        causal:      j <= i + Sk - Sq             (bottom-right aligned)
        key_padding: key_padding[b, j]            (i1 [B, Sk], true = keep)
        mask:        mask broadcast to [B,H,Sq,Sk] (i1, true = keep)
      p = softmax over j, a row with every key masked giving 0 (never NaN)
      p = dropout(p) when dropout_rate > 0 (Philox, as transfuse.dropout)
      out = p·V

    ```mlir
    %o = transfuse.attention %q, %k, %v key_padding %kp {causal, scale = 1.250000e-01 : f64}
        : (tensor<?x8x?x64xf32>, tensor<?x8x?x64xf32>, tensor<?x8x?x64xf32>, tensor<?x?xi1>) -> tensor<?x8x?x64xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$query, TF_FloatTensor:$key, TF_FloatTensor:$value,
                       Optional<TF_MaskTensor>:$key_padding,
                       Optional<TF_MaskTensor>:$mask,
                       Optional<TF_FloatTensor>:$bias,
                       F64Attr:$scale, UnitAttr:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout_rate,
                       DefaultValuedAttr<I64Attr, "0">:$dropout_seed,
                       DefaultValuedAttr<I64Attr, "0">:$dropout_stream);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`key_padding` $key_padding^)? (`mask` $mask^)?
    (`bias` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Transfuse_AddLayerNormOp : Transfuse_Op<"add_layer_norm", [TF_Broadcasting]> {
  let summary = "LayerNorm(x + residual) over the last dimension, and the sum";
  let description = [{
    `sum = input + residual` (residual broadcasts to input's shape) and
    `result = layer_norm(sum, gamma, beta, epsilon)` over the last dimension.
    `sum` is the residual stream of pre-LN models; a backend skips storing it
    when it has no use. `beta` is optional; `rms` makes the norm RMSNorm
    (transfuse.layer_norm's `rms`).

    ```mlir
    %y, %s = transfuse.add_layer_norm %x, %r, %g, %b {epsilon = 1.0e-05 : f64}
        : (tensor<?x?x512xf32>, tensor<?x?x512xf32>, tensor<512xf32>, tensor<512xf32>) -> (tensor<?x?x512xf32>, tensor<?x?x512xf32>)
    ```
  }];
  let arguments = (ins TF_FloatTensor:$input, TF_FloatTensor:$residual,
                       TF_FloatTensor:$gamma, Optional<TF_FloatTensor>:$beta, F64Attr:$epsilon,
                       UnitAttr:$rms);
  let results = (outs TF_FloatTensor:$result, TF_FloatTensor:$sum);
  let assemblyFormat = [{
    $input `,` $residual `,` $gamma (`,` $beta^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Transfuse_LinearOp : Transfuse_Op<"linear", [TF_ShapeRule, AttrSizedOperandSegments]> {
  let summary = "act(x·W + bias) + residual: a matmul with a fused epilogue";
  let description = [{
    `input` [..., K]; `weight` [K, N], or [N, K] with `transpose_weight`
    (PyTorch's nn.Linear layout); `bias` [N]; `activation` one of none, relu,
    gelu, gelu_tanh, silu; `residual` broadcasts to the result [..., N]:

      result = activation(input·op(weight) + bias) + residual

    Two epilogues combine pairs of the product's columns (z = input·op(weight)
    + bias):
    - `gated` (SwiGLU and its kin): N is even and the result is [..., N/2],
      result[..., j] = activation(z[..., j])·z[..., N/2 + j] (no residual);
    - `rotary %inv_freq (offset %o)?` with `rotary_columns` C and `head_dim`
      D: the first C columns of z hold heads of D columns, rotated as
      transfuse.rotary rotates them (inv_freq [D/2], row s of dimension -2 at
      position offset + s); the other columns are z's (no activation or
      residual). The Q and K projections of Llama, merged with V.

    ```mlir
    %y = transfuse.linear %x, %w, %b {activation = #transfuse.activation<relu>, transpose_weight}
        : (tensor<?x?x512xf32>, tensor<2048x512xf32>, tensor<2048xf32>) -> tensor<?x?x2048xf32>
    %h = transfuse.linear %x, %wgu {activation = #transfuse.activation<silu>, gated, transpose_weight}
        : (tensor<?x?x512xf32>, tensor<2816x512xf32>) -> tensor<?x?x1408xf32>
    %qkv = transfuse.linear %x, %wqkv rotary %inv_freq offset %len
        {head_dim = 64 : i64, rotary_columns = 1024 : i64, transpose_weight}
        : (tensor<?x?x512xf32>, tensor<1536x512xf32>, tensor<32xf32>, index) -> tensor<?x?x1536xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$input, TF_FloatTensor:$weight,
                       Optional<TF_FloatTensor>:$bias, Optional<TF_FloatTensor>:$residual,
                       Optional<TF_FloatTensor>:$inv_freq, Optional<Index>:$offset,
                       UnitAttr:$transpose_weight,
                       DefaultValuedAttr<TF_ActivationAttr,
                                         "::mlir::transfuse::Activation::None">:$activation,
                       UnitAttr:$gated,
                       DefaultValuedAttr<I64Attr, "0">:$rotary_columns,
                       DefaultValuedAttr<I64Attr, "0">:$head_dim);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? (`residual` $residual^)? (`rotary` $inv_freq^)?
    (`offset` $offset^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Transfuse_FusedElementwiseOp : Transfuse_Op<"fused_elementwise", [TF_Broadcasting, 
    IsolatedFromAbove, SingleBlock]> {
  let summary = "a chain of elementwise ops computed in one pass over memory";
  let description = [{
    The body computes the result from the block arguments (one per operand,
    same types) with elementwise transfuse ops (broadcasting as they do) and
    yields it. A backend generates one vectorized loop over the result.

    ```mlir
    %r = transfuse.fused_elementwise %e, %pe : (tensor<?x?x512xf32>, tensor<?x512xf32>) -> tensor<?x?x512xf32> {
    ^bb0(%a: tensor<?x?x512xf32>, %b: tensor<?x512xf32>):
      %0 = transfuse.scale %a {factor = 22.627 : f64} : tensor<?x?x512xf32>
      %1 = transfuse.add %0, %b : (tensor<?x?x512xf32>, tensor<?x512xf32>) -> tensor<?x?x512xf32>
      transfuse.yield %1 : tensor<?x?x512xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<TF_AnyTensor>:$inputs);
  let results = (outs TF_FloatTensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type($inputs, results) $body
  }];
  let hasVerifier = 1;
}

def Transfuse_YieldOp : Transfuse_Op<"yield", [
    Terminator, HasParent<"FusedElementwiseOp">]> {
  let summary = "yields the value of a fused_elementwise body";
  let arguments = (ins TF_FloatTensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

#endif // TRANSFUSE_FUSED_OPS_TD
