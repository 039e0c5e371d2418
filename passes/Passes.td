//===- Passes.td - transfuse passes ----------------------------*- tablegen -*-===//
//
// One pass, one file (passes/<Name>.cpp). Each fusion pass records what it
// fused and why the rest did not into a FusionReport (the driver's --report),
// or, with `remarks=true`, as remarks on the ops (lit tests use that).
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_PASSES_TD
#define TRANSFUSE_PASSES_TD

include "mlir/Pass/PassBase.td"

class FusionPass<string name, string summaryText>
    : Pass<name, "mlir::ModuleOp"> {
  let summary = summaryText;
  let dependentDialects = ["mlir::transfuse::TransfuseDialect"];
  let options = [
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Emit a remark for every fused site and every candidate left alone">
  ];
}

def TransfuseFuseAttention
    : FusionPass<"transfuse-fuse-attention",
                 "Fuse Q·Kᵀ scaling, masks, softmax (and dropout) and ·V into transfuse.attention"> {
  let description = [{
    Matches softmax(mask(scale·(Q·Kᵀ) + bias))·V, whatever way a graph writes
    it: the scale as `scale`, `mul` or `div` by a constant, before or after
    the matmul; masks by `select(keep, s, -inf)` or an additive `add`; Kᵀ as a
    transpose flag or a permute (composed exactly, never assumed); dropout
    after the softmax. Causal masks become `causal` and [B,1,1,Sk] masks
    `key_padding` only when their sizes are proven to be Sq and Sk. K and V
    whose heads are repeated for grouped query heads (reshape, G copies
    concatenated, reshape: GraphBuilder::repeatHeads) are read unrepeated:
    the fused op takes fewer K/V heads than query heads.

    Before:
      %s = transfuse.matmul %q, %k {transpose_rhs = true} ...
      %t = transfuse.scale %s {factor = 0.125 : f64} ...
      %m = transfuse.select %keep, %t, %ninf ...
      %p = transfuse.softmax %m {axis = 3 : i64} ...
      %o = transfuse.matmul %p, %v ...
    After:
      %o = transfuse.attention %q, %k, %v key_padding %kp {scale = 1.250000e-01 : f64} ...

    Refused, with the reason in the report: softmax over another axis, a
    non-constant scale, a mask that does not broadcast to the scores, a V
    whose length is not provably K's, an intermediate with a second use.
  }];
}

def TransfuseFuseAddLayerNorm
    : FusionPass<"transfuse-fuse-add-layer-norm",
                 "Fuse a residual add and the layer norm it feeds into transfuse.add_layer_norm"> {
  let description = [{
    Before:
      %s = transfuse.add %x, %r ...
      %y = transfuse.layer_norm %s, %g, %b {axis = 2 : i64, epsilon = ...} ...
    After:
      %y, %s = transfuse.add_layer_norm %x, %r, %g, %b {epsilon = ...} ...
    The sum result replaces the add's other uses (the pre-LN residual stream).
  }];
}

