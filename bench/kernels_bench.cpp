// Benchmarks of the attention, normalization and elementwise kernels
// (runtime/kernels: Attention.h, Norm.h, Elementwise.h), with the FMA peak
// probe and a streaming copy measured in the same run.
//
//   [TRANSFUSE_ISA=AVX2] build/bench/kernels_bench [--benchmark_filter=...]
//       [--benchmark_repetitions=5 --benchmark_report_aggregates_only=true]
//
// Attention: B=1, H=8, Sq=Sk=512, D=64 (also D=128), fused vs unfused, with and
// without the causal mask; args: causal/threads. Counters: GFLOPS counted as
// 4·B·H·Sq·Sk·D (halved when causal) per call, and peak_frac = GFLOPS /
// (one thread's measured FMA peak · threads).
//
// Decode step: B=8 sequences, H=8, D=64, Sq queries each (1; 4 and 8: a
// short prompt or forced prefix) against Sk cached keys (64, 256, 1024), 1
// thread: the decode kernel (K cache transposed) against the fused and
// unfused kernels on the same data; args: queries/keys. Counter cache_GBps:
// the K and V bytes a step must read once (2·B·H·Sk·D·4) per second.
//
// Bandwidth: add+layer_norm (x, residual in; y and the sum out), layer_norm,
// softmax and gelu on rows of 512 and 2048, and a copy (std::memcpy) of one
// tensor of the same size, at two sizes per tensor: 256 KiB (every tensor of
// add+layer_norm together stays in the 2 MiB L2: a transformer layer's
// activations at 128 tokens × 512) and 64 MiB (beyond L2: L3/DRAM).
// args: width/KiB per tensor/threads. Counter bytes_per_second counts the
// bytes the kernel must read and write once (add+LN: 4 tensors; softmax,
// layer_norm, gelu, copy: 2 tensors).

#include "runtime/ThreadPool.h"
#include "runtime/kernels/Attention.h"
#include "runtime/kernels/DecodeAttention.h"
#include "runtime/kernels/Elementwise.h"
#include "bench/lib/BenchUtil.h"
#include "runtime/kernels/Norm.h"

#include <benchmark/benchmark.h>
#include <hwy/aligned_allocator.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

namespace tk = transfuse::kernels;
namespace rt = transfuse::rt;

