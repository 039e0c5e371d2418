// What the Google Benchmark programs share: the FMA peak, probed once per
// process, and one thread pool per thread count.
#ifndef TRANSFUSE_BENCH_LIB_BENCHUTIL_H
#define TRANSFUSE_BENCH_LIB_BENCHUTIL_H

#include "bench/lib/FmaPeak.h"
#include "runtime/ThreadPool.h"

#include <map>
#include <memory>

namespace transfuse::kernels {

// One thread's fp32 FMA peak in GFLOP/s, measured on first use.
inline double cachedFmaPeakGflops() {
  static double peak = measureFmaPeak(0.3, 5).gflops;
  return peak;
}

// A pool of `threads` threads kept for the process; null for one thread
// (the kernels then run on the caller).
inline rt::ThreadPool* benchPool(int threads) {
  if (threads <= 1) return nullptr;
  static std::map<int, std::unique_ptr<rt::ThreadPool>> pools;
  auto& p = pools[threads];
  if (!p) p = std::make_unique<rt::ThreadPool>(threads);
  return p.get();
}

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_BENCH_LIB_BENCHUTIL_H
