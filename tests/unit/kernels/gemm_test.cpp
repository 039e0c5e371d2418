// GEMM (runtime/kernels/Gemm.h) against a scalar reference with double
// accumulation, on every Highway target compiled in (hwy::TestWithParamTarget
// switches the dispatched target per test instance).
//
// Tolerance, per element (u = 2^-24, the fp32 unit roundoff):
//   |C - ref| <= 1.2·(K + 2)·u·S + 8·u·(|x| + |residual|) + 1e-30
// where S = Σ_k |A(i,k)|·|B(k,j)| (+ |bias_j|) and x = Σ_k A·B + bias is the
// pre-activation value. The first term is the worst-case bound for a sum of K
// products in any order (γ_{K+1}·S), times 1.2 for the largest slope of the
// activations (gelu' <= 1.13); the second covers the activation's own error
// (erf within 2.5e-7 absolute, i.e. < 4.5u·|x|/2 for gelu; tanh-gelu's
// exp and division) and the final additions. Threaded results are checked
// bitwise against single-threaded ones.

#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/ElementwiseMath.h"
#include "runtime/kernels/Gemm.h"

#include "runtime/ThreadPool.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>
#include <hwy/tests/hwy_gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace transfuse::kernels {
namespace {

using rt::ThreadPool;

constexpr double kU = 1.0 / (1 << 24);

struct Case {
  size_t M, N, K;
  bool transA = false, transB = false;
  bool bias = false, residual = false;
  Activation act = Activation::kNone;
  size_t padA = 0, padB = 0, padC = 0, padR = 0;  // leading dimension - width
  size_t offset = 0;  // floats each pointer is shifted by (1: misaligned)
  std::string str() const {
    return "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
           (transA ? " Aᵀ" : "") + (transB ? " Bᵀ" : "") + (bias ? " bias" : "") + " " +
           activationName(act) + (residual ? " residual" : "") +
           " pads=" + std::to_string(padA) + "," + std::to_string(padB) + "," +
           std::to_string(padC) + "," + std::to_string(padR) +
           " offset=" + std::to_string(offset);
  }
};

// A buffer with `offset` floats before the data and random contents.
struct Buffer {
  std::vector<float> storage;
  float* p = nullptr;
  Buffer(size_t n, size_t offset, std::mt19937& rng) : storage(n + offset + 1) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& x : storage) x = dist(rng);
    p = storage.data() + offset;
  }
};

double activation(Activation act, double x) {
  switch (act) {
    case Activation::kNone: return x;
    case Activation::kRelu: return math::relu(x);
    case Activation::kGelu: return math::gelu(x);
    case Activation::kGeluTanh: return math::geluTanh(x);
    case Activation::kSilu: return math::silu(x);
  }
  return x;
}

struct Operands {
  Case c;
  size_t lda, ldb, ldc, ldr;
  Buffer A, B, bias, res;
  Operands(const Case& cs, std::mt19937& rng)
      : c(cs),
        lda((cs.transA ? cs.M : cs.K) + cs.padA),
        ldb((cs.transB ? cs.K : cs.N) + cs.padB),
        ldc(cs.N + cs.padC),
        ldr(cs.N + cs.padR),
        A((cs.transA ? cs.K : cs.M) * lda, cs.offset, rng),
        B((cs.transB ? cs.N : cs.K) * ldb, cs.offset, rng),
        bias(cs.N, cs.offset, rng),
        res(cs.M * ldr, cs.offset, rng) {}

  float a(size_t i, size_t k) const { return c.transA ? A.p[k * lda + i] : A.p[i * lda + k]; }
  float b(size_t k, size_t j) const { return c.transB ? B.p[j * ldb + k] : B.p[k * ldb + j]; }

  GemmEpilogue epilogue() const {
    GemmEpilogue ep;
    ep.bias = c.bias ? bias.p : nullptr;
    ep.activation = c.act;
    ep.residual = c.residual ? res.p : nullptr;
    ep.ldr = ldr;
    return ep;
  }

