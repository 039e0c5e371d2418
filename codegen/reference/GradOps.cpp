//===- GradOps.cpp - the reference backend's gradient ops -----------------===//
//
// The ops of TransfuseGradOps.td that take more than a line of the dispatch
// in Interpreter.cpp: slice_grad, weight_grad, cross_entropy, pool and
// l2_normalize and their gradients, layer_norm_grad, embedding_grad and
// attention_grad, each a direct transcription of its definition in fp64.
//
//===----------------------------------------------------------------------===//

#include "codegen/reference/InterpreterOps.h"

#include <cmath>
#include <limits>

namespace mlir::transfuse::reference::detail {

LogicalResult Interpreter::evalSliceGrad(SliceGradOp op) {
  const Buf &g = get(op.getGrad()), &like = get(op.getLike());
  const int64_t axis = normalizedAxis(op.getAxis(), (int64_t)like.shape.size());
  const int64_t start = op.getStart() + (op.getOffset() ? indices[op.getOffset()] : 0);
  const int64_t size = g.shape.size() == like.shape.size() ? g.shape[axis] : -1;
  if (size < 0 || start < 0 || start + size > like.shape[axis])
    return fail(op, "grad " + str(g.shape) + " at " + std::to_string(start) +
                        " does not fit axis " + std::to_string(axis) + " of " + str(like.shape));
  Buf r{like.shape, std::vector<double>(like.data.size(), 0.0)};
  const int64_t outer = numel(ArrayRef<int64_t>(like.shape).take_front(axis));
  const int64_t inner = numel(ArrayRef<int64_t>(like.shape).drop_front(axis + 1));
  for (int64_t o = 0; o < outer; ++o)
    std::copy_n(g.data.begin() + o * size * inner, size * inner,
                r.data.begin() + (o * like.shape[axis] + start) * inner);
  set(op.getResult(), std::move(r));
  return success();
}

LogicalResult Interpreter::evalWeightGrad(WeightGradOp op) {
  const Buf &x = get(op.getInput()), &g = get(op.getGrad());
  const int64_t K = x.shape.back(), N = g.shape.back();
  if (x.shape.size() != g.shape.size() ||
      !std::equal(x.shape.begin(), x.shape.end() - 1, g.shape.begin()))
    return fail(op, "input " + str(x.shape) + " and grad " + str(g.shape) +
                        " differ in their leading dimensions");
  const int64_t rows = K > 0 ? (int64_t)x.data.size() / K : 0;
  Buf r{{K, N}, std::vector<double>(K * N, 0.0)};
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t k = 0; k < K; ++k) {
      const double xv = x.data[i * K + k];
      for (int64_t n = 0; n < N; ++n)
        r.data[k * N + n] += xv * g.data[i * N + n];
    }
  set(op.getResult(), std::move(r));
  return success();
}

/// cross_entropy (grad null) or cross_entropy_grad (grad: the loss's
/// gradient, rank 0), as TransfuseGradOps.td defines them.
LogicalResult Interpreter::evalCrossEntropy(Operation *op, Value logitsValue, Value labelsValue,
                                            double eps, int64_t ignore, const Buf *grad) {
  const Buf &logits = get(logitsValue), &labels = get(labelsValue);
  const int64_t V = logits.shape.back(), rows = (int64_t)labels.data.size();
  if (rows * V != (int64_t)logits.data.size())
    return fail(op, "logits " + str(logits.shape) + " do not match labels " + str(labels.shape));
  int64_t count = 0;
  for (double y : labels.data) {
    if ((int64_t)y == ignore)
      continue;
    if (y < 0 || y >= V)
      return fail(op, "label " + std::to_string((int64_t)y) + " in " + nameOf(labelsValue) +
                          " is outside the vocabulary [0, " + std::to_string(V) + ")");
    ++count;
  }
  Buf r;
  if (grad) {
    r.shape = logits.shape;
    r.data.assign(logits.data.size(), 0.0);
  } else {
    r.data.assign(1, 0.0);
  }
  double total = 0.0;
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t y = (int64_t)labels.data[t];
    if (y == ignore)
      continue;
    const double *x = logits.data.data() + t * V;
    double mx = -std::numeric_limits<double>::infinity(), sum = 0.0;
    for (int64_t c = 0; c < V; ++c)
      mx = std::max(mx, x[c]);
    for (int64_t c = 0; c < V; ++c)
      sum += std::exp(x[c] - mx);
    const double lse = mx + std::log(sum);
    if (grad) {
      const double scale = grad->data[0] / (double)count;
      for (int64_t c = 0; c < V; ++c)
        r.data[t * V + c] = scale * (std::exp(x[c] - lse) - (c == y ? 1.0 - eps : 0.0) - eps / V);
    } else {
      double all = 0.0; // Σ_c -log p_c
      for (int64_t c = 0; c < V; ++c)
        all += lse - x[c];
      total += (1.0 - eps) * (lse - x[y]) + eps / V * all;
    }
  }
  if (!grad)
    r.data[0] = count ? total / (double)count : 0.0;
  set(op->getResult(0), std::move(r));
  return success();
}

