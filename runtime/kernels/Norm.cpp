// Dispatch and threading for Norm.h; the per-target code is norm-inl.h.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/Norm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "runtime/kernels/norm-inl.h"

#if HWY_ONCE
#include "runtime/kernels/Norm.h"
#include "runtime/kernels/Parallel.h"

#include <algorithm>
#include <cmath>
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

namespace {

void normGrad(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
              float* dbeta, size_t rows, size_t width, float eps, bool rms,
              rt::ThreadPool* pool) {
  if (width == 0) return;
  std::vector<float> stats(2 * rows);
  auto* statsRows = HWY_DYNAMIC_DISPATCH(LayerNormStatsRows);
  parallelFor(pool, rows, rowGrain(width), [&](size_t r0, size_t r1) {
    statsRows(x, width, eps, rms, stats.data(), r0, r1);
  });
  auto* params = HWY_DYNAMIC_DISPATCH(LayerNormParamGradRange);
  constexpr size_t kBlock = 64;  // columns per task, as columnSums
  parallelFor(pool, (width + kBlock - 1) / kBlock, 1, [&](size_t b0, size_t b1) {
    params(x, dy, stats.data(), rows, width, dgamma, dbeta, b0 * kBlock,
           std::min(width, b1 * kBlock));
  });
  auto* input = HWY_DYNAMIC_DISPATCH(LayerNormInputGradRows);
  parallelFor(pool, rows, rowGrain(width), [&](size_t r0, size_t r1) {
    input(x, gamma, dy, stats.data(), dx, width, rms, r0, r1);
  });
}

}  // namespace

void layerNormGrad(const float* x, const float* gamma, const float* dy, float* dx,
                   float* dgamma, float* dbeta, size_t rows, size_t width, float eps,
                   rt::ThreadPool* pool) {
  normGrad(x, gamma, dy, dx, dgamma, dbeta, rows, width, eps, false, pool);
}

void rmsNormGrad(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                 float* dbeta, size_t rows, size_t width, float eps, rt::ThreadPool* pool) {
  normGrad(x, gamma, dy, dx, dgamma, dbeta, rows, width, eps, true, pool);
}

void addLayerNorm(const float* x, const float* residual, const float* gamma,
                  const float* beta, float* y, float* sum, size_t rows, size_t width,
                  float eps, rt::ThreadPool* pool) {
  HWY_DYNAMIC_DISPATCH(AddLayerNormRun)(x, residual, gamma, beta, y, sum, rows, width, eps, false,
                                        pool);
}

void layerNorm(const float* x, const float* gamma, const float* beta, float* y,
               size_t rows, size_t width, float eps, rt::ThreadPool* pool) {
  addLayerNorm(x, nullptr, gamma, beta, y, nullptr, rows, width, eps, pool);
}

void addRmsNorm(const float* x, const float* residual, const float* gamma, const float* beta,
                float* y, float* sum, size_t rows, size_t width, float eps,
                rt::ThreadPool* pool) {
  HWY_DYNAMIC_DISPATCH(AddLayerNormRun)(x, residual, gamma, beta, y, sum, rows, width, eps, true,
                                        pool);
}

