// Fused and unfused attention (runtime/kernels/Attention.h) against a scalar
// reference with double accumulation, on every Highway target compiled in:
// self and cross attention, head dims 1..256, every mask kind, dense and
// [B,S,H,D] layouts, misaligned pointers. Fully masked rows must be exactly 0;
// threaded results must equal single-threaded ones bit for bit.
// Tolerance: |O - ref| <= 2e-5 · (1 + |ref|) (inputs in [-1, 1], fp32 dot
// products of up to 256 terms and softmax sums of up to 700 terms); fused
// against unfused: the same bound (both are checked against the reference).
#include "runtime/Philox.h"
#include "runtime/ThreadPool.h"
#include "bench/lib/AttentionBench.h"
#include "runtime/kernels/Attention.h"
#include "tests/unit/kernels/KernelTestUtil.h"

#include <hwy/tests/hwy_gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace transfuse::kernels {
namespace {

using ktest::Buf;

constexpr int kNoMask = 0, kCausal = 1, kKeyLengths = 2, kKeyMask = 4, kAdditive = 8;

struct Problem {
  size_t B, H, Sq, Sk, D;
  int masks;
  bool bshd = false;  // [B,S,H,D] layout instead of [B,H,S,D]
  size_t misalign = 0;
  bool additiveBroadcastRows = false;  // additive mask [Sk] per batch (row stride 0)
  size_t Hkv = 0;  // grouped-query attention: K/V heads (0: H)
  size_t kvH() const { return Hkv ? Hkv : H; }
};

struct Data {
  Problem p;
  Buf q, k, v, add;
  std::vector<int32_t> lens;
  std::vector<uint8_t> kmask;
  AttentionArgs args;
  Data(const Problem& pr, std::mt19937& rng)
      : p(pr),
        q(pr.B * pr.H * pr.Sq * pr.D, pr.misalign),
        k(pr.B * pr.kvH() * pr.Sk * pr.D, (pr.misalign + 1) % 4),
        v(pr.B * pr.kvH() * pr.Sk * pr.D, (pr.misalign + 2) % 4),
        add(pr.B * pr.H * pr.Sq * pr.Sk + 1, pr.misalign) {
    q.fill(rng, -1, 1);
    k.fill(rng, -1, 1);
    v.fill(rng, -1, 1);
    add.fill(rng, -2, 2);
    // Some -inf in the additive mask, and one batch's row 0 fully masked by it.
    for (size_t i = 0; i < add.size(); i += 7) add[i] = -INFINITY;
    args.batch = p.B;
    args.heads = p.H;
    args.seqQ = p.Sq;
    args.seqK = p.Sk;
    args.headDim = p.D;
    args.kvHeads = p.Hkv;
    args.q.data = q.data();
    args.k.data = k.data();
    args.v.data = v.data();
    if (p.bshd) {
      for (AttentionTensor* t : {&args.q, &args.k, &args.v}) {
        const size_t S = t == &args.q ? p.Sq : p.Sk, heads = t == &args.q ? p.H : p.kvH();
        t->batchStride = S * heads * p.D;
        t->headStride = p.D;
        t->rowStride = heads * p.D;
      }
      args.outBatchStride = p.Sq * p.H * p.D;
      args.outHeadStride = p.D;
      args.outRowStride = p.H * p.D;
    }
    args.scale = 1.0f / std::sqrt(static_cast<float>(p.D));
    args.causal = p.masks & kCausal;
    if (p.masks & kKeyLengths) {
      for (size_t b = 0; b < p.B; ++b)
        lens.push_back(static_cast<int32_t>(b == 0 ? p.Sk : (b * 37) % (p.Sk + 1)));
      args.keyLengths = lens.data();
    }
    if (p.masks & kKeyMask) {
      kmask.resize(p.B * p.Sk);
      for (auto& m : kmask) m = (rng() % 4) != 0;
      if (p.B > 1)
        for (size_t j = 0; j < p.Sk; ++j) kmask[p.Sk + j] = 0;  // batch 1: every key masked
      args.keyMask = kmask.data();
    }
    if (p.masks & kAdditive) {
      args.additive = add.data();
      if (p.additiveBroadcastRows) {
        args.additiveBatchStride = p.Sk;
        args.additiveHeadStride = 0;
        args.additiveRowStride = 0;
      } else {
        args.additiveBatchStride = p.H * p.Sq * p.Sk;
        args.additiveHeadStride = p.Sq * p.Sk;
        args.additiveRowStride = p.Sk;
      }
    }
  }
  size_t qi(size_t b, size_t h, size_t s) const {
    return p.bshd ? (b * p.Sq + s) * p.H * p.D + h * p.D : ((b * p.H + h) * p.Sq + s) * p.D;
  }
  // Key/value element of query head h: its group's K/V head.
  size_t ki(size_t b, size_t h, size_t s) const {
    const size_t kh = h / (p.H / p.kvH()), H = p.kvH();
    return p.bshd ? (b * p.Sk + s) * H * p.D + kh * p.D : ((b * H + kh) * p.Sk + s) * p.D;
  }
  bool masked(size_t b, size_t h, size_t i, size_t j, double* addv) const {
    *addv = 0;
    if (args.causal && static_cast<ptrdiff_t>(j) > static_cast<ptrdiff_t>(i + p.Sk) -
                                                        static_cast<ptrdiff_t>(p.Sq))
      return true;
    if (args.keyLengths && static_cast<int32_t>(j) >= args.keyLengths[b]) return true;
    if (args.keyMask && args.keyMask[b * p.Sk + j] == 0) return true;
    if (args.additive) {
      *addv = args.additive[b * args.additiveBatchStride + h * args.additiveHeadStride +
                            i * args.additiveRowStride + j];
      if (std::isinf(*addv)) return true;
    }
    return false;
  }
  // Reference output, same layout as Q; fully masked rows are 0.
  std::vector<double> reference() const {
    std::vector<double> out(q.size(), 0.0);
    std::vector<double> s(p.Sk);
    for (size_t b = 0; b < p.B; ++b)
      for (size_t h = 0; h < p.H; ++h)
        for (size_t i = 0; i < p.Sq; ++i) {
          double mx = -INFINITY;
          for (size_t j = 0; j < p.Sk; ++j) {
            double addv;
            if (masked(b, h, i, j, &addv)) {
              s[j] = -INFINITY;
              continue;
            }
            double dot = 0;
            for (size_t d = 0; d < p.D; ++d) dot += double(q[qi(b, h, i) + d]) * k[ki(b, h, j) + d];
            s[j] = dot * args.scale + addv;
            mx = std::max(mx, s[j]);
          }
          if (mx == -INFINITY) continue;
          double sum = 0;
          for (size_t j = 0; j < p.Sk; ++j) sum += s[j] == -INFINITY ? 0 : std::exp(s[j] - mx);
          for (size_t j = 0; j < p.Sk; ++j) {
            if (s[j] == -INFINITY) continue;
            const double w = std::exp(s[j] - mx) / sum;
            for (size_t d = 0; d < p.D; ++d) out[qi(b, h, i) + d] += w * v[ki(b, h, j) + d];
          }
        }
    return out;
  }
  bool rowFullyMasked(size_t b, size_t h, size_t i) const {
    double addv;
    for (size_t j = 0; j < p.Sk; ++j)
      if (!masked(b, h, i, j, &addv)) return false;
    return true;
  }
};

// bf16: the products on bf16 operands (AttentionArgs::bf16), its bound
// against the fp64 reference: 2^-8 of (1 + |ref|) forward, 2^-7 for the
// gradients (8-bit mantissas of Q, K, V, P, dO; measured up to 1.2e-3 and
// between 2e-3 and 4e-3 on these shapes).
constexpr double kBf16Bound = 4e-3, kBf16GradBound = 8e-3;

void checkAgainstReference(const Problem& pr, rt::ThreadPool* pool = nullptr, bool bf16 = false) {
  std::mt19937 rng(static_cast<uint32_t>(pr.Sq * 131 + pr.Sk * 7 + pr.D + pr.masks));
  Data data(pr, rng);
  const std::vector<double> ref = data.reference();
  Buf fused(data.q.size(), (pr.misalign + 3) % 4), unfused(data.q.size());
  for (size_t i = 0; i < fused.size(); ++i) fused[i] = unfused[i] = NAN;
  AttentionArgs a = data.args;
  a.bf16 = bf16;
  a.out = fused.data();
  ASSERT_TRUE(attention(a, pool).isOk());
  a.out = unfused.data();
  ASSERT_TRUE(attentionUnfused(a, pool).isOk());
  for (size_t b = 0; b < pr.B; ++b)
    for (size_t h = 0; h < pr.H; ++h)
      for (size_t i = 0; i < pr.Sq; ++i) {
        const bool full = data.rowFullyMasked(b, h, i);
        for (size_t d = 0; d < pr.D; ++d) {
          const size_t o = data.qi(b, h, i) + d;
          const double tol = (bf16 ? kBf16Bound : 2e-5) * (1 + std::fabs(ref[o]));
          ASSERT_NEAR(fused[o], ref[o], tol)
              << "fused B=" << pr.B << " H=" << pr.H << " Sq=" << pr.Sq << " Sk=" << pr.Sk
              << " D=" << pr.D << " masks=" << pr.masks << " at b=" << b << " h=" << h
              << " i=" << i << " d=" << d;
          ASSERT_NEAR(unfused[o], ref[o], tol) << "unfused";
          ASSERT_NEAR(fused[o], unfused[o], tol) << "fused vs unfused";
          if (full) {
            ASSERT_EQ(fused[o], 0.0f) << "fully masked row";
            ASSERT_FALSE(std::signbit(fused[o]) && false);
            ASSERT_EQ(unfused[o], 0.0f) << "fully masked row (unfused)";
          }
        }
      }
}

class AttentionTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(AttentionTest);

TEST_P(AttentionTest, SelfAttentionShapes) {
  for (size_t D : {1, 3, 8, 17, 64, 128, 256})
    for (size_t S : {1, 2, 15, 16, 33, 70})
      checkAgainstReference({1, 2, S, S, D, kNoMask, false, D % 3});
}

TEST_P(AttentionTest, ZeroSizes) {
  checkAgainstReference({1, 1, 0, 5, 8, kNoMask});
  checkAgainstReference({2, 1, 5, 0, 8, kNoMask});  // no keys: every row is 0
  checkAgainstReference({0, 2, 5, 5, 8, kCausal});
}

TEST_P(AttentionTest, CrossAttentionAndCausalBottomRight) {
  for (int masks : {kNoMask, kCausal})
    for (auto [Sq, Sk] : {std::pair<size_t, size_t>{1, 77}, {5, 40}, {40, 5}, {33, 100},
                          {100, 33}, {64, 64}, {70, 129}})
      checkAgainstReference({2, 2, Sq, Sk, 64, masks, false, 1});
}

// Decode-shaped calls (a KV cache): few queries against many keys (where the
// vectors are wide enough, the few-rows path with D in the lanes).
TEST_P(AttentionTest, FewQueriesManyKeys) {
  for (int masks : {kNoMask, kCausal, kKeyLengths | kKeyMask | kAdditive, kCausal | kAdditive})
    for (size_t Sq : {1, 2, 3, 5, 8})
      for (size_t Sk : {1, 71, 300}) {
        checkAgainstReference({2, 3, Sq, Sk, 64, masks, true, 1});
        checkAgainstReference({1, 2, Sq, Sk, 40, masks, false, 0});
      }
}

TEST_P(AttentionTest, MasksAndLayouts) {
  for (int masks : {kKeyLengths, kKeyMask, kAdditive, kCausal | kKeyLengths,
                    kCausal | kAdditive | kKeyMask, kKeyLengths | kKeyMask | kAdditive})
    for (bool bshd : {false, true}) {
      checkAgainstReference({3, 2, 37, 45, 32, masks, bshd, 2});
      checkAgainstReference({3, 1, 45, 37, 128, masks, bshd, 0});
    }
  Problem bcast{2, 2, 20, 50, 16, kAdditive, false, 1, /*additiveBroadcastRows=*/true};
  checkAgainstReference(bcast);
}

TEST_P(AttentionTest, ThreadedEqualsSingleThreaded) {
  rt::ThreadPool pool(2);
  for (int masks : {kNoMask, kCausal, kCausal | kKeyLengths | kAdditive}) {
    std::mt19937 rng(11);
    Problem pr{2, 3, 150, 150, 64, masks};
    Data data(pr, rng);
    Buf o1(data.q.size()), o2(data.q.size());
    AttentionArgs a = data.args;
    a.out = o1.data();
    ASSERT_TRUE(attention(a).isOk());
    a.out = o2.data();
    ASSERT_TRUE(attention(a, &pool).isOk());
    for (size_t i = 0; i < o1.size(); ++i) ASSERT_EQ(o1[i], o2[i]);
  }
  checkAgainstReference({2, 3, 90, 90, 64, kCausal | kKeyMask}, &pool);
}

// Scores that grow along the keys (the running maximum rises at every tile,
// exercising the lazy rescale) and scores spanning hundreds (softmax weights
// down to exp(-300), far below fp32's range).
TEST_P(AttentionTest, GrowingAndLargeScores) {
  for (float slope : {0.05f, 0.5f, 5.0f, 1e5f}) {  // 1e5: scores ~1e7
    for (bool causal : {false, true}) {
      const size_t S = 200, D = 16;
      std::mt19937 rng(12);
      Problem pr{1, 1, S, S, D, causal ? kCausal : kNoMask};
      Data data(pr, rng);
      for (size_t j = 0; j < S; ++j)
        for (size_t d = 0; d < D; ++d) {
          data.q[j * D + d] = 1.0f + 0.01f * d;
          data.k[j * D + d] = slope * static_cast<float>(j) * (d % 2 ? 1.0f : 0.5f);
        }
      const std::vector<double> ref = data.reference();
      Buf o(data.q.size());
      AttentionArgs a = data.args;
      a.out = o.data();
      ASSERT_TRUE(attention(a).isOk());
      for (size_t i = 0; i < o.size(); ++i)
        ASSERT_NEAR(o[i], ref[i], 2e-5 * (1 + std::fabs(ref[i])))
            << "slope=" << slope << " causal=" << causal << " i=" << i;
    }
  }
}

// attentionBackward against the backward written out in double from the
// same masked probabilities (Data::masked): dV = Pdᵀ·g, dP = drop(g·Vᵀ),
// dS = P ⊙ (dP - Σ_j dP ⊙ P)·scale, dQ = dS·K, dK = dSᵀ·Q. Fully masked rows
// give no gradient. Tolerance |x - ref| <= 5e-5·(1 + |ref|) (fp32 GEMMs of up
// to 100 terms over inputs in [-1, 1]; the fp32 probabilities are those of
// the forward's bound).
void checkBackward(const Problem& pr, float rate, rt::ThreadPool* pool = nullptr,
                   bool bf16 = false) {
  std::mt19937 rng(static_cast<uint32_t>(pr.Sq * 17 + pr.Sk * 3 + pr.D + pr.masks));
  Data data(pr, rng);
  const size_t B = pr.B, H = pr.H, Sq = pr.Sq, Sk = pr.Sk, D = pr.D;
  Buf g(B * H * Sq * D, 1), dq(B * H * Sq * D, 2), dk(B * pr.kvH() * Sk * D, 3),
      dv(B * pr.kvH() * Sk * D);
  g.fill(rng, -1, 1);
  for (Buf* b : {&dq, &dk, &dv})
    for (size_t i = 0; i < b->size(); ++i) (*b)[i] = NAN;  // every element is written
  AttentionGradArgs a;
  a.forward = data.args;
  // dO, dQ, dK and dV in the layout of Q, K and V.
  a.grad = {g.data(), data.args.q.batchStride, data.args.q.headStride, data.args.q.rowStride};
  a.dq = {dq.data(), data.args.q.batchStride, data.args.q.headStride, data.args.q.rowStride};
  a.dk = {dk.data(), data.args.k.batchStride, data.args.k.headStride, data.args.k.rowStride};
  a.dv = {dv.data(), data.args.v.batchStride, data.args.v.headStride, data.args.v.rowStride};
  a.forward.bf16 = bf16;
  a.forward.dropoutRate = rate;
  a.forward.dropoutSeed = 7;
  a.forward.dropoutStep = 3;
  a.forward.dropoutStream = 5;
  ASSERT_TRUE(attentionBackward(a, pool).isOk());
  std::vector<double> rq(dq.size(), 0.0), rk(dk.size(), 0.0), rv(dv.size(), 0.0);
  std::vector<double> p(Sk), dp(Sk);
  std::vector<bool> kept(Sk);
  for (size_t b = 0; b < B; ++b)
    for (size_t h = 0; h < H; ++h) {
      const size_t t = b * H + h;
      for (size_t i = 0; i < Sq; ++i) {
        double mx = -INFINITY;
        for (size_t j = 0; j < Sk; ++j) {
          double addv, dot = 0;
          if (data.masked(b, h, i, j, &addv)) {
            p[j] = -INFINITY;
            continue;
          }
          for (size_t d = 0; d < D; ++d) dot += double(data.q[data.qi(b, h, i) + d]) * data.k[data.ki(b, h, j) + d];
          p[j] = dot * data.args.scale + addv;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (size_t j = 0; j < Sk; ++j) sum += mx == -INFINITY || p[j] == -INFINITY ? 0 : std::exp(p[j] - mx);
        for (size_t j = 0; j < Sk; ++j) p[j] = sum == 0 || p[j] == -INFINITY ? 0 : std::exp(p[j] - mx) / sum;
        double rowDot = 0;
        for (size_t j = 0; j < Sk; ++j) {
          kept[j] = rate == 0 || rt::philoxUniform(7, 3, 5, (t * Sq + i) * Sk + j) >= rate;
          const double keep = kept[j] ? 1.0 / (1.0 - rate) : 0.0;
          double gv = 0;
          for (size_t d = 0; d < D; ++d) {
            rv[data.ki(b, h, j) + d] += p[j] * keep * g[data.qi(b, h, i) + d];
            gv += double(g[data.qi(b, h, i) + d]) * data.v[data.ki(b, h, j) + d];
          }
          dp[j] = gv * keep;
          rowDot += dp[j] * p[j];
        }
        for (size_t j = 0; j < Sk; ++j) {
          const double ds = p[j] * (dp[j] - rowDot) * data.args.scale;
          for (size_t d = 0; d < D; ++d) {
            rq[data.qi(b, h, i) + d] += ds * data.k[data.ki(b, h, j) + d];
            rk[data.ki(b, h, j) + d] += ds * data.q[data.qi(b, h, i) + d];
          }
        }
      }
    }
  auto expectNear = [&](const Buf& got, const std::vector<double>& ref, const char* what) {
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], (bf16 ? kBf16GradBound : 5e-5) * (1 + std::fabs(ref[i])))
          << what << " B=" << B << " H=" << H << " Sq=" << Sq << " Sk=" << Sk << " D=" << D
          << " masks=" << pr.masks << " rate=" << rate << " at " << i;
  };
  expectNear(dq, rq, "dQ");
  expectNear(dk, rk, "dK");
  expectNear(dv, rv, "dV");
}

