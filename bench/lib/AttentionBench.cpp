// Attention benchmark (AttentionBench.h).

#include "bench/lib/AttentionBench.h"

#include "bench/lib/FmaPeak.h"
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Attention.h"
#include "runtime/kernels/Targets.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

namespace transfuse::kernels {

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
