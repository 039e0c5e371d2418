// Elementwise.h: activations, embedding, argmax, top-k. Per-target code lives
// in this file (compiled once per target by foreach_target.h), built from the
// generic maps of elementwise-inl.h.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/Elementwise.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include "runtime/Philox.h"
#include "runtime/kernels/ElementwiseMath.h"
#include "runtime/kernels/elementwise-inl.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <cstring>
#include <vector>

HWY_BEFORE_NAMESPACE();
namespace transfuse::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

HWY_NOINLINE void ActivateRun(Activation act, const float* x, float* y, size_t n) {
  ActivateSpan(act, x, y, n);
}
HWY_NOINLINE void ErfSpan(const float* x, float* y, size_t n) {
  MapUnary(x, y, n, [](auto d, auto v) { return Erf(d, v); });
}

// out = g · act'(x) over [0, n) (Elementwise.h's activationGrad). relu's is
// g times 1 or 0, the scalar definition's bits.
HWY_NOINLINE void ActivationGradSpan(math::Kind kind, const float* x, const float* g, float* out,
                                     size_t n) {
  namespace tk = transfuse::kernels::HWY_NAMESPACE;
  switch (kind) {
#define TRANSFUSE_GRAD_SPAN(kind, scalar, vector)                                              \
  case math::Kind::kind:                                                                         \
    return MapBinary(x, g, out, n,                                                               \
                     [](auto d, auto xv, auto gv) { return hn::Mul(gv, vector(d, xv)); });
    TRANSFUSE_DERIVATIVES(TRANSFUSE_GRAD_SPAN)
#undef TRANSFUSE_GRAD_SPAN
    default:
      return;  // not an activation: Elementwise.h's precondition
  }
}

#if HWY_TARGET != HWY_SCALAR
// Philox4x32-10 (runtime/Philox.h) of G·N consecutive blocks from `block`,
// one block per u32 lane, G vectors as independent chains (the rounds are a
// serial chain of multiplies, so a second one fills the pipeline); stores
// the 4·G·N words in element order (block-major) to `words`. The low
// counter word must not wrap inside the G·N blocks.
template <size_t G>
HWY_INLINE void PhiloxWords(uint64_t block, uint64_t seed, uint64_t step, uint64_t stream,
                            uint32_t* HWY_RESTRICT words) {
  const hn::ScalableTag<uint32_t> du;
  const hn::Repartition<uint64_t, decltype(du)> d64;
  using VU = hn::Vec<decltype(du)>;
  const size_t N = hn::Lanes(du);
  // hi:lo = a · m (32 x 32 -> 64 bits) per lane.
  auto mul = [&](VU a, VU m, VU* hi, VU* lo) HWY_ATTR {
    const auto even = hn::MulEven(a, m);
    const auto odd = hn::MulEven(hn::BitCast(du, hn::ShiftRight<32>(hn::BitCast(d64, a))), m);
    *lo = hn::OddEven(hn::BitCast(du, hn::ShiftLeft<32>(odd)), hn::BitCast(du, even));
    *hi = hn::OddEven(hn::BitCast(du, odd), hn::BitCast(du, hn::ShiftRight<32>(even)));
  };
  const VU m0 = hn::Set(du, 0xD2511F53u), m1 = hn::Set(du, 0xCD9E8D57u);
  VU c0[G], c1[G], c2[G], c3[G];
  for (size_t g = 0; g < G; ++g) {
    c0[g] = hn::Iota(du, static_cast<uint32_t>(block + g * N));
    c1[g] = hn::Set(du, static_cast<uint32_t>(block >> 32));
    c2[g] = hn::Set(du, static_cast<uint32_t>(stream));
    c3[g] = hn::Set(du, static_cast<uint32_t>(step));
  }
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const VU key0 = hn::Set(du, k0), key1 = hn::Set(du, k1);
    for (size_t g = 0; g < G; ++g) {
      VU hi0, lo0, hi1, lo1;
      mul(c0[g], m0, &hi0, &lo0);
      mul(c2[g], m1, &hi1, &lo1);
      c0[g] = hn::Xor3(hi1, c1[g], key0);
      c1[g] = lo1;
      c2[g] = hn::Xor3(hi0, c3[g], key1);
      c3[g] = lo0;
    }
  }
  for (size_t g = 0; g < G; ++g)
    hn::StoreInterleaved4(c0[g], c1[g], c2[g], c3[g], du, words + g * 4 * N);
}
#endif

