// runGemmBench and its formatting (GemmBench.h).

#include "bench/lib/GemmBench.h"

#include "runtime/Json.h"
#include "runtime/ThreadPool.h"
#include "bench/lib/FmaPeak.h"
#include "runtime/kernels/Gemm.h"
#include "runtime/kernels/Bf16Gemm.h"
#include "runtime/kernels/Int8Gemm.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

namespace transfuse::kernels {

rt::StatusOr<GemmBenchResult> runGemmBench(const GemmBenchOptions& o) {
  if (o.m == 0 || o.n == 0 || o.k == 0)
    return rt::Status::error("bench gemm: --m, --n and --k must be positive");
  if (o.threads < 1) return rt::Status::error("bench gemm: --threads must be at least 1");
  if (o.dtype != "f32" && o.dtype != "bf16" && o.dtype != "int8")
    return rt::Status::error("bench gemm: --dtype " + o.dtype + " is not one of f32, bf16, int8");
  if (o.dtype == "int8" && (o.packPerCall || (o.epilogue != "none" && o.epilogue != "bias")))
    return rt::Status::error("bench gemm: --dtype int8 takes --epilogue none or bias, and its "
                             "weights are packed once");
  GemmEpilogue ep;
  bool bias = o.epilogue != "none", residual = o.epilogue == "residual";
  if (o.epilogue == "none" || o.epilogue == "bias" || o.epilogue == "residual") {
    ep.activation = Activation::kNone;
  } else if (auto act = parseActivation(o.epilogue); act && *act != Activation::kNone) {
    ep.activation = *act;
  } else {
    std::string known = "none, bias";
    for (int i = 1; i < kNumActivations; ++i)
      known += std::string(", ") + activationName(static_cast<Activation>(i));
    return rt::Status::error("bench gemm: unknown --epilogue '" + o.epilogue + "' (" + known +
                             ", residual)");
  }

  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto fill = [&](std::vector<float>& v) {
    for (float& x : v) x = dist(rng);
  };
  std::vector<float> A(o.m * o.k), B(o.k * o.n), C(o.m * o.n), biasV(o.n), res;
  fill(A);
  fill(B);
  fill(biasV);
  if (residual) {
    res.resize(o.m * o.n);
    fill(res);
  }
  if (bias) ep.bias = biasV.data();
  if (residual) ep.residual = res.data();

  GemmBenchResult r;
  r.m = o.m;
  r.n = o.n;
  r.k = o.k;
  r.epilogue = o.epilogue;
  r.packPerCall = o.packPerCall;
  r.threads = o.threads;
  GemmKernelInfo info = gemmKernelInfo();
  r.target = info.target;
  r.mr = info.mr;
  r.nr = info.nr;
  r.kc = info.kc;
  r.mc = info.mc;
  r.peakGflopsPerThread = measureFmaPeak().gflops;
  r.dtype = o.dtype;

  rt::ThreadPool pool(o.threads);
  const bool int8 = o.dtype == "int8", bf16 = o.dtype == "bf16";
  PackedB packed = int8 || bf16 ? PackedB{} : packB(B.data(), o.k, o.n, o.n, false);
  Int8Weights quantized;
  Bf16Weights rounded;
  if (bf16) {
    rounded = packBf16(B.data(), o.n, false, o.k, o.n, {}, &pool);
    const Bf16Path path = bestBf16Path();
    r.target = std::string("bf16 ") + bf16PathName(path);
    r.mr = static_cast<size_t>(bf16BlockRows(path));
    r.nr = 32;
    r.kc = rounded.kPadded;
    r.mc = 0;
  }
  if (int8) {
    quantized = quantizePackB(B.data(), o.n, false, o.k, o.n);
    const Int8Path path = int8PathFor(static_cast<int64_t>(o.m));
    r.target = std::string("int8 ") + int8PathName(path);
    r.mr = static_cast<size_t>(int8BlockRows(path));
    r.nr = 32;
    r.kc = quantized.kPadded;
    r.mc = 0;
  }
  auto call = [&] {
    if (bf16 && o.packPerCall) {
      gemmBf16(o.m, o.n, o.k, A.data(), o.k, false, B.data(), o.n, false, C.data(), o.n, ep,
               &pool);
      return;
    }
    if (bf16) {
      gemmBf16(static_cast<int64_t>(o.m), A.data(), static_cast<int64_t>(o.k), rounded, ep,
               C.data(), static_cast<int64_t>(o.n), &pool);
      return;
    }
    if (int8) {
      gemmInt8(o.m, A.data(), o.k, quantized, bias ? biasV.data() : nullptr, C.data(), o.n,
               &pool);
      return;
    }
    if (o.packPerCall) {
      PackedB fresh = packB(B.data(), o.k, o.n, o.n, false, &pool);
      gemm(o.m, o.n, o.k, A.data(), o.k, false, fresh, C.data(), o.n, ep, &pool);
      return;
    }
    gemm(o.m, o.n, o.k, A.data(), o.k, false, packed, C.data(), o.n, ep, &pool);
  };
  call();  // warm-up: caches, page faults, thread wake-up
  std::vector<double> times;
  auto start = std::chrono::steady_clock::now();
  while (times.size() < 3 ||
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
             o.minSeconds) {
    auto t0 = std::chrono::steady_clock::now();
    call();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  r.calls = static_cast<int64_t>(times.size());
  r.medianSeconds = times[times.size() / 2];
  r.bestSeconds = times.front();
  r.gflops = 2.0 * o.m * o.n * o.k / r.medianSeconds * 1e-9;
  r.fractionOfPeak = r.gflops / (r.peakGflopsPerThread * o.threads);
  return r;
}

std::string gemmBenchJson(const GemmBenchResult& r) {
  rt::JsonValue v = rt::JsonValue::object();
  v.set("benchmark", "gemm");
  v.set("m", r.m);
  v.set("n", r.n);
  v.set("k", r.k);
  v.set("epilogue", r.epilogue);
  v.set("dtype", r.dtype);
  v.set("pack_per_call", r.packPerCall);
  v.set("threads", r.threads);
  v.set("target", r.target);
  v.set("tile", std::to_string(r.mr) + "x" + std::to_string(r.nr));
  v.set("kc", r.kc);
  v.set("mc", r.mc);
  v.set("calls", r.calls);
  v.set("median_seconds", r.medianSeconds);
  v.set("best_seconds", r.bestSeconds);
  v.set("gflops", r.gflops);
  v.set("peak_gflops_per_thread", r.peakGflopsPerThread);
  v.set("fraction_of_peak", r.fractionOfPeak);
  return v.dump();
}

std::string gemmBenchText(const GemmBenchResult& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "gemm %s %zux%zux%zu %s, %d thread(s), %s %zux%zu: %.1f GFLOP/s, %.1f%% of "
                "the fp32 FMA peak (%.1f GFLOP/s/thread)",
                r.dtype.c_str(), r.m, r.n, r.k, r.epilogue.c_str(), r.threads, r.target.c_str(),
                r.mr, r.nr,
                r.gflops, 100.0 * r.fractionOfPeak, r.peakGflopsPerThread);
  return buf;
}

}  // namespace transfuse::kernels
