// Per-target code of DecodeAttention.cpp: one (b, h) task of a decode step.
// See DecodeAttention.h for the contract; strides are resolved (non-zero)
// when these functions run.
//
// Task (b, h):
//   qs[g·D + d] = scale·log2(e) · Q[i, d]      (scores in log2 units: 2^x)
//   S[i·ld + j] = Σ_d qs[i·D + d] · Kᵀ[d, j]     ScoreGroup: up to 8 queries
//                 (so K is read once for Sq <= 8) × U vectors of keys, G·U
//                 accumulators (16 on AVX-512, 8 on the 16-register
//                 targets), Kᵀ rows loaded in place, q broadcast
//   per query i: masks -> -inf over the visible keys, m = max, P = 2^(S - m),
//   l = Σ P (SoftmaxWeights; l == 0, all masked: P = 0, O = 0)
//   O[i, :] = (Σ_j P[i, j] · V[j, :]) / l_i over D in vector lanes, every V
//   row read once per group (WeightedRowsGroup; one query: WeightedRows,
//   two accumulator sets for alternate keys). Keys no query of the group
//   sees (causal) are never read.

#if defined(TRANSFUSE_KERNELS_DECODE_ATTENTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TRANSFUSE_KERNELS_DECODE_ATTENTION_INL_H_
#undef TRANSFUSE_KERNELS_DECODE_ATTENTION_INL_H_
#else
#define TRANSFUSE_KERNELS_DECODE_ATTENTION_INL_H_
#endif

#include <hwy/highway.h>

#include "runtime/kernels/Common-inl.h"
#include "runtime/kernels/DecodeAttention.h"
#include "runtime/kernels/Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

HWY_BEFORE_NAMESPACE();
namespace transfuse::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Accumulator registers the micro-kernels use: half of the vector registers
// (AVX-512 has 32, the other x86 targets 16), the rest holding the key or
// value vectors loaded and the broadcasts.
#if HWY_TARGET <= HWY_AVX3  // the AVX-512 targets
constexpr size_t kDecodeAccumulators = 16;
#else
constexpr size_t kDecodeAccumulators = 8;
#endif
// Queries per pass over K: up to 8, so K is read once for Sq <= 8.
constexpr size_t kDecodeGroup = 8;
// Shared rows per task: one pass of ScoreGroup's query group.
constexpr size_t kDecodeMaxSharedRows = kDecodeGroup;

// s[g·ld + j] = Σ_d qs[g·D + d] · kt[d·dimStride + j] for g < G, j < n; the
// keys in vector lanes, U vectors of them at a time (G·U accumulators).
template <size_t G, size_t U>
HWY_NOINLINE void ScoreGroup(const float* HWY_RESTRICT qs, size_t D, const float* HWY_RESTRICT kt,
                             size_t dimStride, size_t n, float* HWY_RESTRICT s, size_t ld) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d);
  size_t j = 0;
  for (; j + U * N <= n; j += U * N) {
    V acc[G][U];
    for (size_t g = 0; g < G; ++g)
      for (size_t u = 0; u < U; ++u) acc[g][u] = hn::Zero(d);
    const float* kp = kt + j;
    for (size_t dd = 0; dd < D; ++dd, kp += dimStride) {
      for (size_t u = 0; u < U; ++u) {
        const V k = hn::LoadU(d, kp + u * N);
        for (size_t g = 0; g < G; ++g) acc[g][u] = hn::MulAdd(hn::Set(d, qs[g * D + dd]), k, acc[g][u]);
      }
    }
    for (size_t g = 0; g < G; ++g)
      for (size_t u = 0; u < U; ++u) hn::StoreU(acc[g][u], d, s + g * ld + j + u * N);
  }
  for (; j < n; j += N) {  // the rest, a vector at a time (the last partial)
    const size_t m = std::min(N, n - j);
    V acc[G];
    for (size_t g = 0; g < G; ++g) acc[g] = hn::Zero(d);
    const float* kp = kt + j;
    for (size_t dd = 0; dd < D; ++dd, kp += dimStride) {
      const V k = m == N ? hn::LoadU(d, kp) : LoadTail(d, kp, m, 0.0f);
      for (size_t g = 0; g < G; ++g) acc[g] = hn::MulAdd(hn::Set(d, qs[g * D + dd]), k, acc[g]);
    }
    for (size_t g = 0; g < G; ++g) {
      if (m == N)
        hn::StoreU(acc[g], d, s + g * ld + j);
      else
        StoreTail(d, acc[g], s + g * ld + j, m);
    }
  }
}

