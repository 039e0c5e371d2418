// What the Google Benchmark programs share: their main (with the Highway
// target forced by $TRANSFUSE_ISA), the FMA peak, probed once per process,
// and one thread pool per thread count.
#ifndef TRANSFUSE_BENCH_LIB_BENCHUTIL_H
#define TRANSFUSE_BENCH_LIB_BENCHUTIL_H

#include "bench/lib/FmaPeak.h"
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Targets.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <functional>
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

// main() of a benchmark program: $TRANSFUSE_ISA (e.g. AVX2) dispatches every
// kernel, the FMA probe included, to that Highway target instead of the best
// one; the context's "target" names the one measured. `addContext` adds
// program-specific context before the run.
inline int benchMain(int argc, char** argv, const std::function<void()>& addContext = {}) {
  if (rt::Status s = forceTargetFromEnvironment(); !s.isOk()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], s.message().c_str());
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("target", bestTargetName());
  if (addContext) addContext();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_BENCH_LIB_BENCHUTIL_H