def TransfuseFuseLinearEpilogue
    : FusionPass<"transfuse-fuse-linear-epilogue",
                 "Turn matmuls by a weight into transfuse.linear with bias, activation and residual epilogues"> {
  let description = [{
    Before:
      %y = transfuse.matmul %x, %w {transpose_rhs = true} ...
      %z = transfuse.add %y, %b ...      // b: [N]
      %a = transfuse.relu %z ...
    After:
      %a = transfuse.linear %x, %w bias %b {activation = #transfuse.activation<relu>, transpose_weight} ...
    A residual add is taken only when no layer norm consumes it: such an add
    belongs to add_layer_norm, whatever order the passes run in.
  }];
}

def TransfuseFuseLinearBackward : Pass<"transfuse-fuse-linear-backward", "mlir::ModuleOp"> {
  let summary = "After autodiff: an activation's gradient through a product by a weight becomes one GEMM epilogue";
  let description = [{
    The backward half of the linear-epilogue fusion (the pipeline runs it
    after --transfuse-autodiff when the strategy fuses epilogues).
    Before:
      %p = transfuse.matmul %g, %w2 ...            // w2: a rank-2 weight
      %s = transfuse.scale %p {factor = 1.11} ...  // optional
      %dz = transfuse.activation_grad %h, %s {kind = "relu"} ...
    After:
      %dz = transfuse.linear_input_grad %g, %w2, %h {kind = "relu", scale = 1.11} ...
    The product and the scale must have no other use.
  }];
  let dependentDialects = ["mlir::transfuse::TransfuseDialect"];
}

def TransfuseMergeProjections
    : FusionPass<"transfuse-merge-projections",
                 "Merge projections of one input (Q/K/V; cross-attention K/V) into one matmul"> {
  let description = [{
    Before:
      %q = matmul(%x, %wq) + %bq;  %k = matmul(%x, %wk) + %bk;  %v = ...
    After:
      %w = transfuse.concat %wq, %wk, %wv ...;  %b = transfuse.concat ...
      %qkv = matmul(%x, %w) + %b
      %q, %k, %v = transfuse.split %qkv {axis = -1} ...
    Every plain projection (no activation or residual) of the same input with
    the same layout and bias presence joins one group; the encoder memory's
    K/V projections of all decoder layers therefore become one matmul.
  }];
}

def TransfuseRaiseDecomposed : Pass<"transfuse-raise-decomposed", "mlir::ModuleOp"> {
  let summary = "Raise what a graph writes in primitives (GELU, SiLU, LayerNorm, RMSNorm, causal masks) to the named ops";
  let description = [{
    Exported graphs (ONNX) spell out ops the dialect has: this finds them in
    any association and operand order and replaces them, so that the
    fusions apply. The fusion pipeline runs it first when a strategy fuses.
      0.5·x·(1 + erf(x/√2))                       -> gelu(x)
      0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))  -> gelu(x) {approximate = tanh}
      x·sigmoid(x)                                -> silu(x)
      (x - mean(x)) / sqrt(mean((x - mean(x))²) + eps) · g + b
                                                  -> layer_norm(x, g, b)
      x / sqrt(mean(x²) + eps) · g (or x · 1/sqrt(...))
                                                  -> layer_norm(x, g) {rms}
      select(slice of a constant lower triangle, s, fill)
                                                  -> select(causal_mask, s, fill)
      x + y, y [1, S, D]                          -> x + y as [S, D]
    Means are over the last axis with dimensions kept; the norm's gamma and
    beta are [D] or [1, ..., D]. A causal fill of finfo(float32).min becomes
    -inf (RaiseCausalMask says why that is exact).
  }];
  let dependentDialects = ["mlir::transfuse::TransfuseDialect"];
}

def TransfuseFuseElementwise
    : FusionPass<"transfuse-fuse-elementwise",
                 "Fuse chains of elementwise ops into transfuse.fused_elementwise"> {
  let description = [{
    Groups a chain of same-shape elementwise ops whose intermediates have one
    use (and scalar constants) into one region computed in one loop.
    Before:
      %a = transfuse.scale %e {factor = 22.6 : f64} ...
      %b = transfuse.add %a, %pe ...
    After:
      %b = transfuse.fused_elementwise %e, %pe ... { scale; add; yield }
  }];
}

def TransfuseHoistPrepare : Pass<"transfuse-hoist-prepare", "mlir::ModuleOp"> {
  let summary = "Hoist weight-only computations into a @prepare entry point run once at load";
  let description = [{
    Slicing packed weights, concatenating merged projection weights and other
    pure work on parameters and constants moves into `@prepare`; the entry
    points read its results as `transfuse.param "prepared.N" {prepared}`.
  }];
  let dependentDialects = ["mlir::transfuse::TransfuseDialect", "mlir::func::FuncDialect"];
}

def TransfuseAutodiff : Pass<"transfuse-autodiff", "mlir::ModuleOp"> {
  let summary = "Build the gradient of a loss function with respect to its parameters";
  let description = [{
    For `@F` (option `function`, default `loss`), whose first result is a
    scalar loss, adds `@F_grad` with the same arguments, returning the loss
    (`transfuse.name = "loss"`) and the gradient of every parameter name, in
    the order the names first appear (`grad.<name>`): reverse mode through
    each op's gradient rule (GradientOpInterface, ir/Gradients.cpp), the
    gradients of a value with several uses summed, and so those of a name
    used by several params (tied weights). A parameter the loss does not
    depend on gets zeros. An op without a rule (fused ops: autodiff runs
    before fusion) is an error naming it.

    Before:
      func.func @loss(%x: tensor<2x3xf32>) -> tensor<f32> {
        %w = transfuse.param "w" ... : tensor<3x3xf32>
        %y = transfuse.matmul %x, %w ...
        %l = transfuse.reduce_sum %y {axes = array<i64: 0, 1>} ...
        return %l : tensor<f32>
      }
    After: @loss, and
      func.func @loss_grad(%x: tensor<2x3xf32>) -> (tensor<f32>, tensor<3x3xf32>)
      returning %l and the matmul rule's xᵀ·1.
  }];
  let dependentDialects = ["mlir::transfuse::TransfuseDialect", "mlir::func::FuncDialect"];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"loss\"",
           "The function to differentiate (its first result is the loss)">
  ];
}

#endif // TRANSFUSE_PASSES_TD