  // Returns C (with ldc, `offset` floats in front), padding filled with NaN.
  std::vector<float> run(ThreadPool* pool, bool prepacked = true) const {
    std::vector<float> C(c.M * ldc + c.offset + 1, std::numeric_limits<float>::quiet_NaN());
    float* Cp = C.data() + c.offset;
    if (prepacked) {
      PackedB pb = packB(B.p, c.K, c.N, ldb, c.transB);
      gemm(c.M, c.N, c.K, A.p, lda, c.transA, pb, Cp, ldc, epilogue(), pool);
    } else {
      gemm(c.M, c.N, c.K, A.p, lda, c.transA, B.p, ldb, c.transB, Cp, ldc, epilogue(), pool);
    }
    return C;
  }

  // Checks C against the double reference and that the padding is untouched.
  void check(const std::vector<float>& C) const {
    const float* Cp = C.data() + c.offset;
    int failures = 0;
    for (size_t i = 0; i < c.M; ++i) {
      for (size_t j = 0; j < ldc; ++j) {
        const float got = Cp[i * ldc + j];
        if (j >= c.N) {
          if (!std::isnan(got) && ++failures <= 5)
            ADD_FAILURE() << c.str() << ": padding C(" << i << "," << j << ") written";
          continue;
        }
        double x = 0, s = 0;
        for (size_t k = 0; k < c.K; ++k) {
          x += static_cast<double>(a(i, k)) * b(k, j);
          s += std::fabs(static_cast<double>(a(i, k)) * b(k, j));
        }
        if (c.bias) {
          x += bias.p[j];
          s += std::fabs(bias.p[j]);
        }
        double r = c.residual ? res.p[i * ldr + j] : 0.0;
        double want = activation(c.act, x) + r;
        double tol = 1.2 * (c.K + 2) * kU * s + 8 * kU * (std::fabs(x) + std::fabs(r)) + 1e-30;
        if (!(std::fabs(got - want) <= tol) && ++failures <= 5)
          ADD_FAILURE() << c.str() << ": C(" << i << "," << j << ") = " << got << ", want "
                        << want << " ± " << tol;
      }
    }
  }
};

class GemmTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(GemmTest);

const Activation kActs[] = {Activation::kNone, Activation::kRelu, Activation::kGelu,
                            Activation::kGeluTanh, Activation::kSilu};
constexpr size_t kNumActs = std::size(kActs);

// Every (M, N, K) of a sample of 0..33 in each dimension; the variant (transposes,
// epilogue, misalignment, leading dimensions) rotates with the case index so that
// every variant meets every size class.
TEST_P(GemmTest, SmallAndOddSizes) {
  std::mt19937 rng(1);
  const size_t ms[] = {0, 1, 2, 3, 5, 7, 13, 14, 15, 17, 29};
  const size_t ns[] = {0, 1, 7, 15, 16, 17, 31, 32, 33};
  const size_t ks[] = {0, 1, 2, 3, 17};
  size_t index = 0;
  for (size_t M : ms)
    for (size_t N : ns)
      for (size_t K : ks) {
        Case c{M, N, K};
        c.transA = index & 1;
        c.transB = (index >> 1) & 1;
        c.offset = (index >> 2) & 1;
        c.act = kActs[(index / 3) % kNumActs];
        c.bias = (index % 5) != 0;
        c.residual = (index % 7) < 3;
        c.padA = index % 3;
        c.padB = (index / 2) % 3;
        c.padC = (index / 4) % 2;
        c.padR = index % 2 ? 3 : 0;
        ++index;
        Operands op(c, rng);
        op.check(op.run(nullptr));
      }
}