TEST_P(AttentionTest, BackwardAgainstReference) {
  for (int masks : {kNoMask, kCausal, kKeyMask, kKeyLengths | kAdditive, kCausal | kKeyMask})
    for (bool bshd : {false, true}) {
      checkBackward({2, 2, 13, 13, 16, masks, bshd, 1}, 0.0f);
      checkBackward({2, 3, 7, 19, 8, masks, bshd, 0}, 0.0f);  // cross: Sq < Sk
      checkBackward({1, 2, 19, 7, 33, masks, bshd, 2}, 0.0f);  // Sq > Sk
    }
  for (size_t S : {1, 2, 64, 65}) checkBackward({1, 1, S, S, 64, kCausal}, 0.0f);
  checkBackward({2, 2, 0, 5, 8, kNoMask}, 0.0f);
  checkBackward({2, 2, 5, 0, 8, kNoMask}, 0.0f);  // no keys: every gradient is 0
}

// The products on bf16 operands (--dtype bf16): forward (fused entry and
// unfused) and backward within bf16's bound of the fp64 reference, every
// mask and layout, with and without dropout; not fp32's result; one
// thread's bits on three.
TEST_P(AttentionTest, Bf16ProductsWithinTheirBound) {
  for (int masks : {kNoMask, kCausal, kKeyMask, kKeyLengths | kAdditive})
    for (bool bshd : {false, true}) {
      checkAgainstReference({2, 2, 13, 13, 16, masks, bshd, 1}, nullptr, true);
      checkAgainstReference({1, 3, 7, 70, 64, masks, bshd, 0}, nullptr, true);
      checkBackward({2, 2, 13, 13, 16, masks, bshd, 1}, 0.0f, nullptr, true);
      checkBackward({1, 2, 19, 7, 33, masks, bshd, 2}, 0.1f, nullptr, true);
    }
  checkAgainstReference({2, 6, 9, 9, 16, kCausal, false, 0, false, 2}, nullptr, true);
  checkBackward({2, 6, 7, 7, 16, kCausal, false, 0, false, 3}, 0.0f, nullptr, true);
  std::mt19937 rng(5);
  Data data({2, 2, 33, 40, 64, kCausal}, rng);
  Buf f32(data.q.size()), one(data.q.size()), three(data.q.size());
  AttentionArgs a = data.args;
  a.out = f32.data();
  ASSERT_TRUE(attention(a).isOk());
  a.bf16 = true;
  a.out = one.data();
  ASSERT_TRUE(attention(a).isOk());
  rt::ThreadPool pool(3);
  a.out = three.data();
  ASSERT_TRUE(attention(a, &pool).isOk());
  EXPECT_EQ(0, std::memcmp(one.data(), three.data(), one.size() * sizeof(float)));
  EXPECT_NE(0, std::memcmp(one.data(), f32.data(), one.size() * sizeof(float)));
}