void rmsNorm(const float* x, const float* gamma, const float* beta, float* y, size_t rows,
             size_t width, float eps, rt::ThreadPool* pool) {
  addRmsNorm(x, nullptr, gamma, beta, y, nullptr, rows, width, eps, pool);
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

// Pooling and L2 normalization: B·S·D adds against the encoder's B·S·D²
// multiply-adds per layer, so plain loops (the inner one over the width,
// which the compiler vectorizes) over batches or rows on the pool.
void pool(const float* x, const uint8_t* keep, float* y, size_t batch, size_t seq, size_t width,
          int32_t mode, rt::ThreadPool* threads) {
  parallelFor(threads, batch, 1, [&](size_t b0, size_t b1) {
    std::vector<double> acc(width);
    for (size_t b = b0; b < b1; ++b) {
      const float* xb = x + b * seq * width;
      float* yb = y + b * width;
      const uint8_t* kb = keep + b * seq;
      if (mode == kPoolCls) {
        for (size_t d = 0; d < width; ++d) yb[d] = seq ? xb[d] : 0.0f;
        continue;
      }
      size_t kept = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (size_t s = 0; s < seq; ++s) {
        if (!kb[s]) continue;
        const float* row = xb + s * width;
        if (mode == kPoolMean) {
          for (size_t d = 0; d < width; ++d) acc[d] += row[d];
        } else if (kept == 0) {
          for (size_t d = 0; d < width; ++d) acc[d] = row[d];
        } else {
          for (size_t d = 0; d < width; ++d) acc[d] = std::max<double>(acc[d], row[d]);
        }
        ++kept;
      }
      const double scale = mode == kPoolMean && kept ? 1.0 / static_cast<double>(kept) : 1.0;
      for (size_t d = 0; d < width; ++d) yb[d] = static_cast<float>(acc[d] * scale);
    }
  });
}

void poolGrad(const float* x, const uint8_t* keep, const float* dy, float* dx, size_t batch,
              size_t seq, size_t width, int32_t mode, rt::ThreadPool* threads) {
  parallelFor(threads, batch, 1, [&](size_t b0, size_t b1) {
    std::vector<size_t> best(width);
    for (size_t b = b0; b < b1; ++b) {
      const float* xb = x + b * seq * width;
      const float* gb = dy + b * width;
      const uint8_t* kb = keep + b * seq;
      float* db = dx + b * seq * width;
      std::fill(db, db + seq * width, 0.0f);
      if (mode == kPoolCls) {
        if (seq) std::copy(gb, gb + width, db);
        continue;
      }
      size_t kept = 0;
      for (size_t s = 0; s < seq; ++s) kept += kb[s] != 0;
      if (kept == 0) continue;
      if (mode == kPoolMean) {
        const float inv = static_cast<float>(1.0 / static_cast<double>(kept));
        for (size_t s = 0; s < seq; ++s)
          if (kb[s])
            for (size_t d = 0; d < width; ++d) db[s * width + d] = gb[d] * inv;
        continue;
      }
      size_t first = 0;
      while (!kb[first]) ++first;
      std::fill(best.begin(), best.end(), first);
      for (size_t s = first + 1; s < seq; ++s)
        if (kb[s])
          for (size_t d = 0; d < width; ++d)
            if (xb[s * width + d] > xb[best[d] * width + d]) best[d] = s;
      for (size_t d = 0; d < width; ++d) db[best[d] * width + d] = gb[d];
    }
  });
}

namespace {
double squaredNorm(const float* x, size_t width) {
  double sum = 0.0;
  for (size_t d = 0; d < width; ++d) sum += static_cast<double>(x[d]) * x[d];
  return sum;
}
}  // namespace

void l2Normalize(const float* x, float* y, size_t rows, size_t width, float eps,
                 rt::ThreadPool* threads) {
  parallelFor(threads, rows, rowGrain(width), [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const double n = std::max(std::sqrt(squaredNorm(x + r * width, width)), double(eps));
      const float inv = static_cast<float>(1.0 / n);
      for (size_t d = 0; d < width; ++d) y[r * width + d] = x[r * width + d] * inv;
    }
  });
}

void l2NormalizeGrad(const float* x, const float* dy, float* dx, size_t rows, size_t width,
                     float eps, rt::ThreadPool* threads) {
  parallelFor(threads, rows, rowGrain(width), [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const float* xr = x + r * width;
      const float* gr = dy + r * width;
      float* dr = dx + r * width;
      const double norm = std::sqrt(squaredNorm(xr, width));
      if (!(norm > eps)) {
        for (size_t d = 0; d < width; ++d) dr[d] = gr[d] / eps;
        continue;
      }
      double yg = 0.0;
      for (size_t d = 0; d < width; ++d) yg += static_cast<double>(xr[d]) * gr[d];
      yg /= norm * norm;  // c = (x·dy)/n², so that y·(y·dy) = x·c
      const float inv = static_cast<float>(1.0 / norm), c = static_cast<float>(yg);
      for (size_t d = 0; d < width; ++d) dr[d] = (gr[d] - xr[d] * c) * inv;
    }
  });
}

}  // namespace transfuse::kernels
#endif  // HWY_ONCE
