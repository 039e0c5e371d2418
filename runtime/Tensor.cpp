// Dtype table and fp32 <-> F16/BF16 conversions for Tensor.h. The conversions work
// on the bit patterns (no hardware half support needed) and round to nearest even.
#include "runtime/Tensor.h"

#include <cstring>

namespace transfuse::rt {

namespace {
uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace

size_t dtypeSize(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::Bool: return 1;
  }
  return 0;
}

const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::Bool: return "BOOL";
  }
  return "?";
}

bool parseDType(std::string_view name, DType* out) {
  static const DType all[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                              DType::I32, DType::I64, DType::Bool};
  for (DType d : all) {
    if (name == dtypeName(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

Tensor Tensor::zeros(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes.assign(static_cast<size_t>(t.numElements()) * dtypeSize(dtype), 0);
  return t;
}

// binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in fp32.
    float mag = static_cast<float>(mant) * bitsFloat(0x33800000u);  // 2^-24
    return bitsFloat(sign | floatBits(mag));
  }
  if (exp == 31) return bitsFloat(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  return bitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u)  // NaN: keep the top payload bits, force quiet.
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  // 65520 = halfway between 65504 (max half) and 2^16; ties-to-even goes up.
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (ax < 0x38800000u) {
    // Result is a half subnormal (or zero): round(|f| / 2^-24).
    uint32_t e = ax >> 23;
    uint32_t shift = 126 - e;  // |f| = m * 2^(e-150), m with implicit bit
    if (e == 0 || shift > 24) return sign;  // < 2^-25 (or exactly): rounds to 0
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias exponent 127 -> 15 and drop 13 mantissa bits with RNE; a carry
  // out of the mantissa correctly bumps the exponent.
  uint32_t q = (ax >> 13) - (112u << 10);
  uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1))) ++q;
  return static_cast<uint16_t>(sign | q);
}

float bf16ToFloat(uint16_t b) { return bitsFloat(static_cast<uint32_t>(b) << 16); }

const float* floatData(const Tensor& t, std::vector<float>& scratch) {
  if (t.dtype == DType::F32) return t.data<float>();
  const int64_t n = t.numElements();
  scratch.resize(static_cast<size_t>(n));
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(t.bytes.data());
  for (int64_t i = 0; i < n; ++i)
    scratch[i] = t.dtype == DType::BF16 ? bf16ToFloat(bits[i]) : halfToFloat(bits[i]);
  return scratch.data();
}

uint16_t floatToBf16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)  // NaN: truncate, force quiet
    return static_cast<uint16_t>((x >> 16) | 0x0040u);
  x += 0x7fffu + ((x >> 16) & 1u);  // RNE; overflow carries into inf
  return static_cast<uint16_t>(x >> 16);
}

std::string shapeToString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace transfuse::rt
