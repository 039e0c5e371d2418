// Parameter initializers for Init.h: uniform and normal draws from Philox blocks.
#include "runtime/Init.h"

#include <cassert>
#include <cmath>

#include "runtime/Philox.h"

namespace transfuse::rt {

namespace {
constexpr uint32_t kInitKeyTweak = 0x1D17A11Bu;
}

bool parseInitKind(std::string_view name, InitKind* out) {
  static const InitKind all[] = {InitKind::Zeros, InitKind::Ones, InitKind::XavierUniform,
                                 InitKind::Normal002, InitKind::UniformFanIn};
  for (InitKind k : all) {
    if (name == initKindName(k)) {
      *out = k;
      return true;
    }
  }
  return false;
}

const char* initKindName(InitKind kind) {
  switch (kind) {
    case InitKind::Zeros: return "zeros";
    case InitKind::Ones: return "ones";
    case InitKind::XavierUniform: return "xavier_uniform";
    case InitKind::Normal002: return "normal_0.02";
    case InitKind::UniformFanIn: return "uniform_fan_in";
  }
  return "?";
}

void initTensor(Tensor& t, InitKind kind, int64_t fanIn, int64_t fanOut, uint64_t seed,
                uint64_t tensorIndex) {
  assert(t.dtype == DType::F32);
  const int64_t n = t.numElements();
  t.bytes.resize(static_cast<size_t>(n) * sizeof(float));
  float* out = t.data<float>();
  if (kind == InitKind::Zeros || kind == InitKind::Ones) {
    const float v = kind == InitKind::Ones ? 1.0f : 0.0f;
    for (int64_t i = 0; i < n; ++i) out[i] = v;
    return;
  }
  const std::array<uint32_t, 2> key = {static_cast<uint32_t>(seed),
                                       static_cast<uint32_t>(seed >> 32) ^ kInitKeyTweak};
  auto block = [&](uint64_t b) {
    return philox4x32_10({static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32),
                          static_cast<uint32_t>(tensorIndex),
                          static_cast<uint32_t>(tensorIndex >> 32)},
                         key);
  };

  if (kind == InitKind::Normal002) {
    const double kStd = 0.02, kTwoPi = 6.283185307179586;
    for (int64_t base = 0; base < n; base += 4) {
      std::array<uint32_t, 4> w = block(static_cast<uint64_t>(base) / 4);
      for (int p = 0; p < 2; ++p) {
        // u1 in (0, 1] so log(u1) is finite; u2 in [0, 1).
        double u1 = (static_cast<double>(w[2 * p] >> 8) + 1.0) / 16777216.0;
        double u2 = static_cast<double>(w[2 * p + 1] >> 8) / 16777216.0;
        double r = std::sqrt(-2.0 * std::log(u1)) * kStd;
        int64_t i0 = base + 2 * p;
        if (i0 < n) out[i0] = static_cast<float>(r * std::cos(kTwoPi * u2));
        if (i0 + 1 < n) out[i0 + 1] = static_cast<float>(r * std::sin(kTwoPi * u2));
      }
    }
    return;
  }

  double bound = 0.0;
  if (kind == InitKind::XavierUniform) {
    if (fanIn + fanOut > 0) bound = std::sqrt(6.0 / static_cast<double>(fanIn + fanOut));
  } else {  // UniformFanIn
    if (fanIn > 0) bound = 1.0 / std::sqrt(static_cast<double>(fanIn));
  }
  const float fbound = static_cast<float>(bound);
  for (int64_t base = 0; base < n; base += 4) {
    std::array<uint32_t, 4> w = block(static_cast<uint64_t>(base) / 4);
    for (int j = 0; j < 4 && base + j < n; ++j) {
      double u = static_cast<double>(w[j] >> 8) / 16777216.0;  // [0, 1)
      float v = static_cast<float>((2.0 * u - 1.0) * bound);
      // Rounding to float may land on the bound; clamp keeps |v| <= bound.
      if (v > fbound) v = fbound;
      if (v < -fbound) v = -fbound;
      out[base + j] = v;
    }
  }
}

}  // namespace transfuse::rt
