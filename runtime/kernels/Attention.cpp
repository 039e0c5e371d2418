// Attention.h: dispatch, threading, the unfused composition and the
// driver-facing benchmark. Per-target code: attention-inl.h.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/Attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "runtime/kernels/attention-inl.h"

#if HWY_ONCE
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Attention.h"
#include "runtime/kernels/FmaPeak.h"
#include "runtime/kernels/Gemm.h"
#include "runtime/kernels/Norm.h"
#include "runtime/kernels/Parallel.h"
#include "runtime/kernels/Targets.h"

#include <hwy/aligned_allocator.h>
#include <hwy/targets.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

namespace transfuse::kernels {

HWY_EXPORT(AttentionTask);
HWY_EXPORT(AttentionQueryTile);
HWY_EXPORT(ScaleAndMaskRows);

namespace {

// Validates and fills in dense strides for zero stride triples.
rt::Status resolve(const AttentionArgs& in, AttentionArgs& a) {
  a = in;
  if (a.headDim == 0 || a.headDim > 256)
    return rt::Status::error("attention: head_dim " + std::to_string(a.headDim) +
                             " is outside 1..256");
  if (a.batch * a.heads * a.seqQ == 0) return rt::Status::ok();
  if (!a.q.data || !a.out || (a.seqK > 0 && (!a.k.data || !a.v.data)))
    return rt::Status::error("attention: Q, K, V and the output must be given");
  auto dense = [&](AttentionTensor& t, size_t S) {
    if (t.batchStride == 0 && t.headStride == 0 && t.rowStride == 0) {
      t.rowStride = a.headDim;
      t.headStride = S * a.headDim;
      t.batchStride = a.heads * S * a.headDim;
    }
  };
  dense(a.q, a.seqQ);
  dense(a.k, a.seqK);
  dense(a.v, a.seqK);
  if (a.outBatchStride == 0 && a.outHeadStride == 0 && a.outRowStride == 0) {
    a.outRowStride = a.headDim;
    a.outHeadStride = a.seqQ * a.headDim;
    a.outBatchStride = a.heads * a.seqQ * a.headDim;
  }
  return rt::Status::ok();
}

}  // namespace

rt::Status attention(const AttentionArgs& args, rt::ThreadPool* pool) {
  AttentionArgs a;
  if (rt::Status st = resolve(args, a); !st) return st;
  if (a.batch * a.heads * a.seqQ == 0) return rt::Status::ok();
  const size_t tile = HWY_DYNAMIC_DISPATCH(AttentionQueryTile)();
  const size_t tiles = (a.seqQ + tile - 1) / tile;
  const size_t tasks = a.batch * a.heads * tiles;
  auto* task = HWY_DYNAMIC_DISPATCH(AttentionTask);
  // Tasks run head by head, so one head's K and V (Sk·D·8 bytes: 256 KiB at
  // Sk = 512, D = 64) stay in L2 across its query tiles; within a head the
  // last (for causal, heaviest) query tile goes first, and threads take one
  // task at a time, so the uneven causal tiles balance.
  auto run = [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      const size_t bh = t / tiles;
      const size_t qt = tiles - 1 - t % tiles;
      task(a, bh / a.heads, bh % a.heads, qt * tile);
    }
  };
  if (!pool || pool->numThreads() <= 1) {
    run(0, tasks);
  } else {
    pool->parallelForChunked(static_cast<int64_t>(tasks), 1, [&](int64_t b, int64_t e, int) {
      run(static_cast<size_t>(b), static_cast<size_t>(e));
    });
  }
  return rt::Status::ok();
}

rt::Status attentionUnfused(const AttentionArgs& args, rt::ThreadPool* pool) {
  AttentionArgs a;
  if (rt::Status st = resolve(args, a); !st) return st;
  if (a.batch * a.heads * a.seqQ == 0) return rt::Status::ok();
  const size_t Sq = a.seqQ, Sk = a.seqK, D = a.headDim;
  if (Sk == 0) {  // no keys: every row is fully masked
    for (size_t b = 0; b < a.batch; ++b)
      for (size_t h = 0; h < a.heads; ++h)
        for (size_t i = 0; i < Sq; ++i)
          std::fill_n(a.out + b * a.outBatchStride + h * a.outHeadStride + i * a.outRowStride,
                      D, 0.0f);
    return rt::Status::ok();
  }
  // Per (b, h): S = Q·Kᵀ (GEMM, Kᵀ packed per call), scale + masks, row
  // softmax, O = P·V (GEMM, V packed per call); each step uses the pool.
  auto S = hwy::AllocateAligned<float>(Sq * Sk);
  auto* mask = HWY_DYNAMIC_DISPATCH(ScaleAndMaskRows);
  const size_t grain = std::max<size_t>(1, 4096 / Sk);
  for (size_t b = 0; b < a.batch; ++b) {
    for (size_t h = 0; h < a.heads; ++h) {
      float* s = S.get();
      const float* qb = a.q.data + b * a.q.batchStride + h * a.q.headStride;
      const float* kb = a.k.data + b * a.k.batchStride + h * a.k.headStride;
      const float* vb = a.v.data + b * a.v.batchStride + h * a.v.headStride;
      float* ob = a.out + b * a.outBatchStride + h * a.outHeadStride;
      gemm(Sq, Sk, D, qb, a.q.rowStride, /*transA=*/false, kb, a.k.rowStride,
           /*transB=*/true, s, Sk, {}, pool);
      parallelFor(pool, Sq, grain, [&](size_t r0, size_t r1) { mask(a, b, h, s, r0, r1); });
      softmax(s, s, Sq, Sk, pool);
      gemm(Sq, D, Sk, s, Sk, false, vb, a.v.rowStride, false, ob, a.outRowStride, {}, pool);
    }
  }
  return rt::Status::ok();
}