template <size_t G>
void Scores(const float* qs, size_t D, const float* kt, size_t dimStride, size_t n, float* s,
            size_t ld) {
  constexpr size_t U = std::min<size_t>(8, std::max<size_t>(1, kDecodeAccumulators / G));
  ScoreGroup<G, U>(qs, D, kt, dimStride, n, s, ld);
}

// o[0, D) = Σ_{j < n} p[j] · v[j·rowStride + (0, D)] · inv: up to 8 vectors
// of D per pass over the rows (8 accumulators: D = 64 in one pass on AVX2);
// with 4 or fewer, two accumulator sets for alternate rows.
HWY_NOINLINE void WeightedRows(const float* HWY_RESTRICT p, size_t n, const float* HWY_RESTRICT v,
                               size_t rowStride, size_t D, float inv, float* HWY_RESTRICT o) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d);
  for (size_t d0 = 0; d0 < D; d0 += 8 * N) {
    const size_t w = std::min(8 * N, D - d0), nv = (w + N - 1) / N, last = w - (nv - 1) * N;
    auto load = [&](const float* row, size_t c) {
      return c + 1 < nv || last == N ? hn::LoadU(d, row + c * N) : LoadTail(d, row + c * N, last, 0.0f);
    };
    V a0[8], a1[8];
    for (size_t c = 0; c < 8; ++c) a0[c] = a1[c] = hn::Zero(d);
    size_t j = 0;
    if (nv <= 4) {
      for (; j + 2 <= n; j += 2) {
        const V p0 = hn::Set(d, p[j]), p1 = hn::Set(d, p[j + 1]);
        const float* r0 = v + j * rowStride + d0;
        const float* r1 = r0 + rowStride;
        for (size_t c = 0; c < nv; ++c) {
          a0[c] = hn::MulAdd(p0, load(r0, c), a0[c]);
          a1[c] = hn::MulAdd(p1, load(r1, c), a1[c]);
        }
      }
    }
    for (; j < n; ++j) {
      const V p0 = hn::Set(d, p[j]);
      const float* r0 = v + j * rowStride + d0;
      for (size_t c = 0; c < nv; ++c) a0[c] = hn::MulAdd(p0, load(r0, c), a0[c]);
    }
    const V scale = hn::Set(d, inv);
    for (size_t c = 0; c < nv; ++c) {
      const V r = hn::Mul(hn::Add(a0[c], a1[c]), scale);
      if (c + 1 < nv || last == N)
        hn::StoreU(r, d, o + d0 + c * N);
      else
        StoreTail(d, r, o + d0 + c * N, last);
    }
  }
}

// o_g[0, D) = Σ_{j < n} p[g·ld + j] · v[j·rowStride + (0, D)] · inv[g] for
// g < G (G >= 2 queries): each V row is read once for the whole group.
template <size_t G>
HWY_NOINLINE void WeightedRowsGroup(const float* HWY_RESTRICT p, size_t ld, size_t n,
                                    const float* HWY_RESTRICT v, size_t rowStride, size_t D,
                                    const float* inv, float* HWY_RESTRICT o, size_t oStride) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d);
  // G·kC accumulators: AVX-512 4 × 4 (D = 64 in one pass), AVX2 4 × 2.
  constexpr size_t kC = std::min<size_t>(4, std::max<size_t>(1, kDecodeAccumulators / G));
  for (size_t d0 = 0; d0 < D; d0 += kC * N) {
    const size_t w = std::min(kC * N, D - d0), nv = (w + N - 1) / N, last = w - (nv - 1) * N;
    auto load = [&](const float* row, size_t c) {
      return c + 1 < nv || last == N ? hn::LoadU(d, row + c * N) : LoadTail(d, row + c * N, last, 0.0f);
    };
    V acc[G][kC];
    for (size_t g = 0; g < G; ++g)
      for (size_t c = 0; c < kC; ++c) acc[g][c] = hn::Zero(d);
    for (size_t j = 0; j < n; ++j) {
      const float* row = v + j * rowStride + d0;
      V rv[kC];
      for (size_t c = 0; c < nv; ++c) rv[c] = load(row, c);
      for (size_t g = 0; g < G; ++g) {
        const V pg = hn::Set(d, p[g * ld + j]);
        for (size_t c = 0; c < nv; ++c) acc[g][c] = hn::MulAdd(pg, rv[c], acc[g][c]);
      }
    }
    for (size_t g = 0; g < G; ++g) {
      const V scale = hn::Set(d, inv[g]);
      for (size_t c = 0; c < nv; ++c) {
        const V r = hn::Mul(acc[g][c], scale);
        float* out = o + g * oStride + d0 + c * N;
        if (c + 1 < nv || last == N)
          hn::StoreU(r, d, out);
        else
          StoreTail(d, r, out, last);
      }
    }
  }
}

