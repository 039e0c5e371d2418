// Per-target GEMM code (see Gemm.h for the formula, layouts and algorithm).
// Included once per Highway target by Gemm.cpp through foreach_target.h; the
// toggle guard below re-includes it per target.
//
// Blocking (fp32, AVX-512; other targets scale NR and MR with their vectors
// and registers, Kc and Mc stay):
//   NR = 2 vectors = 32 columns, MR <= 14 rows: 28 accumulators + 2 B vectors +
//        1 broadcast = 31 of the 32 zmm registers. Per k: 2 loads of B, 14
//        broadcast loads of A, 28 FMAs (14 cycles on two FMA ports).
//   Kc = 256: a B sub-panel (Kc×NR×4 = 32 KiB) stays in the 48 KiB L1d while
//        a 14-row A micro-panel (14 KiB) streams through it from L2 (measured:
//        Kc = 128 and 192 were slower, more C traffic for no L1 gain).
//   Mc <= 128 rows and packed A for all of K <= 1 MiB (kABudget): the A row
//        block stays in the 2 MiB L2 while the B panels pass by (K = 512 or
//        1024: 128 rows; K = 2048: 120 rows), and the block's C strip of a
//        panel (Mc×NR×4 = 16 KiB) stays in L1 beside the 32 KiB B sub-panel
//        across the k-blocks. Measured (one thread, K = 512, N = 37000, where
//        C is not otherwise cached): Mc = 256 → 128 took M = 256 from 145 to
//        156 GFLOP/s and M = 512 from 144 to 154; shapes whose C stays in L2
//        (N <= 2048, 1024³) were unchanged, although B is re-read from L3
//        once per 128 rows (1/64 byte per flop).
//   A K so long that the A budget leaves short row blocks (K = 8000: 30
//        rows; K = 37000: 14) runs in K chunks (KChunks), one pass over C
//        per chunk: measured, 2976×512×37000 on two threads went from 49%
//        to 83% of the peak.
//   The C strip of a panel (rows × 32) stays in L1/L2 across the k-blocks,
//   so C is read from memory once; the next B sub-panel (usually in L3 or
//   memory: weights are read once per row block) is prefetched into L2 in
//   slices by the tiles working on the current one, and each tile's C lines
//   are prefetched into L2 before its k loop. Measured on this machine, the
//   B prefetch took 128×2048×2048 from 125 to 151 GFLOP/s on one thread.

#if defined(TRANSFUSE_KERNELS_GEMM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TRANSFUSE_KERNELS_GEMM_INL_H_
#undef TRANSFUSE_KERNELS_GEMM_INL_H_
#else
#define TRANSFUSE_KERNELS_GEMM_INL_H_
#endif

#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/kernels/ElementwiseMath.h"
#include "runtime/kernels/Erf-inl.h"
#include "runtime/kernels/Gemm.h"
#include "runtime/kernels/Parallel.h"
#include "runtime/kernels/RotaryTable.h"

HWY_BEFORE_NAMESPACE();
namespace transfuse::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace gemm {

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Rows of the register tile: as many as the vector registers allow with two
// accumulators per row, two B vectors and one broadcast.
#if HWY_TARGET == HWY_SCALAR
constexpr size_t kMaxMR = 4;
#elif (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3) || HWY_ARCH_ARM_A64
constexpr size_t kMaxMR = 14;  // 32 vector registers
#else
constexpr size_t kMaxMR = 6;  // 16 vector registers (SSE4, AVX2)
#endif
constexpr size_t kKc = 256;
constexpr size_t kMc = 128;
// Bytes of packed A (a row block for all of K) meant to stay in L2.
constexpr size_t kABudget = (1 << 20) / sizeof(float);
// Row stride of a packed A micro-panel (see PackA): Kc plus one cache line, so
// that the rows of a tile do not all fall into the same L1 sets.
constexpr size_t kAStride = kKc + 16;
// Multiply-adds per thread below which fewer threads are used, the least work
// a thread claims at a time, and the fewest rows per thread for splitting C
// by rows (see GemmPacked).
constexpr double kMinMacsPerThread = 1 << 20;
// The multiply-adds one streamed element of B is worth when M is small.
constexpr double kStreamedMacs = 8;
constexpr size_t kMinUnitMacs = 1 << 18;
constexpr size_t kMinRowsPerThread = 128;

HWY_INLINE size_t NR() { return 2 * hn::Lanes(DF()); }

// Loads the first n (< Lanes) floats of p, zeros in the other lanes, reading
// nothing past p[n-1] (MaskedLoad is fault-free on AVX2/AVX-512 only).
HWY_INLINE VF LoadN(DF d, const float* HWY_RESTRICT p, size_t n) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  return hn::MaskedLoad(hn::FirstN(d, n), d, p);
#else
  HWY_ALIGN float buf[hn::MaxLanes(DF())] = {};
  std::memcpy(buf, p, n * sizeof(float));
  return hn::Load(d, buf);
#endif
}

// Stores the first n (< Lanes) lanes of v to p, touching nothing else.
HWY_INLINE void StoreN(DF d, VF v, float* HWY_RESTRICT p, size_t n) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  hn::BlendedStore(v, hn::FirstN(d, n), d, p);
#else
  HWY_ALIGN float buf[hn::MaxLanes(DF())];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, n * sizeof(float));
#endif
}

