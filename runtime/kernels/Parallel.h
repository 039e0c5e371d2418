// parallelFor: splits [0, n) into contiguous chunks of at least `grain`
// items and runs f(begin, end) on each, on the runtime thread pool when one is
// given (the calling thread takes part), inline otherwise. Results never depend
// on the split: every kernel writes disjoint outputs per item, so threaded
// results equal single-threaded ones bit for bit.
#ifndef TRANSFUSE_RUNTIME_KERNELS_PARALLEL_H
#define TRANSFUSE_RUNTIME_KERNELS_PARALLEL_H

#include "runtime/ThreadPool.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace transfuse::kernels {

// Rows per task for row kernels of the given width: about 32 KiB of a row-major
// fp32 tensor, at least one row.
inline size_t rowGrain(size_t width) {
  return std::max<size_t>(1, 8192 / std::max<size_t>(1, width));
}

template <class F>
void parallelFor(rt::ThreadPool* pool, size_t n, size_t grain, F&& f) {
  if (n == 0) return;
  grain = std::max<size_t>(1, grain);
  if (!pool || pool->numThreads() <= 1 || n <= grain) {
    f(size_t{0}, n);
    return;
  }
  // Dynamic chunks: about 4 per thread (load balance), never below `grain`.
  const size_t T = static_cast<size_t>(pool->numThreads());
  const size_t chunk = std::max(grain, (n + 4 * T - 1) / (4 * T));
  pool->parallelForChunked(static_cast<int64_t>(n), static_cast<int64_t>(chunk),
                           [&](int64_t b, int64_t e, int) {
                             f(static_cast<size_t>(b), static_cast<size_t>(e));
                           });
}

// Runs f(begin, end) over [0, n) one task per grab (uneven tasks, such as
// causal attention tiles, balance), on the pool when one is given, inline
// otherwise.
template <class F>
void parallelTasks(rt::ThreadPool* pool, size_t n, F&& f) {
  if (!pool || pool->numThreads() <= 1) {
    f(size_t{0}, n);
    return;
  }
  pool->parallelForChunked(static_cast<int64_t>(n), 1, [&](int64_t b, int64_t e, int) {
    f(static_cast<size_t>(b), static_cast<size_t>(e));
  });
}

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_PARALLEL_H