LogicalResult Interpreter::evalLayerNormGrad(LayerNormGradOp op) {
  const Buf &x = get(op.getInput()), &gamma = get(op.getGamma()), &dy = get(op.getGrad());
  const int64_t axis = normalizedAxis(op.getAxis(), (int64_t)x.shape.size());
  const int64_t n = numel(ArrayRef<int64_t>(x.shape).drop_front(axis));
  const double eps = op.getEpsilon().convertToDouble();
  if (dy.data.size() != x.data.size())
    return fail(op, "grad " + str(dy.shape) + " is not the input's " + str(x.shape));
  Buf dx{x.shape, std::vector<double>(x.data.size())};
  Buf dg{gamma.shape, std::vector<double>(n, 0.0)}, db{gamma.shape, std::vector<double>(n, 0.0)};
  std::vector<double> xhat(n), d(n);
  for (int64_t base = 0; base < (int64_t)x.data.size(); base += n) {
    auto [mean, r] = meanAndRstd(x.data.data() + base, n, eps, op.getRms());
    double md = 0.0, mdx = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      xhat[i] = (x.data[base + i] - mean) * r;
      d[i] = dy.data[base + i] * gamma.data[i];
      md += d[i];
      mdx += d[i] * xhat[i];
      dg.data[i] += dy.data[base + i] * xhat[i];
      db.data[i] += dy.data[base + i];
    }
    md = op.getRms() ? 0.0 : md / n; // RMSNorm does not center
    mdx /= n;
    for (int64_t i = 0; i < n; ++i)
      dx.data[base + i] = r * (d[i] - md - xhat[i] * mdx);
  }
  set(op.getInputGrad(), std::move(dx));
  set(op.getGammaGrad(), std::move(dg));
  set(op.getBetaGrad(), std::move(db));
  return success();
}

LogicalResult Interpreter::evalUnfold(Operation *op, Value input, ArrayRef<int64_t> patch,
                                      const Buf *grad) {
  const Buf &x = get(input);
  if (x.shape.size() != 4 || x.shape[2] % patch[0] != 0 || x.shape[3] % patch[1] != 0)
    return fail(op, "the input " + str(x.shape) + " is not [B, C, H, W] of whole patches");
  const int64_t B = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t ph = patch[0], pw = patch[1], rows = (H / ph) * (W / pw), cols = C * ph * pw;
  if (grad && grad->shape != Shape{B, rows, cols})
    return fail(op, "grad " + str(grad->shape) + " is not the patches of " + str(x.shape));
  Buf r;
  r.shape = grad ? x.shape : Shape{B, rows, cols};
  r.data.assign(numel(r.shape), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t xx = 0; xx < W; ++xx) {
          const int64_t pixel = ((b * C + c) * H + y) * W + xx;
          const int64_t row = (y / ph) * (W / pw) + xx / pw;
          const int64_t col = (c * ph + y % ph) * pw + xx % pw;
          const int64_t element = (b * rows + row) * cols + col;
          if (grad)
            r.data[pixel] = grad->data[element];
          else
            r.data[element] = x.data[pixel];
        }
  set(op->getResult(0), std::move(r));
  return success();
}

LogicalResult Interpreter::evalPool(Operation *op, Value input, Value keepValue, Pooling mode,
                                    const Buf *grad) {
  const Buf &x = get(input), &keep = get(keepValue);
  if (x.shape.size() != 3 || keep.shape != Shape{x.shape[0], x.shape[1]})
    return fail(op, "keep " + str(keep.shape) + " does not match the input " + str(x.shape));
  const int64_t B = x.shape[0], S = x.shape[1], D = x.shape[2];
  if (grad && grad->shape != Shape{B, D})
    return fail(op, "grad " + str(grad->shape) + " is not [B, D] of the input " + str(x.shape));
  Buf r;
  r.shape = grad ? x.shape : Shape{B, D};
  r.data.assign(numel(r.shape), 0.0);
  auto at = [&](int64_t b, int64_t s, int64_t d) { return (b * S + s) * D + d; };
  for (int64_t b = 0; b < B; ++b) {
    int64_t kept = 0;
    for (int64_t s = 0; s < S; ++s)
      kept += keep.data[b * S + s] != 0.0;
    for (int64_t d = 0; d < D; ++d) {
      const double g = grad ? grad->data[b * D + d] : 0.0;
      if (mode == Pooling::Cls) {
        if (S == 0)
          continue;
        if (grad)
          r.data[at(b, 0, d)] = g;
        else
          r.data[b * D + d] = x.data[at(b, 0, d)];
      } else if (mode == Pooling::Mean) {
        if (kept == 0)
          continue;
        double sum = 0.0;
        for (int64_t s = 0; s < S; ++s)
          if (keep.data[b * S + s] != 0.0) {
            sum += x.data[at(b, s, d)];
            if (grad)
              r.data[at(b, s, d)] = g / kept;
          }
        if (!grad)
          r.data[b * D + d] = sum / kept;
      } else {
        int64_t best = -1;
        for (int64_t s = 0; s < S; ++s)
          if (keep.data[b * S + s] != 0.0 && (best < 0 || x.data[at(b, s, d)] > x.data[at(b, best, d)]))
            best = s;
        if (best < 0)
          continue;
        if (grad)
          r.data[at(b, best, d)] = g;
        else
          r.data[b * D + d] = x.data[at(b, best, d)];
      }
    }
  }
  set(op->getResult(0), std::move(r));
  return success();
}