// One register tile: C[MR, ncols] (+)= pa·pb (+ bias).
//   pa: A micro-panel, MR rows of kb (pa[r·kAStride + k]; the stride is a
//       compile-time constant, so every row is one displacement off one
//       pointer and packing row-major A is a copy);
//   pb: B panel, kb×NR k-major (pb[k·NR + j]), columns >= ncols are zero;
//   accumulate: add C's current value (a partial sum of earlier k-blocks);
//   bias: bias + tile column 0, or null (given for the last k-block only);
//   pf, pfLines: cache lines to prefetch into L2 (one per k step, at most kb).
// Each C element: ((C + Σ_k a·b) + bias), the sum an FMA chain in k order.
template <size_t MR>
HWY_NOINLINE void MicroTile(const float* HWY_RESTRICT pa, const float* HWY_RESTRICT pb,
                            size_t kb, float* HWY_RESTRICT c, size_t ldc, size_t ncols,
                            bool accumulate, const float* HWY_RESTRICT bias,
                            const float* pf, size_t pfLines) {
  const DF d;
  const size_t L = hn::Lanes(d);
  // C's tile is touched only after the k loop: fetch its lines into L2 now
  // (they are often in L3 or memory; into L1 they would be evicted by the
  // 46 KiB of A and B the k loop reads).
  HWY_UNROLL(16)
  for (size_t r = 0; r < MR; ++r) {
    __builtin_prefetch(c + r * ldc, 0, 2);
    __builtin_prefetch(c + r * ldc + 2 * L - 1, 0, 2);
  }
  VF acc0[MR], acc1[MR];
  HWY_UNROLL(16)
  for (size_t r = 0; r < MR; ++r) {
    acc0[r] = hn::Zero(d);
    acc1[r] = hn::Zero(d);
  }
  auto step = [&]() HWY_ATTR {
    const VF b0 = hn::Load(d, pb);
    const VF b1 = hn::Load(d, pb + L);
    HWY_UNROLL(16)
    for (size_t r = 0; r < MR; ++r) {
      const VF a = hn::Set(d, pa[r * kAStride]);
      acc0[r] = hn::MulAdd(a, b0, acc0[r]);
      acc1[r] = hn::MulAdd(a, b1, acc1[r]);
    }
    pa += 1;
    pb += 2 * L;
  };
  // The first pfLines steps also prefetch one line each of what comes next
  // (the next B panel) into L2.
  const size_t npf = std::min(pfLines, kb);
  HWY_UNROLL(2)
  for (size_t k = 0; k < npf; ++k) {
    __builtin_prefetch(pf + k * (64 / sizeof(float)), 0, 2);
    step();
  }
  HWY_UNROLL(2)
  for (size_t k = npf; k < kb; ++k) step();

  if (ncols == 2 * L) {  // full tile
    VF bias0 = hn::Zero(d), bias1 = hn::Zero(d);
    if (bias) {
      bias0 = hn::LoadU(d, bias);
      bias1 = hn::LoadU(d, bias + L);
    }
    HWY_UNROLL(16)
    for (size_t r = 0; r < MR; ++r) {
      float* HWY_RESTRICT cr = c + r * ldc;
      VF x0 = acc0[r], x1 = acc1[r];
      if (accumulate) {
        x0 = hn::Add(hn::LoadU(d, cr), x0);
        x1 = hn::Add(hn::LoadU(d, cr + L), x1);
      }
      if (bias) {
        x0 = hn::Add(x0, bias0);
        x1 = hn::Add(x1, bias1);
      }
      hn::StoreU(x0, d, cr);
      hn::StoreU(x1, d, cr + L);
    }
    return;
  }
  // Edge tile: ncols < NR valid columns, masked loads and stores.
  const size_t n0 = std::min(ncols, L);
  const size_t n1 = ncols - n0;  // 0 .. L-1
  VF bias0 = hn::Zero(d), bias1 = hn::Zero(d);
  if (bias) {
    bias0 = n0 == L ? hn::LoadU(d, bias) : LoadN(d, bias, n0);
    if (n1) bias1 = LoadN(d, bias + L, n1);
  }
  for (size_t r = 0; r < MR; ++r) {
    float* HWY_RESTRICT cr = c + r * ldc;
    VF x0 = acc0[r], x1 = acc1[r];
    if (n0 == L) {
      if (accumulate) x0 = hn::Add(hn::LoadU(d, cr), x0);
      if (bias) x0 = hn::Add(x0, bias0);
      hn::StoreU(x0, d, cr);
    } else {
      if (accumulate) x0 = hn::Add(LoadN(d, cr, n0), x0);
      if (bias) x0 = hn::Add(x0, bias0);
      StoreN(d, x0, cr, n0);
    }
    if (n1) {
      if (accumulate) x1 = hn::Add(LoadN(d, cr + L, n1), x1);
      if (bias) x1 = hn::Add(x1, bias1);
      StoreN(d, x1, cr + L, n1);
    }
  }
}

using MicroFn = void (*)(const float*, const float*, size_t, float*, size_t, size_t, bool,
                         const float*, const float*, size_t);

template <size_t... I>
HWY_INLINE const MicroFn* MicroTable(std::index_sequence<I...>) {
  static const MicroFn table[] = {nullptr, &MicroTile<I + 1>...};
  return table;
}
// kernels[h] handles tiles of h rows, 1 <= h <= kMaxMR.
HWY_INLINE const MicroFn* MicroKernels() {
  return MicroTable(std::make_index_sequence<kMaxMR>());
}

// The activation kAct of a vector (Erf-inl.h's evaluations).
template <Activation kAct>
HWY_INLINE VF Activate(DF d, VF x) {
  if constexpr (kAct == Activation::kRelu) return Relu(d, x);
  if constexpr (kAct == Activation::kGelu) return GeluErf(d, x);
  if constexpr (kAct == Activation::kGeluTanh) return GeluTanh(d, x);
  if constexpr (kAct == Activation::kSilu) return Silu(d, x);
  return x;
}

