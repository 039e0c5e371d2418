// Decode-step attention (runtime/kernels/DecodeAttention.h) against a scalar
// reference with double accumulation, on every Highway target compiled in:
// 1 to 9 queries against 0..300 cached keys (every remainder of the key
// vectors), head dims 1..256, causal, key lengths and a key mask, a cache
// with spare capacity (T > Sk) and strided Q/O ([B,S,H,D]), misaligned
// pointers. It must also agree with the fused attention kernel on the same
// data with K untransposed. Fully masked rows are exactly 0; threaded runs
// equal single-threaded ones bit for bit.
// Tolerance: |O - ref| <= 2e-5 · (1 + |ref|) (inputs in [-1, 1]).
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Attention.h"
#include "runtime/kernels/DecodeAttention.h"
#include "tests/unit/kernels/KernelTestUtil.h"

#include <hwy/tests/hwy_gtest.h>

#include <cmath>
#include <cstring>

namespace transfuse::kernels {
namespace {

using ktest::Buf;

struct Problem {
  size_t B, H, Sq, Sk, D;
  bool causal = false, lengths = false, mask = false;
  size_t capacity = 0;  // T of the cache (>= Sk); 0: Sk
  bool bshd = false;    // Q and O as [B, S, H, D]
  size_t misalign = 0;
  size_t Hkv = 0;  // grouped-query attention: K/V heads (0: H)
  size_t kvH() const { return Hkv ? Hkv : H; }
};

struct Data {
  Problem p;
  size_t T;
  Buf q, kt, v;  // Q [B,H,Sq,D] or [B,Sq,H,D]; Kᵀ [B,H,D,T]; V [B,H,T,D]
  std::vector<int32_t> lens;
  std::vector<uint8_t> kmask;
  DecodeAttentionArgs args;
  Data(const Problem& pr, std::mt19937& rng)
      : p(pr),
        T(std::max(pr.capacity, pr.Sk)),
        q(pr.B * pr.H * pr.Sq * pr.D, pr.misalign),
        kt(pr.B * pr.kvH() * pr.D * T + 1, (pr.misalign + 1) % 4),
        v(pr.B * pr.kvH() * T * pr.D + 1, (pr.misalign + 2) % 4) {
    q.fill(rng, -1, 1);
    kt.fill(rng, -1, 1);
    v.fill(rng, -1, 1);
    args.batch = p.B;
    args.heads = p.H;
    args.seqQ = p.Sq;
    args.seqK = p.Sk;
    args.headDim = p.D;
    args.kvHeads = p.Hkv;
    args.q.data = q.data();
    if (p.bshd) {
      args.q = {q.data(), p.Sq * p.H * p.D, p.D, p.H * p.D};
      args.outBatchStride = p.Sq * p.H * p.D;
      args.outHeadStride = p.D;
      args.outRowStride = p.H * p.D;
    }
    args.k = {kt.data(), p.kvH() * p.D * T, p.D * T, T};
    args.v = {v.data(), p.kvH() * T * p.D, T * p.D, p.D};
    args.scale = 1.0f / std::sqrt(static_cast<float>(p.D));
    args.causal = p.causal;
    if (p.lengths) {
      for (size_t b = 0; b < p.B; ++b)
        lens.push_back(static_cast<int32_t>(b == 0 ? p.Sk : (b * 37) % (p.Sk + 1)));
      args.keyLengths = lens.data();
    }
    if (p.mask) {
      kmask.resize(p.B * p.Sk);
      for (auto& m : kmask) m = (rng() % 4) != 0;
      if (p.B > 1)
        for (size_t j = 0; j < p.Sk; ++j) kmask[p.Sk + j] = 0;  // batch 1: all keys masked
      args.keyMask = kmask.data();
    }
  }
  size_t qi(size_t b, size_t h, size_t i) const {
    return p.bshd ? (b * p.Sq + i) * p.H * p.D + h * p.D : ((b * p.H + h) * p.Sq + i) * p.D;
  }
  // K and V of query head h: its group's K/V head.
  size_t kvRow(size_t b, size_t h) const { return b * p.kvH() + h / (p.H / p.kvH()); }
  float key(size_t b, size_t h, size_t j, size_t d) const { return kt[(kvRow(b, h) * p.D + d) * T + j]; }
  float value(size_t b, size_t h, size_t j, size_t d) const { return v[(kvRow(b, h) * T + j) * p.D + d]; }
  bool masked(size_t b, size_t i, size_t j) const {
    if (p.causal && ptrdiff_t(j) > ptrdiff_t(i + p.Sk) - ptrdiff_t(p.Sq)) return true;
    if (p.lengths && int32_t(j) >= lens[b]) return true;
    if (p.mask && kmask[b * p.Sk + j] == 0) return true;
    return false;
  }
  std::vector<double> reference() const {
    std::vector<double> out(q.size(), 0.0), s(p.Sk);
    for (size_t b = 0; b < p.B; ++b)
      for (size_t h = 0; h < p.H; ++h)
        for (size_t i = 0; i < p.Sq; ++i) {
          double mx = -INFINITY;
          for (size_t j = 0; j < p.Sk; ++j) {
            s[j] = -INFINITY;
            if (masked(b, i, j)) continue;
            double dot = 0;
            for (size_t d = 0; d < p.D; ++d) dot += double(q[qi(b, h, i) + d]) * key(b, h, j, d);
            s[j] = dot * args.scale;
            mx = std::max(mx, s[j]);
          }
          if (mx == -INFINITY) continue;
          double sum = 0;
          for (size_t j = 0; j < p.Sk; ++j) sum += s[j] == -INFINITY ? 0 : std::exp(s[j] - mx);
          for (size_t j = 0; j < p.Sk; ++j)
            if (s[j] != -INFINITY)
              for (size_t d = 0; d < p.D; ++d)
                out[qi(b, h, i) + d] += std::exp(s[j] - mx) / sum * value(b, h, j, d);
        }
    return out;
  }
};

void check(const Problem& pr, rt::ThreadPool* pool = nullptr) {
  std::mt19937 rng(static_cast<uint32_t>(pr.Sq * 131 + pr.Sk * 7 + pr.D));
  Data data(pr, rng);
  const std::vector<double> ref = data.reference();
  Buf out(data.q.size(), (pr.misalign + 3) % 4);
  for (size_t i = 0; i < out.size(); ++i) out[i] = NAN;
  DecodeAttentionArgs a = data.args;
  a.out = out.data();
  ASSERT_TRUE(decodeAttention(a, pool).isOk());
  for (size_t b = 0; b < pr.B; ++b)
    for (size_t h = 0; h < pr.H; ++h)
      for (size_t i = 0; i < pr.Sq; ++i) {
        bool all = true;
        for (size_t j = 0; j < pr.Sk; ++j) all &= data.masked(b, i, j);
        for (size_t d = 0; d < pr.D; ++d) {
          const size_t o = data.qi(b, h, i) + d;
          ASSERT_NEAR(out[o], ref[o], 2e-5 * (1 + std::fabs(ref[o])))
              << "B=" << pr.B << " H=" << pr.H << " Sq=" << pr.Sq << " Sk=" << pr.Sk
              << " D=" << pr.D << " causal=" << pr.causal << " lengths=" << pr.lengths
              << " mask=" << pr.mask << " at b=" << b << " h=" << h << " i=" << i << " d=" << d;
          if (all) ASSERT_EQ(out[o], 0.0f) << "a fully masked row";
        }
      }
}

class DecodeAttentionTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(DecodeAttentionTest);

TEST_P(DecodeAttentionTest, QueriesAgainstEveryKeyRemainder) {
  for (size_t Sq : {1, 2, 3, 4, 5, 8, 9})
    for (size_t Sk : {0, 1, 2, 7, 15, 16, 17, 31, 63, 64, 65, 71, 129, 300})
      check({2, 2, Sq, Sk, 64, false, false, false, 0, false, Sq % 3});
}

TEST_P(DecodeAttentionTest, HeadDims) {
  for (size_t D : {1, 3, 8, 17, 33, 64, 100, 128, 256})
    for (size_t Sq : {1, 3})
      check({1, 2, Sq, 70, D, false, false, false, 0, false, D % 4});
}

TEST_P(DecodeAttentionTest, MasksCapacityAndLayouts) {
  for (bool causal : {false, true})
    for (bool lengths : {false, true})
      for (bool mask : {false, true})
        for (size_t Sq : {1, 4, 6}) {
          check({3, 2, Sq, 37, 64, causal, lengths, mask, 0, false});
          check({3, 2, Sq, 37, 64, causal, lengths, mask, 50, true, 1});  // spare capacity
        }
  check({2, 2, 5, 3, 16, true, false, false});  // causal with fewer keys than queries
}

// The same numbers as the fused kernel, which reads K untransposed.
TEST_P(DecodeAttentionTest, AgreesWithFusedAttention) {
  for (size_t Sq : {1, 2, 8})
    for (bool causal : {false, true}) {
      const Problem pr{2, 4, Sq, 133, 64, causal, true, false, 160};
      std::mt19937 rng(7);
      Data data(pr, rng);
      Buf k(pr.B * pr.H * pr.Sk * pr.D), mine(data.q.size()), fused(data.q.size());
      for (size_t b = 0; b < pr.B; ++b)
        for (size_t h = 0; h < pr.H; ++h)
          for (size_t j = 0; j < pr.Sk; ++j)
            for (size_t d = 0; d < pr.D; ++d)
              k[((b * pr.H + h) * pr.Sk + j) * pr.D + d] = data.key(b, h, j, d);
      DecodeAttentionArgs a = data.args;
      a.out = mine.data();
      ASSERT_TRUE(decodeAttention(a).isOk());
      AttentionArgs f;
      f.batch = pr.B;
      f.heads = pr.H;
      f.seqQ = pr.Sq;
      f.seqK = pr.Sk;
      f.headDim = pr.D;
      f.q.data = data.q.data();
      f.k.data = k.data();
      f.v = {data.v.data(), pr.H * data.T * pr.D, data.T * pr.D, pr.D};
      f.out = fused.data();
      f.scale = a.scale;
      f.causal = causal;
      f.keyLengths = a.keyLengths;
      ASSERT_TRUE(attention(f).isOk());
      for (size_t i = 0; i < mine.size(); ++i)
        ASSERT_NEAR(mine[i], fused[i], 2e-5 * (1 + std::fabs(fused[i]))) << i;
    }
}

// Grouped-query attention: one query per row (a task per K/V head with its
// query heads as queries) and several (a task per query head), both layouts,
// masks, 12 query heads over 4, 3 and 1 K/V heads.
TEST_P(DecodeAttentionTest, GroupedKeyValueHeads) {
  rt::ThreadPool pool(2);
  for (size_t hkv : {4, 3, 1})
    for (bool bshd : {false, true}) {
      check({2, 12, 1, 37, 64, true, true, false, 64, bshd, 0, hkv}, &pool);
      check({3, 12, 1, 5, 16, false, false, true, 0, bshd, 1, hkv});
      check({2, 12, 3, 21, 32, true, false, true, 40, bshd, 2, hkv}, &pool);
    }
}

TEST_P(DecodeAttentionTest, ThreadedEqualsSingleThreaded) {
  const Problem pr{4, 8, 2, 257, 64, true, true, true};
  std::mt19937 rng(11);
  Data data(pr, rng);
  Buf one(data.q.size()), many(data.q.size());
  DecodeAttentionArgs a = data.args;
  a.out = one.data();
  ASSERT_TRUE(decodeAttention(a).isOk());
  rt::ThreadPool pool(4);
  a.out = many.data();
  ASSERT_TRUE(decodeAttention(a, &pool).isOk());
  EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)), 0);
}