// The scratch one task needs, in floats: the scores of every query (rows of
// ld = Sk rounded up to 16) and the scaled queries of one group.
size_t DecodeScratchFloats(size_t seqQ, size_t seqK, size_t headDim) {
  return seqQ * ((seqK + 15) / 16 * 16) + kDecodeGroup * headDim;
}

// The softmax weights of query i's scores si over its `n` visible keys, in
// place, zero up to `width`; returns 1/Σ, or 0 when every key is masked (the
// row's weights are then all 0).
template <class D>
float SoftmaxWeights(D d, float* HWY_RESTRICT si, size_t n, size_t width) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const float m = n ? ReduceMaxF(d, FoldRow(d, si, n, ninf, [](auto a, auto b) { return hn::Max(a, b); }))
                    : ninf;
  if (m == ninf) {
    std::fill_n(si, width, 0.0f);
    return 0.0f;
  }
  const float sum = Exp2ShiftedSumInPlace(d, si, n, m);
  std::fill(si + n, si + width, 0.0f);
  return 1.0f / sum;
}

// Task (b, h) over `rows` rows from b: rows == 1, the Sq queries of row b;
// rows > 1 (Sq == 1, rows that share K and V), one query per row, K and V
// read from row b. `grouped` (Sq == 1, rows == 1, grouped K/V heads): h is
// a K/V head and the task's queries are the query heads that read it, so
// its K and V are read once for all of them.
void DecodeAttentionTask(const DecodeAttentionArgs& a, size_t b, size_t rows, size_t h,
                         bool grouped, float* scratch) {
  const hn::ScalableTag<float> d;
  const size_t Sk = a.seqK, D = a.headDim, ld = (Sk + 15) / 16 * 16;
  const size_t G = a.heads / a.kvHeadCount();
  const bool shared = rows > 1;
  const size_t Q = shared ? rows : grouped ? G : a.seqQ;  // queries of the task
  const size_t qStride = shared ? a.q.batchStride : grouped ? a.q.headStride : a.q.rowStride;
  const size_t oStride = shared ? a.outBatchStride : grouped ? a.outHeadStride : a.outRowStride;
  const size_t qh = grouped ? h * G : h, kh = grouped ? h : a.kvHead(h);
  float* s = scratch;
  float* qs = scratch + Q * ld;
  const float* qb = a.q.data + b * a.q.batchStride + qh * a.q.headStride;
  const float* kt = a.k.data + b * a.k.batchStride + kh * a.k.headStride;
  const float* vb = a.v.data + b * a.v.batchStride + kh * a.v.headStride;
  float* ob = a.out + b * a.outBatchStride + qh * a.outHeadStride;
  const float qscale = a.scale * 1.4426950408889634f;  // log2(e)
  const float ninf = -std::numeric_limits<float>::infinity();
  const ptrdiff_t limit = a.keyLengths ? std::max<int32_t>(a.keyLengths[b], 0) : ptrdiff_t(Sk);
  // Keys query qi sees (shared rows and grouped heads: each is query 0).
  auto visible = [&](size_t qi) {
    const size_t i = shared || grouped ? 0 : qi;
    ptrdiff_t n = std::min<ptrdiff_t>(ptrdiff_t(Sk), limit);
    if (a.causal) n = std::min<ptrdiff_t>(n, ptrdiff_t(i + Sk) - ptrdiff_t(a.seqQ) + 1);
    return n > 0 ? size_t(n) : size_t{0};
  };
  for (size_t i0 = 0; i0 < Q; i0 += kDecodeGroup) {
    const size_t g = std::min(kDecodeGroup, Q - i0);
    for (size_t r = 0; r < g; ++r)
      for (size_t dd = 0; dd < D; ++dd) qs[r * D + dd] = qb[(i0 + r) * qStride + dd] * qscale;
    float* sg = s + i0 * ld;
    // Keys no query of the group sees are never read.
    const size_t n = visible(i0 + g - 1);
    switch (g) {
    case 1: Scores<1>(qs, D, kt, a.k.dimStride, n, sg, ld); break;
    case 2: Scores<2>(qs, D, kt, a.k.dimStride, n, sg, ld); break;
    case 3: Scores<3>(qs, D, kt, a.k.dimStride, n, sg, ld); break;
    case 4: Scores<4>(qs, D, kt, a.k.dimStride, n, sg, ld); break;
    case 5: Scores<5>(qs, D, kt, a.k.dimStride, n, sg, ld); break;
    case 6: Scores<6>(qs, D, kt, a.k.dimStride, n, sg, ld); break;
    case 7: Scores<7>(qs, D, kt, a.k.dimStride, n, sg, ld); break;
    default: Scores<8>(qs, D, kt, a.k.dimStride, n, sg, ld); break;
    }
    float inv[kDecodeGroup];
    for (size_t r = 0; r < g; ++r) {
      float* si = sg + r * ld;
      const size_t ni = visible(i0 + r);
      if (a.keyMask)
        for (size_t j = 0; j < ni; ++j)
          if (a.keyMask[b * Sk + j] == 0) si[j] = ninf;
      inv[r] = SoftmaxWeights(d, si, ni, n);
    }
    // P·V in sub-groups of up to 4 queries, each reading V once.
    for (size_t r0 = 0; r0 < g; r0 += 4) {
      const size_t gp = std::min<size_t>(4, g - r0);
      const float* p = sg + r0 * ld;
      float* o = ob + (i0 + r0) * oStride;
      switch (gp) {
      case 1: WeightedRows(p, n, vb, a.v.rowStride, D, inv[r0], o); break;
      case 2: WeightedRowsGroup<2>(p, ld, n, vb, a.v.rowStride, D, inv + r0, o, oStride); break;
      case 3: WeightedRowsGroup<3>(p, ld, n, vb, a.v.rowStride, D, inv + r0, o, oStride); break;
      default: WeightedRowsGroup<4>(p, ld, n, vb, a.v.rowStride, D, inv + r0, o, oStride); break;
      }
    }
  }
}