// x → act(x) (+ residual) over `rows` rows of `ncols` columns of C, in place.
template <Activation kAct>
HWY_NOINLINE void EpilogueRows(float* HWY_RESTRICT c, size_t ldc, size_t rows, size_t ncols,
                               const float* HWY_RESTRICT res, size_t ldr) {
  const DF d;
  const size_t L = hn::Lanes(d);
  auto apply = [&](VF x) HWY_ATTR { return Activate<kAct>(d, x); };
  for (size_t r = 0; r < rows; ++r) {
    float* HWY_RESTRICT cr = c + r * ldc;
    const float* HWY_RESTRICT rr = res ? res + r * ldr : nullptr;
    size_t j = 0;
    for (; j + L <= ncols; j += L) {
      VF x = apply(hn::LoadU(d, cr + j));
      if (rr) x = hn::Add(x, hn::LoadU(d, rr + j));
      hn::StoreU(x, d, cr + j);
    }
    if (j < ncols) {
      const size_t n = ncols - j;
      VF x = apply(LoadN(d, cr + j, n));
      if (rr) x = hn::Add(x, LoadN(d, rr + j, n));
      StoreN(d, x, cr + j, n);
    }
  }
}

HWY_INLINE void Epilogue(Activation act, float* c, size_t ldc, size_t rows, size_t ncols,
                         const float* res, size_t ldr) {
  switch (act) {
    case Activation::kNone:
      if (res) EpilogueRows<Activation::kNone>(c, ldc, rows, ncols, res, ldr);
      return;
    case Activation::kRelu:
      return EpilogueRows<Activation::kRelu>(c, ldc, rows, ncols, res, ldr);
    case Activation::kGelu:
      return EpilogueRows<Activation::kGelu>(c, ldc, rows, ncols, res, ldr);
    case Activation::kGeluTanh:
      return EpilogueRows<Activation::kGeluTanh>(c, ldc, rows, ncols, res, ldr);
    case Activation::kSilu:
      return EpilogueRows<Activation::kSilu>(c, ldc, rows, ncols, res, ldr);
  }
}

// x → (scale·x)·f'(pre) over `rows` rows of `ncols` columns of C, in place
// (GemmEpilogue::derivative): the bits of a scale, then activationGrad.
template <Activation kAct>
HWY_NOINLINE void DerivativeRows(float* HWY_RESTRICT c, size_t ldc, size_t rows, size_t ncols,
                                 const float* HWY_RESTRICT pre, size_t ldp, float scale) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const VF s = hn::Set(d, scale);
  const bool scaled = scale != 1.0f;
  auto apply = [&](VF x, VF p) HWY_ATTR {
    if (scaled) x = hn::Mul(x, s);
    if constexpr (kAct == Activation::kRelu) return hn::Mul(x, ReluDerivative(d, p));
    if constexpr (kAct == Activation::kGelu) return hn::Mul(x, GeluErfDerivative(d, p));
    if constexpr (kAct == Activation::kSilu) return hn::Mul(x, SiluDerivative(d, p));
    return hn::Mul(x, GeluTanhDerivative(d, p));
  };
  for (size_t r = 0; r < rows; ++r) {
    float* HWY_RESTRICT cr = c + r * ldc;
    const float* HWY_RESTRICT pr = pre + r * ldp;
    size_t j = 0;
    for (; j + L <= ncols; j += L)
      hn::StoreU(apply(hn::LoadU(d, cr + j), hn::LoadU(d, pr + j)), d, cr + j);
    if (j < ncols) {
      const size_t n = ncols - j;
      StoreN(d, apply(LoadN(d, cr + j, n), LoadN(d, pr + j, n)), cr + j, n);
    }
  }
}

// The epilogue of GemmEpilogue `ep` on a stored block of C whose first row
// is `row` and first column `j0`.
HWY_INLINE void ApplyEpilogue(const GemmEpilogue& ep, size_t N, float* c, size_t ldc, size_t row,
                              size_t j0, size_t rows, size_t ncols) {
  if (ep.derivative != Activation::kNone) {
    const size_t ldp = ep.ldp ? ep.ldp : N;
    const float* pre = ep.pre + row * ldp + j0;
    switch (ep.derivative) {
      case Activation::kRelu:
        return DerivativeRows<Activation::kRelu>(c, ldc, rows, ncols, pre, ldp, ep.scale);
      case Activation::kGelu:
        return DerivativeRows<Activation::kGelu>(c, ldc, rows, ncols, pre, ldp, ep.scale);
      case Activation::kSilu:
        return DerivativeRows<Activation::kSilu>(c, ldc, rows, ncols, pre, ldp, ep.scale);
      default:
        return DerivativeRows<Activation::kGeluTanh>(c, ldc, rows, ncols, pre, ldp, ep.scale);
    }
  }
  const size_t ldr = ep.ldr ? ep.ldr : N;
  Epilogue(ep.activation, c, ldc, rows, ncols, ep.residual ? ep.residual + row * ldr + j0 : nullptr,
           ldr);
}

// Loads the first n <= Lanes floats of p (zeros in the other lanes).
HWY_INLINE VF LoadUpTo(DF d, const float* HWY_RESTRICT p, size_t n) {
  return n == hn::Lanes(d) ? hn::LoadU(d, p) : LoadN(d, p, n);
}
HWY_INLINE void StoreUpTo(DF d, VF v, float* HWY_RESTRICT p, size_t n) {
  if (n == hn::Lanes(d))
    hn::StoreU(v, d, p);
  else
    StoreN(d, v, p, n);
}

// A paired panel's tile, stored: `s` holds its rows × NR partial sums (the
// panel's two vectors per row), `row` is the tile's first row of C.
//   rotary: x0 (columns c0..) and x1 (c1 = c0 + half..) plus bias, rotated
//           by the angle of pair i = c0 % headDim at the row's position;
//   gated:  act(x0 + bias0)·(x1 + bias1) to C's columns c0..
struct PairTile {
  const float* s;
  size_t rows, row;
  PanelColumns cols;
};

