// CUDA fused attention forward on tensor cores, bf16 (AttentionBf16.cuh).

#include "runtime/kernels/cuda/AttentionBf16.cuh"

#include "runtime/kernels/cuda/AttentionCommon.cuh"

#include <mma.h>

#include <cmath>

namespace transfuse::cuda {
namespace {

using attention_detail::Strides;
using attention_detail::visibleKeys;

namespace wmma = nvcuda::wmma;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 16;                  // query rows per warp (one MMA tile)
constexpr int kQueries = kWarps * kRows;   // per block
constexpr int kKeys = 64;                  // per K/V tile

template <class T>
struct Params {
  int H, G, Sq, Sk;  // G: query heads per K/V head
  const T *q, *k, *v;
  T* out;
  Strides qs, ks, vs, os;
  float scale;
  bool causal;
  const int32_t* keyLengths;
};

// Bytes of dynamic shared memory for head dimension D.
constexpr size_t sharedBytes(int D) {
  return (kQueries + 2 * kKeys) * D * 2      // Q, K, V tiles (16-bit)
         + kQueries * kKeys * (sizeof(float) + 2)  // scores, weights
         + kQueries * D * sizeof(float)                   // O accumulators
         + 2 * kQueries * sizeof(float);                  // running max and sum
}

// Rows [0, rows) of a [*, D] 16-bit tile from `src` (row stride `stride`)
// to `dst` (dense), 8 elements (16 bytes) per copy; rows >= valid are zeros.
template <int D, class T>
__device__ void loadTile(T* dst, const T* src, size_t stride, int rows, int valid) {
  constexpr int kVectors = D / 8;
  for (int idx = threadIdx.x; idx < rows * kVectors; idx += kThreads) {
    const int r = idx / kVectors, c = idx % kVectors;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (r < valid) value = *reinterpret_cast<const uint4*>(src + static_cast<size_t>(r) * stride + c * 8);
    *reinterpret_cast<uint4*>(dst + r * D + c * 8) = value;
  }
}

template <int D, class T>
__global__ void __launch_bounds__(kThreads) attentionTensorKernel(Params<T> p) {
  extern __shared__ __align__(128) unsigned char smem[];
  T* qTile = reinterpret_cast<T*>(smem);
  T* kTile = qTile + kQueries * D;
  T* vTile = kTile + kKeys * D;
  float* scores = reinterpret_cast<float*>(vTile + kKeys * D);  // [kQueries][kKeys]
  T* weights = reinterpret_cast<T*>(scores + kQueries * kKeys);
  float* acc = reinterpret_cast<float*>(weights + kQueries * kKeys);  // [kQueries][D]
  float* runMax = acc + kQueries * D;
  float* runSum = runMax + kQueries;

  const int b = blockIdx.x / p.H, h = blockIdx.x % p.H;
  const int i0 = blockIdx.y * kQueries;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const T* q = p.q + b * p.qs.batch + h * p.qs.head;
  const T* k = p.k + b * p.ks.batch + (h / p.G) * p.ks.head;
  const T* v = p.v + b * p.vs.batch + (h / p.G) * p.vs.head;

  loadTile<D>(qTile, q + static_cast<size_t>(i0) * p.qs.row, p.qs.row, kQueries, p.Sq - i0);
  for (int idx = threadIdx.x; idx < kQueries * D; idx += kThreads) acc[idx] = 0.0f;
  for (int r = threadIdx.x; r < kQueries; r += kThreads) {
    runMax[r] = -INFINITY;
    runSum[r] = 0.0f;
  }
  // Keys past a row's length hold zeros in the tile (their V must not reach
  // O: a weight of 0 times NaN is NaN).
  const int lengthEnd = p.keyLengths ? min(p.Sk, max(p.keyLengths[b], 0)) : p.Sk;
  const int blockEnd = visibleKeys(p, b, min(i0 + kQueries, p.Sq) - 1);
  const int r0 = warp * kRows;                 // this warp's rows
  const int row = r0 + lane / 2, half = lane % 2;  // two lanes per row
  const int rowEnd = visibleKeys(p, b, i0 + row);

  for (int j0 = 0; j0 < blockEnd; j0 += kKeys) {
    __syncthreads();  // the previous tile is no longer read (and Q, O are set)
    loadTile<D>(kTile, k + static_cast<size_t>(j0) * p.ks.row, p.ks.row, kKeys, lengthEnd - j0);
    loadTile<D>(vTile, v + static_cast<size_t>(j0) * p.vs.row, p.vs.row, kKeys, lengthEnd - j0);
    __syncthreads();

    // Scores of the warp's 16 rows against the tile's 64 keys.
    for (int n = 0; n < kKeys / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> s;
      wmma::fill_fragment(s, 0.0f);
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> kt;  // Kᵀ
        wmma::load_matrix_sync(a, qTile + r0 * D + kk * 16, D);
        wmma::load_matrix_sync(kt, kTile + n * 16 * D + kk * 16, D);
        wmma::mma_sync(s, a, kt, s);
      }
      wmma::store_matrix_sync(scores + r0 * kKeys + n * 16, s, kKeys, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax: each lane takes 32 of its row's 64 scores.
    float* sRow = scores + row * kKeys + half * 32;
    float mx = -INFINITY;
    for (int c = 0; c < 32; ++c) {
      const int j = j0 + half * 32 + c;
      const float value = j < rowEnd ? sRow[c] * p.scale : -INFINITY;
      sRow[c] = value;
      mx = fmaxf(mx, value);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    const float mOld = runMax[row], mNew = fmaxf(mOld, mx);
    const float alpha = mNew == -INFINITY ? 1.0f : expf(mOld - mNew);
    float sum = 0.0f;
    T* wRow = weights + row * kKeys + half * 32;
    for (int c = 0; c < 32; ++c) {
      const T w = fromFloat<T>(sRow[c] == -INFINITY ? 0.0f : expf(sRow[c] - mNew));
      wRow[c] = w;
      sum += toFloat(w);  // the sum of the weights P·V uses
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    __syncwarp();  // both lanes of a row read runMax before it changes
    if (half == 0) {
      runMax[row] = mNew;
      runSum[row] = runSum[row] * alpha + sum;
    }
    for (int d = half * (D / 2); d < (half + 1) * (D / 2); ++d) acc[row * D + d] *= alpha;
    __syncwarp();

    // O rows += P · V.
    for (int n = 0; n < D / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> o;
      wmma::load_matrix_sync(o, acc + r0 * D + n * 16, D, wmma::mem_row_major);
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> w;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> vv;
        wmma::load_matrix_sync(w, weights + r0 * kKeys + kk * 16, kKeys);
        wmma::load_matrix_sync(vv, vTile + kk * 16 * D + n * 16, D);
        wmma::mma_sync(o, w, vv, o);
      }
      wmma::store_matrix_sync(acc + r0 * D + n * 16, o, D, wmma::mem_row_major);
    }
    __syncwarp();
  }
  __syncthreads();
  const int i = i0 + row;
  if (i >= p.Sq) return;
  const float l = runSum[row], inv = l > 0.0f ? 1.0f / l : 0.0f;
  T* out = p.out + b * p.os.batch + h * p.os.head + static_cast<size_t>(i) * p.os.row;
  for (int d = half * (D / 2); d < (half + 1) * (D / 2); ++d)
    out[d] = fromFloat<T>(acc[row * D + d] * inv);
}

bool aligned(const void* ptr, const Strides& s) {  // 16 bytes at a time
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && s.batch % 8 == 0 && s.head % 8 == 0 &&
         s.row % 8 == 0;
}

template <int D, class T>
cudaError_t launch(const Params<T>& p, size_t blocks, size_t tiles, cudaStream_t stream) {
  constexpr size_t shared = sharedBytes(D);
  cudaError_t e = cudaFuncSetAttribute(attentionTensorKernel<D, T>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(shared));
  if (e != cudaSuccess) return e;
  attentionTensorKernel<D, T><<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(tiles)),
                                kThreads, shared, stream>>>(p);
  return cudaGetLastError();
}

template <class T>
bool takes(const AttentionArgsOf<T>& a) {
  if ((a.headDim != 64 && a.headDim != 128) || a.keyMask || a.dropoutRate > 0.0) return false;
  Params<T> p;
  attention_detail::setCommon(p, a);
  // The tiles are loaded 16 bytes at a time.
  return aligned(p.q, p.qs) && (a.seqK == 0 || (aligned(p.k, p.ks) && aligned(p.v, p.vs)));
}

template <class T>
cudaError_t run(const AttentionArgsOf<T>& a, cudaStream_t stream) {
  if (a.batch * a.heads * a.seqQ == 0) return cudaSuccess;
  if (!a.q.data || !a.out || (a.seqK > 0 && (!a.k.data || !a.v.data))) return cudaErrorInvalidValue;
  if (!takes(a)) return cudaErrorInvalidValue;
  const size_t H = a.heads, D = a.headDim;
  Params<T> p;
  attention_detail::setCommon(p, a);
  const size_t tiles = (a.seqQ + kQueries - 1) / kQueries;
  if (tiles > 65535 || a.batch * H > 0x7fffffffu) return cudaErrorInvalidValue;
  return D == 64 ? launch<64>(p, a.batch * H, tiles, stream)
                 : launch<128>(p, a.batch * H, tiles, stream);
}

}  // namespace

bool attentionBf16Takes(const AttentionBf16Args& a) { return takes(a); }
cudaError_t attentionBf16(const AttentionBf16Args& a, cudaStream_t stream) { return run(a, stream); }

}  // namespace transfuse::cuda