// The whole step over `a` (strides resolved): tasks (row group, head) on
// the pool, the scores of a task in a per-thread scratch buffer.
HWY_NOINLINE void DecodeAttentionRun(const DecodeAttentionArgs& a, rt::ThreadPool* pool) {
  // Tasks: (first row, rows) × heads; rows > 1 only for shared rows.
  std::vector<std::pair<size_t, size_t>> groups;
  const bool share = a.seqQ == 1 && a.keyRowIds && a.valueRowIds;
  for (size_t b = 0; b < a.batch; ++b) {
    if (share && !groups.empty()) {
      auto& [b0, rows] = groups.back();
      const bool same = rows < kDecodeMaxSharedRows && a.keyRowIds[b] == a.keyRowIds[b0] &&
                        a.valueRowIds[b] == a.valueRowIds[b0] &&
                        (!a.keyLengths || a.keyLengths[b] == a.keyLengths[b0]) &&
                        (!a.keyMask || std::equal(a.keyMask + b * a.seqK, a.keyMask + (b + 1) * a.seqK,
                                                  a.keyMask + b0 * a.seqK));
      if (same) {
        ++rows;
        continue;
      }
    }
    groups.push_back({b, 1});
  }
  // One query per row and grouped K/V heads: a task per K/V head.
  const bool grouped = a.seqQ == 1 && !share && a.kvHeadCount() < a.heads;
  const size_t heads = grouped ? a.kvHeadCount() : a.heads;
  const size_t queries = std::max({a.seqQ, share ? kDecodeMaxSharedRows : size_t{1},
                                   grouped ? a.heads / heads : size_t{1}});
  const size_t scratch = DecodeScratchFloats(queries, a.seqK, a.headDim);
  auto run = [&](size_t t0, size_t t1) {
    thread_local std::vector<float> buffer;
    if (buffer.size() < scratch) buffer.resize(scratch);
    for (size_t t = t0; t < t1; ++t) {
      const auto [b, rows] = groups[t / heads];
      DecodeAttentionTask(a, b, rows, t % heads, grouped, buffer.data());
    }
  };
  parallelTasks(pool, groups.size() * heads, run);
}

}  // namespace HWY_NAMESPACE
}  // namespace transfuse::kernels
HWY_AFTER_NAMESPACE();

#endif  // TRANSFUSE_KERNELS_DECODE_ATTENTION_INL_H_
