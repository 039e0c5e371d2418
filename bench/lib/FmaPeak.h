// A probe of this machine's fp32 FMA peak for one thread: independent chains
// of vector FMAs (acc = acc·m + c) on the best Highway target compiled in,
// with as many accumulators as the registers allow (24 on AVX-512's 32
// registers, 12 on 16-register targets), so that neither FMA latency nor loads
// limit it. Kernel benchmarks report their GFLOP/s as a fraction of it.
#ifndef TRANSFUSE_BENCH_LIB_FMAPEAK_H
#define TRANSFUSE_BENCH_LIB_FMAPEAK_H

#include <cstddef>
#include <string>

namespace transfuse::kernels {

struct FmaPeak {
  double gflops = 0;     // one thread: 2·lanes·chains·iterations / second
  std::string target;    // the Highway target measured, e.g. "AVX3"
  size_t lanes = 0;      // fp32 lanes per vector
  size_t chains = 0;     // independent accumulators
};

// Best of `repeats` runs of about seconds/repeats each, on the calling thread.
FmaPeak measureFmaPeak(double seconds = 0.2, int repeats = 5);

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_BENCH_LIB_FMAPEAK_H