LogicalResult Interpreter::evalL2Normalize(Operation *op, Value input, double eps,
                                           const Buf *grad) {
  const Buf &x = get(input);
  if (grad && grad->shape != x.shape)
    return fail(op, "grad " + str(grad->shape) + " is not the input's " + str(x.shape));
  const int64_t D = x.shape.empty() ? 0 : x.shape.back();
  Buf r{x.shape, std::vector<double>(x.data.size())};
  for (int64_t base = 0; D > 0 && base < (int64_t)x.data.size(); base += D) {
    double squares = 0.0;
    for (int64_t i = 0; i < D; ++i)
      squares += x.data[base + i] * x.data[base + i];
    const double norm = std::sqrt(squares), n = std::max(norm, eps);
    double yg = 0.0;
    for (int64_t i = 0; grad && i < D; ++i)
      yg += x.data[base + i] / n * grad->data[base + i];
    for (int64_t i = 0; i < D; ++i) {
      const double y = x.data[base + i] / n;
      if (!grad)
        r.data[base + i] = y;
      else
        r.data[base + i] = norm > eps ? (grad->data[base + i] - y * yg) / n : grad->data[base + i] / eps;
    }
  }
  set(op->getResult(0), std::move(r));
  return success();
}

LogicalResult Interpreter::evalEmbeddingGrad(EmbeddingGradOp op) {
  const Buf &ids = get(op.getIds()), &g = get(op.getGrad());
  auto type = cast<RankedTensorType>(op.getType());
  const int64_t V = type.getDimSize(0), D = type.getDimSize(1);
  if ((int64_t)(ids.data.size() * D) != (int64_t)g.data.size())
    return fail(op, "grad " + str(g.shape) + " does not match ids " + str(ids.shape));
  Buf r{Shape{V, D}, std::vector<double>(V * D, 0.0)};
  for (size_t i = 0; i < ids.data.size(); ++i) {
    const int64_t id = (int64_t)ids.data[i];
    if (id < 0 || id >= V)
      return fail(op, "token id " + std::to_string(id) + " in " + nameOf(op.getIds()) +
                          " is outside the vocabulary [0, " + std::to_string(V) + ")");
    for (int64_t c = 0; c < D; ++c)
      r.data[id * D + c] += g.data[i * D + c];
  }
  set(op.getResult(), std::move(r));
  return success();
}

LogicalResult Interpreter::evalAttentionGrad(AttentionGradOp op) {
  const double scale = op.getScale().convertToDouble(), rate = op.getDropoutRate().convertToDouble();
  Buf p;
  const Buf &q = get(op.getQuery());
  const int64_t heads = q.shape[1], kvHeads = get(op.getKey()).shape[1];
  const Buf k = repeatHeads(get(op.getKey()), heads), v = repeatHeads(get(op.getValue()), heads);
  if (failed(attentionProbs(op, q, k, scale, Value(), op.getCausal(), op.getKeyPadding(),
                            op.getMask(), p)))
    return failure();
  const Buf &g = get(op.getGrad());
  Buf pd = p, dv, dp, dq, dk;
  if (rate > 0.0)
    dropoutInPlace(pd, rate, op.getDropoutSeed() + key.seed, key.step, op.getDropoutStream());
  if (failed(matmul(op, pd, g, /*ta=*/true, false, dv)) ||
      failed(matmul(op, g, v, false, /*tb=*/true, dp)))
    return failure();
  if (rate > 0.0) // through the same mask and scale
    dropoutInPlace(dp, rate, op.getDropoutSeed() + key.seed, key.step, op.getDropoutStream());
  forEachRow(p.shape, 3, [&](int64_t base, int64_t stride, int64_t len) {
    double dot = 0.0;
    for (int64_t j = 0; j < len; ++j)
      dot += dp.data[base + j * stride] * p.data[base + j * stride];
    for (int64_t j = 0; j < len; ++j) { // dS, scaled: the scores were scale·Q·Kᵀ
      double &d = dp.data[base + j * stride];
      d = p.data[base + j * stride] * (d - dot) * scale;
    }
  });
  if (failed(matmul(op, dp, k, false, false, dq)) ||
      failed(matmul(op, dp, q, /*ta=*/true, false, dk)))
    return failure();
  set(op.getQueryGrad(), std::move(dq));
  set(op.getKeyGrad(), sumHeads(dk, kvHeads)); // a K/V head's gradient: its group's sum
  set(op.getValueGrad(), sumHeads(dv, kvHeads));
  return success();
}

} // namespace mlir::transfuse::reference::detail