namespace {

hwy::AlignedFreeUniquePtr<float[]> randomBuf(size_t n, uint32_t seed, float lo = -1,
                                             float hi = 1) {
  auto p = hwy::AllocateAligned<float>(n);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (size_t i = 0; i < n; ++i) p[i] = u(rng);
  return p;
}

// ---- attention ---------------------------------------------------------------

void runAttention(benchmark::State& state, bool unfused, size_t D) {
  const bool causal = state.range(0) != 0;
  const int threads = static_cast<int>(state.range(1));
  const size_t B = 1, H = 8, S = 512;
  auto q = randomBuf(B * H * S * D, 1), k = randomBuf(B * H * S * D, 2),
       v = randomBuf(B * H * S * D, 3), o = randomBuf(B * H * S * D, 4);
  tk::AttentionArgs a;
  a.batch = B;
  a.heads = H;
  a.seqQ = a.seqK = S;
  a.headDim = D;
  a.q.data = q.get();
  a.k.data = k.get();
  a.v.data = v.get();
  a.out = o.get();
  a.scale = 1.0f / std::sqrt(static_cast<float>(D));
  a.causal = causal;
  rt::ThreadPool* pool = tk::benchPool(threads);
  for (auto _ : state) {
    rt::Status st = unfused ? tk::attentionUnfused(a, pool) : tk::attention(a, pool);
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
  const double flops = 4.0 * B * H * S * S * D * (causal ? 0.5 : 1.0);
  state.counters["GFLOPS"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_GFLOPS"] = tk::cachedFmaPeakGflops() * threads;
  state.counters["peak_frac"] = benchmark::Counter(
      flops * 1e-9 / (tk::cachedFmaPeakGflops() * threads), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_AttentionFused(benchmark::State& s) { runAttention(s, false, 64); }
void BM_AttentionUnfused(benchmark::State& s) { runAttention(s, true, 64); }
void BM_AttentionFusedD128(benchmark::State& s) { runAttention(s, false, 128); }
void BM_AttentionUnfusedD128(benchmark::State& s) { runAttention(s, true, 128); }

void attentionArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"causal", "threads"});
  for (int t : {1, 2})
    for (int c : {0, 1}) b->Args({c, t});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_AttentionFused)->Apply(attentionArgs);
BENCHMARK(BM_AttentionUnfused)->Apply(attentionArgs);
BENCHMARK(BM_AttentionFusedD128)->Apply(attentionArgs);
BENCHMARK(BM_AttentionUnfusedD128)->Apply(attentionArgs);

// kind 0: decodeAttention (Kᵀ cache), 1: attention, 2: attentionUnfused.
void runDecode(benchmark::State& state, int kind) {
  const size_t B = 8, H = 8, D = 64, Sq = static_cast<size_t>(state.range(0)),
               Sk = static_cast<size_t>(state.range(1));
  auto q = randomBuf(B * H * Sq * D, 1), k = randomBuf(B * H * Sk * D, 2),
       v = randomBuf(B * H * Sk * D, 3), o = randomBuf(B * H * Sq * D, 4);
  rt::ThreadPool* pool = tk::benchPool(1);
  tk::DecodeAttentionArgs d;
  d.batch = B;
  d.heads = H;
  d.seqQ = Sq;
  d.seqK = Sk;
  d.headDim = D;
  d.q.data = q.get();
  d.k.data = k.get();  // read as [B, H, D, Sk]: the same bytes, another layout
  d.v.data = v.get();
  d.out = o.get();
  d.scale = 0.125f;
  tk::AttentionArgs a;
  a.batch = B;
  a.heads = H;
  a.seqQ = Sq;
  a.seqK = Sk;
  a.headDim = D;
  a.q.data = q.get();
  a.k.data = k.get();
  a.v.data = v.get();
  a.out = o.get();
  a.scale = 0.125f;
  for (auto _ : state) {
    rt::Status st = kind == 0   ? tk::decodeAttention(d, pool)
                    : kind == 1 ? tk::attention(a, pool)
                                : tk::attentionUnfused(a, pool);
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
  state.counters["cache_GBps"] = benchmark::Counter(2.0 * B * H * Sk * D * 4 * 1e-9,
                                                    benchmark::Counter::kIsIterationInvariantRate);
}
void BM_DecodeStepKernel(benchmark::State& s) { runDecode(s, 0); }
void BM_DecodeStepFused(benchmark::State& s) { runDecode(s, 1); }
void BM_DecodeStepUnfused(benchmark::State& s) { runDecode(s, 2); }
void decodeArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"queries", "keys"});
  for (auto [q, k] : {std::pair{1, 64}, {1, 256}, {1, 1024}, {4, 256}, {8, 256}}) b->Args({q, k});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_DecodeStepKernel)->Apply(decodeArgs);
BENCHMARK(BM_DecodeStepFused)->Apply(decodeArgs);
BENCHMARK(BM_DecodeStepUnfused)->Apply(decodeArgs);