// Every epilogue and transpose combination on tiles with ragged edges and
// K around the 256 block: full and partial tiles, one and several k-blocks.
TEST_P(GemmTest, EdgeTilesEveryEpilogue) {
  std::mt19937 rng(2);
  const size_t shapes[][3] = {{29, 47, 255}, {15, 65, 257}, {43, 33, 513}, {64, 63, 256}};
  size_t index = 0;
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t)
      for (Activation act : kActs)
        for (int epi = 0; epi < 2; ++epi) {
          Case c{s[0], s[1], s[2]};
          c.transA = t & 1;
          c.transB = t >> 1;
          c.act = act;
          c.bias = epi == 1 || act != Activation::kNone;
          c.residual = epi == 1;
          c.offset = index & 1;
          c.padA = c.padB = c.padC = c.padR = (index % 3) * 5;
          ++index;
          Operands op(c, rng);
          op.check(op.run(nullptr));
        }
}

// A large product, single- and multi-threaded, bitwise equal.
TEST_P(GemmTest, LargeThreadedEqualsSerial) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  Case cases[2] = {{300, 257, 513}, {300, 257, 513}};
  cases[0].bias = true;
  cases[0].act = Activation::kGelu;
  cases[0].residual = true;
  cases[0].offset = 1;
  cases[1].transA = cases[1].transB = true;
  cases[1].act = Activation::kGeluTanh;
  cases[1].padA = 3;
  cases[1].padC = 5;
  for (const Case& c : cases) {
    Operands op(c, rng);
    std::vector<float> serial = op.run(nullptr);
    op.check(serial);
    std::vector<float> threaded = op.run(&pool);
    ASSERT_EQ(serial.size(), threaded.size());
    EXPECT_EQ(0, std::memcmp(serial.data(), threaded.data(), serial.size() * sizeof(float)))
        << c.str();
  }
}

// A long K runs in K chunks (gemm-inl.h KChunks: {300, 40, 4100} in two,
// {150, 70, 8000} in three; {20, 33, 3000} has one row block and one chunk):
// the bias and the epilogue apply once, after the last chunk, and threads
// give the same bits.
TEST_P(GemmTest, LongKInChunks) {
  std::mt19937 rng(8);
  ThreadPool pool(2);
  const size_t shapes[][3] = {{300, 40, 4100}, {150, 70, 8000}, {20, 33, 3000}};
  size_t index = 0;
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t) {
      Case c{s[0], s[1], s[2]};
      c.transA = t & 1;
      c.transB = t >> 1;
      c.act = kActs[index % kNumActs];
      c.bias = true;
      c.residual = index % 2 == 1;
      c.padC = (index % 3) * 5;
      ++index;
      Operands op(c, rng);
      std::vector<float> serial = op.run(nullptr);
      op.check(serial);
      std::vector<float> threaded = op.run(&pool);
      EXPECT_EQ(0, std::memcmp(serial.data(), threaded.data(), serial.size() * sizeof(float)))
          << c.str();
    }
}

// Threaded splits over N (wide) and over M (narrow N): bitwise equal to one
// thread, with pools of 1, 2 and 3 threads. The small shapes run on one
// thread (under kMinMacsPerThread); the larger ones split C by panels
// ({64,512,300}, {30,3000,64}), by rows ({400,70,300}: >= 128 rows per
// thread), or have fewer panels than threads ({100,20,1100}: one panel, so
// the other threads' regions are empty and they only steal).
TEST_P(GemmTest, ThreadSplitsBitwiseEqual) {
  std::mt19937 rng(4);
  ThreadPool pool1(1), pool2(2), pool3(3);
  const size_t shapes[][3] = {{64, 512, 300}, {200, 20, 100}, {7, 1000, 40},  {97, 33, 600},
                              {30, 3000, 64}, {400, 70, 300}, {100, 20, 1100}};
  for (const auto& s : shapes) {
    Case c{s[0], s[1], s[2]};
    c.bias = true;
    c.act = Activation::kRelu;
    Operands op(c, rng);
    std::vector<float> serial = op.run(nullptr);
    op.check(serial);
    for (ThreadPool* pool : {&pool1, &pool2, &pool3}) {
      std::vector<float> threaded = op.run(pool);
      EXPECT_EQ(0, std::memcmp(serial.data(), threaded.data(), serial.size() * sizeof(float)))
          << c.str() << " threads=" << pool->numThreads();
    }
  }
}