// Grouped-query attention: 6 query heads over 2 or 3 K/V heads, and one
// K/V head for all (multi-query), forward and backward (dK and dV summed
// over each group), both layouts.
TEST_P(AttentionTest, GroupedKeyValueHeads) {
  for (bool bshd : {false, true})
    for (size_t hkv : {1, 2, 3}) {
      checkAgainstReference({2, 6, 9, 9, 16, kCausal, bshd, 0, false, hkv});
      checkAgainstReference({1, 6, 3, 70, 64, kKeyMask, bshd, 1, false, hkv});
      checkBackward({2, 6, 7, 7, 16, kCausal, bshd, 0, false, hkv}, 0.0f);
      checkBackward({1, 6, 5, 11, 8, kKeyLengths | kAdditive, bshd, 2, false, hkv}, 0.1f);
    }
}

TEST_P(AttentionTest, BackwardWithDropout) {
  for (float rate : {0.1f, 0.5f})
    for (int masks : {kNoMask, kCausal | kKeyMask})
      checkBackward({2, 2, 17, 23, 16, masks, false, 1}, rate);
}

// Forward dropout: O = drop(P)·V with the draw the backward regenerates.
TEST_P(AttentionTest, ForwardWithDropout) {
  std::mt19937 rng(9);
  Problem pr{2, 2, 9, 14, 8, kCausal | kKeyMask};
  Data data(pr, rng);
  const float rate = 0.3f;
  Buf o(data.q.size());
  AttentionArgs a = data.args;
  a.out = o.data();
  a.dropoutRate = rate;
  a.dropoutSeed = 11;
  a.dropoutStep = 2;
  a.dropoutStream = 4;
  ASSERT_TRUE(attention(a).isOk());
  size_t dropped = 0;
  for (size_t b = 0; b < pr.B; ++b)
    for (size_t h = 0; h < pr.H; ++h)
      for (size_t i = 0; i < pr.Sq; ++i) {
        std::vector<double> p(pr.Sk);
        double mx = -INFINITY, sum = 0;
        for (size_t j = 0; j < pr.Sk; ++j) {
          double addv, dot = 0;
          if (data.masked(b, h, i, j, &addv)) {
            p[j] = -INFINITY;
            continue;
          }
          for (size_t d = 0; d < pr.D; ++d) dot += double(data.q[data.qi(b, h, i) + d]) * data.k[data.ki(b, h, j) + d];
          p[j] = dot * a.scale;
          mx = std::max(mx, p[j]);
        }
        for (size_t j = 0; j < pr.Sk; ++j) sum += p[j] == -INFINITY ? 0 : std::exp(p[j] - mx);
        for (size_t d = 0; d < pr.D; ++d) {
          double ref = 0;
          for (size_t j = 0; j < pr.Sk; ++j) {
            if (p[j] == -INFINITY) continue;
            const bool kept = rt::philoxUniform(11, 2, 4, ((b * pr.H + h) * pr.Sq + i) * pr.Sk + j) >= rate;
            dropped += !kept && d == 0;
            if (kept) ref += std::exp(p[j] - mx) / sum / (1 - rate) * data.v[data.ki(b, h, j) + d];
          }
          ASSERT_NEAR(o[data.qi(b, h, i) + d], ref, 2e-5 * (1 + std::fabs(ref)));
        }
      }
  EXPECT_GT(dropped, 0u);  // the draw did drop something
}

