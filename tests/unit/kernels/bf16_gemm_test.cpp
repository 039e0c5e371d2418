// The bf16 GEMM (runtime/kernels/Bf16Gemm.h) on every path this machine
// has: the rounding against its definition; packing against the layout;
// every path's C against the exact (double) sum of the rounded operands'
// products within fp32's summation bound, and against the scalar path bit
// for bit on normal inputs; threads give one thread's bits; the epilogues
// (activation, residual in place, the backward's derivative, rotary and
// gated pairs) against the plain product followed by the ops they replace;
// the unpacked entry (A or B transposed) against the packed one. Paths the
// machine lacks are named as skipped.

#include "runtime/kernels/Bf16Gemm.h"

#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/ElementwiseMath.h"
#include "tests/unit/kernels/PairedReference.h"

#include "runtime/ThreadPool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace transfuse::kernels {
namespace {

const Bf16Path kAllPaths[] = {Bf16Path::kScalar, Bf16Path::kAvx2, Bf16Path::kAvx512Bf16,
                              Bf16Path::kAmx};

bool has(Bf16Path p) {
  for (Bf16Path q : bf16PathsAvailable())
    if (q == p) return true;
  return false;
}

std::vector<float> randomMatrix(int64_t rows, int64_t cols, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (float& x : v) x = dist(rng);
  return v;
}

uint32_t bitsOf(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
float fromBits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

TEST(Bf16Gemm, RoundingIsToNearestEvenOnTheBits) {
  EXPECT_EQ(roundBf16(1.0f), 0x3f80);
  EXPECT_EQ(roundBf16(-2.0f), 0xc000);
  EXPECT_EQ(roundBf16(fromBits(0x3f808000)), 0x3f80);  // a tie to the even 0x3f80
  EXPECT_EQ(roundBf16(fromBits(0x3f818000)), 0x3f82);  // a tie to the even 0x3f82
  EXPECT_EQ(roundBf16(fromBits(0x3f808001)), 0x3f81);  // past the tie
  EXPECT_EQ(roundBf16(fromBits(0x3f807fff)), 0x3f80);
  EXPECT_EQ(roundBf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  EXPECT_EQ(roundBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(roundBf16(fromBits(0x00000001)), 0x0000);  // the smallest denormal
  const uint16_t nan = roundBf16(fromBits(0x7f800001));  // a signalling NaN's payload below bit 16
  EXPECT_TRUE(std::isnan(widenBf16(nan)));
  EXPECT_TRUE(std::isnan(widenBf16(roundBf16(std::nanf("")))));
  // Widening is exact: every bf16 comes back.
  for (uint32_t b = 0; b < 0x10000; b += 7)
    if (!std::isnan(widenBf16(static_cast<uint16_t>(b))))
      EXPECT_EQ(roundBf16(widenBf16(static_cast<uint16_t>(b))), b);
  // Against the definition: the nearest bf16, ties to an even mantissa.
  std::vector<float> x = randomMatrix(1, 4000, 3, 1000.0f);
  for (float v : x) {
    const uint32_t lo = bitsOf(v) & 0xffff0000u, hi = lo + 0x10000u;
    const double dlo = std::fabs(double(v) - double(fromBits(lo)));
    const double dhi = std::fabs(double(v) - double(fromBits(hi)));
    const uint32_t want = dlo < dhi ? lo : dhi < dlo ? hi : ((lo >> 16) & 1 ? hi : lo);
    ASSERT_EQ(uint32_t{roundBf16(v)} << 16, want) << v;
  }
}

TEST(Bf16Gemm, PackingFollowsTheLayout) {
  const int64_t k = 37, n = 45;  // a partial k-pair tail and a partial block
  std::vector<float> b = randomMatrix(k, n, 7);
  b[5] = std::nanf("");
  for (bool transB : {false, true}) {
    std::vector<float> src = b;
    if (transB)  // the same B stored as [N, K]
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < n; ++j) src[j * k + i] = b[i * n + j];
    rt::ThreadPool pool(3);
    const Bf16Weights w = packBf16(src.data(), transB ? k : n, transB, k, n, {}, &pool);
    ASSERT_EQ(w.kPadded, 64);
    ASSERT_EQ(w.blocks, 2);
    ASSERT_EQ(w.data.size(), size_t(2 * 2 * 64 * 16));
    for (int64_t j = 0; j < 64; ++j)
      for (int64_t i = 0; i < w.kPadded; ++i) {
        const uint16_t got = w.data[(j / 16) * w.kPadded * 16 + (i / 2) * 32 + (j % 16) * 2 + i % 2];
        const uint16_t want = i < k && j < n ? roundBf16(b[i * n + j]) : 0;
        ASSERT_EQ(got, want) << "k " << i << " column " << j << (transB ? " (transB)" : "");
      }
  }
}

struct Shape {
  int64_t m, n, k;
};

// C of `path` within the bound of fp32 sums of the exact products: each
// of the K adds rounds once, so |C - exact| <= K·2^-24·Σ|products| (+ the
// bias add's rounding).
void checkAgainstExact(Bf16Path path, const Shape& s, uint32_t seed, int64_t lda, int64_t ldc,
                       int aOffset) {
  std::vector<float> aStore(static_cast<size_t>(s.m * lda + aOffset));
  std::vector<float> a0 = randomMatrix(s.m, s.k, seed);
  float* a = aStore.data() + aOffset;  // misaligned rows
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.k; ++j) a[i * lda + j] = a0[i * s.k + j];
  std::vector<float> b = randomMatrix(s.n, s.k, seed + 1, 0.5f), bias = randomMatrix(1, s.n, seed + 2);
  const Bf16Weights w = packBf16(b.data(), s.k, true, s.k, s.n);
  std::vector<float> c(static_cast<size_t>(s.m * ldc), -3.0f);
  gemmBf16(s.m, a, lda, w, GemmEpilogue{bias.data()}, c.data(), ldc, nullptr, path);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      if (j >= s.n) {
        ASSERT_EQ(c[i * ldc + j], -3.0f) << "wrote past N";
        continue;
      }
      double exact = 0, magnitude = 0;
      for (int64_t q = 0; q < s.k; ++q) {
        const double p = double(widenBf16(roundBf16(a[i * lda + q]))) *
                         double(widenBf16(roundBf16(b[j * s.k + q])));
        exact += p;
        magnitude += std::fabs(p);
      }
      const double bound = (s.k + 1) * std::ldexp(magnitude, -24) +
                           std::ldexp(std::fabs(exact + bias[j]), -23);
      ASSERT_NEAR(c[i * ldc + j], exact + bias[j], bound)
          << bf16PathName(path) << " " << s.m << "x" << s.n << "x" << s.k << " at " << i << ","
          << j;
    }
}

TEST(Bf16Gemm, EveryPathIsWithinTheFp32SumBound) {
  for (Bf16Path path : kAllPaths) {
    if (!has(path)) {
      std::cout << "[ SKIPPED  ] bf16 path " << bf16PathName(path) << " (not on this machine)\n";
      continue;
    }
    for (const Shape& s : {Shape{1, 1, 1}, Shape{3, 17, 5}, Shape{33, 70, 131},
                           Shape{64, 64, 64}, Shape{50, 96, 300}, Shape{7, 33, 0},
                           Shape{70, 96, 1100}}) {
      checkAgainstExact(path, s, 11, s.k + 3, s.n + 5, 1);
      checkAgainstExact(path, s, 12, std::max<int64_t>(s.k, 1), s.n, 0);
    }
  }
}

// The same product on `path` and threads: K in more than one pass on every
// path; blocks of whole rows and columns summed in C, the others in scratch.
std::vector<float> productOn(Bf16Path path, rt::ThreadPool* pool, int64_t m = 45) {
  const int64_t n = 150, k = 1100;
  std::vector<float> a = randomMatrix(m, k, 21), b = randomMatrix(n, k, 22, 0.3f);
  const Bf16Weights w = packBf16(b.data(), k, true, k, n);
  std::vector<float> c(static_cast<size_t>(m * n));
  gemmBf16(m, a.data(), k, w, GemmEpilogue{}, c.data(), n, pool, path);
  return c;
}

TEST(Bf16Gemm, EveryPathGivesOneRowsBitsOnAnyThreadCountAndBatch) {
  rt::ThreadPool pool(3);
  const std::vector<float> scalar = productOn(Bf16Path::kScalar, nullptr);
  for (Bf16Path path : bf16PathsAvailable()) {
    const std::vector<float> want = productOn(path, nullptr);
    // Every path but AMX sums in scalar's order.
    if (path != Bf16Path::kAmx)
      EXPECT_EQ(0, std::memcmp(want.data(), scalar.data(), want.size() * sizeof(float)))
          << bf16PathName(path) << " against scalar";
    const std::vector<float> threaded = productOn(path, &pool);
    EXPECT_EQ(0, std::memcmp(threaded.data(), want.data(), want.size() * sizeof(float)))
        << bf16PathName(path) << " on 3 threads";
    // A row's bits do not depend on how many rows share its call.
    for (int64_t m : {1, 7, 16, 17, 33}) {
      const std::vector<float> some = productOn(path, &pool, m);
      EXPECT_EQ(0, std::memcmp(some.data(), want.data(), some.size() * sizeof(float)))
          << bf16PathName(path) << ", " << m << " rows";
    }
  }
}

TEST(Bf16Gemm, TheEpilogueIsTheActivationThenTheResidual) {
  const int64_t m = 21, n = 77, k = 64;
  std::vector<float> a = randomMatrix(m, k, 41), b = randomMatrix(n, k, 42, 0.3f);
  std::vector<float> bias = randomMatrix(1, n, 43), res = randomMatrix(m, n, 44);
  const Bf16Weights w = packBf16(b.data(), k, true, k, n);
  for (Bf16Path path : bf16PathsAvailable()) {
    std::vector<float> plain(static_cast<size_t>(m * n));
    gemmBf16(m, a.data(), k, w, GemmEpilogue{bias.data()}, plain.data(), n, nullptr, path);
    for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu,
                           Activation::kGeluTanh, Activation::kSilu}) {
      std::vector<float> want(plain.size());
      activate(act, plain.data(), want.data(), want.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] += res[i];
      std::vector<float> got = res;  // the residual added in place
      GemmEpilogue ep{bias.data(), act, got.data()};
      gemmBf16(m, a.data(), k, w, ep, got.data(), n, nullptr, path);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << activationName(act) << ", " << bf16PathName(path);
    }
    // The backward's derivative: (scale · A·B) · f'(pre).
    std::vector<float> noBias(plain.size()), pre = randomMatrix(m, n, 45, 3.0f);
    gemmBf16(m, a.data(), k, w, GemmEpilogue{}, noBias.data(), n, nullptr, path);
    for (Activation act : {Activation::kRelu, Activation::kGelu, Activation::kSilu}) {
      std::vector<float> want(plain.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = noBias[i] * 0.5f;
      activationGrad(*math::activationKind(act), pre.data(), want.data(), want.data(),
                     want.size());
      GemmEpilogue ep;
      ep.derivative = act;
      ep.pre = pre.data();
      ep.scale = 0.5f;
      std::vector<float> got(want.size(), -1.0f);
      gemmBf16(m, a.data(), k, w, ep, got.data(), n, nullptr, path);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << "derivative " << activationName(act) << ", " << bf16PathName(path);
    }
  }
}