// The derivative epilogue (backward: the gradient at an activation's input
// through the product) gives the bits of the product, a scale and
// activationGrad run one after the other: every derivative, scale 1 and
// not, edge tiles, transposes, a padded `pre`, K = 0, one and two threads.
TEST_P(GemmTest, DerivativeEpilogueEqualsProductThenActivationGrad) {
  std::mt19937 rng(9);
  ThreadPool pool(2);
  const size_t shapes[][3] = {{29, 47, 255}, {64, 63, 0}, {300, 257, 130}};
  const std::pair<Activation, math::Kind> kinds[] = {{Activation::kRelu, math::Kind::kRelu},
                                                     {Activation::kGelu, math::Kind::kGelu},
                                                     {Activation::kGeluTanh, math::Kind::kGeluTanh},
                                                     {Activation::kSilu, math::Kind::kSilu}};
  size_t index = 0;
  for (const auto& s : shapes)
    for (const auto& [act, kind] : kinds)
      for (float scale : {1.0f, 1.25f}) {
        Case c{s[0], s[1], s[2]};
        c.transA = index & 1;
        c.transB = (index >> 1) & 1;
        c.padA = c.padB = c.padC = (index % 3) * 5;
        ++index;
        Operands op(c, rng);
        const size_t ldp = c.N + 3;
        Buffer pre(c.M * ldp, 0, rng);
        for (size_t i = 0; i < c.M * ldp; i += 7) pre.p[i] = 0.0f;  // relu'(0) = 0
        // Unfused: the product, then x·scale, then activationGrad per row.
        std::vector<float> want = op.run(nullptr);
        for (size_t i = 0; i < c.M; ++i) {
          float* row = want.data() + c.offset + i * op.ldc;
          for (size_t j = 0; j < c.N; ++j) row[j] = scale == 1.0f ? row[j] : row[j] * scale;
          activationGrad(kind, pre.p + i * ldp, row, row, c.N);
        }
        GemmEpilogue ep;
        ep.derivative = act;
        ep.pre = pre.p;
        ep.ldp = ldp;
        ep.scale = scale;
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::vector<float> got(want.size(), std::numeric_limits<float>::quiet_NaN());
          PackedB pb = packB(op.B.p, c.K, c.N, op.ldb, c.transB);
          gemm(c.M, c.N, c.K, op.A.p, op.lda, c.transA, pb, got.data() + c.offset, op.ldc, ep, p);
          EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
              << c.str() << " derivative " << activationName(act) << " scale " << scale
              << (p ? " 2 threads" : " 1 thread");
        }
      }
}

// The convenience entry point that packs B per call gives the same result.
TEST_P(GemmTest, UnpackedBEqualsPacked) {
  std::mt19937 rng(5);
  Case c{37, 70, 300};
  c.transB = true;
  c.bias = true;
  c.act = Activation::kGelu;
  Operands op(c, rng);
  std::vector<float> packed = op.run(nullptr, true);
  std::vector<float> unpacked = op.run(nullptr, false);
  EXPECT_EQ(0, std::memcmp(packed.data(), unpacked.data(), packed.size() * sizeof(float)));
  op.check(unpacked);
}

// Packing over threads gives the same panels as packing on one thread, for
// both layouts of B and a partial last panel.
TEST_P(GemmTest, ThreadedPackingEqualsSerial) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const size_t K = 300, N = 1000;  // 1000 is not a multiple of any panel width
  std::vector<float> b(K * N);
  for (float& x : b) x = u(rng);
  rt::ThreadPool pool(3);
  for (bool transB : {false, true}) {
    const size_t ldb = transB ? K : N;
    PackedB serial = packB(b.data(), K, N, ldb, transB);
    PackedB threaded = packB(b.data(), K, N, ldb, transB, &pool);
    ASSERT_EQ(serial.npad, threaded.npad);
    EXPECT_EQ(0, std::memcmp(serial.data.get(), threaded.data.get(),
                             K * serial.npad * sizeof(float)))
        << "transB=" << transB;
  }
}

