//===- GraphBuilder.h - nn-style construction of transfuse graphs ---------===//
//
// A thin layer over mlir::OpBuilder that emits transfuse primitives the way a
// paper writes a Transformer: separate Q/K/V projections, scaled dot
// products, masks by select, softmax, and so on. Fusion passes rewrite these
// graphs later; nothing here fuses.
//
// Shapes: activations are batch-first [B, S, D] with B and S possibly dynamic.
// Linear weights follow PyTorch ([out, in], y = x·Wᵀ + b); Conv1D weights
// follow GPT-2 ([in, out], y = x·W + b).
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_FRONTEND_GRAPHBUILDER_H
#define TRANSFUSE_FRONTEND_GRAPHBUILDER_H

#include "ir/TransfuseDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <optional>

namespace mlir::transfuse {

/// Projection weights of one attention block, already split per Q/K/V.
/// `transposed` is true for PyTorch layout ([out, in]), false for Conv1D.
struct AttentionWeights {
  Value wq, bq, wk, bk, wv, bv, wo, bo;
  bool transposed = true;
};

class GraphBuilder {
public:
  GraphBuilder(OpBuilder &builder, Location loc) : b(builder), loc(loc) {}

  OpBuilder &builder() { return b; }
  Location location() const { return loc; }
  /// Sets the location of subsequently emitted ops (e.g. per layer).
  void setLocation(Location l) { loc = l; }

  //--- Sources ---------------------------------------------------------------
  /// A named f32 parameter; one op per name (later requests reuse it).
  Value param(StringRef name, ArrayRef<int64_t> shape, StringRef init,
              std::optional<int64_t> fanIn = std::nullopt, bool optional = false);
  /// A scalar f32 constant (tensor<f32>).
  Value scalar(double value);
  /// An f32 constant of `shape` holding `values` (row-major).
  Value constant(ArrayRef<float> values, ArrayRef<int64_t> shape);
  /// The size of `axis` of `tensor`, as an index.
  Value dim(Value tensor, int64_t axis);

  //--- Primitives ------------------------------------------------------------
  Value matmul(Value lhs, Value rhs, bool transposeLhs = false,
               bool transposeRhs = false);
  Value add(Value a, Value b);
  Value mul(Value a, Value b);
  Value scale(Value x, double factor);
  /// relu, gelu (exact) or gelu_tanh.
  Value activation(Value x, StringRef kind);
  Value tanh(Value x);
  Value softmax(Value x, int64_t axis);
  /// LayerNorm over the last dimension (`beta` may be null); RMSNorm with `rms`.
  Value layerNorm(Value x, Value gamma, Value beta, double eps, bool rms = false);
  Value select(Value cond, Value onTrue, Value onFalse);
  Value transpose(Value x, ArrayRef<int64_t> permutation);
  /// Reshapes to `shape` (dynamic sizes carried over in order).
  Value reshape(Value x, ArrayRef<int64_t> shape);
  SmallVector<Value> split(Value x, int64_t axis, ArrayRef<int64_t> sizes);
  Value concat(ValueRange xs, int64_t axis);
  /// The first `length` rows along `axis` (a dynamic slice).
  Value sliceLeading(Value x, int64_t axis, Value length);
  /// Rows [offset, offset + length) along `axis`.
  Value sliceAt(Value x, int64_t axis, Value offset, Value length);
  /// The last row along `axis` (size 1).
  Value last(Value x, int64_t axis);
  /// The first row along `axis` (size 1).
  Value first(Value x, int64_t axis);
  /// Rows [start, start + size) along `axis` (static).
  Value slice(Value x, int64_t axis, int64_t start, int64_t size);
  Value gather(Value table, Value ids);
  Value dropout(Value x, double rate);
  /// The mean cross-entropy of logits [..., V] against labels [...]
  /// (transfuse.cross_entropy: PyTorch's label smoothing and ignore_index).
  Value crossEntropy(Value logits, Value labels, double labelSmoothing, int64_t ignoreIndex);
  /// One vector per sequence of x [B, S, D] (transfuse.pool: mode "cls",
  /// "mean" or "max" over the positions `keep` [B, S] keeps).
  Value pool(Value x, Value keep, StringRef mode);
  /// x / max(||x||₂, 1e-12) along the last axis.
  Value l2Normalize(Value x);
  /// An image x [B, C, H, W] as its patches' rows [B, N, C·ph·pw]
  /// (transfuse.unfold: a stride-`patch` convolution is unfold, then a GEMM).
  Value unfold(Value x, int64_t patchH, int64_t patchW);
  /// x broadcast to `like`'s shape (a learned token repeated over the batch).
  Value expand(Value x, Value like);