// ---- benchmark -------------------------------------------------------------

AttentionBenchResult runAttentionBench(const AttentionBenchOptions& o) {
  AttentionBenchResult r;
  r.options = o;
  if (r.options.kvSeq == 0) r.options.kvSeq = o.seq;
  const AttentionBenchOptions& opt = r.options;
  if (opt.threads < 1) {
    r.status = rt::Status::error("bench attention: --threads must be >= 1");
    return r;
  }
  if (opt.headDim == 0 || opt.headDim > 256) {
    r.status = rt::Status::error("bench attention: --head-dim must be in 1..256");
    return r;
  }
  if (opt.batch == 0 || opt.heads == 0 || opt.seq == 0) {
    r.status = rt::Status::error("bench attention: --batch, --heads and --seq must be >= 1");
    return r;
  }
  const size_t B = opt.batch, H = opt.heads, Sq = opt.seq, Sk = opt.kvSeq, D = opt.headDim;
  std::vector<float> q(B * H * Sq * D), k(B * H * Sk * D), v(B * H * Sk * D), out(q.size());
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (auto* t : {&q, &k, &v})
    for (float& x : *t) x = uni(rng);
  AttentionArgs a;
  a.batch = B;
  a.heads = H;
  a.seqQ = Sq;
  a.seqK = Sk;
  a.headDim = D;
  a.q.data = q.data();
  a.k.data = k.data();
  a.v.data = v.data();
  a.out = out.data();
  a.scale = 1.0f / std::sqrt(static_cast<float>(D));
  a.causal = opt.causal;
  std::unique_ptr<rt::ThreadPool> pool;
  if (opt.threads > 1) pool = std::make_unique<rt::ThreadPool>(opt.threads);
  auto call = [&]() {
    return opt.unfused ? attentionUnfused(a, pool.get()) : attention(a, pool.get());
  };
  if (rt::Status st = call(); !st) {  // warm-up
    r.status = st;
    return r;
  }
  std::vector<double> times;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < opt.minSeconds || times.size() < 3) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)call();
    const auto t1 = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double>(t1 - t0).count());
    elapsed = std::chrono::duration<double>(t1 - start).count();
  }
  std::sort(times.begin(), times.end());
  r.iterations = static_cast<int>(times.size());
  r.seconds = times[times.size() / 2];
  r.flops = 4.0 * B * H * Sq * Sk * D * (opt.causal ? 0.5 : 1.0);
  r.gflops = r.flops / r.seconds * 1e-9;
  r.target = bestTargetName();
  // The FMA peak of `threads` cores, measured now (one thread's peak times
  // the thread count: one thread per core on this machine).
  const FmaPeak peak = measureFmaPeak(0.2, 5);
  r.peakGflops = peak.gflops * opt.threads;
  r.fractionOfPeak = r.peakGflops > 0 ? r.gflops / r.peakGflops : 0;
  return r;
}

std::string attentionBenchJson(const AttentionBenchResult& r) {
  const AttentionBenchOptions& o = r.options;
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "{\"kernel\":\"attention\",\"batch\":%zu,\"heads\":%zu,\"seq\":%zu,"
                "\"kv_seq\":%zu,\"head_dim\":%zu,\"causal\":%s,\"unfused\":%s,"
                "\"threads\":%d,\"target\":\"%s\",\"iterations\":%d,\"seconds\":%.9g,"
                "\"flops\":%.6g,\"gflops\":%.4f,\"peak_gflops\":%.4f,"
                "\"fraction_of_peak\":%.4f}",
                o.batch, o.heads, o.seq, o.kvSeq ? o.kvSeq : o.seq, o.headDim,
                o.causal ? "true" : "false", o.unfused ? "true" : "false", o.threads,
                r.target.c_str(), r.iterations, r.seconds, r.flops, r.gflops, r.peakGflops,
                r.fractionOfPeak);
  return buf;
}

}  // namespace transfuse::kernels
#endif  // HWY_ONCE
