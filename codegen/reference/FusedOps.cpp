//===- FusedOps.cpp - the reference backend's fused ops -------------------===//
//
// The ops of TransfuseFusedOps.td, each evaluated as its definition on the
// primitives: attention (and the probabilities attention_grad shares),
// linear with its bias, activation and residual, and a fused_elementwise
// region op by op.
//
//===----------------------------------------------------------------------===//

#include "codegen/reference/InterpreterOps.h"

#include "codegen/lowering/OpMath.h"

#include <limits>

namespace mlir::transfuse::reference::detail {

/// The definition in TransfuseFusedOps.td, step by step on the primitives.
/// softmax(mask(scale·Q·Kᵀ + bias)) over the keys, into `s` [B, H, Sq, Sk]
/// (attention and attention_grad; masks as TransfuseFusedOps.td says).
Buf repeatHeads(const Buf &x, int64_t heads) {
  const int64_t B = x.shape[0], kv = x.shape[1], block = x.shape[2] * x.shape[3];
  if (kv == heads)
    return x;
  Buf r{{B, heads, x.shape[2], x.shape[3]}, std::vector<double>(B * heads * block)};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      std::copy_n(x.data.begin() + (b * kv + h / (heads / kv)) * block, block,
                  r.data.begin() + (b * heads + h) * block);
  return r;
}

Buf sumHeads(const Buf &x, int64_t kvHeads) {
  const int64_t B = x.shape[0], heads = x.shape[1], block = x.shape[2] * x.shape[3];
  if (kvHeads == heads)
    return x;
  Buf r{{B, kvHeads, x.shape[2], x.shape[3]}, std::vector<double>(B * kvHeads * block, 0.0)};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t e = 0; e < block; ++e)
        r.data[(b * kvHeads + h / (heads / kvHeads)) * block + e] += x.data[(b * heads + h) * block + e];
  return r;
}

LogicalResult Interpreter::attentionProbs(Operation *op, const Buf &q, const Buf &k, double scale,
                                          Value bias, bool causal, Value keyPadding, Value mask,
                                          Buf &s) {
  if (failed(matmul(op, q, k, false, /*tb=*/true, s)))
    return failure();
  for (double &x : s.data)
    x *= scale;
  if (bias) {
    Buf biased;
    if (failed(binary(op, s, get(bias), std::plus<>(), biased)))
      return failure();
    if (biased.shape != s.shape)
      return fail(op, "bias " + str(get(bias).shape) + " does not broadcast to the scores " + str(s.shape));
    s = std::move(biased);
  }
  int64_t B = s.shape[0], Sq = s.shape[2], Sk = s.shape[3];
  const double ninf = -std::numeric_limits<double>::infinity();
  auto applyMask = [&](const Buf &keep) -> LogicalResult {
    Buf masked;
    if (failed(broadcast(op, keep.shape, s.shape, masked.shape)) || masked.shape != s.shape)
      return fail(op, "mask " + str(keep.shape) + " does not broadcast to the scores " + str(s.shape));
    std::array<Shape, 1> strides = {broadcastStrides(keep.shape, s.shape)};
    forEachBroadcast<1>(s.shape, strides, [&](int64_t i, const std::array<int64_t, 1> &o) {
      if (keep.data[o[0]] == 0.0)
        s.data[i] = ninf;
    });
    return success();
  };
  if (causal) {
    Buf c{{Sq, Sk}, std::vector<double>(Sq * Sk)};
    for (int64_t i = 0; i < Sq; ++i)
      for (int64_t j = 0; j < Sk; ++j)
        c.data[i * Sk + j] = j <= i + Sk - Sq;
    if (failed(applyMask(c)))
      return failure();
  }
  if (keyPadding) {
    Buf kp = get(keyPadding);
    if (kp.shape != Shape{B, Sk})
      return fail(op, "key_padding is " + str(kp.shape) + ", expected " + str({B, Sk}));
    kp.shape = {B, 1, 1, Sk};
    if (failed(applyMask(kp)))
      return failure();
  }
  if (mask && failed(applyMask(get(mask))))
    return failure();
  softmaxInPlace(s, 3);
  return success();
}

LogicalResult Interpreter::evalAttention(AttentionOp op) {
  Buf s;
  const Buf &q = get(op.getQuery());
  const int64_t heads = q.shape[1];
  if (failed(attentionProbs(op, q, repeatHeads(get(op.getKey()), heads),
                            op.getScale().convertToDouble(), op.getBias(), op.getCausal(),
                            op.getKeyPadding(), op.getMask(), s)))
    return failure();
  if (double rate = op.getDropoutRate().convertToDouble(); rate > 0.0)
    dropoutInPlace(s, rate, op.getDropoutSeed() + key.seed, key.step, op.getDropoutStream());
  Buf r;
  if (failed(matmul(op, s, repeatHeads(get(op.getValue()), heads), false, false, r)))
    return failure();
  set(op.getResult(), std::move(r));
  return success();
}

LogicalResult Interpreter::evalLinear(LinearOp op) {
  const Buf &x = get(op.getInput()), &w = get(op.getWeight());
  Buf r;
  if (failed(matmul(op, x, w, false, op.getTransposeWeight(), r)))
    return failure();
  if (op.getBias()) {
    Buf biased;
    if (failed(binary(op, r, get(op.getBias()), std::plus<>(), biased)))
      return failure();
    r = std::move(biased);
  }
  std::optional<math::Kind> act = activationKind(op.getActivation());
  if (op.getGated()) { // act(gate)·up: the two halves of each row
    const int64_t n = r.shape.back() / 2, rows = (int64_t)r.data.size() / (2 * n);
    Buf gated;
    gated.shape = r.shape;
    gated.shape.back() = n;
    gated.data.resize(rows * n);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double g = r.data[i * 2 * n + j], u = r.data[i * 2 * n + n + j];
        gated.data[i * n + j] = (act ? math::apply(*act, g) : g) * u;
      }
    r = std::move(gated);
  } else if (act) {
    for (double &y : r.data)
      y = math::apply(*act, y);
  }
  if (op.getInvFreq())
    rotaryInPlace(r, get(op.getInvFreq()), op.getHeadDim(), op.getRotaryColumns(),
                  op.getOffset() ? indices[op.getOffset()] : 0, /*inverse=*/false);
  if (op.getResidual()) {
    Buf sum;
    if (failed(binary(op, r, get(op.getResidual()), std::plus<>(), sum)))
      return failure();
    if (sum.shape != r.shape)
      return fail(op, "residual " + str(get(op.getResidual()).shape) + " does not broadcast to " + str(r.shape));
    r = std::move(sum);
  }
  set(op.getResult(), std::move(r));
  return success();
}

LogicalResult Interpreter::evalFusedElementwise(FusedElementwiseOp op) {
  Block &body = op.getBody().front();
  for (auto [arg, input] : llvm::zip(body.getArguments(), op.getInputs()))
    set(arg, get(input));
  for (Operation &inner : body.without_terminator())
    if (failed(eval(&inner)))
      return failure();
  set(op.getResult(), get(cast<YieldOp>(body.getTerminator()).getValue()));
  for (Operation &inner : body.without_terminator())
    for (Value result : inner.getResults())
      values.erase(result.getAsOpaquePointer());
  for (BlockArgument arg : body.getArguments())
    values.erase(arg.getAsOpaquePointer());
  return success();
}

} // namespace mlir::transfuse::reference::detail