HWY_NOINLINE void RotaryTile(const PairTile& t, const GemmEpilogue& ep, const GemmPairs& pairs,
                             const float* HWY_RESTRICT cosT, const float* HWY_RESTRICT sinT,
                             float* HWY_RESTRICT C, size_t ldc) {
  const DF d;
  const size_t L = hn::Lanes(d), n = t.cols.n0, half = pairs.headDim / 2;
  const size_t i = t.cols.c0 % pairs.headDim;
  VF b0 = hn::Zero(d), b1 = hn::Zero(d);
  if (ep.bias) {
    b0 = LoadUpTo(d, ep.bias + t.cols.c0, n);
    b1 = LoadUpTo(d, ep.bias + t.cols.c1, n);
  }
  for (size_t r = 0; r < t.rows; ++r) {
    const size_t pos = (t.row + r) % ep.seqLen;
    const VF c = LoadUpTo(d, cosT + pos * half + i, n), sn = LoadUpTo(d, sinT + pos * half + i, n);
    VF x0 = hn::Load(d, t.s + r * 2 * L), x1 = hn::Load(d, t.s + r * 2 * L + L);
    if (ep.bias) {
      x0 = hn::Add(x0, b0);
      x1 = hn::Add(x1, b1);
    }
    // As transfuse.rotary rounds it: each product, then the sum.
    const VF y0 = hn::Sub(hn::Mul(x0, c), hn::Mul(x1, sn));
    const VF y1 = hn::Add(hn::Mul(x1, c), hn::Mul(x0, sn));
    float* cr = C + (t.row + r) * ldc;
    StoreUpTo(d, y0, cr + t.cols.c0, n);
    StoreUpTo(d, y1, cr + t.cols.c1, n);
  }
}

template <Activation kAct>
HWY_NOINLINE void GatedTile(const PairTile& t, const float* HWY_RESTRICT bias,
                            float* HWY_RESTRICT C, size_t ldc) {
  const DF d;
  const size_t L = hn::Lanes(d), n = t.cols.n0;
  VF b0 = hn::Zero(d), b1 = hn::Zero(d);
  if (bias) {
    b0 = LoadUpTo(d, bias + t.cols.c0, n);
    b1 = LoadUpTo(d, bias + t.cols.c1, n);
  }
  for (size_t r = 0; r < t.rows; ++r) {
    VF x0 = hn::Load(d, t.s + r * 2 * L), x1 = hn::Load(d, t.s + r * 2 * L + L);
    if (bias) {
      x0 = hn::Add(x0, b0);
      x1 = hn::Add(x1, b1);
    }
    StoreUpTo(d, hn::Mul(Activate<kAct>(d, x0), x1), C + (t.row + r) * ldc + t.cols.c0, n);
  }
}

HWY_INLINE void GatedTileOf(Activation act, const PairTile& t, const float* bias, float* C,
                            size_t ldc) {
  switch (act) {
    case Activation::kNone: return GatedTile<Activation::kNone>(t, bias, C, ldc);
    case Activation::kRelu: return GatedTile<Activation::kRelu>(t, bias, C, ldc);
    case Activation::kGelu: return GatedTile<Activation::kGelu>(t, bias, C, ldc);
    case Activation::kGeluTanh: return GatedTile<Activation::kGeluTanh>(t, bias, C, ldc);
    case Activation::kSilu: return GatedTile<Activation::kSilu>(t, bias, C, ldc);
  }
}

// dst[c·dstStride + r] = src[r·srcStride + c] for r < rows, c < cols: the
// transposing copies of packing (transposed A, transposed B). On AVX2 and
// AVX-512, whole 8×8 blocks go through eight 256-bit vectors (three rounds
// of interleaves, 24 shuffles per 64 floats, instead of 64 scalar loads and
// stores whose stores each touch another cache line); the edges are scalar.
HWY_INLINE void TransposeCopy(const float* HWY_RESTRICT src, size_t srcStride, size_t rows,
                              size_t cols, float* HWY_RESTRICT dst, size_t dstStride) {
  size_t r0 = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  const hn::Full256<float> d8;
  const hn::Full256<double> d4;
  using V8 = hn::Vec<decltype(d8)>;
  auto lo64 = [&](V8 a, V8 b) HWY_ATTR {
    return hn::BitCast(d8, hn::InterleaveLower(hn::BitCast(d4, a), hn::BitCast(d4, b)));
  };
  auto hi64 = [&](V8 a, V8 b) HWY_ATTR {
    return hn::BitCast(d8, hn::InterleaveUpper(d4, hn::BitCast(d4, a), hn::BitCast(d4, b)));
  };
  for (; r0 + 8 <= rows; r0 += 8) {
    size_t c0 = 0;
    for (; c0 + 8 <= cols; c0 += 8) {
      const float* s = src + r0 * srcStride + c0;
      V8 v[8];
      for (size_t j = 0; j < 8; ++j) v[j] = hn::LoadU(d8, s + j * srcStride);
      // t: pairs of rows interleaved per 128-bit block; u: quads; then the
      // blocks' halves joined: column c of the block is row c of the result.
      V8 t[8], u[8];
      for (size_t j = 0; j < 8; j += 2) {
        t[j] = hn::InterleaveLower(v[j], v[j + 1]);
        t[j + 1] = hn::InterleaveUpper(d8, v[j], v[j + 1]);
      }
      for (size_t j = 0; j < 8; j += 4) {
        u[j] = lo64(t[j], t[j + 2]);
        u[j + 1] = hi64(t[j], t[j + 2]);
        u[j + 2] = lo64(t[j + 1], t[j + 3]);
        u[j + 3] = hi64(t[j + 1], t[j + 3]);
      }
      float* o = dst + c0 * dstStride + r0;
      for (size_t c = 0; c < 4; ++c) {
        hn::StoreU(hn::ConcatLowerLower(d8, u[c + 4], u[c]), d8, o + c * dstStride);
        hn::StoreU(hn::ConcatUpperUpper(d8, u[c + 4], u[c]), d8, o + (c + 4) * dstStride);
      }
    }
    for (; c0 < cols; ++c0)
      for (size_t r = r0; r < r0 + 8; ++r) dst[c0 * dstStride + r] = src[r * srcStride + c0];
  }
#endif
  // The rest (all of it on targets without 256-bit vectors): blocks of 8
  // rows, so the writes stay in few cache lines.
  for (; r0 < rows; r0 += 8) {
    const size_t rn = std::min<size_t>(8, rows - r0);
    for (size_t c = 0; c < cols; ++c)
      for (size_t r = r0; r < r0 + rn; ++r) dst[c * dstStride + r] = src[r * srcStride + c];
  }
}

