// CUDA attention backward (Attention.cuh: attentionBackward).
//
// Three kernels, a warp per row, the lanes splitting D (lane d, d + 32,
// ...; D <= 256: 8 values per lane) and scores reduced by an xor butterfly
// (every lane gets the same bits):
//   stats   warp per query i: the online maximum m and l = Σ_j e^(s_ij - m)
//           give lse_i = m + log l, and Σ_j e^(s_ij - m)·dPd_ij / l gives
//           rowsum(dP ⊙ P)_i (dPd: dP through the dropout mask)
//   dQ      warp per query: dQ_i = Σ_j dS_ij·K_j, P_ij = e^(s_ij - lse_i)
//   dK, dV  warp per key: dV_j = Σ_i Pd_ij·dO_i, dK_j = Σ_i dS_ij·Q_i
// s_ij = scale·(Q_i·K_j) and dP_ij = dO_i·V_j are formed the same way in
// each kernel, so all three see the same bits of them.

#include "runtime/kernels/cuda/Attention.cuh"

#include "runtime/kernels/cuda/AttentionCommon.cuh"

#include <cmath>

namespace transfuse::cuda {
namespace {

using attention_detail::resolve;
using attention_detail::Strides;
using attention_detail::visibleKeys;

constexpr int kWarps = 4;  // rows per block
constexpr int kMaxPerLane = 8;  // D <= 256

struct Params {
  int B, H, G, Sq, Sk, D;  // G: query heads per K/V head
  const float *q, *k, *v, *g;
  float *dq, *dk, *dv;
  Strides qs, ks, vs, gs, dqs, dks, dvs;
  float scale;
  bool causal;
  const int32_t* keyLengths;
  const uint8_t* keyMask;
  attention_detail::Dropout dropout;
  float *lse, *rowDot;  // [B·H·Sq] each
};

__device__ float warpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// This lane's elements of a row of D: row[lane + 32·t] for t < kMaxPerLane.
__device__ void loadRow(const float* row, int D, float (&out)[kMaxPerLane]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int t = 0; t < kMaxPerLane; ++t) {
    const int d = lane + 32 * t;
    out[t] = d < D ? row[d] : 0.0f;
  }
}

__device__ void storeRow(float* row, int D, const float (&in)[kMaxPerLane]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int t = 0; t < kMaxPerLane; ++t) {
    const int d = lane + 32 * t;
    if (d < D) row[d] = in[t];
  }
}

// Σ_d a[d]·row[d], a held by the lanes, row read in place.
__device__ float dot(const float (&a)[kMaxPerLane], const float* row, int D) {
  const int lane = threadIdx.x % 32;
  float s = 0.0f;
#pragma unroll
  for (int t = 0; t < kMaxPerLane; ++t) {
    const int d = lane + 32 * t;
    if (d < D) s = fmaf(a[t], row[d], s);
  }
  return warpSum(s);
}

__device__ bool keyMasked(const Params& p, int b, int j) {
  return p.keyMask && p.keyMask[size_t(b) * p.Sk + j] == 0;
}

// The dropout factor of (b, h, i, j), the forward's draw: 1 without
// dropout, else `keep` or 0 (dropped).
__device__ float dropoutFactor(const Params& p, int b, int h, int i, int j) {
  if (!p.dropout.on) return 1.0f;
  return p.dropout.kept(p.H, p.Sq, p.Sk, b, h, i, j) ? p.dropout.keep : 0.0f;
}

// x (dP or P) through the dropout mask: 0 when dropped, else x·factor.
__device__ float dropped(float x, float factor) { return factor == 0.0f ? 0.0f : x * factor; }

// The warp's row (query or key) of [B, H, S]; false past the end.
__device__ bool warpRow(int S, int H, const Params& p, int* b, int* h, int* i) {
  const size_t row = size_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (row >= size_t(p.B) * H * S) return false;
  *i = static_cast<int>(row % S);
  *h = static_cast<int>(row / S % H);
  *b = static_cast<int>(row / (size_t(S) * H));
  return true;
}

