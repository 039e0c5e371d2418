// Benchmarks of the runtime core: Philox draws (dropout masks are regenerated
// in backward, so their cost matters), F16/BF16 -> F32 conversion and
// safetensors loading (a model load reads every weight once).
//
//   build/bench/runtime_bench [--benchmark_filter=...]

#include "runtime/Philox.h"
#include "runtime/Safetensors.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <unistd.h>

namespace rt = transfuse::rt;

static void BM_PhiloxUniform(benchmark::State& state) {
  uint64_t i = 0;
  float sum = 0;
  for (auto _ : state) {
    for (int k = 0; k < 1024; ++k) sum += rt::philoxUniform(42, 7, 3, i++);
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations() * 1024);
}
BENCHMARK(BM_PhiloxUniform);

static void BM_Bf16ToF32(benchmark::State& state) {
  std::vector<uint16_t> in(1 << 16, 0x3f80);
  std::vector<float> out(in.size());
  for (auto _ : state) {
    for (size_t k = 0; k < in.size(); ++k) out[k] = rt::bf16ToFloat(in[k]);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * in.size() * sizeof(uint16_t));
}
BENCHMARK(BM_Bf16ToF32);

// Opens and reads (as F32) a file of one tensor of state.range(0) MiB.
static void BM_SafetensorsReadF32(benchmark::State& state) {
  int64_t n = state.range(0) * (1 << 20) / 4;
  rt::Tensor t = rt::Tensor::zeros(rt::DType::F32, {n});
  std::string path = "/tmp/transfuse_bench_" + std::to_string(getpid()) + ".safetensors";
  if (!rt::writeSafetensors(path, {{"w", &t}}).isOk()) {
    state.SkipWithError("cannot write the benchmark file");
    return;
  }
  for (auto _ : state) {
    auto file = rt::SafetensorsFile::open(path);
    auto tensor = file->readAsF32("w");
    benchmark::DoNotOptimize(tensor->bytes.data());
  }
  std::remove(path.c_str());
  state.SetBytesProcessed(state.iterations() * n * 4);
}
BENCHMARK(BM_SafetensorsReadF32)->Arg(16)->Arg(256)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