  //--- nn-style helpers ------------------------------------------------------
  /// x·Wᵀ + b (PyTorch nn.Linear; weight [out, in]); `bias` may be null.
  Value linear(Value x, Value weight, Value bias);
  /// x·W + b (GPT-2 Conv1D; weight [in, out]).
  Value conv1d(Value x, Value weight, Value bias);
  /// LayerNorm over the last dimension with params `prefix.weight`/`.bias`.
  Value layerNorm(Value x, StringRef prefix, double eps);
  /// RMSNorm over the last dimension with param `prefix.weight` (Llama's).
  Value rmsNorm(Value x, StringRef prefix, double eps);
  /// Sinusoidal positions [length, dModel] of positions offset..offset+length
  /// (`offset` null: 0), interleaved or (`halves`, Marian's) sines then cosines.
  Value positionalEncoding(Value length, int64_t dModel, Value offset = Value(),
                           bool halves = false);
  /// A [B, 1, 1, S] keep-mask from tokens [B, S] (tokens != padId).
  Value keyPaddingMask(Value tokens, int64_t padId);
  /// tokens != padId as [B, S] (what pool keeps).
  Value tokenMask(Value tokens, int64_t padId);
  /// A [Sq, Sk] causal keep-mask, bottom-right aligned.
  Value causalMask(Value queryLen, Value keyLen);
  /// Multi-head attention of `query` [B, Sq, D] over `memory` [B, Sk, D]:
  /// projectHeads of Q, K and V, then attendHeads.
  Value multiHeadAttention(Value query, Value memory, const AttentionWeights &w,
                           int64_t numHeads, ArrayRef<Value> masks,
                           double dropoutRate);
  /// x [B, S, D] projected by `weight` and `bias` and split into heads
  /// [B, H, S, D/H] (Linear layout when `transposed`, else Conv1D).
  Value projectHeads(Value x, Value weight, Value bias, bool transposed, int64_t numHeads);
  /// y [B, S, H·dh] split into heads [B, H, S, dh].
  Value splitHeads(Value y, int64_t numHeads);
  /// Heads [B, Hkv, S, dh] repeated `times` each, [B, Hkv·times, S, dh]
  /// (head h reads head h / times: grouped-query attention's K and V).
  Value repeatHeads(Value x, int64_t times);
  /// The rotary embedding of x [B, S, heads·headDim] at positions offset..
  /// (transfuse.rotary; `offset` null: 0).
  Value rotary(Value x, Value invFreq, Value offset, int64_t headDim);
  /// softmax(q·kᵀ/√dh, masked)·v over heads q [B, H, Sq, dh], k and v
  /// [B, H, Sk, dh], merged back to [B, Sq, H·dh] and projected by wo, bo.
  /// Each mask is a boolean keep-mask broadcastable to [B, H, Sq, Sk];
  /// masked scores become -inf before the softmax.
  Value attendHeads(Value q, Value k, Value v, const AttentionWeights &w,
                    ArrayRef<Value> masks, double dropoutRate);
  /// One residual sublayer around `f`: post-LN: LN(x + dropout(f(x)));
  /// pre-LN: x + dropout(f(LN(x))), LN with params `normPrefix.weight/.bias`.
  Value residual(Value x, StringRef normPrefix, bool preNorm, double eps,
                 double dropoutRate, llvm::function_ref<Value(Value)> f);
  /// act(x·W1ᵀ + b1)·W2ᵀ + b2, or in Conv1D layout when !transposed.
  Value feedForward(Value x, Value w1, Value b1, Value w2, Value b2,
                    StringRef act, bool transposed, double dropoutRate);

  //--- Decoding state (TransfuseStateOps.td) --------------------------------
  Value stateLength();
  /// Appends heads [B, H, n, dh] to cache `name`; the [B, H, L + n, dh] cache.
  Value cacheAppend(StringRef name, Value x, bool keys);
  void stateWrite(StringRef name, Value x, bool keys);
  /// Positions 0..`length` of rows 0..`batch` of `name`, heads like `like`.
  Value stateRead(StringRef name, Value batch, Value length, Value like, bool keys);

private:
  OpBuilder &b;
  Location loc;
  llvm::StringMap<Value> params;
  Operation *lastParam = nullptr;
  int64_t dropoutStreams = 0;
};

} // namespace mlir::transfuse

#endif // TRANSFUSE_FRONTEND_GRAPHBUILDER_H