// Shared rows: rows of equal K and V ids hold equal caches (the beams of one
// source); one query per row reads them once, from the first row of a run
// of up to 8. `ids` gives each row's id; rows of a run get the first row's
// K and V, and with `poison` every other row's cache is NaN, so a task that
// read any but the first row would show.
void checkShared(const std::vector<uint64_t>& ids, size_t Sq, bool lengths, bool mask, bool poison,
                 rt::ThreadPool* pool = nullptr) {
  const Problem pr{ids.size(), 3, Sq, 29, 64, false, lengths, mask, 40};
  std::mt19937 rng(5);
  Data data(pr, rng);
  const size_t kRow = pr.H * pr.D * data.T, vRow = pr.H * data.T * pr.D;
  std::vector<size_t> first(ids.size());
  for (size_t b = 0; b < ids.size(); ++b) {
    first[b] = b > 0 && ids[b] == ids[b - 1] ? first[b - 1] : b;
    std::copy_n(&data.kt[first[b] * kRow], kRow, &data.kt[b * kRow]);
    std::copy_n(&data.v[first[b] * vRow], vRow, &data.v[b * vRow]);
  }
  const std::vector<double> ref = data.reference();
  if (poison)
    for (size_t b = 0; b < ids.size(); ++b)
      if (first[b] != b) {
        std::fill_n(&data.kt[b * kRow], kRow, NAN);
        std::fill_n(&data.v[b * vRow], vRow, NAN);
      }
  Buf out(data.q.size());
  DecodeAttentionArgs a = data.args;
  a.out = out.data();
  a.keyRowIds = a.valueRowIds = ids.data();
  ASSERT_TRUE(decodeAttention(a, pool).isOk());
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_NEAR(out[i], ref[i], 2e-5 * (1 + std::fabs(ref[i])))
        << "Sq=" << Sq << " lengths=" << lengths << " mask=" << mask << " at " << i;
}

TEST_P(DecodeAttentionTest, SharedRowsReadTheFirstRowOfARun) {
  // Runs of 3, 2, 8 and 1 rows: each task reads only its first row.
  const std::vector<uint64_t> runs = {7, 7, 7, 9, 9, 4, 4, 4, 4, 4, 4, 4, 4, 5};
  checkShared(runs, 1, false, false, true);
  rt::ThreadPool pool(3);
  checkShared(runs, 1, false, false, true, &pool);
  // A run of 9 is two tasks (8 + 1); different key lengths or mask rows
  // split a run; several queries per row read their own rows.
  const std::vector<uint64_t> nine = {1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2};
  for (bool lengths : {false, true})
    for (bool mask : {false, true}) checkShared(nine, 1, lengths, mask, false);
  checkShared(nine, 2, false, false, false);
}

TEST(DecodeAttention, BadArgumentsAreErrors) {
  DecodeAttentionArgs a;
  a.headDim = 300;
  EXPECT_FALSE(decodeAttention(a).isOk());
  a.headDim = 64;
  a.seqK = 4;
  EXPECT_FALSE(decodeAttention(a).isOk());  // no tensors
}

}  // namespace
}  // namespace transfuse::kernels