// Packs rows [i0, i0+mc) × k-block [k0, k0+kb) of A: row i0 + r goes to
// dst[r·kAStride + k] = A(i0 + r, k0 + k) (a tile of h rows starting at row
// r0 is then dst + r0·kAStride). Row-major A is a copy per row; transposed A
// (A(i,k) = A[k·lda + i]) a transposing copy.
HWY_INLINE void PackA(const float* HWY_RESTRICT A, size_t lda, bool transA, size_t i0,
                      size_t mc, size_t k0, size_t kb, float* HWY_RESTRICT dst) {
  if (!transA) {  // A(i,k) = A[i·lda + k]
    for (size_t r = 0; r < mc; ++r)
      std::memcpy(dst + r * kAStride, A + (i0 + r) * lda + k0, kb * sizeof(float));
    return;
  }
  TransposeCopy(A + k0 * lda + i0, lda, kb, mc, dst, kAStride);
}

// Splits `rows` rows into the fewest tiles of <= kMaxMR rows, as evenly as
// possible; returns the count.
HWY_INLINE size_t SplitTiles(size_t rows, size_t* heights) {
  const size_t n = (rows + kMaxMR - 1) / kMaxMR;
  for (size_t t = 0; t < n; ++t) heights[t] = rows / n + (t < rows % n ? 1 : 0);
  return n;
}

// Per-thread packed A, grown (never shrunk) to the largest block seen: no
// allocation per call in steady state. It remembers which row block of which
// call it holds, so consecutive work units of one row block pack A once.
struct ScratchA {
  hwy::AlignedFreeUniquePtr<float[]> p;
  size_t size = 0;
  uint64_t call = 0;  // 0: holds nothing
  size_t i0 = 0;
  float* get(size_t floats) {
    if (size < floats) {
      p = hwy::AllocateAligned<float>(floats);
      size = floats;
      call = 0;
    }
    return p.get();
  }
};
HWY_INLINE ScratchA& ThreadScratchA() {
  static thread_local ScratchA scratch;
  return scratch;
}
// Distinguishes calls (A may change between calls at the same address).
inline std::atomic<uint64_t> gCallCounter{0};

// One pass over C: the k range [k0, k1) of the product (a K chunk, see
// KChunks; all of K for most products).
struct Problem {
  size_t M, N, K;
  const float* A;
  size_t lda;
  bool transA;
  const PackedB* B;
  float* C;
  size_t ldc;
  GemmEpilogue ep;
  uint64_t call;    // unique per pass, > 0
  size_t k0, k1;    // the pass's k range (multiples of kKc but for k1 = K)
  bool accumulate;  // C holds the sum over [0, k0) (an earlier chunk's)
  bool final;       // k1 = K: the bias and the epilogue are applied
  size_t nkb;       // k-blocks of kKc in [k0, k1)
  size_t panels;    // B panels
  const float* cosT = nullptr;  // rotary pairs: rotaryTableFor's
  const float* sinT = nullptr;
};

// Per-thread partial sums of a paired panel's row block (rows × NR).
HWY_INLINE float* ThreadPairStrip(size_t floats) {
  static thread_local hwy::AlignedFreeUniquePtr<float[]> strip;
  static thread_local size_t size = 0;
  if (size < floats) {
    strip = hwy::AllocateAligned<float>(floats);
    size = floats;
  }
  return strip.get();
}

// Stores a paired panel's tile (PairTile) by the pairs' epilogue.
HWY_INLINE void StorePairTile(const Problem& P, const PairTile& t) {
  if (P.B->pairs.kind == GemmPairs::Kind::kRotary)
    RotaryTile(t, P.ep, P.B->pairs, P.cosT, P.sinT, P.C, P.ldc);
  else
    GatedTileOf(P.ep.activation, t, P.ep.bias, P.C, P.ldc);
}

// The K chunks to run a product in. A work unit packs A of its row block
// for all of its K (kABudget), so a long K leaves few rows per block (K =
// 8000: 30), and B is read from L3 once per row block; cutting K into
// chunks gives taller blocks for one more read and write of C per chunk.
// The count is the one with the least weighted traffic, in floats:
// kCPassWeight·(c - 1)·2·M·N for C plus blocks(c)·K·N for B. A float of C
// re-read weighs more than one of B: B streams through in panels that are
// prefetched ahead, C is read back tile by tile (measured, one thread,
// AVX3: 2976×256×8000, B 8 MB, 4 chunks: +5%; 8000×256×2976, C 8 MB, 2
// chunks under an equal weight: -4 to -11%). Chunks start at multiples of
// kKc, so the k-blocks, and with them the bits of C, are those of one pass.
constexpr double kCPassWeight = 8.0;
HWY_INLINE size_t KChunks(size_t M, size_t N, size_t nkb) {
  size_t best = 1;
  double bestCost = 0.0;
  for (size_t c = 1; c <= nkb; ++c) {
    const size_t perChunk = (nkb + c - 1) / c;
    const size_t mc = std::max(kMaxMR, std::min(kMc, kABudget / (perChunk * kAStride)));
    const double cost = kCPassWeight * static_cast<double>(c - 1) * 2.0 * M * N +
                        static_cast<double>((M + mc - 1) / mc) * nkb * kKc * N;
    if (c == 1 || cost < bestCost) {
      best = c;
      bestCost = cost;
    }
    if (mc == kMc) break;  // more chunks only add C traffic
  }
  return best;
}