// repackB over a buffer that held other values (NaN, padding included)
// reuses it and gives packB's bytes; a buffer of another shape is replaced.
TEST_P(GemmTest, RepackIntoTheSameBufferEqualsPacking) {
  std::mt19937 rng(10);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const size_t K = 70, N = 37;
  std::vector<float> b(K * N);
  for (float& x : b) x = u(rng);
  rt::ThreadPool pool(2);
  for (bool transB : {false, true}) {
    const size_t ldb = transB ? K : N;
    PackedB fresh = packB(b.data(), K, N, ldb, transB);
    PackedB reused = packB(b.data(), K, N, ldb, transB);
    std::fill_n(reused.data.get(), K * reused.npad, NAN);
    const float* buffer = reused.data.get();
    repackB(reused, b.data(), K, N, ldb, transB, &pool);
    EXPECT_EQ(reused.data.get(), buffer) << "the buffer is reused";
    EXPECT_EQ(0, std::memcmp(fresh.data.get(), reused.data.get(), K * fresh.npad * sizeof(float)));
    PackedB other = packB(b.data(), K - 1, N, ldb, transB);
    repackB(other, b.data(), K, N, ldb, transB);
    ASSERT_EQ(other.k, K);
    EXPECT_EQ(0, std::memcmp(fresh.data.get(), other.data.get(), K * fresh.npad * sizeof(float)));
  }
}

// Column pairs (Gemm.h GemmPairs): the fused gated epilogue gives the bits
// of the plain products followed by act(gate)·up, and stays within the
// products' bound of a double reference; the rotary epilogue equals the
// plain product followed by the rotation in float (as transfuse.rotary
// rounds it) within the rounding of its two products (a compiler may
// contract a product and the sum into an FMA). Shapes cover head dims whose half
// is a whole vector, less than one (8: 4 pairs) and not a multiple (80: 40
// pairs), plain columns after the rotated ones (V), one and several
// k-blocks, edge tiles, transposed B, K = 0, one and two threads.
struct PairCase {
  size_t M, K, headDim, heads, plain;  // rotary: N = heads·headDim + plain
  bool transB, bias;
  size_t seqLen, offset;
};