__global__ void statsKernel(Params p) {
  int b, h, i;
  if (!warpRow(p.Sq, p.H, p, &b, &h, &i)) return;
  float q[kMaxPerLane], g[kMaxPerLane];
  loadRow(p.q + b * p.qs.batch + h * p.qs.head + i * p.qs.row, p.D, q);
  loadRow(p.g + b * p.gs.batch + h * p.gs.head + i * p.gs.row, p.D, g);
  const float* kb = p.k + b * p.ks.batch + (h / p.G) * p.ks.head;
  const float* vb = p.v + b * p.vs.batch + (h / p.G) * p.vs.head;
  float m = -INFINITY, l = 0.0f, acc = 0.0f;
  const int end = visibleKeys(p, b, i);
  for (int j = 0; j < end; ++j) {
    if (keyMasked(p, b, j)) continue;
    const float s = p.scale * dot(q, kb + j * p.ks.row, p.D);
    const float dp = dropped(dot(g, vb + j * p.vs.row, p.D), dropoutFactor(p, b, h, i, j));
    if (s > m) {
      const float alpha = expf(m - s);  // 0 for the first key
      l *= alpha;
      acc *= alpha;
      m = s;
    }
    const float e = expf(s - m);
    l += e;
    acc = fmaf(e, dp, acc);
  }
  if (threadIdx.x % 32 == 0) {
    const size_t r = (size_t(b) * p.H + h) * p.Sq + i;
    p.lse[r] = l > 0.0f ? m + logf(l) : -INFINITY;
    p.rowDot[r] = l > 0.0f ? acc / l : 0.0f;
  }
}

__global__ void queryGradKernel(Params p) {
  int b, h, i;
  if (!warpRow(p.Sq, p.H, p, &b, &h, &i)) return;
  float q[kMaxPerLane], g[kMaxPerLane], dq[kMaxPerLane] = {};
  loadRow(p.q + b * p.qs.batch + h * p.qs.head + i * p.qs.row, p.D, q);
  loadRow(p.g + b * p.gs.batch + h * p.gs.head + i * p.gs.row, p.D, g);
  const float* kb = p.k + b * p.ks.batch + (h / p.G) * p.ks.head;
  const float* vb = p.v + b * p.vs.batch + (h / p.G) * p.vs.head;
  const size_t r = (size_t(b) * p.H + h) * p.Sq + i;
  const float lse = p.lse[r], rowDot = p.rowDot[r];
  const int end = visibleKeys(p, b, i);
  const int lane = threadIdx.x % 32;
  for (int j = 0; j < end; ++j) {
    if (keyMasked(p, b, j)) continue;
    const float* kj = kb + j * p.ks.row;
    const float s = p.scale * dot(q, kj, p.D);
    const float dp = dropped(dot(g, vb + j * p.vs.row, p.D), dropoutFactor(p, b, h, i, j));
    const float ds = expf(s - lse) * (dp - rowDot) * p.scale;
#pragma unroll
    for (int t = 0; t < kMaxPerLane; ++t) {
      const int d = lane + 32 * t;
      if (d < p.D) dq[t] = fmaf(ds, kj[d], dq[t]);
    }
  }
  storeRow(p.dq + b * p.dqs.batch + h * p.dqs.head + i * p.dqs.row, p.D, dq);
}