TEST_P(AttentionTest, BackwardThreadedEqualsSingleThreaded) {
  rt::ThreadPool pool(2);
  checkBackward({2, 3, 40, 40, 32, kCausal | kKeyMask}, 0.1f, &pool);
  std::mt19937 rng(5);
  Problem pr{2, 3, 50, 50, 64, kCausal};
  Data data(pr, rng);
  Buf g(data.q.size()), out[2][3] = {{Buf(data.q.size()), Buf(data.k.size()), Buf(data.v.size())},
                                     {Buf(data.q.size()), Buf(data.k.size()), Buf(data.v.size())}};
  g.fill(rng, -1, 1);
  for (int run = 0; run < 2; ++run) {
    AttentionGradArgs a;
    a.forward = data.args;
    a.grad.data = g.data();
    a.dq.data = out[run][0].data();
    a.dk.data = out[run][1].data();
    a.dv.data = out[run][2].data();
    a.forward.dropoutRate = 0.2f;
    ASSERT_TRUE(attentionBackward(a, run ? &pool : nullptr).isOk());
  }
  for (int t = 0; t < 3; ++t)
    for (size_t i = 0; i < out[0][t].size(); ++i) ASSERT_EQ(out[0][t][i], out[1][t][i]);
}

// The layout a compiled train step uses: dO read out of a [B, S, 2·H·D]
// buffer at column H·D, dQ, dK and dV written into one [B, S, 3·H·D]
// buffer at columns 0, H·D and 2·H·D. The gradients have the bits of the
// dense layout's, and the buffer's other elements are untouched.
TEST_P(AttentionTest, BackwardStridedEqualsDense) {
  std::mt19937 rng(13);
  Problem pr{2, 3, 11, 11, 16, kCausal | kKeyMask};
  Data data(pr, rng);
  const size_t B = pr.B, H = pr.H, S = pr.Sq, D = pr.D, HD = H * D;
  Buf g(B * S * 2 * HD), dense[3] = {Buf(B * H * S * D), Buf(B * H * S * D), Buf(B * H * S * D)};
  Buf fused(B * S * 3 * HD + 1, 1);
  g.fill(rng, -1, 1);
  for (size_t i = 0; i < fused.size(); ++i) fused[i] = 7.0f;
  auto at = [&](size_t width, size_t b, size_t h, size_t s) { return (b * S + s) * width + h * D; };
  AttentionGradArgs a;
  a.forward = data.args;
  a.forward.dropoutRate = 0.2f;
  Buf gDense(B * H * S * D);
  for (size_t b = 0; b < B; ++b)
    for (size_t h = 0; h < H; ++h)
      for (size_t s = 0; s < S; ++s)
        for (size_t d = 0; d < D; ++d)
          gDense[((b * H + h) * S + s) * D + d] = g[at(2 * HD, b, h, s) + HD + d];
  a.grad.data = gDense.data();
  a.dq.data = dense[0].data();
  a.dk.data = dense[1].data();
  a.dv.data = dense[2].data();
  ASSERT_TRUE(attentionBackward(a).isOk());
  a.grad = {g.data() + HD, S * 2 * HD, D, 2 * HD};
  for (size_t t = 0; t < 3; ++t)
    (t == 0 ? a.dq : t == 1 ? a.dk : a.dv) = {fused.data() + t * HD, S * 3 * HD, D, 3 * HD};
  ASSERT_TRUE(attentionBackward(a).isOk());
  std::vector<bool> written(fused.size(), false);
  for (size_t t = 0; t < 3; ++t)
    for (size_t b = 0; b < B; ++b)
      for (size_t h = 0; h < H; ++h)
        for (size_t s = 0; s < S; ++s)
          for (size_t d = 0; d < D; ++d) {
            const size_t i = at(3 * HD, b, h, s) + t * HD + d;
            written[i] = true;
            ASSERT_EQ(fused[i], dense[t][((b * H + h) * S + s) * D + d]) << t << " " << i;
          }
  for (size_t i = 0; i < fused.size(); ++i)
    if (!written[i]) ASSERT_EQ(fused[i], 7.0f) << i;
}