TEST_P(GemmTest, RotaryPairsEqualProductThenRotation) {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  const PairCase cases[] = {
      {1, 64, 64, 3, 64, true, false, 1, 17},   {5, 300, 64, 4, 0, false, true, 5, 0},
      {33, 257, 8, 6, 8, true, true, 11, 3},    {130, 96, 80, 2, 80, true, true, 65, 0},
      {20, 0, 16, 2, 5, false, true, 4, 2},     {64, 513, 128, 2, 33, false, false, 64, 100},
      {300, 64, 32, 4, 64, true, true, 100, 0},
  };
  for (const PairCase& pc : cases) {
    const size_t N = pc.heads * pc.headDim + pc.plain, half = pc.headDim / 2;
    Case c{pc.M, N, pc.K};
    c.transB = pc.transB;
    c.bias = pc.bias;
    Operands op(c, rng);
    std::vector<float> freq(half);
    for (size_t i = 0; i < half; ++i)
      freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / pc.headDim));
    GemmEpilogue ep = op.epilogue();
    ep.invFreq = freq.data();
    ep.seqLen = pc.seqLen;
    ep.positionOffset = pc.offset;
    const GemmPairs pairs{GemmPairs::Kind::kRotary, pc.headDim, pc.heads * pc.headDim};
    const std::vector<float> plain = op.run(nullptr);  // the product and bias
    op.check(plain);
    PackedB pb = packB(op.B.p, c.K, N, op.ldb, c.transB, nullptr, pairs);
    for (ThreadPool* threads : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> C(c.M * op.ldc, std::numeric_limits<float>::quiet_NaN());
      gemm(c.M, N, c.K, op.A.p, op.lda, false, pb, C.data(), op.ldc, ep, threads);
      int failures = 0;
      for (size_t i = 0; i < c.M; ++i)
        for (size_t j = 0; j < N; ++j) {
          const float* x = plain.data() + i * op.ldc;
          float want = x[j];
          double ref = want, tol = 0;
          if (j < pairs.columns) {
            const size_t h0 = j / pc.headDim * pc.headDim, t = j - h0, pair = t % half;
            const float a = x[h0 + pair], b = x[h0 + pair + half];
            float cs, sn;
            math::rotaryCosSin(static_cast<float>(pc.offset + i % pc.seqLen), freq[pair], &cs, &sn);
            // Each product rounded, then the sum (no contraction to an FMA).
            const float p = t < half ? a * cs : b * cs, q = t < half ? b * sn : a * sn;
            want = t < half ? p - q : p + q;
            ref = t < half ? double(a) * cs - double(b) * sn : double(b) * cs + double(a) * sn;
            tol = 2 * kU * (std::fabs(p) + std::fabs(q));
          }
          const float got = C[i * op.ldc + j];
          if (!(std::fabs(got - want) <= tol) && ++failures <= 5)
            ADD_FAILURE() << c.str() << " head_dim=" << pc.headDim << ": C(" << i << "," << j
                          << ") = " << got << ", the product then the rotation gives " << want
                          << " (double: " << ref << ")";
        }
      EXPECT_EQ(failures, 0);
    }
  }
}

TEST_P(GemmTest, GatedPairsEqualProductThenGate) {
  std::mt19937 rng(12);
  ThreadPool pool(2);
  const size_t shapes[][3] = {{1, 48, 64}, {7, 2048 / 8, 300}, {33, 17, 257},
                              {130, 100, 96}, {9, 40, 0},       {300, 64, 64}};
  size_t index = 0;
  for (const auto& s : shapes)
    for (Activation act : kActs) {
      const size_t M = s[0], n = s[1], K = s[2];
      Case c{M, 2 * n, K};
      c.transB = index % 2 == 0;
      c.bias = index % 3 != 1;
      ++index;
      Operands op(c, rng);
      // act(gate + bias) and up + bias by the plain GEMM, on B's halves.
      const size_t ldb = op.ldb;
      auto half = [&](size_t first, Activation a) {
        std::vector<float> out(M * n);
        GemmEpilogue e;
        e.bias = c.bias ? op.bias.p + first : nullptr;
        e.activation = a;
        const float* b = c.transB ? op.B.p + first * ldb : op.B.p + first;
        gemm(M, n, K, op.A.p, op.lda, false, b, ldb, c.transB, out.data(), n, e);
        return out;
      };
      const std::vector<float> gate = half(0, act), up = half(n, Activation::kNone);
      GemmEpilogue ep;
      ep.bias = c.bias ? op.bias.p : nullptr;
      ep.activation = act;
      const GemmPairs pairs{GemmPairs::Kind::kGated, 0, 0};
      PackedB pb = packB(op.B.p, K, 2 * n, ldb, c.transB, nullptr, pairs);
      for (ThreadPool* threads : {static_cast<ThreadPool*>(nullptr), &pool}) {
        const size_t ldc = n + 3;
        std::vector<float> C(M * ldc, std::numeric_limits<float>::quiet_NaN());
        gemm(M, 2 * n, K, op.A.p, op.lda, false, pb, C.data(), ldc, ep, threads);
        int failures = 0;
        for (size_t i = 0; i < M; ++i)
          for (size_t j = 0; j < ldc; ++j) {
            const float got = C[i * ldc + j];
            if (j >= n) {
              if (!std::isnan(got) && ++failures <= 5)
                ADD_FAILURE() << "padding C(" << i << "," << j << ") written";
              continue;
            }
            const float want = gate[i * n + j] * up[i * n + j];
            // The double reference: |error| within the two products' bounds.
            double g = 0, u = 0, sg = 0, su = 0;
            for (size_t k = 0; k < K; ++k) {
              const double a = op.a(i, k);
              g += a * op.b(k, j);
              u += a * op.b(k, n + j);
              sg += std::fabs(a * op.b(k, j));
              su += std::fabs(a * op.b(k, n + j));
            }
            if (c.bias) {
              g += op.bias.p[j];
              u += op.bias.p[n + j];
              sg += std::fabs(op.bias.p[j]);
              su += std::fabs(op.bias.p[n + j]);
            }
            const double ref = activation(act, g) * u;
            const double tol = 1.2 * (K + 2) * kU * (sg * std::fabs(u) + su * 1.2 * std::fabs(g)) +
                               16 * kU * std::fabs(activation(act, g) * u) + 1e-30;
            if (got != want && ++failures <= 5)
              ADD_FAILURE() << activationName(act) << " M=" << M << " n=" << n << " K=" << K
                            << ": C(" << i << "," << j << ") = " << got
                            << ", the products then the gate give " << want;
            if (!(std::fabs(got - ref) <= tol) && ++failures <= 5)
              ADD_FAILURE() << activationName(act) << ": C(" << i << "," << j << ") = " << got
                            << ", want " << ref << " ± " << tol;
          }
        EXPECT_EQ(failures, 0);
      }
    }
}

