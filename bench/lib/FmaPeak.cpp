// The FMA peak probe (FmaPeak.h). Per-target code is in this file, compiled
// once per Highway target by foreach_target.h.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/lib/FmaPeak.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace transfuse::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3) || HWY_ARCH_ARM_A64
constexpr size_t kChains = 24;
#else
constexpr size_t kChains = 12;
#endif

// Runs `iters` rounds of kChains independent FMAs; returns a value depending
// on all of them (so nothing is optimized away). Sets lanes and chains.
HWY_NOINLINE float FmaChains(uint64_t iters, size_t* lanes, size_t* chains) {
  const hn::ScalableTag<float> d;
  *lanes = hn::Lanes(d);
  *chains = kChains;
  using V = hn::Vec<decltype(d)>;
  V acc[kChains];
  HWY_UNROLL(32)
  for (size_t i = 0; i < kChains; ++i) acc[i] = hn::Set(d, 0.001f * static_cast<float>(i));
  const V m = hn::Set(d, 0.999999f), c = hn::Set(d, 1e-6f);  // converges to 1
  for (uint64_t it = 0; it < iters; ++it) {
    HWY_UNROLL(32)
    for (size_t i = 0; i < kChains; ++i) acc[i] = hn::MulAdd(acc[i], m, c);
  }
  V sum = acc[0];
  for (size_t i = 1; i < kChains; ++i) sum = hn::Add(sum, acc[i]);
  return hn::GetLane(sum);
}

}  // namespace HWY_NAMESPACE
}  // namespace transfuse::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "bench/lib/FmaPeak.h"
#include "runtime/kernels/Targets.h"

#include <algorithm>
#include <chrono>

namespace transfuse::kernels {

HWY_EXPORT(FmaChains);

FmaPeak measureFmaPeak(double seconds, int repeats) {
  FmaPeak peak;
  peak.target = bestTargetName();
  repeats = std::max(1, repeats);
  volatile float sink = 0;
  // Calibrate: iterations for about seconds/repeats.
  uint64_t iters = 1 << 16;
  double best = 0;
  for (int r = -1; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    sink = sink + HWY_DYNAMIC_DISPATCH(FmaChains)(iters, &peak.lanes, &peak.chains);
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r < 0) {  // calibration run
      double want = seconds / repeats;
      iters = std::max<uint64_t>(1024, static_cast<uint64_t>(iters * want / std::max(dt, 1e-9)));
      continue;
    }
    double flops = 2.0 * static_cast<double>(peak.lanes * peak.chains) * static_cast<double>(iters);
    best = std::max(best, flops / dt * 1e-9);
  }
  peak.gflops = best;
  return peak;
}

}  // namespace transfuse::kernels
#endif  // HWY_ONCE