TEST(Bf16Gemm, PairedEpiloguesAreThePlainProductThenTheRotationOrTheGating) {
  rt::ThreadPool pool(3);
  const int64_t m = 11, k = 90, seqLen = 4, offset = 5;
  for (int64_t headDim : {64, 24}) {
    const int64_t heads = 3, columns = heads * headDim, n = columns + 40, half = headDim / 2;
    std::vector<float> a = randomMatrix(m, k, 51), b = randomMatrix(n, k, 52, 0.2f);
    std::vector<float> bias = randomMatrix(1, n, 53), invFreq = inverseFrequencies(headDim);
    const GemmPairs pairs{GemmPairs::Kind::kRotary, static_cast<size_t>(headDim),
                          static_cast<size_t>(columns)};
    const Bf16Weights plainW = packBf16(b.data(), k, true, k, n);
    const Bf16Weights w = packBf16(b.data(), k, true, k, n, pairs);
    for (Bf16Path path : bf16PathsAvailable()) {
      std::vector<float> want(static_cast<size_t>(m * n));
      gemmBf16(m, a.data(), k, plainW, GemmEpilogue{bias.data()}, want.data(), n, nullptr, path);
      rotateReference(want, m, n, columns, headDim, invFreq, seqLen, offset);
      GemmEpilogue ep{bias.data()};
      ep.invFreq = invFreq.data();
      ep.seqLen = seqLen;
      ep.positionOffset = offset;
      for (rt::ThreadPool* p : {static_cast<rt::ThreadPool*>(nullptr), &pool}) {
        std::vector<float> got(want.size(), -7.0f);
        gemmBf16(m, a.data(), k, w, ep, got.data(), n, p, path);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << "rotary, head " << headDim << ", " << bf16PathName(path)
            << (p ? " on 3 threads" : "");
      }
    }
  }
  const int64_t half = 50, n = 2 * half;
  std::vector<float> a = randomMatrix(m, k, 61), b = randomMatrix(k, n, 62, 0.2f);
  std::vector<float> bias = randomMatrix(1, n, 63);
  const Bf16Weights plainW = packBf16(b.data(), n, false, k, n);
  const Bf16Weights w = packBf16(b.data(), n, false, k, n, {GemmPairs::Kind::kGated, 0, 0});
  for (Bf16Path path : bf16PathsAvailable()) {
    std::vector<float> plain(static_cast<size_t>(m * n));
    gemmBf16(m, a.data(), k, plainW, GemmEpilogue{bias.data()}, plain.data(), n, nullptr, path);
    for (Activation act : {Activation::kSilu, Activation::kGelu, Activation::kNone}) {
      const std::vector<float> want = gateReference(plain, m, half, act);
      std::vector<float> got(want.size(), -7.0f);
      gemmBf16(m, a.data(), k, w, GemmEpilogue{bias.data(), act}, got.data(), half, &pool, path);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << "gated " << activationName(act) << ", " << bf16PathName(path);
    }
  }
}