// Inverted dropout of x[0, n) whose first element has index `first`:
// element i is kept (times `keep`) when word (i % 4) of Philox4x32-10 at
// block i / 4 (runtime/Philox.h), shifted right by 8, is >= `threshold`
// (ceil(rate · 2^24): the same test as philoxUniform(...) >= rate). The
// generator runs with one block per u32 lane, two vectors of blocks at a
// time (PhiloxWords); blocks whose low counter word would wrap inside them,
// and the unaligned head and the tail, run the scalar definition.
HWY_NOINLINE void DropoutSpan(const float* x, float* y, size_t n, uint32_t threshold, float keep,
                              uint64_t seed, uint64_t step, uint64_t stream, uint64_t first) {
  auto scalar = [&](size_t i) {
    const uint64_t index = first + i;
    const uint32_t word = rt::philoxBlock(seed, step, stream, index >> 2)[index & 3];
    y[i] = rt::dropoutKept(word, threshold) ? x[i] * keep : 0.0f;
  };
  size_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  constexpr size_t kGroups = 2;
  const hn::ScalableTag<uint32_t> du;
  const hn::Rebind<int32_t, decltype(du)> di;
  const hn::Rebind<float, decltype(du)> df;
  const size_t N = hn::Lanes(du);
  HWY_ALIGN uint32_t words[4 * kGroups * hn::MaxLanes(du)];
  const auto limit = hn::Set(di, static_cast<int32_t>(threshold) - 1);
  const auto keepV = hn::Set(df, keep);
  // Applies the words of `count` elements from element i.
  auto apply = [&](size_t count) HWY_ATTR {
    for (size_t j = 0; j < count; j += N) {
      const auto k = hn::BitCast(di, hn::ShiftRight<8>(hn::Load(du, words + j)));
      const auto kept = hn::RebindMask(df, hn::Gt(k, limit));
      hn::StoreU(hn::IfThenElseZero(kept, hn::Mul(hn::LoadU(df, x + i + j), keepV)), df, y + i + j);
    }
  };
  for (; i < n && ((first + i) & 3) != 0; ++i) scalar(i);
  for (; i + 4 * N <= n;) {
    const uint64_t block = (first + i) >> 2;
    const bool two = i + 4 * kGroups * N <= n;
    const size_t blocks = two ? kGroups * N : N;
    if (static_cast<uint32_t>(block) > UINT32_MAX - (blocks - 1)) {  // the low word wraps
      for (size_t j = 0; j < 4 * blocks; ++j) scalar(i + j);
    } else {
      if (two)
        PhiloxWords<kGroups>(block, seed, step, stream, words);
      else
        PhiloxWords<1>(block, seed, step, stream, words);
      apply(4 * blocks);
    }
    i += 4 * blocks;
  }
#endif
  for (; i < n; ++i) scalar(i);
}

// out = row · scale (+ pe when pe is non-null).
HWY_NOINLINE void ScaleAddRow(const float* row, float scale, const float* pe, float* out,
                              size_t n) {
  if (pe) {
    MapBinary(row, pe, out, n, [scale](auto d, auto a, auto b) {
      return hn::MulAdd(a, hn::Set(d, scale), b);
    });
  } else {
    MapUnary(row, out, n, [scale](auto d, auto a) { return hn::Mul(a, hn::Set(d, scale)); });
  }
}

// pe[2i] = sin(angle[i]), pe[2i+1] = cos(angle[i]) for i < half, with
// angle[] already reduced to [-π, π] (Highway's Sin/Cos are accurate there);
// an odd dim's last element is the sine of angle[half].
HWY_NOINLINE void SinCosInterleave(const float* angle, size_t dim, float* pe) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const size_t pairs = (dim + 1) / 2;
  HWY_ALIGN float s[64], c[64];
  for (size_t i0 = 0; i0 < pairs; i0 += 64) {
    const size_t m = std::min<size_t>(64, pairs - i0);
    for (size_t i = 0; i < m; i += N) {
      const auto a = (i + N <= m) ? hn::LoadU(d, angle + i0 + i)
                                  : LoadTail(d, angle + i0 + i, m - i, 0.0f);
      hn::Store(hn::Sin(d, a), d, s + i);
      hn::Store(hn::Cos(d, a), d, c + i);
    }
    for (size_t i = 0; i < m; ++i) {
      const size_t j = 2 * (i0 + i);
      pe[j] = s[i];
      if (j + 1 < dim) pe[j + 1] = c[i];
    }
  }
}

