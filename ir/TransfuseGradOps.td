//===- TransfuseGradOps.td - the loss and backward ops ---------*- tablegen -*-===//
//
// Ops of training graphs: the cross-entropy loss, and the backward ops the
// gradient rules (ir/Gradients.cpp) emit where a primitive composition would
// be slow or lose accuracy. The reference backend runs each as written here;
// docs/training.md states how autodiff uses them.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_GRAD_OPS_TD
#define TRANSFUSE_GRAD_OPS_TD

def TF_ShapeOfFirst : DeclareOpInterfaceMethods<Transfuse_ShapeRuleOpInterface, ["resultSize"]>;

def Transfuse_CrossEntropyOp : Transfuse_Op<"cross_entropy"> {
  let summary = "mean cross-entropy of logits against labels, with label smoothing";
  let description = [{
    `logits` [..., V], `labels` [...] (i32). As PyTorch's
    `CrossEntropyLoss(label_smoothing=ε, ignore_index=ignore_index)` defines
    it: per token whose label y is not `ignore_index`,
    `loss = (1 - ε)·(-log p_y) + ε/V · Σ_c (-log p_c)` with
    `p = softmax(logits)` (the smoothing mass over all V classes, the
    ignored class included); the result is the mean over those tokens (0
    when there is none). A label outside [0, V) other than `ignore_index` is
    a run-time error.

    ```mlir
    %l = transfuse.cross_entropy %logits, %labels {ignore_index = 1 : i64, label_smoothing = 1.0e-01 : f64} : (tensor<?x?x1000xf32>, tensor<?x?xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$logits, TF_TokenTensor:$labels,
                       F64Attr:$label_smoothing, I64Attr:$ignore_index);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $labels attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Transfuse_CrossEntropyGradOp : Transfuse_Op<"cross_entropy_grad", [TF_ShapeOfFirst]> {
  let summary = "the gradient of cross_entropy with respect to the logits";
  let description = [{
    `g / N · (p_c - (1 - ε)·[c = y] - ε/V)` per token that counts (N of
    them), 0 in the rows of ignored tokens; `g` is the loss's gradient
    (rank 0). Attributes as cross_entropy's.
  }];
  let arguments = (ins TF_FloatTensor:$logits, TF_TokenTensor:$labels, TF_FloatTensor:$grad,
                       F64Attr:$label_smoothing, I64Attr:$ignore_index);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $labels `,` $grad attr-dict `:` functional-type(operands, results)";
}

def Transfuse_LayerNormGradOp : Transfuse_Op<"layer_norm_grad", [TF_ShapeOfFirst]> {
  let summary = "the gradients of layer_norm: input, gamma, beta";
  let description = [{
    For `y = x̂·γ + β`, `x̂ = (x - mean)·r`, `r = 1/sqrt(var + ε)` over the
    dimensions [axis, rank) (n elements): with `d = dy·γ`,
    `dx = r·(d - mean(d) - x̂·mean(d·x̂))`, `dγ = Σ dy·x̂` and `dβ = Σ dy`
    summed over the leading dimensions. The mean and r are recomputed from
    `input`, not saved. With `rms` (RMSNorm): `x̂ = x·r`, `r = 1/sqrt(mean(x²)
    + ε)`, `dx = r·(d - x̂·mean(d·x̂))`.

    ```mlir
    %dx, %dg, %db = transfuse.layer_norm_grad %x, %g, %dy {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x?x512xf32>, tensor<512xf32>, tensor<?x?x512xf32>) -> (tensor<?x?x512xf32>, tensor<512xf32>, tensor<512xf32>)
    ```
  }];
  let arguments = (ins TF_FloatTensor:$input, TF_FloatTensor:$gamma, TF_FloatTensor:$grad,
                       I64Attr:$axis, F64Attr:$epsilon, UnitAttr:$rms);
  let results = (outs TF_FloatTensor:$input_grad, TF_FloatTensor:$gamma_grad,
                      TF_FloatTensor:$beta_grad);
  let assemblyFormat = "$input `,` $gamma `,` $grad attr-dict `:` functional-type(operands, results)";
}

def Transfuse_EmbeddingGradOp : Transfuse_Op<"embedding_grad"> {
  let summary = "the gradient of gather's table: a scatter-add of rows";
  let description = [{
    `result[v, :] = Σ_{i: ids[i] = v} grad[i, :]`; the result [V, D] is
    static (the table's type).

    ```mlir
    %dt = transfuse.embedding_grad %ids, %dy : (tensor<?x?xi32>, tensor<?x?x512xf32>) -> tensor<1000x512xf32>
    ```
  }];
  let arguments = (ins TF_TokenTensor:$ids, TF_FloatTensor:$grad);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$ids `,` $grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Transfuse_ActivationGradOp : Transfuse_Op<"activation_grad", [TF_Broadcasting]> {
  let summary = "dy · f'(x) for an activation f";
  let description = [{
    `activation` is relu (f'(x) = x > 0), gelu, gelu_tanh or silu (not
    none). The derivatives are runtime/kernels/ElementwiseMath.h's.

    Canonicalization: relu's derivative read from a dropout's output, of a
    gradient that is the same dropout's backward (the same key and shape),
    becomes the derivative of the gradient before the dropout times
    1/(1 - rate): where an element was kept both are that product, where
    it was dropped both are 0, so the backward pass does not draw the mask
    again.

    ```mlir
    %dx = transfuse.activation_grad %x, %dy {activation = #transfuse.activation<gelu>} : (tensor<?x2048xf32>, tensor<?x2048xf32>) -> tensor<?x2048xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$input, TF_FloatTensor:$grad,
                       TF_ActivationAttr:$activation);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Transfuse_LinearInputGradOp : Transfuse_Op<"linear_input_grad", [TF_ShapeRule]> {
  let summary = "an activation's input gradient through the linear layer it feeds, in one GEMM";
  let description = [{
    `result` = f'(`pre`) · `scale` · (`grad`·op(W)), op(W) = Wᵀ with
    `transpose_weight` (as transfuse.linear's): `grad` [..., N] is the
    gradient of a linear layer's output, W its rank-2 weight with op(W)
    [N, K], `pre` [..., K] the activation's input (or, for relu, anything
    positive exactly where it is: activation_grad's rules). `activation`
    as activation_grad's. The linear-epilogue fusion makes
    it, after autodiff, from activation_grad(pre, [scale(] matmul(grad, W)
    [)]); it lowers to one GEMM whose epilogue applies the derivative.

    ```mlir
    %dz = transfuse.linear_input_grad %g, %w, %h {activation = #transfuse.activation<relu>, scale = 1.1111111111111112 : f64} : (tensor<?x?x512xf32>, tensor<512x2048xf32>, tensor<?x?x2048xf32>) -> tensor<?x?x2048xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$grad, TF_FloatTensor:$weight, TF_FloatTensor:$pre,
                       TF_ActivationAttr:$activation, UnitAttr:$transpose_weight, DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $weight `,` $pre attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Transfuse_ExpandOp : Transfuse_Op<"expand", [TF_Broadcasting]> {
  let summary = "broadcasts input to the shape of like (NumPy rules)";
  let description = [{
    The gradient of a reduction: the reduced gradient (with its reduced
    dimensions kept as 1) broadcast back. `like` gives only the shape.

    ```mlir
    %g = transfuse.expand %r, %x : (tensor<?x1xf32>, tensor<?x512xf32>) -> tensor<?x512xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$input, TF_FloatTensor:$like);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$input `,` $like attr-dict `:` functional-type(operands, results)";
}

def Transfuse_WeightGradOp : Transfuse_Op<"weight_grad", [TF_ShapeRule]> {
  let summary = "the gradient of a weight applied to batched rows: the sum of xᵀ·g over them";
  let description = [{
    `input` [..., K] and `grad` [..., N] have the same leading dimensions;
    `result` [K, N] is the sum over every leading index i of
    input[i]ᵀ·grad[i]: the gradient of a rank-2 weight W in input·W, one
    product whose contraction runs over batch and sequence together
    (instead of a matmul per batch and a reduction of [B, K, N] after it).

    ```mlir
    %dw = transfuse.weight_grad %x, %g : (tensor<?x?x512xf32>, tensor<?x?x2048xf32>) -> tensor<512x2048xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$input, TF_FloatTensor:$grad);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Transfuse_SliceGradOp : Transfuse_Op<"slice_grad", [TF_ShapeRule]> {
  let summary = "the gradient of slice: grad placed in zeros of the input's shape";
  let description = [{
    `result` has the shape of `like` (the sliced input) and is 0 except
    along `axis` at [start + offset, start + offset + n), which holds
    `grad` (n: its size there); `start` and `offset` as the slice's.

    ```mlir
    %dw = transfuse.slice_grad %g, %wpe {axis = 0 : i64, start = 0 : i64} : (tensor<?x768xf32>, tensor<1024x768xf32>) -> tensor<1024x768xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$grad, TF_FloatTensor:$like, Optional<Index>:$offset,
                       I64Attr:$axis, I64Attr:$start);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $like (`offset` $offset^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Transfuse_PoolGradOp : Transfuse_Op<"pool_grad", [TF_ShapeOfFirst]> {
  let summary = "the gradient of pool: grad spread back over the sequence";
  let description = [{
    The result has `input`'s shape [B, S, D]: `cls` puts `grad[b]` at
    position 0; `mean` puts `keep[b, s]·grad[b] / Σ_s keep` at every
    position; `max` puts `grad[b, d]` at the first kept position holding
    the maximum of column d. Everything else is 0.

    ```mlir
    %dh = transfuse.pool_grad %h, %keep, %g {mode = #transfuse.pooling<max>} : (tensor<?x?x384xf32>, tensor<?x?xi1>, tensor<?x384xf32>) -> tensor<?x?x384xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$input, TF_MaskTensor:$keep, TF_FloatTensor:$grad,
                       TF_PoolingAttr:$mode);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$input `,` $keep `,` $grad attr-dict `:` functional-type(operands, results)";
}

def Transfuse_UnfoldGradOp : Transfuse_Op<"unfold_grad", [TF_ShapeOfFirst]> {
  let summary = "the gradient of unfold: patch rows put back in place";
  let description = [{
    The result has `input`'s shape [B, C, H, W]: each element of `grad`
    [B, N, C·ph·pw] goes back to the pixel unfold read it from (patches do
    not overlap, so nothing is summed). `input` gives only the shape.

    ```mlir
    %dx = transfuse.unfold_grad %x, %g {patch = array<i64: 16, 16>} : (tensor<?x3x224x224xf32>, tensor<?x196x768xf32>) -> tensor<?x3x224x224xf32>
    ```
  }];
  let arguments = (ins TF_FloatTensor:$input, TF_FloatTensor:$grad, DenseI64ArrayAttr:$patch);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` functional-type(operands, results)";
}

def Transfuse_L2NormalizeGradOp : Transfuse_Op<"l2_normalize_grad", [TF_ShapeOfFirst]> {
  let summary = "the gradient of l2_normalize";
  let description = [{
    Per row, with `n = ||x||₂` and `y = x / n`: `dx = (g - y·(y·g)) / n`
    when `n > epsilon`, else `g / epsilon` (where the norm was clamped, the
    op was a scale).
  }];
  let arguments = (ins TF_FloatTensor:$input, TF_FloatTensor:$grad, F64Attr:$epsilon);
  let results = (outs TF_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` functional-type(operands, results)";
}

def Transfuse_AttentionGradOp : Transfuse_Op<"attention_grad", [TF_ShapeRule,
    AttrSizedOperandSegments]> {
  let summary = "the gradients of attention: query, key, value";
  let description = [{
    For `out = dropout(p)·V`, `p = softmax(mask(scale·Q·Kᵀ))` (attention's
    operands and attributes, no bias): the probabilities are recomputed, as
    FlashAttention's backward does, never saved; with `g` the output's
    gradient, `dV = dropout(p)ᵀ·g`, `dP = dropout(g·Vᵀ)` (the same mask),
    `dS = p ⊙ (dP - Σ_j dP ⊙ p)`, `dQ = scale·dS·K`, `dK = scale·dSᵀ·Q`. A
    fully masked row has p = 0 and so no gradient.
  }];
  let arguments = (ins TF_FloatTensor:$query, TF_FloatTensor:$key, TF_FloatTensor:$value,
                       TF_FloatTensor:$grad,
                       Optional<TF_MaskTensor>:$key_padding, Optional<TF_MaskTensor>:$mask,
                       F64Attr:$scale, UnitAttr:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$dropout_rate,
                       DefaultValuedAttr<I64Attr, "0">:$dropout_seed,
                       DefaultValuedAttr<I64Attr, "0">:$dropout_stream);
  let results = (outs TF_FloatTensor:$query_grad, TF_FloatTensor:$key_grad,
                      TF_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $grad (`key_padding` $key_padding^)? (`mask` $mask^)?
    attr-dict `:` functional-type(operands, results)
  }];
}

#endif // TRANSFUSE_GRAD_OPS_TD
