// CUDA GEMM with a fused epilogue, fp32 or bf16 storage (Gemm.cuh).

#include "runtime/kernels/cuda/Gemm.cuh"

#include "runtime/kernels/cuda/CublasLt.cuh"

#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace transfuse::cuda {
namespace {

constexpr int kTile = 64;    // C tile: kTile × kTile per block
constexpr int kStep = 16;    // K per shared-memory stage
constexpr int kThreads = 256;
constexpr int kPer = 4;      // C elements per thread along each axis

using gemm_detail::activate;

__device__ float derivativeAt(Activation act, float x) {
  namespace tm = transfuse::kernels::math;
  switch (act) {
    case Activation::kRelu: return tm::reluDerivative(x);
    case Activation::kGelu: return tm::geluDerivative(x);
    case Activation::kGeluTanh: return tm::geluTanhDerivative(x);
    case Activation::kSilu: return tm::siluDerivative(x);
    default: return 1.0f;
  }
}

// Paired products (kPaired): the 64 columns of a block's tile hold 32
// pairs, thread tx the first columns of pairs 2·tx and 2·tx + 1 (its
// columns 0 and 1) and their second columns (2 and 3). pairCount pairs in
// all; pair q's B columns are those below.
struct PairColumns {
  size_t first, second;
};
__device__ inline size_t pairCount(const kernels::GemmPairs& pairs, size_t n) {
  return pairs.kind == kernels::GemmPairs::Kind::kGated ? n / 2 : pairs.columns / 2;
}
__device__ inline PairColumns pairColumns(const kernels::GemmPairs& pairs, size_t n, size_t q) {
  if (pairs.kind == kernels::GemmPairs::Kind::kGated) return {q, n / 2 + q};
  const size_t half = pairs.headDim / 2, first = q / half * pairs.headDim + q % half;
  return {first, first + half};
}
// The B column of a paired tile's column `t` (0..63) in block column `bx`,
// and whether it exists.
__device__ inline bool tileColumn(const kernels::GemmPairs& pairs, size_t n, size_t bx, int t,
                                  size_t* col) {
  const size_t q = bx * (kTile / 2) + (t / 4) * 2 + (t % 2);
  if (q >= pairCount(pairs, n)) return false;
  const PairColumns c = pairColumns(pairs, n, q);
  *col = (t % 4) / 2 ? c.second : c.first;
  return true;
}

template <class T, bool kPaired>
__global__ void __launch_bounds__(kThreads) gemmKernel(GemmArgsOf<T> p) {
  // Rows padded by 4 floats: the transposed stores of a warp (16 rows of
  // one column) spread over the banks, and rows stay 16-byte aligned.
  __shared__ __align__(16) float As[kStep][kTile + 4];  // A tile, transposed: As[k][i]
  __shared__ __align__(16) float Bs[kStep][kTile + 4];  // B tile: Bs[k][j]
  const int t = threadIdx.x;
  const int tx = t % 16, ty = t / 16;  // this thread: rows ty·4.., columns tx·4..
  const size_t row0 = static_cast<size_t>(blockIdx.y) * kTile;
  const size_t col0 = static_cast<size_t>(blockIdx.x) * kTile;
  const size_t z = blockIdx.z;  // the product of a batch
  p.a += z * p.strideA;
  p.b += z * p.strideB;
  p.c += z * p.strideC;
  if (p.residual) p.residual += z * p.strideResidual;
  float acc[kPer][kPer] = {};
  for (size_t k0 = 0; k0 < p.k; k0 += kStep) {
    // 64×16 elements of A and of B, 4 per thread; out of range: 0.
    for (int e = t; e < kTile * kStep; e += kThreads) {
      const int r = e / kStep, kk = e % kStep;  // A: consecutive threads along k
      const size_t gi = row0 + r, gk = k0 + kk;
      if (p.transA) {  // A stored [K,M]: consecutive threads along m
        const int i = e % kTile, ka = e / kTile;
        const size_t gia = row0 + i, gka = k0 + ka;
        As[ka][i] = gia < p.m && gka < p.k ? toFloat(p.a[gka * p.lda + gia]) : 0.0f;
      } else {
        As[kk][r] = gi < p.m && gk < p.k ? toFloat(p.a[gi * p.lda + gk]) : 0.0f;
      }
      if (p.transB) {  // B stored [N,K]: consecutive threads along k
        size_t gj = col0 + r;
        const bool in = kPaired ? tileColumn(p.pairs, p.n, blockIdx.x, r, &gj) : gj < p.n;
        Bs[kk][r] = in && gk < p.k ? toFloat(p.b[gj * p.ldb + gk]) : 0.0f;
      } else {         // B stored [K,N]: consecutive threads along n
        const int j = e % kTile, kb = e / kTile;
        size_t gj = col0 + j;
        const size_t gkb = k0 + kb;
        const bool in = kPaired ? tileColumn(p.pairs, p.n, blockIdx.x, j, &gj) : gj < p.n;
        Bs[kb][j] = in && gkb < p.k ? toFloat(p.b[gkb * p.ldb + gj]) : 0.0f;
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kStep; ++kk) {
      const float4 a4 = *reinterpret_cast<const float4*>(&As[kk][ty * kPer]);
      const float4 b4 = *reinterpret_cast<const float4*>(&Bs[kk][tx * kPer]);
      const float a[kPer] = {a4.x, a4.y, a4.z, a4.w}, b[kPer] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
      for (int i = 0; i < kPer; ++i)
#pragma unroll
        for (int j = 0; j < kPer; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  if constexpr (kPaired) {
    // acc[i][jp] and acc[i][jp + 2]: the two columns of pair 2·tx + jp.
    const size_t pairs = pairCount(p.pairs, p.n), half = p.pairs.headDim / 2;
    for (int i = 0; i < kPer; ++i) {
      const size_t gi = row0 + ty * kPer + i;
      if (gi >= p.m) continue;
      for (int jp = 0; jp < 2; ++jp) {
        const size_t q = blockIdx.x * (kTile / 2) + tx * 2 + jp;
        if (q >= pairs) continue;
        const PairColumns c = pairColumns(p.pairs, p.n, q);
        float x0 = acc[i][jp], x1 = acc[i][jp + 2];
        if (p.bias) {
          x0 += toFloat(p.bias[c.first]);
          x1 += toFloat(p.bias[c.second]);
        }
        if (p.pairs.kind == kernels::GemmPairs::Kind::kGated) {
          p.c[gi * p.ldc + q] = fromFloat<T>(__fmul_rn(activate(p.activation, x0), x1));
          continue;
        }
        float cs, sn;
        kernels::math::rotaryCosSin(static_cast<float>(p.positionOffset + gi % p.seqLen),
                                    p.invFreq[q % half], &cs, &sn);
        p.c[gi * p.ldc + c.first] = fromFloat<T>(x0 * cs - x1 * sn);
        p.c[gi * p.ldc + c.second] = fromFloat<T>(x1 * cs + x0 * sn);
      }
    }
    return;
  }
  const size_t ldr = p.ldr ? p.ldr : p.n;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const size_t gi = row0 + ty * kPer + i;
    if (gi >= p.m) continue;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const size_t gj = col0 + tx * kPer + j;
      if (gj >= p.n) continue;
      float v = acc[i][j];
      if (p.derivative != Activation::kNone) {
        // The CPU's order: the product, scaled, times f'(pre).
        if (p.scale != 1.0f) v = __fmul_rn(v, p.scale);
        v = __fmul_rn(v, derivativeAt(p.derivative, toFloat(p.pre[gi * (p.ldp ? p.ldp : p.n) + gj])));
        p.c[gi * p.ldc + gj] = fromFloat<T>(v);
        continue;
      }
      if (p.bias) v += toFloat(p.bias[gj]);
      v = activate(p.activation, v);
      if (p.residual) v += toFloat(p.residual[gi * ldr + gj]);
      p.c[gi * p.ldc + gj] = fromFloat<T>(v);
    }
  }
}

// The operands a product needs, and leading dimensions that hold its rows;
// the derivative epilogue alone, on one product.
template <class T>
bool valid(const GemmArgsOf<T>& a) {
  const bool derivative = a.derivative != Activation::kNone;
  using Kind = kernels::GemmPairs::Kind;
  if (a.pairs.kind != Kind::kNone) {
    const size_t hd = a.pairs.headDim, cols = a.pairs.columns;
    const bool shape = a.pairs.kind == Kind::kGated
                           ? a.n % 2 == 0
                           : hd > 0 && hd % 2 == 0 && cols % hd == 0 && cols <= a.n && a.invFreq &&
                                 a.seqLen > 0;
    if (!shape || a.residual || derivative || a.batch != 1) return false;
  }
  const size_t cols = a.pairs.kind == Kind::kGated ? a.n / 2 : a.n;  // C's
  return a.c && (a.k == 0 || (a.a && a.b)) && a.ldc >= cols &&
         (a.k == 0 || a.lda >= (a.transA ? a.m : a.k)) &&
         (a.k == 0 || a.ldb >= (a.transB ? a.k : a.n)) && !(a.residual && a.ldr && a.ldr < a.n) &&
         (!derivative || (a.pre && !a.bias && !a.residual && a.activation == Activation::kNone &&
                          a.batch == 1 && !(a.ldp && a.ldp < a.n)));
}

template <class T>
cudaError_t runCudaCores(const GemmArgsOf<T>& a, cudaStream_t stream) {
  if (a.m == 0 || a.n == 0 || a.batch == 0) return cudaSuccess;
  if (!valid(a)) return cudaErrorInvalidValue;
  const size_t tilesN = (a.n + kTile - 1) / kTile, tilesM = (a.m + kTile - 1) / kTile;
  if (tilesM > 65535 || tilesN > 0x7fffffff || a.batch > 65535) return cudaErrorInvalidValue;
  if (a.pairs.kind != kernels::GemmPairs::Kind::kNone) {
    const bool gated = a.pairs.kind == kernels::GemmPairs::Kind::kGated;
    const size_t pairs = gated ? a.n / 2 : a.pairs.columns / 2;
    const size_t pairTiles = (pairs + kTile / 2 - 1) / (kTile / 2);
    if (pairTiles)
      gemmKernel<T, true><<<dim3(static_cast<unsigned>(pairTiles), static_cast<unsigned>(tilesM)),
                            kThreads, 0, stream>>>(a);
    if (gated || a.pairs.columns == a.n) return cudaGetLastError();
    // A rotary product's other columns (V): the plain kernel, shifted.
    GemmArgsOf<T> rest = a;
    rest.pairs = {};
    rest.n = a.n - a.pairs.columns;
    rest.b = a.transB ? a.b + a.pairs.columns * a.ldb : a.b + a.pairs.columns;
    rest.c = a.c + a.pairs.columns;
    if (a.bias) rest.bias = a.bias + a.pairs.columns;
    const size_t restTiles = (rest.n + kTile - 1) / kTile;
    gemmKernel<T, false><<<dim3(static_cast<unsigned>(restTiles), static_cast<unsigned>(tilesM)),
                           kThreads, 0, stream>>>(rest);
    return cudaGetLastError();
  }
  gemmKernel<T, false><<<dim3(static_cast<unsigned>(tilesN), static_cast<unsigned>(tilesM),
                              static_cast<unsigned>(a.batch)),
                         kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

template <class T>
cudaError_t run(const GemmArgsOf<T>& a, cudaStream_t stream) {
  // $TRANSFUSE_CUDA_GEMM: cores (the CUDA-core kernel only), cublaslt
  // (cuBLASLt only), tensor (bf16: our tensor-core kernel, never cuBLASLt);
  // else cuBLASLt where it can, then (bf16) our tensor cores, then the CUDA
  // cores.
  enum Mode { kAny, kCores, kCublasLt, kTensor };
  static const Mode mode = [] {
    const char* v = std::getenv("TRANSFUSE_CUDA_GEMM");
    if (v && std::strcmp(v, "cores") == 0) return kCores;
    if (v && std::strcmp(v, "cublaslt") == 0) return kCublasLt;
    if (v && std::strcmp(v, "tensor") == 0) return kTensor;
    return kAny;
  }();
  if (a.m == 0 || a.n == 0 || a.batch == 0) return cudaSuccess;
  if (!valid(a)) return cudaErrorInvalidValue;
  if (mode == kAny || mode == kCublasLt) {
    const cudaError_t e = gemmCublasLt(a, stream);
    if (e != cudaErrorNotSupported || mode == kCublasLt) return e;
  }
  if constexpr (std::is_same_v<T, bf16>) {
    if (mode != kCores) {
      const cudaError_t e = gemmTensorCores(a, stream);
      if (e != cudaErrorNotSupported) return e;
    }
  }
  return runCudaCores(a, stream);
}

}  // namespace

cudaError_t gemm(const GemmArgsOf<float>& a, cudaStream_t stream) { return run(a, stream); }
cudaError_t gemm(const GemmArgsOf<bf16>& a, cudaStream_t stream) { return run(a, stream); }
cudaError_t gemmCudaCores(const GemmArgsOf<float>& a, cudaStream_t stream) {
  return runCudaCores(a, stream);
}
cudaError_t gemmCudaCores(const GemmArgsOf<bf16>& a, cudaStream_t stream) {
  return runCudaCores(a, stream);
}

}  // namespace transfuse::cuda
