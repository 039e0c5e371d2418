// The measurement behind `transfuse bench gemm --m M --n N --k K
// [--epilogue E] --threads T [--json]`: times our GEMM on random operands
// (B packed once, as a model load does, and not timed) and reports GFLOP/s
// (2·M·N·K per call, median of the timed calls) and the fraction of the
// machine's FMA peak (measureFmaPeak, in the same run, times T threads).
// The driver parses flags and prints; this layer only measures.
#ifndef TRANSFUSE_BENCH_LIB_GEMMBENCH_H
#define TRANSFUSE_BENCH_LIB_GEMMBENCH_H

#include "runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace transfuse::kernels {

struct GemmBenchOptions {
  size_t m = 1024, n = 1024, k = 1024;
  // none | bias | relu | gelu | gelu_tanh | residual. relu, gelu and
  // gelu_tanh apply after a bias (a Linear layer's epilogue); residual is
  // bias + residual add.
  std::string epilogue = "none";
  // B packed inside each timed call, as a product of two activations
  // (exec::matmul) packs it; otherwise once, as a model's weights are.
  bool packPerCall = false;
  int threads = 1;
  double minSeconds = 1.0;  // keep calling for at least this long (and >= 3 calls)
  // f32; bf16: the bf16 GEMM (Bf16Gemm.h) on its best path, B rounded and
  // packed once (or per call), A rounded in each call (timed); int8: the
  // int8 GEMM (Int8Gemm.h) on its best path, B quantized and packed once, A
  // quantized in each call (timed), bias as the epilogue.
  std::string dtype = "f32";
};

struct GemmBenchResult {
  size_t m = 0, n = 0, k = 0;
  std::string epilogue;
  bool packPerCall = false;
  int threads = 1;
  std::string dtype;
  std::string target;            // Highway target of the kernel (bf16, int8: the path)
  size_t mr = 0, nr = 0, kc = 0, mc = 0;  // micro-kernel tile and blocking
  int64_t calls = 0;             // timed calls
  double medianSeconds = 0;      // per call
  double bestSeconds = 0;        // fastest call
  double gflops = 0;             // 2·m·n·k / medianSeconds
  double peakGflopsPerThread = 0;  // measureFmaPeak, one thread
  double fractionOfPeak = 0;     // gflops / (peak · threads)
};

// Errors: a dimension of 0, threads < 1, an unknown epilogue.
rt::StatusOr<GemmBenchResult> runGemmBench(const GemmBenchOptions& options);

// One JSON object: {"benchmark":"gemm","m":..,"n":..,"k":..,"epilogue":..,
// "threads":..,"target":..,"tile":"14x32","kc":..,"mc":..,"calls":..,
// "median_seconds":..,"gflops":..,"peak_gflops_per_thread":..,
// "fraction_of_peak":..}
std::string gemmBenchJson(const GemmBenchResult& result);

// One line for humans, e.g. "gemm 1024x1024x1024 none, 1 thread(s), AVX3
// 14x32: 201.3 GFLOP/s, 90.4% of peak (222.7 GFLOP/s/thread)".
std::string gemmBenchText(const GemmBenchResult& result);

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_BENCH_LIB_GEMMBENCH_H
