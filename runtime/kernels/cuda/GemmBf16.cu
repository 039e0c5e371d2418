// The bf16 GEMM on tensor cores (Gemm.cuh: gemmTensorCores).
//
// A block of 4 warps computes a 64×64 tile of C, each warp 32×32 as 2×2
// WMMA 16×16×16 MMAs (bf16 in, fp32 accumulators), over K in steps of 32
// staged in shared memory: A as [m][k] (row-major fragments), B as [n][k]
// (column-major fragments), whatever the operands' layouts, zeros past the
// edges. The accumulators then go through shared memory, where the
// epilogue (bias, activation, residual) runs in fp32 on each element once
// before the single rounding to bf16.

#include "runtime/kernels/cuda/Gemm.cuh"

#include <mma.h>

namespace transfuse::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kTile = 64;     // C tile per block
constexpr int kStep = 32;     // K per shared-memory stage
constexpr int kPad = 8;       // bf16 elements of padding per staged row (16 bytes)
constexpr int kThreads = 128;  // 4 warps, 2×2 over the tile
constexpr int kLd = kStep + kPad;    // staged rows: K contiguous
constexpr int kLdC = kTile + 4;      // the fp32 C tile's rows

struct Shared {
  union {
    struct {
      bf16 a[kTile][kLd];  // A(i, k)
      bf16 b[kTile][kLd];  // B(k, j) at b[j][k]
    } stage;
    float c[kTile][kLdC];
  };
};

using gemm_detail::activate;

__global__ void __launch_bounds__(kThreads) gemmBf16Kernel(GemmArgsOf<bf16> p) {
  __shared__ __align__(32) Shared s;
  const int t = threadIdx.x, warp = t / 32;
  const int wm = warp / 2, wn = warp % 2;  // this warp's 32×32 of the tile
  const size_t row0 = static_cast<size_t>(blockIdx.y) * kTile;
  const size_t col0 = static_cast<size_t>(blockIdx.x) * kTile;
  const size_t z = blockIdx.z;
  p.a += z * p.strideA;
  p.b += z * p.strideB;
  p.c += z * p.strideC;
  if (p.residual) p.residual += z * p.strideResidual;
  const bf16 zero = __float2bfloat16(0.0f);

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (size_t k0 = 0; k0 < p.k; k0 += kStep) {
    // 64×32 of A and of B, 16 elements each per thread; consecutive threads
    // read consecutive addresses of the operand as stored.
    for (int e = t; e < kTile * kStep; e += kThreads) {
      if (p.transA) {  // A stored [K, M]
        const int i = e % kTile, kk = e / kTile;
        const size_t gi = row0 + i, gk = k0 + kk;
        s.stage.a[i][kk] = gi < p.m && gk < p.k ? p.a[gk * p.lda + gi] : zero;
      } else {
        const int kk = e % kStep, i = e / kStep;
        const size_t gi = row0 + i, gk = k0 + kk;
        s.stage.a[i][kk] = gi < p.m && gk < p.k ? p.a[gi * p.lda + gk] : zero;
      }
      if (p.transB) {  // B stored [N, K]
        const int kk = e % kStep, j = e / kStep;
        const size_t gj = col0 + j, gk = k0 + kk;
        s.stage.b[j][kk] = gj < p.n && gk < p.k ? p.b[gj * p.ldb + gk] : zero;
      } else {         // B stored [K, N]
        const int j = e % kTile, kk = e / kTile;
        const size_t gj = col0 + j, gk = k0 + kk;
        s.stage.b[j][kk] = gj < p.n && gk < p.k ? p.b[gk * p.ldb + gj] : zero;
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kStep; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b[2];
      for (int i = 0; i < 2; ++i)
        wmma::load_matrix_sync(a[i], &s.stage.a[wm * 32 + i * 16][kk], kLd);
      for (int j = 0; j < 2; ++j)
        wmma::load_matrix_sync(b[j], &s.stage.b[wn * 32 + j * 16][kk], kLd);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();  // the stage is read before it is overwritten (or becomes C)
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&s.c[wm * 32 + i * 16][wn * 32 + j * 16], acc[i][j], kLdC,
                              wmma::mem_row_major);
  __syncthreads();
  const size_t ldr = p.ldr ? p.ldr : p.n;
  for (int e = t; e < kTile * kTile; e += kThreads) {
    const int i = e / kTile, j = e % kTile;
    const size_t gi = row0 + i, gj = col0 + j;
    if (gi >= p.m || gj >= p.n) continue;
    float v = s.c[i][j];
    if (p.bias) v += __bfloat162float(p.bias[gj]);
    v = activate(p.activation, v);
    if (p.residual) v += __bfloat162float(p.residual[gi * ldr + gj]);
    p.c[gi * p.ldc + gj] = __float2bfloat16(v);
  }
}

}  // namespace

cudaError_t gemmTensorCores(const GemmArgsOf<bf16>& a, cudaStream_t stream) {
  if (a.m == 0 || a.n == 0 || a.batch == 0) return cudaSuccess;
  if (a.derivative != Activation::kNone) return cudaErrorNotSupported;  // training: fp32
  if (a.pairs.kind != kernels::GemmPairs::Kind::kNone) return cudaErrorNotSupported;
  if (!a.c || (a.k > 0 && (!a.a || !a.b)) || a.ldc < a.n) return cudaErrorInvalidValue;
  const size_t tilesN = (a.n + kTile - 1) / kTile, tilesM = (a.m + kTile - 1) / kTile;
  if (tilesM > 65535 || tilesN > 0x7fffffff || a.batch > 65535) return cudaErrorInvalidValue;
  gemmBf16Kernel<<<dim3(static_cast<unsigned>(tilesN), static_cast<unsigned>(tilesM),
                        static_cast<unsigned>(a.batch)),
                   kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace transfuse::cuda