// The unpacked entry (the backward's products: A or B transposed, B packed
// per call) equals the packed one on the same operands laid out plainly.
TEST(Bf16Gemm, UnpackedProductsEqualPackedOnes) {
  rt::ThreadPool pool(2);
  const int64_t m = 300, n = 40, k = 77;  // few columns: rows split over threads too
  std::vector<float> a = randomMatrix(m, k, 71), b = randomMatrix(k, n, 72, 0.3f);
  std::vector<float> aT(a.size()), bT(b.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) aT[j * m + i] = a[i * k + j];
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j) bT[j * k + i] = b[i * n + j];
  const Bf16Weights w = packBf16(b.data(), n, false, k, n);
  std::vector<float> want(static_cast<size_t>(m * n));
  gemmBf16(m, a.data(), k, w, GemmEpilogue{}, want.data(), n, nullptr);
  for (bool transA : {false, true})
    for (bool transB : {false, true}) {
      std::vector<float> got(want.size(), -1.0f);
      gemmBf16(m, n, k, transA ? aT.data() : a.data(), transA ? m : k, transA,
               transB ? bT.data() : b.data(), transB ? k : n, transB, got.data(), n, {}, &pool);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << "transA " << transA << " transB " << transB;
    }
}

TEST(Bf16Gemm, TheBestPathIsTheFirst) {
  EXPECT_EQ(bestBf16Path(), bf16PathsAvailable().front());
  EXPECT_EQ(bf16PathsAvailable().back(), Bf16Path::kScalar);
  if (has(Bf16Path::kAmx)) EXPECT_EQ(bestBf16Path(), Bf16Path::kAmx);
}