// One work unit: C rows [i0, i0+mc) × panels [p0, p1) (all of K). Loop nest:
//   pack A of the row block for every k-block (stays in L2; skipped when
//   this thread's scratch already holds it)
//   panel (K×NR of B, read from L3/memory once per row block)
//     k-block (Kc×NR of B in L1)
//       tile (<= MR rows: the micro-kernel; the C strip of the panel,
//             rows×NR, stays in L1/L2 across k-blocks)
// Each tile prefetches a slice of the next B sub-panel into L2.
HWY_INLINE void GemmUnit(const Problem& P, size_t i0, size_t mc, size_t p0, size_t p1) {
  const PackedB& B = *P.B;
  const size_t nr = B.nr, K = P.K, nkb = P.nkb;
  const MicroFn* kernels = MicroKernels();
  ScratchA& scratch = ThreadScratchA();
  float* pa = scratch.get(mc * nkb * kAStride);
  if (scratch.call != P.call || scratch.i0 != i0) {
    for (size_t kbi = 0; kbi < nkb; ++kbi) {
      const size_t k0 = P.k0 + kbi * kKc;
      PackA(P.A, P.lda, P.transA, i0, mc, k0, std::min(kKc, P.k1 - k0), pa + kbi * mc * kAStride);
    }
    scratch.call = P.call;
    scratch.i0 = i0;
  }
  size_t heights[kMc + 1];  // tile heights of the row block
  const size_t ntiles = SplitTiles(mc, heights);
  const bool hasEpilogue = P.final && (P.ep.activation != Activation::kNone || P.ep.residual ||
                                       P.ep.derivative != Activation::kNone);
  const size_t lineFloats = 64 / sizeof(float);
  auto subPanel = [&](size_t p, size_t k0) { return B.data.get() + p * K * nr + k0 * nr; };

  for (size_t p = p0; p < p1; ++p) {
    const PanelColumns cols = panelColumns(B.pairs, P.N, nr / 2, p);
    const size_t j0 = cols.c0;
    // A paired panel sums into the thread's strip, then stores by its pairs.
    float* strip = cols.paired ? ThreadPairStrip(mc * nr) : nullptr;
    const size_t ncols = cols.paired ? nr : cols.n0 + cols.n1;
    for (size_t kbi = 0; kbi < nkb; ++kbi) {
      const size_t k0 = P.k0 + kbi * kKc, kb = std::min(kKc, P.k1 - k0);
      const bool first = kbi == 0 && !P.accumulate, last = kbi + 1 == nkb;
      const float* pb = subPanel(p, k0);
      // The sub-panel used next: the next k-block of this panel (contiguous:
      // panel-major layout), else the next panel's first.
      const float* next = nullptr;
      size_t nextLines = 0;
      if (!last) {
        next = pb + kb * nr;
        nextLines = std::min(kKc, P.k1 - k0 - kb) * nr / lineFloats;
      } else if (p + 1 < P.panels) {  // beyond p1: likely this thread's next unit
        next = subPanel(p + 1, P.k0);
        nextLines = std::min(kKc, P.k1 - P.k0) * nr / lineFloats;
      }
      const size_t slice = (nextLines + ntiles - 1) / ntiles;
      const float* bias =
          last && P.final && P.ep.bias && !strip ? P.ep.bias + j0 : nullptr;
      const float* ta = pa + kbi * mc * kAStride;
      size_t row = i0;
      for (size_t t = 0; t < ntiles; ++t) {
        const size_t h = heights[t];
        float* c = strip ? strip + (row - i0) * nr : P.C + row * P.ldc + j0;
        const size_t ldc = strip ? nr : P.ldc;
        const size_t done = std::min(nextLines, t * slice);
        kernels[h](ta, pb, kb, c, ldc, ncols, !first, bias, next + done * lineFloats,
                   std::min(slice, nextLines - done));
        if (last && strip)
          StorePairTile(P, PairTile{c, h, row, cols});
        else if (last && hasEpilogue)
          ApplyEpilogue(P.ep, P.N, c, P.ldc, row, j0, h, ncols);
        ta += h * kAStride;
        row += h;
      }
    }
  }
}

