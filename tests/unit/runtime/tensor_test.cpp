// Tests for runtime/Tensor.h and Status.h: dtype table, zeros(), shapeToString, and
// the F16/BF16 <-> F32 conversions (exhaustive exactness of 16->32->16, subnormals,
// infinities, NaN, overflow, and round-to-nearest-even at ties).
#include "runtime/Status.h"
#include "runtime/Tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace transfuse::rt {
namespace {

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(StatusTest, OkAndError) {
  EXPECT_TRUE(Status::ok().isOk());
  EXPECT_TRUE(static_cast<bool>(Status::ok()));
  Status e = Status::error("boom");
  EXPECT_FALSE(e.isOk());
  EXPECT_FALSE(static_cast<bool>(e));
  EXPECT_EQ(e.message(), "boom");
  StatusOr<int> v(5);
  ASSERT_TRUE(v.isOk());
  EXPECT_EQ(*v, 5);
  StatusOr<std::string> s(std::string("abc"));
  EXPECT_EQ(s->size(), 3u);
  StatusOr<int> bad(Status::error("nope"));
  EXPECT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(), "nope");
}

TEST(TensorTest, DTypeTable) {
  const DType all[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                       DType::I32, DType::I64, DType::Bool};
  const size_t sizes[] = {4, 8, 2, 2, 4, 8, 1};
  const char* names[] = {"F32", "F64", "F16", "BF16", "I32", "I64", "BOOL"};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(dtypeSize(all[i]), sizes[i]);
    EXPECT_STREQ(dtypeName(all[i]), names[i]);
    DType d;
    ASSERT_TRUE(parseDType(names[i], &d));
    EXPECT_EQ(d, all[i]);
  }
  DType d;
  EXPECT_FALSE(parseDType("f32", &d));
  EXPECT_FALSE(parseDType("U8", &d));
  EXPECT_FALSE(parseDType("", &d));
}

TEST(TensorTest, ZerosAndShape) {
  Tensor t = Tensor::zeros(DType::F16, {2, 3});
  EXPECT_EQ(t.numElements(), 6);
  EXPECT_EQ(t.bytes.size(), 12u);
  for (uint8_t b : t.bytes) EXPECT_EQ(b, 0);
  EXPECT_EQ(Tensor::zeros(DType::F32, {}).numElements(), 1);
  EXPECT_EQ(Tensor::zeros(DType::F32, {4, 0}).bytes.size(), 0u);
  EXPECT_EQ(shapeToString({2, 3}), "[2, 3]");
  EXPECT_EQ(shapeToString({}), "[]");
  EXPECT_EQ(shapeToString({7}), "[7]");
}

TEST(TensorTest, HalfKnownValues) {
  EXPECT_EQ(halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfToFloat(0xc000), -2.0f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0400), std::ldexp(1.0f, -14));  // min normal
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));  // min subnormal
  EXPECT_EQ(halfToFloat(0x03ff), 1023 * std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(halfToFloat(0x7c00)) && halfToFloat(0x7c00) > 0);
  EXPECT_TRUE(std::isinf(halfToFloat(0xfc00)) && halfToFloat(0xfc00) < 0);
  EXPECT_TRUE(std::isnan(halfToFloat(0x7e00)));
  EXPECT_TRUE(std::signbit(halfToFloat(0x8000)));

  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);  // below the midpoint
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);  // midpoint ties to even -> inf
  EXPECT_EQ(floatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(floatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  uint16_t nan = floatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  // A signalling NaN whose payload sits only in the low bits must stay a NaN.
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(bitsToFloat(0x7f800001u)))));
  // Subnormals.
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (0)
  EXPECT_EQ(floatToHalf(std::ldexp(1.5f, -25)), 0x0001);  // above the tie
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp: tie -> even (2)
  EXPECT_EQ(floatToHalf(std::ldexp(5.0f, -25)), 0x0002);  // 2.5 ulp: tie -> even (2)
  EXPECT_EQ(floatToHalf(std::ldexp(1023.5f, -24)), 0x0400);  // rounds up to min normal
  EXPECT_EQ(floatToHalf(1e-30f), 0x0000);
  EXPECT_EQ(floatToHalf(-1e-30f), 0x8000);
  // Normal ties: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 -> even (1).
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9 (even) -> up.
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  // Mantissa carry into the exponent: 2 - 2^-12 rounds to 2.
  EXPECT_EQ(floatToHalf(2.0f - std::ldexp(1.0f, -12)), 0x4000);
}

TEST(TensorTest, HalfRoundTripIsExactForAllNonNaN) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float f = halfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(f))));
      continue;
    }
    ASSERT_EQ(floatToHalf(f), h) << std::hex << h;
  }
}

TEST(TensorTest, HalfRoundingMatchesNearest) {
  // For floats between adjacent halves, the result is the nearer one (ties to even).
  for (uint32_t h = 0; h < 0x7bff; h += 37) {
    float lo = halfToFloat(static_cast<uint16_t>(h));
    float hi = halfToFloat(static_cast<uint16_t>(h + 1));
    float mid = lo + (hi - lo) / 2;  // exact in fp32
    EXPECT_EQ(floatToHalf(mid), (h & 1) ? h + 1 : h) << std::hex << h;
    EXPECT_EQ(floatToHalf(std::nextafter(mid, 0.0f)), h);
    EXPECT_EQ(floatToHalf(std::nextafter(mid, 1e9f)), h + 1);
  }
}

TEST(TensorTest, BF16Conversions) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(bf16ToFloat(0xc000), -2.0f);
  // Ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> even (1).
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  // Subnormal fp32 values are representable in bf16 (same exponent range).
  EXPECT_EQ(floatToBf16(bitsToFloat(0x00010000u)), 0x0001);
  EXPECT_EQ(bf16ToFloat(0x0001), bitsToFloat(0x00010000u));
  EXPECT_EQ(floatToBf16(bitsToFloat(0x00008000u)), 0x0000);  // tie -> even
  EXPECT_EQ(floatToBf16(bitsToFloat(0x00018000u)), 0x0002);  // tie -> even
  // Overflow: the largest float rounds to inf.
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(floatToBf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(bitsToFloat(0x7f800001u)))));
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    float f = bf16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(floatToBf16(f), b) << std::hex << b;
  }
}

}  // namespace
}  // namespace transfuse::rt
