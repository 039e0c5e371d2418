// The int8 GEMM (runtime/kernels/Int8Gemm.h) on every path this machine has:
// quantization against its definition; packing against the layout; every
// path's C against a scalar reference that sums the quantized products
// exactly in int64 (each element within one rounding of the float
// epilogue), and every path against the scalar path bit for bit, on odd
// sizes, misaligned pointers, leading dimensions, zero rows and weights at
// the int8 range's ends (the AVX2 form's int16 saturation edge); threads
// give one thread's bits. Paths the machine lacks are named as skipped.

#include "runtime/kernels/Int8Gemm.h"

#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/ElementwiseMath.h"
#include "tests/unit/kernels/PairedReference.h"

#include "runtime/ThreadPool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

namespace transfuse::kernels {
namespace {

const Int8Path kAllPaths[] = {Int8Path::kScalar, Int8Path::kAvx2, Int8Path::kVnni,
                              Int8Path::kAmx};

bool has(Int8Path p) {
  for (Int8Path q : int8PathsAvailable())
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

TEST(Int8Gemm, QuantizationIsSymmetricPerRowAndRoundsToNearest) {
  const std::vector<float> x = {0.5f, -1.0f, 0.25f, 0.0f, 1.0f / 254, -0.999f,  // peak 1
                                0.0f, 0.0f,  0.0f,  0.0f, 0.0f,       0.0f,     // a zero row
                                3.0f, -6.0f, 1.0f,  2.0f, -0.01f,     6.0f};
  std::vector<int8_t> q(18, 99);
  float scales[3];
  quantizeRows(x.data(), 6, 3, 6, q.data(), 6, scales);
  EXPECT_EQ(scales[0], 1.0f / 127.0f);
  EXPECT_EQ(scales[1], 0.0f);
  EXPECT_EQ(scales[2], 6.0f / 127.0f);
  // 0.5·127 = 63.5 and 127/254 = 0.5 round to even.
  EXPECT_EQ(std::vector<int8_t>(q.begin(), q.begin() + 6),
            (std::vector<int8_t>{64, -127, 32, 0, 0, -127}));
  EXPECT_EQ(std::vector<int8_t>(q.begin() + 6, q.begin() + 12), std::vector<int8_t>(6, 0));
  for (int j = 12; j < 18; ++j) {
    EXPECT_LE(std::abs(q[j] * scales[2] - x[j]), scales[2] / 2 * (1 + 1e-6f)) << j;
    EXPECT_LE(std::abs(int{q[j]}), 127);
  }
}

TEST(Int8Gemm, PackingFollowsTheLayoutAndCountsTheCompensation) {
  const int64_t k = 70, n = 19;  // a second, partial panel; K padded to 128
  std::vector<float> b = randomMatrix(k, n, 3);
  const Int8Weights w = quantizePackB(b.data(), n, /*transB=*/false, k, n);
  ASSERT_EQ(w.kPadded, 128);
  ASSERT_EQ(w.blocks, 1);
  ASSERT_EQ(w.data.size(), static_cast<size_t>(2 * 128 * 16));
  const Int8Weights t = [&] {
    std::vector<float> bt(static_cast<size_t>(k * n));
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j) bt[j * k + i] = b[i * n + j];
    return quantizePackB(bt.data(), k, /*transB=*/true, k, n);
  }();
  EXPECT_EQ(t.data, w.data);
  EXPECT_EQ(t.scale, w.scale);
  for (int64_t j = 0; j < n; ++j) {
    std::vector<float> column(k);
    for (int64_t i = 0; i < k; ++i) column[i] = b[i * n + j];
    std::vector<int8_t> q(k);
    float scale = 0;
    quantizeRows(column.data(), k, 1, k, q.data(), k, &scale);
    EXPECT_EQ(w.scale[j], scale);
    int32_t sum = 0;
    for (int64_t i = 0; i < w.kPadded; ++i) {
      const int8_t packed = w.data[(j / 16) * 128 * 16 + (i / 4) * 64 + (j % 16) * 4 + i % 4];
      EXPECT_EQ(packed, i < k ? q[i] : 0) << "k " << i << " column " << j;
      sum += packed;
    }
    EXPECT_EQ(w.compensation[j], 128 * sum);
  }
}

struct Shape {
  int64_t m, k, n;
};

// C on `path` against the exact sums of the quantized values.
void checkAgainstReference(Int8Path path, const Shape& s, uint32_t seed, bool bias,
                           int64_t offset) {
  const int64_t lda = s.k + 3, ldc = s.n + 5;
  std::vector<float> aStore = randomMatrix(s.m, lda, seed);
  aStore.insert(aStore.begin(), static_cast<size_t>(offset), 0.0f);  // misaligned rows
  const float* a = aStore.data() + offset;
  std::vector<float> b = randomMatrix(s.n, s.k, seed + 1, 0.2f);  // a linear's [N, K]
  // Extremes: a column of ±max weights (every pair of products at the int16
  // edge on the AVX2 form), and a zero row of A.
  for (int64_t i = 0; i < s.k; ++i) b[i] = (i % 2 ? -0.2f : 0.2f);
  if (s.m > 2)
    for (int64_t j = 0; j < s.k; ++j) aStore[offset + 2 * lda + j] = 0.0f;
  const Int8Weights w = quantizePackB(b.data(), s.k, /*transB=*/true, s.k, s.n);
  std::vector<float> biasv = randomMatrix(1, s.n, seed + 2);
  std::vector<float> c(static_cast<size_t>(s.m * ldc), -7.0f);
  gemmInt8(s.m, a, lda, w, bias ? biasv.data() : nullptr, c.data(), ldc, nullptr, path);

  std::vector<int8_t> qa(static_cast<size_t>(s.m * s.k));
  std::vector<float> sa(static_cast<size_t>(s.m));
  quantizeRows(a, lda, s.m, s.k, qa.data(), s.k, sa.data());
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      if (j >= s.n) {
        ASSERT_EQ(c[i * ldc + j], -7.0f) << "wrote past N at " << i << "," << j;
        continue;
      }
      int64_t sum = 0;
      for (int64_t kk = 0; kk < s.k; ++kk)
        sum += int64_t{qa[i * s.k + kk]} *
               w.data[(j / 16) * w.kPadded * 16 + (kk / 4) * 64 + (j % 16) * 4 + kk % 4];
      const double product = static_cast<double>(sum) * (sa[i] * w.scale[j]);
      const double added = bias ? biasv[j] : 0.0;
      // float(sum) is exact (|sum| < 2^24 here); the product and the bias's
      // addition round once each.
      const double tolerance = 1.2e-7 * (2 * std::abs(product) + std::abs(added)) + 1e-30;
      ASSERT_NEAR(c[i * ldc + j], product + added, tolerance)
          << int8PathName(path) << " m=" << s.m << " k=" << s.k << " n=" << s.n << " at " << i
          << "," << j;
    }
}

TEST(Int8Gemm, EveryPathEqualsTheExactSums) {
  std::string skipped;
  const Shape shapes[] = {{1, 1, 1},    {1, 64, 16},  {3, 5, 7},     {8, 70, 19},
                          {33, 130, 47}, {40, 256, 64}, {65, 100, 33}, {2, 513, 40}};
  for (Int8Path path : kAllPaths) {
    if (!has(path)) {
      skipped += std::string(skipped.empty() ? "" : ", ") + int8PathName(path);
      continue;
    }
    uint32_t seed = 10;
    for (const Shape& s : shapes)
      for (bool bias : {false, true})
        for (int64_t offset : {0, 1}) checkAgainstReference(path, s, seed++, bias, offset);
  }
  if (!skipped.empty()) std::cout << "int8 paths this CPU lacks, skipped: " << skipped << "\n";
}

TEST(Int8Gemm, EveryPathGivesTheScalarBitsOnAnyThreadCount) {
  const Shape s{37, 300, 90};
  std::vector<float> a = randomMatrix(s.m, s.k, 21), b = randomMatrix(s.k, s.n, 22, 0.1f);
  const Int8Weights w = quantizePackB(b.data(), s.n, /*transB=*/false, s.k, s.n);
  std::vector<float> bias = randomMatrix(1, s.n, 23);
  std::vector<float> scalar(static_cast<size_t>(s.m * s.n));
  gemmInt8(s.m, a.data(), s.k, w, bias.data(), scalar.data(), s.n, nullptr, Int8Path::kScalar);
  rt::ThreadPool pool(3);
  for (Int8Path path : int8PathsAvailable())
    for (rt::ThreadPool* p : {static_cast<rt::ThreadPool*>(nullptr), &pool}) {
      std::vector<float> c(scalar.size());
      gemmInt8(s.m, a.data(), s.k, w, bias.data(), c.data(), s.n, p, path);
      EXPECT_EQ(0, std::memcmp(c.data(), scalar.data(), c.size() * sizeof(float)))
          << int8PathName(path) << (p ? " with 3 threads" : "");
    }
}

// act(product + bias) + residual, with the activation the fp32 GEMM's
// epilogue applies (kernels::activate), on every path.
TEST(Int8Gemm, TheEpilogueIsTheActivationThenTheResidual) {
  const Shape s{13, 77, 41};
  const int64_t ldr = s.n + 3;
  std::vector<float> a = randomMatrix(s.m, s.k, 41), b = randomMatrix(s.k, s.n, 42, 0.2f);
  const Int8Weights w = quantizePackB(b.data(), s.n, /*transB=*/false, s.k, s.n);
  std::vector<float> bias = randomMatrix(1, s.n, 43), residual = randomMatrix(s.m, ldr, 44);
  for (Int8Path path : int8PathsAvailable()) {
    std::vector<float> plain(static_cast<size_t>(s.m * s.n));
    gemmInt8(s.m, a.data(), s.k, w, bias.data(), plain.data(), s.n, nullptr, path);
    for (int i = 0; i < kNumActivations; ++i) {
      const Activation act = static_cast<Activation>(i);
      std::vector<float> want(plain.size()), got(plain.size());
      activate(act, plain.data(), want.data(), want.size());
      for (int64_t r = 0; r < s.m; ++r)
        for (int64_t j = 0; j < s.n; ++j) want[r * s.n + j] += residual[r * ldr + j];
      Int8Epilogue ep{bias.data(), act, residual.data(), ldr};
      gemmInt8(s.m, a.data(), s.k, w, ep, got.data(), s.n, nullptr, path);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << int8PathName(path) << " " << activationName(act);
    }
  }
  // activate's silu (added for this epilogue) against its definition.
  std::vector<float> x = randomMatrix(1, 300, 45, 12.0f), y(300);
  activate(Activation::kSilu, x.data(), y.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(y[i], x[i] / (1.0 + std::exp(-double(x[i]))), 1e-6 * (1 + std::abs(x[i]))) << x[i];
}

// Column pairs (rotary and gated, as the fp32 GEMM's, Gemm.h): packing puts
// a pair's columns side by side, and on every path and thread count the
// paired product is the plain one (the same weights) followed by the
// rotation or the gating, bit for bit.
TEST(Int8Gemm, PairedEpiloguesAreThePlainProductThenTheRotationOrTheGating) {
  rt::ThreadPool pool(3);
  const int64_t m = 11, k = 90, seqLen = 4, offset = 5;
  for (int64_t headDim : {64, 24}) {  // half 32: two blocks a head; 12: partial panels
    const int64_t heads = 3, columns = heads * headDim, n = columns + 40, half = headDim / 2;
    std::vector<float> a = randomMatrix(m, k, 51), b = randomMatrix(n, k, 52, 0.2f);
    std::vector<float> bias = randomMatrix(1, n, 53), invFreq = inverseFrequencies(headDim);
    const GemmPairs pairs{GemmPairs::Kind::kRotary, static_cast<size_t>(headDim),
                          static_cast<size_t>(columns)};
    const Int8Weights plainW = quantizePackB(b.data(), k, true, k, n);
    const Int8Weights w = quantizePackB(b.data(), k, true, k, n, pairs);
    // Head 0's column 1 and its partner half + 1 sit 16 apart in block 0.
    for (int64_t kk = 0; kk < k; ++kk) {
      EXPECT_EQ(w.data[(kk / 4) * 64 + 1 * 4 + kk % 4],
                plainW.data[(kk / 4) * 64 + 1 * 4 + kk % 4]);
      const int64_t j = half + 1;
      EXPECT_EQ(w.data[w.kPadded * 16 + (kk / 4) * 64 + 1 * 4 + kk % 4],
                plainW.data[(j / 16) * w.kPadded * 16 + (kk / 4) * 64 + (j % 16) * 4 + kk % 4]);
    }
    for (Int8Path path : int8PathsAvailable()) {
      std::vector<float> want(static_cast<size_t>(m * n));
      gemmInt8(m, a.data(), k, plainW, bias.data(), want.data(), n, nullptr, path);
      rotateReference(want, m, n, columns, headDim, invFreq, seqLen, offset);
      Int8Epilogue ep{bias.data()};
      ep.invFreq = invFreq.data();
      ep.seqLen = seqLen;
      ep.positionOffset = offset;
      for (rt::ThreadPool* p : {static_cast<rt::ThreadPool*>(nullptr), &pool}) {
        std::vector<float> got(want.size(), -7.0f);
        gemmInt8(m, a.data(), k, w, ep, got.data(), n, p, path);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << "rotary, head " << headDim << ", " << int8PathName(path)
            << (p ? " on 3 threads" : "");
      }
    }
  }
  // Gated: B [K, 2·50] (gate columns, then up), C [M, 50].
  const int64_t half = 50, n = 2 * half;
  std::vector<float> a = randomMatrix(m, k, 61), b = randomMatrix(k, n, 62, 0.2f);
  std::vector<float> bias = randomMatrix(1, n, 63);
  const Int8Weights plainW = quantizePackB(b.data(), n, false, k, n);
  const Int8Weights w = quantizePackB(b.data(), n, false, k, n, {GemmPairs::Kind::kGated, 0, 0});
  for (Int8Path path : int8PathsAvailable()) {
    std::vector<float> plain(static_cast<size_t>(m * n));
    gemmInt8(m, a.data(), k, plainW, bias.data(), plain.data(), n, nullptr, path);
    for (Activation act : {Activation::kSilu, Activation::kGelu, Activation::kNone}) {
      const std::vector<float> want = gateReference(plain, m, half, act);
      for (rt::ThreadPool* p : {static_cast<rt::ThreadPool*>(nullptr), &pool}) {
        std::vector<float> got(want.size(), -7.0f);
        gemmInt8(m, a.data(), k, w, Int8Epilogue{bias.data(), act}, got.data(), half, p, path);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << "gated " << activationName(act) << ", " << int8PathName(path)
            << (p ? " on 3 threads" : "");
      }
    }
  }
}

TEST(Int8Gemm, FewRowsTakeVnniOverAmx) {
  EXPECT_EQ(int8PathFor(64), bestInt8Path());
  if (has(Int8Path::kAmx) && has(Int8Path::kVnni)) {
    EXPECT_EQ(int8PathFor(1), Int8Path::kVnni);
    EXPECT_EQ(int8PathFor(15), Int8Path::kVnni);
    EXPECT_EQ(int8PathFor(16), Int8Path::kAmx);
  } else {
    EXPECT_EQ(int8PathFor(1), bestInt8Path());
  }
}

// Runs the same product; with the avx2 path on, quantization and the
// epilogue run in AVX2 too.
std::vector<float> product(std::vector<int8_t>* qa = nullptr) {
  const Shape s{19, 203, 45};  // vector bodies and scalar tails
  std::vector<float> a = randomMatrix(s.m, s.k, 31), b = randomMatrix(s.n, s.k, 32, 0.3f);
  const Int8Weights w = quantizePackB(b.data(), s.k, /*transB=*/true, s.k, s.n);
  std::vector<float> bias = randomMatrix(1, s.n, 33), c(static_cast<size_t>(s.m * s.n));
  gemmInt8(s.m, a.data(), s.k, w, bias.data(), c.data(), s.n, nullptr);
  if (qa) {
    qa->resize(static_cast<size_t>(s.m * s.k));
    std::vector<float> sa(s.m);
    quantizeRows(a.data(), s.k, s.m, s.k, qa->data(), s.k, sa.data());
    c.insert(c.end(), sa.begin(), sa.end());
  }
  return c;
}

// Turning paths off changes which path sums, never the bits: the AVX-512
// and AVX2 quantization and epilogue equal the scalar ones.
TEST(Int8Gemm, PathsCanBeTurnedOffByName) {
  std::vector<int8_t> qBefore, qAfter;
  const std::vector<float> cBefore = product(&qBefore);
  const std::vector<Int8Path> before = int8PathsAvailable();
  EXPECT_EQ(before.back(), Int8Path::kScalar);
  EXPECT_EQ(bestInt8Path(), before.front());
  rt::Status bad = restrictInt8Paths("-sse9");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("-sse9"), std::string::npos) << bad.message();
  EXPECT_FALSE(restrictInt8Paths("amx").isOk());  // a toggle needs its '-'
  ASSERT_TRUE(restrictInt8Paths("-AMX,-vnni").isOk());  // (AVX-512 row work off)
  {
    std::vector<int8_t> q;
    const std::vector<float> c = product(&q);
    EXPECT_EQ(q, qBefore);
    EXPECT_EQ(0, std::memcmp(c.data(), cBefore.data(), c.size() * sizeof(float)));
  }
  for (Int8Path p : int8PathsAvailable()) {
    EXPECT_NE(p, Int8Path::kAmx);
    EXPECT_NE(p, Int8Path::kVnni);
  }
  EXPECT_EQ(int8PathsAvailable().back(), Int8Path::kScalar);
  ASSERT_TRUE(restrictInt8Paths("-avx2").isOk());
  EXPECT_EQ(int8PathsAvailable(), std::vector<Int8Path>{Int8Path::kScalar});
  const std::vector<float> cAfter = product(&qAfter);
  EXPECT_EQ(qAfter, qBefore);
  EXPECT_EQ(0, std::memcmp(cAfter.data(), cBefore.data(), cBefore.size() * sizeof(float)));
}

}  // namespace
}  // namespace transfuse::kernels
