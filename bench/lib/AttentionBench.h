// The measurement behind `transfuse bench attention`: times fused or unfused
// attention (runtime/kernels/Attention.h) on random data. Benchmark code lives
// in bench/, apart from the kernel library that every artifact links.
#ifndef TRANSFUSE_BENCH_LIB_ATTENTIONBENCH_H
#define TRANSFUSE_BENCH_LIB_ATTENTIONBENCH_H

#include "runtime/Status.h"

#include <cstddef>
#include <string>

namespace transfuse::kernels {

// For `transfuse bench attention` (the driver prints; this only measures):
// times attention on random data with the given shape and reports GFLOP/s
// counted as 4·B·H·Sq·Sk·D (halved when causal), and the FMA peak measured in
// the same run when the probe is available.
struct AttentionBenchOptions {
  size_t batch = 1, heads = 8, seq = 512, kvSeq = 0 /* 0: seq */, headDim = 64;
  bool causal = false;
  bool unfused = false;
  int threads = 1;
  double minSeconds = 0.5;  // measure at least this long (after one warm-up)
};
struct AttentionBenchResult {
  AttentionBenchOptions options;
  double seconds = 0;       // median time of one call
  double flops = 0;         // counted flops of one call
  double gflops = 0;
  double peakGflops = 0;    // FMA peak for `threads` threads; 0 if not measured
  double fractionOfPeak = 0;
  int iterations = 0;
  std::string target;       // Highway target used
  rt::Status status;        // an error (bad options) leaves the figures 0
};
AttentionBenchResult runAttentionBench(const AttentionBenchOptions& options);
// One JSON object: {"kernel":"attention", ..., "gflops":..., ...}.
std::string attentionBenchJson(const AttentionBenchResult& result);

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_BENCH_LIB_ATTENTIONBENCH_H