HWY_NOINLINE void ArgmaxRows(const float* logits, size_t width, int32_t* out, size_t r0,
                             size_t r1) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t r = r0; r < r1; ++r) {
    const float* x = logits + r * width;
    const float mx = ReduceMaxF(
        d, FoldRow(d, x, width, kNegInf, [](auto a, auto b) HWY_ATTR { return hn::Max(a, b); }));
    // The first index holding the maximum.
    int32_t best = 0;
    const auto vm = hn::Set(d, mx);
    size_t i = 0;
    for (; i + N <= width; i += N) {
      const intptr_t k = hn::FindFirstTrue(d, hn::Eq(hn::LoadU(d, x + i), vm));
      if (k >= 0) break;
    }
    for (; i < width; ++i)
      if (x[i] == mx) {
        best = static_cast<int32_t>(i);
        break;
      }
    out[r] = best;
  }
}

// Any lane of x[i..i+N) greater than t?
HWY_INLINE bool AnyGreater(const float* x, float t) {
  const hn::ScalableTag<float> d;
  return !hn::AllFalse(d, hn::Gt(hn::LoadU(d, x), hn::Set(d, t)));
}

HWY_NOINLINE void TopKRows(const float* logits, size_t width, size_t k, float* values,
                           int32_t* indices, size_t r0, size_t r1) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  // A min-heap of the k best so far, worst on top. "a worse than b" means a
  // lower value, or an equal value with a higher index. Scanning in index
  // order, a later element equal to the worst is worse, so only x > worst
  // enters once the heap is full; whole vectors with no such lane are skipped.
  std::vector<std::pair<float, int32_t>> heap;
  heap.reserve(k);
  auto worse = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first < b.first || (a.first == b.first && a.second > b.second);
  };
  auto cmp = [&](const auto& a, const auto& b) { return worse(b, a); };  // worst on top
  for (size_t r = r0; r < r1; ++r) {
    const float* x = logits + r * width;
    heap.clear();
    size_t i = 0;
    for (; i < width && heap.size() < k; ++i) {
      heap.emplace_back(x[i], static_cast<int32_t>(i));
      std::push_heap(heap.begin(), heap.end(), cmp);
    }
    while (i < width) {
      if (i + N <= width && !AnyGreater(x + i, heap.front().first)) {
        i += N;
        continue;
      }
      const size_t end = std::min(width, i + N);
      for (; i < end; ++i) {
        if (x[i] > heap.front().first) {
          std::pop_heap(heap.begin(), heap.end(), cmp);
          heap.back() = {x[i], static_cast<int32_t>(i)};
          std::push_heap(heap.begin(), heap.end(), cmp);
        }
      }
    }
    std::sort(heap.begin(), heap.end(), cmp);  // best first
    for (size_t j = 0; j < k; ++j) {
      values[r * k + j] = heap[j].first;
      indices[r * k + j] = heap[j].second;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace transfuse::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/Parallel.h"

#include <string>
#include <vector>

namespace transfuse::kernels {

HWY_EXPORT(ActivateRun);
HWY_EXPORT(ErfSpan);
HWY_EXPORT(ActivationGradSpan);
HWY_EXPORT(ScaleAddRow);
HWY_EXPORT(SinCosInterleave);
HWY_EXPORT(ArgmaxRows);
HWY_EXPORT(TopKRows);
HWY_EXPORT(DropoutSpan);

namespace {
constexpr size_t kMapGrain = 16384;  // elements per task
}  // namespace

void activate(Activation a, const float* x, float* y, size_t n, rt::ThreadPool* pool) {
  if (a == Activation::kNone) {
    if (x != y) std::memmove(y, x, n * sizeof(float));
    return;
  }
  auto* fn = HWY_DYNAMIC_DISPATCH(ActivateRun);
  parallelFor(pool, n, kMapGrain, [&](size_t b, size_t e) { fn(a, x + b, y + b, e - b); });
}
void gelu(const float* x, float* y, size_t n, rt::ThreadPool* pool) {
  activate(Activation::kGelu, x, y, n, pool);
}
void geluTanh(const float* x, float* y, size_t n, rt::ThreadPool* pool) {
  activate(Activation::kGeluTanh, x, y, n, pool);
}
void relu(const float* x, float* y, size_t n, rt::ThreadPool* pool) {
  activate(Activation::kRelu, x, y, n, pool);
}
void erf(const float* x, float* y, size_t n) { HWY_DYNAMIC_DISPATCH(ErfSpan)(x, y, n); }

void activationGrad(math::Kind kind, const float* x, const float* g, float* out, size_t n,
                    rt::ThreadPool* pool) {
  auto* fn = HWY_DYNAMIC_DISPATCH(ActivationGradSpan);
  parallelFor(pool, n, kMapGrain, [&](size_t b, size_t e) { fn(kind, x + b, g + b, out + b, e - b); });
}

void dropout(const float* x, float* y, size_t n, double rate, uint64_t seed, uint64_t step,
             uint64_t stream, uint64_t first, rt::ThreadPool* pool) {
  const uint32_t threshold = rt::dropoutThreshold(rate);
  const float keep = rt::dropoutKeepScale(rate);
  parallelFor(pool, n, kMapGrain, [&](size_t b, size_t e) {
    HWY_DYNAMIC_DISPATCH(DropoutSpan)(x + b, y + b, e - b, threshold, keep, seed, step, stream,
                                      first + b);
  });
}

rt::Status embedding(const EmbeddingArgs& a, float* out, rt::ThreadPool* pool) {
  const size_t tokens = a.batch * a.seq;
  for (size_t t = 0; t < tokens; ++t) {
    const int32_t id = a.ids[t];
    if (id < 0 || static_cast<size_t>(id) >= a.vocab)
      return rt::Status::error("token id " + std::to_string(id) + " at (batch " +
                               std::to_string(t / a.seq) + ", position " +
                               std::to_string(t % a.seq) + ") is out of range [0, " +
                               std::to_string(a.vocab) + ")");
  }
  if (a.positional == Positional::kLearned && a.seq > 0 &&
      a.positionOffset + a.seq > a.learnedRows)
    return rt::Status::error("position " + std::to_string(a.positionOffset + a.seq - 1) +
                             " is past the learned positional table's " +
                             std::to_string(a.learnedRows) + " rows");
  if (tokens == 0 || a.dim == 0) return rt::Status::ok();
  const size_t dim = a.dim, pairs = (dim + 1) / 2;
  // Inverse frequencies 10000^(-2i/dim), in double.
  std::vector<double> invFreq(pairs);
  for (size_t i = 0; i < pairs; ++i)
    invFreq[i] = std::pow(10000.0, -static_cast<double>(2 * i) / static_cast<double>(dim));
  auto* scaleAdd = HWY_DYNAMIC_DISPATCH(ScaleAddRow);
  auto* sinCos = HWY_DYNAMIC_DISPATCH(SinCosInterleave);
  // Positions are shared by the batch: one task per position s, all b.
  parallelFor(pool, a.seq, std::max<size_t>(1, 4096 / dim), [&](size_t s0, size_t s1) {
    std::vector<float> pe, angle;
    if (a.positional == Positional::kSinusoidal) {
      pe.resize(dim);
      angle.resize(pairs);
    }
    for (size_t s = s0; s < s1; ++s) {
      const size_t pos = a.positionOffset + s;
      const float* peRow = nullptr;
      if (a.positional == Positional::kSinusoidal) {
        const double twoPi = 6.283185307179586476925;
        for (size_t i = 0; i < pairs; ++i) {
          const double ang = static_cast<double>(pos) * invFreq[i];
          angle[i] = static_cast<float>(ang - twoPi * std::nearbyint(ang / twoPi));
        }
        sinCos(angle.data(), dim, pe.data());
        peRow = pe.data();
      } else if (a.positional == Positional::kLearned) {
        peRow = a.learned + pos * dim;
      }
      for (size_t b = 0; b < a.batch; ++b) {
        const size_t t = b * a.seq + s;
        scaleAdd(a.table + static_cast<size_t>(a.ids[t]) * dim, a.scale, peRow,
                 out + t * dim, dim);
      }
    }
  });
  return rt::Status::ok();
}

void argmax(const float* logits, size_t rows, size_t width, int32_t* out,
            rt::ThreadPool* pool) {
  if (rows == 0) return;
  auto* fn = HWY_DYNAMIC_DISPATCH(ArgmaxRows);
  parallelFor(pool, rows, rowGrain(width),
              [&](size_t r0, size_t r1) { fn(logits, width, out, r0, r1); });
}

rt::Status topK(const float* logits, size_t rows, size_t width, size_t k, float* values,
                int32_t* indices, rt::ThreadPool* pool) {
  if (k > width)
    return rt::Status::error("top-k: k = " + std::to_string(k) + " exceeds the row width " +
                             std::to_string(width));
  if (rows == 0 || k == 0) return rt::Status::ok();
  auto* fn = HWY_DYNAMIC_DISPATCH(TopKRows);
  parallelFor(pool, rows, rowGrain(width), [&](size_t r0, size_t r1) {
    fn(logits, width, k, values, indices, r0, r1);
  });
  return rt::Status::ok();
}

}  // namespace transfuse::kernels
#endif  // HWY_ONCE