// One pass (Problem) of GemmPacked over the pool.
HWY_INLINE void RunPass(const Problem& P, rt::ThreadPool* pool) {
  const size_t M = P.M, N = P.N, K = P.k1 - P.k0, nkb = P.nkb;
  const size_t panels = P.panels;
  size_t T = pool ? static_cast<size_t>(pool->numThreads()) : 1;
  // Below ~1M multiply-adds (about 10 µs on one core) a second thread gains
  // less than the hand-off costs (waking a sleeping worker alone is ~50 µs).
  // With few rows (a decode step) the GEMM streams B from memory, 4 bytes
  // per multiply-add of each row, and one core cannot draw the machine's
  // bandwidth: there B's size is the work (kStreamedMacs per element).
  const double macs = static_cast<double>(M) * N * K;
  const double work = std::max(macs, kStreamedMacs * static_cast<double>(N) * K);
  T = std::min(T, static_cast<size_t>(std::max(1.0, work / kMinMacsPerThread)));

  // Row blocks: the fewest whose packed A (all of K) fits the L2 budget, more
  // when there are too few panels to give T threads several units each.
  const size_t mcMax = std::max(kMaxMR, std::min(kMc, kABudget / (nkb * kAStride)));
  size_t nblocks = (M + mcMax - 1) / mcMax;
  if (T > 1 && nblocks * panels < 4 * T) {
    const size_t maxBlocks = (M + kMaxMR - 1) / kMaxMR;  // one tile each
    nblocks = std::min(maxBlocks, std::max(nblocks, (4 * T + panels - 1) / panels));
  }
  auto blockRows = [&](size_t b, size_t* i0) {
    *i0 = M * b / nblocks;
    return M * (b + 1) / nblocks - *i0;
  };
  if (T == 1) {
    for (size_t b = 0; b < nblocks; ++b) {
      size_t i0;
      const size_t mc = blockRows(b, &i0);
      if (mc) GemmUnit(P, i0, mc, 0, panels);
    }
    return;
  }

  // Threads: thread t owns one region of C, a range of rows (when each
  // thread gets >= kMinRowsPerThread rows) or else a range of panels for all
  // rows, cut into row blocks as above. It computes its region a few panels
  // at a time, in order (row block by row block), from the front; a thread
  // that has finished its own region steals from the back of the others'.
  // Why: units of one region share the thread's packed A, two threads meet
  // in C only at region edges and one steal point (threads writing
  // interleaved panel runs of the same rows shared C's cache lines at every
  // run boundary when C is not 64-byte aligned: 4% at 64×512×512), and a
  // thread slowed by another process just loses more of its region to the
  // others. Which thread computes a unit never changes its result.
  const bool byRows = M >= kMinRowsPerThread * T;
  struct Region {
    size_t row0, rows, nb, q0, np;  // rows, its row blocks, panels [q0, q0+np)
    size_t chunk;                   // panels per claim
  };
  struct alignas(64) Cursor {
    // front | back << 32, in items (block·np + panel; < 2^32 for any C that
    // fits in memory: an item is >= 14×32 floats of C).
    std::atomic<uint64_t> v;
  };
  constexpr size_t kMaxThreads = 256;
  T = std::min(T, kMaxThreads);
  Region regions[kMaxThreads];
  Cursor cursors[kMaxThreads];
  for (size_t t = 0; t < T; ++t) {
    Region& r = regions[t];
    if (byRows) {
      r.row0 = M * t / T;
      r.rows = M * (t + 1) / T - r.row0;
      r.nb = (r.rows + mcMax - 1) / mcMax;
      r.q0 = 0;
      r.np = panels;
    } else {
      r.row0 = 0;
      r.rows = M;
      r.nb = nblocks;
      r.q0 = panels * t / T;
      r.np = panels * (t + 1) / T - r.q0;
    }
    const size_t blockRows = r.nb ? (r.rows + r.nb - 1) / r.nb : 1;
    r.chunk = std::max<size_t>(1, kMinUnitMacs / (blockRows * K * P.B->nr));
    const uint64_t items = static_cast<uint64_t>(r.nb) * r.np;
    cursors[t].v.store(items << 32, std::memory_order_relaxed);
  }
  // Computes items [f, e) of region t (within one row block).
  auto compute = [&](size_t t, size_t f, size_t e) {
    const Region& r = regions[t];
    const size_t b = f / r.np;
    const size_t i0 = r.row0 + r.rows * b / r.nb, i1 = r.row0 + r.rows * (b + 1) / r.nb;
    GemmUnit(P, i0, i1 - i0, r.q0 + f % r.np, r.q0 + (e - 1) % r.np + 1);
  };
  // Claims up to a chunk from the front (own) or back (steal) of region t,
  // not crossing a row block; false when it is empty.
  auto claim = [&](size_t t, bool front, size_t* f, size_t* e) {
    const Region& r = regions[t];
    uint64_t cur = cursors[t].v.load(std::memory_order_relaxed);
    for (;;) {
      const size_t lo = cur & 0xffffffffu, hi = cur >> 32;
      if (lo >= hi) return false;
      size_t a, z;
      if (front) {
        a = lo;
        z = std::min({hi, lo + r.chunk, (lo / r.np + 1) * r.np});
      } else {
        z = hi;
        a = std::max({lo, hi - std::min(hi, r.chunk), (hi - 1) / r.np * r.np});
      }
      const uint64_t next = front ? (uint64_t{hi} << 32) | z : (uint64_t{a} << 32) | lo;
      if (cursors[t].v.compare_exchange_weak(cur, next, std::memory_order_relaxed)) {
        *f = a;
        *e = z;
        return true;
      }
    }
  };
  pool->parallelFor(static_cast<int64_t>(T), [&](int64_t tb, int64_t te, int) {
    for (int64_t ti = tb; ti < te; ++ti) {
      const size_t t = static_cast<size_t>(ti);
      size_t f, e;
      while (claim(t, true, &f, &e)) compute(t, f, e);
      for (size_t k = 1; k < T; ++k) {
        const size_t v = (t + k) % T;
        while (claim(v, false, &f, &e)) compute(v, f, e);
      }
    }
  });
}

}  // namespace gemm

// ---- entry points (exported by Gemm.cpp) ----

HWY_NOINLINE void GemmKernelShape(size_t* mr, size_t* nr, size_t* kc, size_t* mc,
                                  int64_t* target) {
  *target = HWY_TARGET;
  *mr = gemm::kMaxMR;
  *nr = gemm::NR();
  *kc = gemm::kKc;
  *mc = gemm::kMc;
}