// A beam-search step's cross attention as a compiled decoder runs it: 32 rows
// (batch 8 · beam 4), one query each, over `keys` cached positions of a state
// of capacity `capacity` (the Kᵀ rows' stride), for 6 layers in turn, so the
// caches stream from memory as in a step. 2 threads. shared: the state's
// row ids say which rows are the beams of one source (equal caches), which
// then share one pass over them.
void BM_DecodeBeamCross(benchmark::State& state) {
  const size_t R = 32, H = 8, D = 64, layers = 6, Sk = static_cast<size_t>(state.range(0)),
               T = static_cast<size_t>(state.range(1));
  std::vector<uint64_t> ids(R);
  for (size_t r = 0; r < R; ++r) ids[r] = r / 4;
  std::vector<hwy::AlignedFreeUniquePtr<float[]>> k, v;
  for (size_t l = 0; l < layers; ++l) {
    k.push_back(randomBuf(R * H * D * T, 2 + l));
    v.push_back(randomBuf(R * H * T * D, 20 + l));
  }
  auto q = randomBuf(R * H * D, 1), o = randomBuf(R * H * D, 4);
  rt::ThreadPool* pool = tk::benchPool(2);
  tk::DecodeAttentionArgs d;
  d.batch = R;
  d.heads = H;
  d.seqK = Sk;
  d.headDim = D;
  d.q.data = q.get();
  d.k.batchStride = H * D * T;
  d.k.headStride = D * T;
  d.k.dimStride = T;
  d.v.batchStride = H * T * D;
  d.v.headStride = T * D;
  d.v.rowStride = D;
  d.out = o.get();
  d.scale = 0.125f;
  if (state.range(2)) d.keyRowIds = d.valueRowIds = ids.data();
  for (auto _ : state) {
    for (size_t l = 0; l < layers; ++l) {
      d.k.data = k[l].get();
      d.v.data = v[l].get();
      rt::Status st = tk::decodeAttention(d, pool);
      benchmark::DoNotOptimize(st);
    }
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_DecodeBeamCross)
    ->ArgNames({"keys", "capacity", "shared"})
    ->ArgsProduct({{24}, {33, 48, 128}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// ---- bandwidth ---------------------------------------------------------------

struct RowShape {
  size_t width, rows, n;
  int threads;
  explicit RowShape(benchmark::State& s)
      : width(static_cast<size_t>(s.range(0))),
        rows((static_cast<size_t>(s.range(1)) << 10) / 4 / width),
        n(rows * width),
        threads(static_cast<int>(s.range(2))) {}
};

void setBytes(benchmark::State& state, size_t bytesPerCall) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytesPerCall));
}

void BM_Copy(benchmark::State& state) {
  RowShape r(state);
  auto x = randomBuf(r.n, 1), y = randomBuf(r.n, 2);
  rt::ThreadPool* pool = tk::benchPool(r.threads);
  for (auto _ : state) {
    if (pool) {
      pool->parallelFor(static_cast<int64_t>(r.n), [&](int64_t b, int64_t e, int) {
        std::memcpy(y.get() + b, x.get() + b, (e - b) * sizeof(float));
      });
    } else {
      std::memcpy(y.get(), x.get(), r.n * sizeof(float));
    }
    benchmark::ClobberMemory();
  }
  setBytes(state, 2 * r.n * sizeof(float));
}

void BM_AddLayerNorm(benchmark::State& state) {
  RowShape r(state);
  auto x = randomBuf(r.n, 1), res = randomBuf(r.n, 2), y = randomBuf(r.n, 3),
       sum = randomBuf(r.n, 4), g = randomBuf(r.width, 5), be = randomBuf(r.width, 6);
  rt::ThreadPool* pool = tk::benchPool(r.threads);
  for (auto _ : state) {
    tk::addLayerNorm(x.get(), res.get(), g.get(), be.get(), y.get(), sum.get(), r.rows, r.width,
                     1e-5f, pool);
    benchmark::ClobberMemory();
  }
  setBytes(state, 4 * r.n * sizeof(float));
}

void BM_LayerNorm(benchmark::State& state) {
  RowShape r(state);
  auto x = randomBuf(r.n, 1), y = randomBuf(r.n, 3), g = randomBuf(r.width, 5),
       be = randomBuf(r.width, 6);
  rt::ThreadPool* pool = tk::benchPool(r.threads);
  for (auto _ : state) {
    tk::layerNorm(x.get(), g.get(), be.get(), y.get(), r.rows, r.width, 1e-5f, pool);
    benchmark::ClobberMemory();
  }
  setBytes(state, 2 * r.n * sizeof(float));
}