// Turning paths off changes which path sums; the AVX-512 and AVX2 rounding
// and epilogue equal the scalar ones. Last, as it lasts.
TEST(Bf16Gemm, PathsCanBeTurnedOffByName) {
  const std::vector<float> before = productOn(bf16PathsAvailable().back(), nullptr);
  // Packing: B [40, 77] as it is and transposed, with a partial k-pair
  // tail and a partial block; gated pairs (columns from both halves).
  std::vector<float> b = randomMatrix(40, 77, 5);
  b[100] = std::nanf("");
  auto packings = [&] {
    return std::vector<LineVector<uint16_t>>{
        packBf16(b.data(), 77, true, 77, 40).data, packBf16(b.data(), 77, false, 40, 77).data,
        packBf16(b.data(), 77, false, 39, 76, {GemmPairs::Kind::kGated, 0, 0}).data};
  };
  const std::vector<LineVector<uint16_t>> packedBefore = packings();
  // A stored transposed, rounded in AVX-512 where the avx512bf16 path is on
  // (AMX off: rows, not tiles) and by scalar loops at the end.
  const int64_t m = 45, n = 33, k = 77;
  std::vector<float> aT = randomMatrix(k, m, 6), bk = randomMatrix(k, n, 7);
  auto transposedProduct = [&] {
    std::vector<float> c(static_cast<size_t>(m * n));
    gemmBf16(m, n, k, aT.data(), m, /*transA=*/true, bk.data(), n, false, c.data(), n);
    return c;
  };
  ASSERT_TRUE(restrictBf16Paths("-amx").isOk());
  const std::vector<float> transposedBefore = transposedProduct();
  rt::Status bad = restrictBf16Paths("-sse9");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("-sse9"), std::string::npos) << bad.message();
  EXPECT_FALSE(restrictBf16Paths("amx").isOk());
  EXPECT_FALSE(restrictBf16Paths("-scalar").isOk());
  ASSERT_TRUE(restrictBf16Paths("-AMX,-avx512bf16").isOk());  // -AMX again: no error
  for (Bf16Path p : bf16PathsAvailable()) {
    EXPECT_NE(p, Bf16Path::kAmx);
    EXPECT_NE(p, Bf16Path::kAvx512Bf16);
  }
  ASSERT_TRUE(restrictBf16Paths("-avx2").isOk());
  EXPECT_EQ(bf16PathsAvailable(), std::vector<Bf16Path>{Bf16Path::kScalar});
  const std::vector<float> after = productOn(bestBf16Path(), nullptr);
  EXPECT_EQ(0, std::memcmp(after.data(), before.data(), after.size() * sizeof(float)));
  EXPECT_EQ(packings(), packedBefore);
  EXPECT_EQ(transposedProduct(), transposedBefore);
}

}  // namespace
}  // namespace transfuse::kernels