// B packed on one target and used on another (the panel widths differ) is
// repacked on the fly, with the same result.
TEST(GemmCrossTarget, PackedOnOneTargetRunOnAnother) {
  std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  if (targets.size() < 2) GTEST_SKIP() << "one target only";
  std::mt19937 rng(6);
  Case c{20, 45, 270};
  c.bias = true;
  Operands op(c, rng);
  hwy::SetSupportedTargetsForTest(targets.front());
  PackedB pb = packB(op.B.p, c.K, c.N, op.ldb, c.transB);
  for (int64_t t : targets) {
    hwy::SetSupportedTargetsForTest(t);
    std::vector<float> C(c.M * op.ldc, std::numeric_limits<float>::quiet_NaN());
    gemm(c.M, c.N, c.K, op.A.p, op.lda, c.transA, pb, C.data(), op.ldc, op.epilogue());
    op.check(C);
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Paired panels are repacked across targets by their columns too.
TEST(GemmCrossTarget, PairedPackedOnOneTargetRunOnAnother) {
  std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  if (targets.size() < 2) GTEST_SKIP() << "one target only";
  std::mt19937 rng(13);
  Case c{9, 2 * 40, 70};
  c.bias = true;
  Operands op(c, rng);
  GemmEpilogue ep = op.epilogue();
  ep.activation = Activation::kSilu;
  const GemmPairs pairs{GemmPairs::Kind::kGated, 0, 0};
  hwy::SetSupportedTargetsForTest(targets.back());
  std::vector<float> want(c.M * 40);
  gemm(c.M, c.N, c.K, op.A.p, op.lda, false, op.B.p, op.ldb, false, want.data(), 40, ep, nullptr,
       pairs);
  hwy::SetSupportedTargetsForTest(targets.front());
  PackedB pb = packB(op.B.p, c.K, c.N, op.ldb, false, nullptr, pairs);
  hwy::SetSupportedTargetsForTest(targets.back());
  std::vector<float> got(c.M * 40);
  gemm(c.M, c.N, c.K, op.A.p, op.lda, false, pb, got.data(), 40, ep);
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
}

TEST(GemmNames, ActivationRoundTrip) {
  for (Activation a : kActs) EXPECT_EQ(parseActivation(activationName(a)), a);
  EXPECT_FALSE(parseActivation("swish").has_value());
}

}  // namespace
}  // namespace transfuse::kernels
