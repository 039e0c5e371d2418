// Dispatch and threading for Norm.h; the per-target code is norm-inl.h.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/Norm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "runtime/kernels/norm-inl.h"

#if HWY_ONCE
#include "runtime/kernels/Norm.h"
#include "runtime/kernels/Parallel.h"

#include <string>
#include <vector>

namespace transfuse::kernels {

HWY_EXPORT(AddLayerNormRun);
HWY_EXPORT(SoftmaxRun);
HWY_EXPORT(LogSumExpRows);
HWY_EXPORT(CrossEntropyRows);
HWY_EXPORT(ColumnSumRange);
HWY_EXPORT(LayerNormStatsRows);
HWY_EXPORT(LayerNormParamGradRange);
HWY_EXPORT(LayerNormInputGradRows);

void columnSums(const float* x, size_t rows, size_t cols, double divisor, float* out,
                rt::ThreadPool* pool) {
  if (cols == 0) return;
  auto* fn = HWY_DYNAMIC_DISPATCH(ColumnSumRange);
  // Tasks take contiguous ranges of 64-column blocks.
  constexpr size_t kBlock = 64;
  parallelFor(pool, (cols + kBlock - 1) / kBlock, 1, [&](size_t b0, size_t b1) {
    fn(x, rows, cols, divisor, out, b0 * kBlock, std::min(cols, b1 * kBlock));
  });
}

void layerNormGrad(const float* x, const float* gamma, const float* dy, float* dx,
                   float* dgamma, float* dbeta, size_t rows, size_t width, float eps,
                   rt::ThreadPool* pool) {
  if (width == 0) return;
  std::vector<float> stats(2 * rows);
  auto* statsRows = HWY_DYNAMIC_DISPATCH(LayerNormStatsRows);
  parallelFor(pool, rows, rowGrain(width),
              [&](size_t r0, size_t r1) { statsRows(x, width, eps, stats.data(), r0, r1); });
  auto* params = HWY_DYNAMIC_DISPATCH(LayerNormParamGradRange);
  constexpr size_t kBlock = 64;  // columns per task, as columnSums
  parallelFor(pool, (width + kBlock - 1) / kBlock, 1, [&](size_t b0, size_t b1) {
    params(x, dy, stats.data(), rows, width, dgamma, dbeta, b0 * kBlock,
           std::min(width, b1 * kBlock));
  });
  auto* input = HWY_DYNAMIC_DISPATCH(LayerNormInputGradRows);
  parallelFor(pool, rows, rowGrain(width), [&](size_t r0, size_t r1) {
    input(x, gamma, dy, stats.data(), dx, width, r0, r1);
  });
}

void addLayerNorm(const float* x, const float* residual, const float* gamma,
                  const float* beta, float* y, float* sum, size_t rows, size_t width,
                  float eps, rt::ThreadPool* pool) {
  HWY_DYNAMIC_DISPATCH(AddLayerNormRun)(x, residual, gamma, beta, y, sum, rows, width, eps, pool);
}

void layerNorm(const float* x, const float* gamma, const float* beta, float* y,
               size_t rows, size_t width, float eps, rt::ThreadPool* pool) {
  addLayerNorm(x, nullptr, gamma, beta, y, nullptr, rows, width, eps, pool);
}

void softmax(const float* x, float* y, size_t rows, size_t width, rt::ThreadPool* pool) {
  HWY_DYNAMIC_DISPATCH(SoftmaxRun)(x, y, rows, width, pool);
}

void logSumExp(const float* x, float* out, size_t rows, size_t width, rt::ThreadPool* pool) {
  if (rows == 0) return;
  auto* fn = HWY_DYNAMIC_DISPATCH(LogSumExpRows);
  parallelFor(pool, rows, rowGrain(width),
              [&](size_t r0, size_t r1) { fn(x, out, width, r0, r1); });
}

rt::Status crossEntropy(const float* x, const int32_t* labels, size_t rows, size_t width,
                        float smoothing, int32_t ignore, float* loss, float* grad,
                        float gradScale, rt::ThreadPool* pool) {
  for (size_t r = 0; r < rows; ++r)
    if (labels[r] != ignore && (labels[r] < 0 || static_cast<size_t>(labels[r]) >= width))
      return rt::Status::error("cross-entropy: label " + std::to_string(labels[r]) + " of row " +
                               std::to_string(r) + " is outside the vocabulary [0, " +
                               std::to_string(width) + ")");
  if (rows == 0 || width == 0) return rt::Status::ok();
  auto* fn = HWY_DYNAMIC_DISPATCH(CrossEntropyRows);
  parallelFor(pool, rows, rowGrain(width), [&](size_t r0, size_t r1) {
    fn(x, labels, width, smoothing, ignore, loss, grad, gradScale, r0, r1);
  });
  return rt::Status::ok();
}

}  // namespace transfuse::kernels
#endif  // HWY_ONCE