void BM_Softmax(benchmark::State& state) {
  RowShape r(state);
  auto x = randomBuf(r.n, 1, -10, 10), y = randomBuf(r.n, 3);
  rt::ThreadPool* pool = tk::benchPool(r.threads);
  for (auto _ : state) {
    tk::softmax(x.get(), y.get(), r.rows, r.width, pool);
    benchmark::ClobberMemory();
  }
  setBytes(state, 2 * r.n * sizeof(float));
}

void BM_Gelu(benchmark::State& state) {
  RowShape r(state);
  auto x = randomBuf(r.n, 1, -5, 5), y = randomBuf(r.n, 3);
  rt::ThreadPool* pool = tk::benchPool(r.threads);
  for (auto _ : state) {
    tk::gelu(x.get(), y.get(), r.n, pool);
    benchmark::ClobberMemory();
  }
  setBytes(state, 2 * r.n * sizeof(float));
}

// Embedding of B·S = 8·64 tokens from the base model's 37000×512 table, ·√d
// plus sinusoidal positions: bytes = the rows read + the output written.
void BM_Embedding(benchmark::State& state) {
  const size_t batch = 8, seq = 64, vocab = 37000, dim = 512;
  const int threads = static_cast<int>(state.range(0));
  auto table = randomBuf(vocab * dim, 1), out = randomBuf(batch * seq * dim, 2);
  std::vector<int32_t> ids(batch * seq);
  std::mt19937 rng(3);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % vocab);
  tk::EmbeddingArgs a;
  a.ids = ids.data();
  a.batch = batch;
  a.seq = seq;
  a.table = table.get();
  a.vocab = vocab;
  a.dim = dim;
  a.scale = std::sqrt(static_cast<float>(dim));
  a.positional = tk::Positional::kSinusoidal;
  rt::ThreadPool* pool = tk::benchPool(threads);
  for (auto _ : state) {
    if (!tk::embedding(a, out.get(), pool).isOk()) state.SkipWithError("embedding failed");
    benchmark::ClobberMemory();
  }
  setBytes(state, 2 * batch * seq * dim * sizeof(float));
}
BENCHMARK(BM_Embedding)->ArgNames({"threads"})->Arg(1)->Arg(2)->UseRealTime();

// argmax and top-5 over logits rows of the 37000-word vocabulary (a decoding
// step of a batch of 8 with beam 4: 32 rows): bytes = the logits read.
void BM_ArgmaxTopK(benchmark::State& state) {
  const size_t rows = 32, width = 37000, k = static_cast<size_t>(state.range(0));
  auto logits = randomBuf(rows * width, 1, -10, 10), values = randomBuf(rows * 8, 2);
  std::vector<int32_t> indices(rows * 8);
  for (auto _ : state) {
    if (k == 1)
      tk::argmax(logits.get(), rows, width, indices.data());
    else if (!tk::topK(logits.get(), rows, width, k, values.get(), indices.data()).isOk())
      state.SkipWithError("topK failed");
    benchmark::ClobberMemory();
  }
  setBytes(state, rows * width * sizeof(float));
}
BENCHMARK(BM_ArgmaxTopK)->ArgNames({"k"})->Arg(1)->Arg(5)->UseRealTime();

void rowArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"width", "KiB", "threads"});
  for (int t : {1, 2})
    for (int kib : {256, 65536})
      for (int w : {512, 2048}) b->Args({w, kib, t});
  b->UseRealTime();
}
BENCHMARK(BM_Copy)->Apply(rowArgs);
BENCHMARK(BM_AddLayerNorm)->Apply(rowArgs);
BENCHMARK(BM_LayerNorm)->Apply(rowArgs);
BENCHMARK(BM_Softmax)->Apply(rowArgs);
BENCHMARK(BM_Gelu)->Apply(rowArgs);

}  // namespace

int main(int argc, char** argv) { return transfuse::kernels::benchMain(argc, argv); }