TEST(AttentionBench, RunsAndFormatsJson) {
  AttentionBenchOptions o;
  o.batch = 1;
  o.heads = 2;
  o.seq = 40;
  o.kvSeq = 20;
  o.headDim = 16;
  o.causal = true;
  o.threads = 2;
  o.minSeconds = 0.01;
  AttentionBenchResult r = runAttentionBench(o);
  ASSERT_TRUE(r.status.isOk()) << r.status.message();
  EXPECT_GT(r.gflops, 0);
  EXPECT_DOUBLE_EQ(r.flops, 4.0 * 2 * 40 * 20 * 16 * 0.5);
  const std::string json = attentionBenchJson(r);
  EXPECT_NE(json.find("\"gflops\":"), std::string::npos) << json;
  EXPECT_NE(json.find("\"kv_seq\":20"), std::string::npos) << json;
  EXPECT_NE(json.find("\"causal\":true"), std::string::npos) << json;
  o.headDim = 300;
  EXPECT_FALSE(runAttentionBench(o).status.isOk());
}

TEST(AttentionErrors, BadHeadDim) {
  AttentionArgs a;
  a.headDim = 257;
  EXPECT_FALSE(attention(a).isOk());
  a.headDim = 0;
  EXPECT_FALSE(attentionUnfused(a).isOk());
}

// A missing gradient tensor is an error, not a write through null, also
// when there are no queries (dK and dV are still zeroed then).
TEST(AttentionErrors, BackwardMissingTensors) {
  std::vector<float> kv(2 * 5 * 4, 1.0f), dk(kv.size(), 7.0f);
  AttentionGradArgs a;
  a.forward.batch = 1;
  a.forward.heads = 2;
  a.forward.seqQ = 0;
  a.forward.seqK = 5;
  a.forward.headDim = 4;
  a.forward.k.data = kv.data();
  a.forward.v.data = kv.data();
  a.dk.data = dk.data();
  const rt::Status s = attentionBackward(a);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("dO, dQ, dK and dV must be given"), std::string::npos) << s.message();
  std::vector<float> dv(kv.size(), 7.0f);
  a.dv.data = dv.data();
  ASSERT_TRUE(attentionBackward(a).isOk());
  for (size_t i = 0; i < kv.size(); ++i) ASSERT_EQ(dk[i], 0.0f) << i;
  for (size_t i = 0; i < kv.size(); ++i) ASSERT_EQ(dv[i], 0.0f) << i;
}

}  // namespace
}  // namespace transfuse::kernels