// Fills panels [p0, p1) of out (k, n, nr, npad, pairs set; data allocated
// by the caller with k·npad floats) from B: panel p's vector v holds the B
// columns panelColumns gives it, k-major (data[p·k·nr + k·nr + v·L + j]),
// zeros past them. Disjoint panel ranges may be packed concurrently.
HWY_NOINLINE void PackBInto(const float* HWY_RESTRICT B, size_t ldb, bool transB,
                            PackedB* out, size_t p0, size_t p1) {
  using namespace gemm;
  const DF d;
  const size_t L = hn::Lanes(d);
  const size_t K = out->k, N = out->n, nr = out->nr;
  float* HWY_RESTRICT data = out->data.get();
  // Blocks of 256 k so that transposed B is read in cache-friendly strips.
  for (size_t k0 = 0; k0 < K; k0 += 256) {
    const size_t kb = std::min<size_t>(256, K - k0);
    for (size_t p = p0; p < p1; ++p) {
      const PanelColumns cols = panelColumns(out->pairs, N, L, p);
      float* HWY_RESTRICT dst = data + p * K * nr + k0 * nr;
      const size_t first[2] = {cols.c0, cols.c1}, count[2] = {cols.n0, cols.n1};
      if (transB) {  // B(k,j) = B[j·ldb + k]
        if (cols.n0 + cols.n1 < nr) std::memset(dst, 0, kb * nr * sizeof(float));
        for (size_t v = 0; v < 2; ++v)
          if (count[v]) TransposeCopy(B + first[v] * ldb + k0, ldb, count[v], kb, dst + v * L, nr);
      } else {  // B(k,j) = B[k·ldb + j]
        for (size_t k = 0; k < kb; ++k) {
          const float* HWY_RESTRICT src = B + (k0 + k) * ldb;
          float* HWY_RESTRICT row = dst + k * nr;
          for (size_t v = 0; v < 2; ++v) {
            const size_t n = count[v];
            const VF x = n == L ? hn::LoadU(d, src + first[v])
                         : n    ? LoadN(d, src + first[v], n)
                                : hn::Zero(d);
            hn::Store(x, d, row + v * L);
          }
        }
      }
    }
  }
}

// Packs all of B into *out for this target (Gemm.h's packB and repackB):
// out's buffer is reused when it holds B's shape at this target's panel
// width, else (re)allocated. Panels are packed on the pool.
HWY_NOINLINE void PackBRun(const float* B, size_t K, size_t N, size_t ldb, bool transB,
                           const GemmPairs* pairs, PackedB* out, rt::ThreadPool* pool) {
  const size_t nr = gemm::NR();
  if (!out->data || out->k != K || out->n != N || out->nr != nr || !(out->pairs == *pairs)) {
    PackedB fresh;
    fresh.k = K;
    fresh.n = N;
    fresh.nr = nr;
    fresh.pairs = *pairs;
    fresh.npad = panelCount(*pairs, N, nr / 2) * nr;
    if (const size_t bytes = K * fresh.npad * sizeof(float))
      fresh.data.reset(static_cast<float*>(hwy::AllocateAlignedBytes(bytes, nullptr, nullptr)));
    *out = std::move(fresh);
  }
  if (!out->data) return;
  parallelFor(pool, out->npad / nr, /*grain=*/1,
              [&](size_t p0, size_t p1) { PackBInto(B, ldb, transB, out, p0, p1); });
}

// C = epilogue(A·B); B packed for this target (B.nr == gemm::NR()).
HWY_NOINLINE void GemmPacked(size_t M, size_t N, size_t K, const float* A, size_t lda,
                             bool transA, const PackedB* B, float* C, size_t ldc,
                             const GemmEpilogue* ep, rt::ThreadPool* pool) {
  using namespace gemm;
  if (M == 0 || N == 0) return;
  const bool paired = B->pairs.kind != GemmPairs::Kind::kNone;
  const float *cosT = nullptr, *sinT = nullptr;
  if (B->pairs.kind == GemmPairs::Kind::kRotary) {
    const RotaryTable& t = rotaryTableFor(ep->invFreq, B->pairs.headDim / 2, ep->positionOffset,
                                          std::min(M, ep->seqLen));
    cosT = t.cos.data();
    sinT = t.sin.data();
  }
  if (K == 0 && paired) {  // every pair tile from zero sums, a row at a time
    const size_t nr = NR();
    HWY_ALIGN float zeros[2 * hn::MaxLanes(DF())] = {};
    const Problem P{M, N, K, A, lda, transA, B, C, ldc, *ep, 0, 0, 0, false, true, 0,
                    panelCount(B->pairs, N, nr / 2), cosT, sinT};
    for (size_t p = 0; p < P.panels; ++p) {
      const PanelColumns cols = panelColumns(B->pairs, N, nr / 2, p);
      for (size_t i = 0; i < M; ++i) {
        if (cols.paired) {
          StorePairTile(P, PairTile{zeros, 1, i, cols});
        } else {  // a rotary product's plain columns: the bias or 0
          float* c = C + i * ldc + cols.c0;
          const size_t n = cols.n0 + cols.n1;
          if (ep->bias)
            std::memcpy(c, ep->bias + cols.c0, n * sizeof(float));
          else
            std::memset(c, 0, n * sizeof(float));
        }
      }
    }
    return;
  }
  if (K == 0) {  // C = act(bias or 0) + residual, or 0·f'(pre)
    for (size_t i = 0; i < M; ++i) {
      float* c = C + i * ldc;
      if (ep->bias)
        std::memcpy(c, ep->bias, N * sizeof(float));
      else
        std::memset(c, 0, N * sizeof(float));
    }
    ApplyEpilogue(*ep, N, C, ldc, 0, 0, M, N);
    return;
  }
  const size_t nkbAll = (K + kKc - 1) / kKc;
  // Paired panels keep their sums in a strip: all of K in one pass.
  const size_t chunks = paired ? 1 : KChunks(M, N, nkbAll);
  for (size_t c = 0, kb0 = 0; c < chunks; ++c) {
    const size_t kb1 = nkbAll * (c + 1) / chunks;
    const Problem P{M, N, K, A, lda, transA, B, C, ldc, *ep,
                    gCallCounter.fetch_add(1, std::memory_order_relaxed) + 1, kb0 * kKc,
                    std::min(K, kb1 * kKc), c > 0, c + 1 == chunks, kb1 - kb0,
                    B->npad / B->nr, cosT, sinT};
    RunPass(P, pool);
    kb0 = kb1;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace transfuse::kernels
HWY_AFTER_NAMESPACE();

#endif  // TRANSFUSE_KERNELS_GEMM_INL_H_ toggle guard