__global__ void keyGradKernel(Params p) {
  int b, kh, j;  // a key of K/V head kh, read by query heads kh·G .. kh·G + G - 1
  if (!warpRow(p.Sk, p.H / p.G, p, &b, &kh, &j)) return;
  float k[kMaxPerLane], v[kMaxPerLane], dk[kMaxPerLane] = {}, dv[kMaxPerLane] = {};
  loadRow(p.k + b * p.ks.batch + kh * p.ks.head + j * p.ks.row, p.D, k);
  loadRow(p.v + b * p.vs.batch + kh * p.vs.head + j * p.vs.row, p.D, v);
  const int lane = threadIdx.x % 32;
  for (int h = kh * p.G; h < (kh + 1) * p.G && !keyMasked(p, b, j); ++h) {
    const float* qb = p.q + b * p.qs.batch + h * p.qs.head;
    const float* gb = p.g + b * p.gs.batch + h * p.gs.head;
    for (int i = 0; i < p.Sq; ++i) {
      if (j >= visibleKeys(p, b, i)) continue;
      const float* qi = qb + i * p.qs.row;
      const float* gi = gb + i * p.gs.row;
      // Q_i·K_j and dO_i·V_j: the same products and sums as the query-side
      // kernels' (lane d multiplies element d; the same butterfly).
      const float s = p.scale * dot(k, qi, p.D);
      const float dp = dot(v, gi, p.D);
      const size_t r = (size_t(b) * p.H + h) * p.Sq + i;
      const float prob = expf(s - p.lse[r]);
      const float factor = dropoutFactor(p, b, h, i, j);
      const float pd = dropped(prob, factor), dpd = dropped(dp, factor);
      const float ds = prob * (dpd - p.rowDot[r]) * p.scale;
#pragma unroll
      for (int t = 0; t < kMaxPerLane; ++t) {
        const int d = lane + 32 * t;
        if (d < p.D) {
          dv[t] = fmaf(pd, gi[d], dv[t]);
          dk[t] = fmaf(ds, qi[d], dk[t]);
        }
      }
    }
  }
  storeRow(p.dk + b * p.dks.batch + kh * p.dks.head + j * p.dks.row, p.D, dk);
  storeRow(p.dv + b * p.dvs.batch + kh * p.dvs.head + j * p.dvs.row, p.D, dv);
}

unsigned int blocksFor(size_t rows) {
  return static_cast<unsigned int>((rows + kWarps - 1) / kWarps);
}

}  // namespace

cudaError_t attentionBackward(const AttentionGradArgs& a, float* work, cudaStream_t stream) {
  const AttentionArgs& f = a.forward;
  const size_t B = f.batch, H = f.heads, Hkv = f.kvHeadCount(), Sq = f.seqQ, Sk = f.seqK;
  const size_t D = f.headDim;
  if (D == 0 || D > 32 * kMaxPerLane || H % Hkv != 0) return cudaErrorInvalidValue;
  if (B * H == 0 || (Sq == 0 && Sk == 0)) return cudaSuccess;
  if ((Sq && (!f.q.data || !a.grad.data || !a.dq.data || !work)) ||
      (Sk && (!f.k.data || !f.v.data || !a.dk.data || !a.dv.data)))
    return cudaErrorInvalidValue;
  Params p{};
  p.B = static_cast<int>(B);
  p.H = static_cast<int>(H);
  p.G = static_cast<int>(H / Hkv);
  p.Sq = static_cast<int>(Sq);
  p.Sk = static_cast<int>(Sk);
  p.D = static_cast<int>(D);
  p.q = f.q.data;
  p.k = f.k.data;
  p.v = f.v.data;
  p.g = a.grad.data;
  p.dq = a.dq.data;
  p.dk = a.dk.data;
  p.dv = a.dv.data;
  p.qs = resolve(f.q.batchStride, f.q.headStride, f.q.rowStride, H, Sq, D);
  p.ks = resolve(f.k.batchStride, f.k.headStride, f.k.rowStride, Hkv, Sk, D);
  p.vs = resolve(f.v.batchStride, f.v.headStride, f.v.rowStride, Hkv, Sk, D);
  p.gs = resolve(a.grad.batchStride, a.grad.headStride, a.grad.rowStride, H, Sq, D);
  p.dqs = resolve(a.dq.batchStride, a.dq.headStride, a.dq.rowStride, H, Sq, D);
  p.dks = resolve(a.dk.batchStride, a.dk.headStride, a.dk.rowStride, Hkv, Sk, D);
  p.dvs = resolve(a.dv.batchStride, a.dv.headStride, a.dv.rowStride, Hkv, Sk, D);
  p.scale = f.scale;
  p.causal = f.causal;
  p.keyLengths = f.keyLengths;
  p.keyMask = f.keyMask;
  p.dropout = attention_detail::Dropout::of(f);
  p.lse = work;
  p.rowDot = work + B * H * Sq;
  constexpr int kThreads = 32 * kWarps;
  if (Sq) {
    statsKernel<<<blocksFor(B * H * Sq), kThreads, 0, stream>>>(p);
    queryGradKernel<<<blocksFor(B * H * Sq), kThreads, 0, stream>>>(p);
  }
  if (Sk) keyGradKernel<<<blocksFor(B * Hkv * Sk), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace transfuse::cuda
