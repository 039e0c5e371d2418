// CUDA fused attention forward, fp32 or bf16 storage (Attention.cuh).

#include "runtime/kernels/cuda/Attention.cuh"

#include "runtime/kernels/cuda/AttentionBf16.cuh"
#include "runtime/kernels/cuda/AttentionCommon.cuh"

#include <cmath>

namespace transfuse::cuda {
namespace {

using attention_detail::Strides;
using attention_detail::visibleKeys;

constexpr int kQueries = 32;     // queries per block
constexpr int kKeys = 32;        // keys per tile
constexpr int kPerQuery = 4;     // threads per query
constexpr int kThreads = kQueries * kPerQuery;
constexpr int kKeysPerThread = kKeys / kPerQuery;  // scores per thread per tile
constexpr int kMaxDim = 256;
constexpr int kOutPerThread = kMaxDim / kPerQuery;  // O accumulators per thread

template <class T>
struct Params {
  int B, H, G, Sq, Sk, D;  // G: query heads per K/V head
  const T *q, *k, *v;
  T* out;
  Strides qs, ks, vs, os;
  float scale;
  bool causal;
  const int32_t* keyLengths;
  const uint8_t* keyMask;
  attention_detail::Dropout dropout;
};

// The max (kMax) or the sum over the kPerQuery consecutive lanes of a query.
template <bool kMax>
__device__ float queryReduce(float v) {
  for (int offset = 1; offset < kPerQuery; offset *= 2) {
    const float o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = kMax ? fmaxf(v, o) : v + o;
  }
  return v;
}

template <class T>
__global__ void attentionKernel(Params<T> p) {
  extern __shared__ float smem[];
  const int D = p.D;
  float* qTile = smem;                 // [kQueries][D], scaled
  float* kTile = qTile + kQueries * D; // [kKeys][D]
  float* vTile = kTile + kKeys * D;    // [kKeys][D]
  float* pTile = vTile + kKeys * D;    // [kQueries][kKeys]

  const int b = blockIdx.x / p.H, h = blockIdx.x % p.H;  // x: up to 2^31 - 1 heads
  const int i0 = blockIdx.y * kQueries;
  const int t = threadIdx.x, row = t / kPerQuery, part = t % kPerQuery;
  const int i = i0 + row;
  const T* q = p.q + b * p.qs.batch + h * p.qs.head;
  const T* k = p.k + b * p.ks.batch + (h / p.G) * p.ks.head;
  const T* v = p.v + b * p.vs.batch + (h / p.G) * p.vs.head;

  for (int idx = t; idx < kQueries * D; idx += kThreads) {
    const int r = idx / D, d = idx % D;
    qTile[idx] = i0 + r < p.Sq ? toFloat(q[(size_t)(i0 + r) * p.qs.row + d]) * p.scale : 0.0f;
  }
  const int rowEnd = visibleKeys(p, b, i);
  // The block's last visible key: its last query's (visibility grows with i).
  const int blockEnd = visibleKeys(p, b, min(i0 + kQueries, p.Sq) - 1);

  float m = -INFINITY, l = 0.0f;
  float o[kOutPerThread];
#pragma unroll
  for (int u = 0; u < kOutPerThread; ++u) o[u] = 0.0f;

  for (int j0 = 0; j0 < blockEnd; j0 += kKeys) {
    __syncthreads();  // the previous tile is no longer read
    for (int idx = t; idx < kKeys * D; idx += kThreads) {
      const int r = idx / D, d = idx % D;
      const bool in = j0 + r < p.Sk;
      kTile[idx] = in ? toFloat(k[(size_t)(j0 + r) * p.ks.row + d]) : 0.0f;
      vTile[idx] = in ? toFloat(v[(size_t)(j0 + r) * p.vs.row + d]) : 0.0f;
    }
    __syncthreads();

    float s[kKeysPerThread];
    float tileMax = -INFINITY;
#pragma unroll
    for (int c = 0; c < kKeysPerThread; ++c) {
      const int jj = part * kKeysPerThread + c;
      float dot = 0.0f;
      for (int d = 0; d < D; ++d) dot = fmaf(qTile[row * D + d], kTile[jj * D + d], dot);
      const int j = j0 + jj;
      const bool masked = j >= rowEnd || (p.keyMask && !p.keyMask[(size_t)b * p.Sk + j]);
      s[c] = masked ? -INFINITY : dot;
      tileMax = fmaxf(tileMax, s[c]);
    }
    const float mNew = fmaxf(m, queryReduce<true>(tileMax));
    // Nothing visible yet: weights 0 and nothing to rescale.
    const float alpha = mNew == -INFINITY ? 1.0f : expf(m - mNew);
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < kKeysPerThread; ++c) {
      const float w = s[c] == -INFINITY ? 0.0f : expf(s[c] - mNew);
      float wd = w;  // through dropout: P·V uses the kept weights, l all of them
      if (p.dropout.on && w != 0.0f)
        wd = p.dropout.kept(p.H, p.Sq, p.Sk, b, h, i, j0 + part * kKeysPerThread + c)
                 ? w * p.dropout.keep
                 : 0.0f;
      pTile[row * kKeys + part * kKeysPerThread + c] = wd;
      sum += w;
    }
    l = l * alpha + queryReduce<false>(sum);
    m = mNew;
    __syncwarp();  // a query's weights are written and read by its own lanes
#pragma unroll
    for (int u = 0; u < kOutPerThread; ++u) o[u] *= alpha;
    // Only the keys this query sees: a masked key's V row (arena garbage,
    // NaN) must not reach O, even with weight 0.
    const int seen = min(kKeys, rowEnd - j0);
    for (int jj = 0; jj < seen; ++jj) {
      const float w = pTile[row * kKeys + jj];
      if (p.keyMask && !p.keyMask[(size_t)b * p.Sk + j0 + jj]) continue;
#pragma unroll
      for (int u = 0; u < kOutPerThread; ++u) {
        const int d = part + kPerQuery * u;
        if (d < D) o[u] = fmaf(w, vTile[jj * D + d], o[u]);
      }
    }
  }
  if (i >= p.Sq) return;
  T* out = p.out + b * p.os.batch + h * p.os.head + (size_t)i * p.os.row;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
  for (int u = 0; u < kOutPerThread; ++u) {
    const int d = part + kPerQuery * u;
    if (d < D) out[d] = fromFloat<T>(o[u] * inv);
  }
}

template <class T>
cudaError_t runAttention(const AttentionArgsOf<T>& a, cudaStream_t stream) {
  if (a.headDim == 0 || a.headDim > kMaxDim || a.heads % a.kvHeadCount() != 0)
    return cudaErrorInvalidValue;
  if (a.batch * a.heads * a.seqQ == 0) return cudaSuccess;
  if (!a.q.data || !a.out || (a.seqK > 0 && (!a.k.data || !a.v.data))) return cudaErrorInvalidValue;
  const size_t H = a.heads, D = a.headDim;
  Params<T> p;
  attention_detail::setCommon(p, a);
  p.B = static_cast<int>(a.batch);
  p.D = static_cast<int>(D);
  p.keyMask = a.keyMask;
  p.dropout = attention_detail::Dropout::of(a);
  const size_t shared = ((kQueries + 2 * kKeys) * D + kQueries * kKeys) * sizeof(float);
  if (shared > 48 * 1024) {  // beyond the default: opt in (sm_80 and later allow more)
    cudaError_t e = cudaFuncSetAttribute(attentionKernel<T>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(shared));
    if (e != cudaSuccess) return e;
  }
  const size_t tiles = (a.seqQ + kQueries - 1) / kQueries;
  if (tiles > 65535) return cudaErrorInvalidValue;  // gridDim.y's limit: Sq <= 2^21
  const dim3 grid(static_cast<unsigned>(a.batch * H), static_cast<unsigned>(tiles));
  attentionKernel<T><<<grid, kThreads, shared, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t attention(const AttentionArgsOf<float>& a, cudaStream_t stream) {
  return runAttention(a, stream);
}

cudaError_t attention(const AttentionArgsOf<bf16>& a, cudaStream_t stream) {
  if (attentionBf16Takes(a)) return attentionBf16(a, stream);
  return runAttention(a, stream);
}

}  // namespace transfuse::cuda
