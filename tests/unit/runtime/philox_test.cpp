// Tests for runtime/Philox.h: the Random123 known-answer vectors for
// philox4x32 with 10 rounds, and the documented seed/step/stream/index mapping of
// philoxUniform (range, determinism, sensitivity to each argument, rough uniformity).
#include "runtime/Philox.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace transfuse::rt {
namespace {

using U4 = std::array<uint32_t, 4>;

TEST(PhiloxTest, KnownAnswerVectors) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (U4{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                          {0xffffffffu, 0xffffffffu}),
            (U4{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (U4{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(PhiloxTest, UniformFollowsDocumentedMapping) {
  // Index 0x400000009 is word 1 of block 0x100000002.
  const uint64_t seed = 0x0123456789abcdefull, step = 7, stream = 3, index = 0x400000009ull;
  U4 w = philox4x32_10({0x00000002u, 0x00000001u, 3u, 7u}, {0x89abcdefu, 0x01234567u});
  EXPECT_EQ(philoxUniform(seed, step, stream, index), (w[1] >> 8) / 16777216.0f);
  for (int k = 0; k < 4; ++k)  // the block's four words, in order
    EXPECT_EQ(philoxUniform(seed, step, stream, 0x400000008ull + k), (w[k] >> 8) / 16777216.0f);
}

// philoxUniforms is philoxUniform over a range, from any start.
TEST(PhiloxTest, UniformsMatchOneByOne) {
  for (uint64_t first : {0ull, 1ull, 3ull, 6ull, (1ull << 32) - 2})
    for (uint64_t n : {0ull, 1ull, 2ull, 5ull, 17ull}) {
      std::vector<float> out(n + 1, -1.0f);
      philoxUniforms(5, 6, 7, first, n, out.data());
      for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], philoxUniform(5, 6, 7, first + i)) << first << " " << i;
      ASSERT_EQ(out[n], -1.0f);  // nothing past n
    }
}

TEST(PhiloxTest, UniformRangeAndSensitivity) {
  const int n = 100000;
  double sum = 0;
  int below[10] = {};
  for (int i = 0; i < n; ++i) {
    float u = philoxUniform(42, 1, 0, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    below[static_cast<int>(u * 10)]++;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
  for (int b = 0; b < 10; ++b) EXPECT_NEAR(below[b], n / 10, n / 100) << "bucket " << b;
  EXPECT_EQ(philoxUniform(1, 2, 3, 4), philoxUniform(1, 2, 3, 4));
  EXPECT_NE(philoxUniform(1, 2, 3, 4), philoxUniform(2, 2, 3, 4));
  EXPECT_NE(philoxUniform(1, 2, 3, 4), philoxUniform(1, 3, 3, 4));
  EXPECT_NE(philoxUniform(1, 2, 3, 4), philoxUniform(1, 2, 4, 4));
  EXPECT_NE(philoxUniform(1, 2, 3, 4), philoxUniform(1, 2, 3, 5));
  EXPECT_NE(philoxUniform(1ull << 32, 2, 3, 4), philoxUniform(0, 2, 3, 4));
  EXPECT_NE(philoxUniform(1, 2, 3, 1ull << 32), philoxUniform(1, 2, 3, 0));
}

TEST(PhiloxTest, DropoutKeepRate) {
  // Keep when u >= rate: the kept fraction is about 1 - rate.
  const float rate = 0.3f;
  int kept = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) kept += philoxUniform(9, 0, 5, i) >= rate;
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.7, 0.005);
}

}  // namespace
}  // namespace transfuse::rt
