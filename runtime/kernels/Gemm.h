// fp32 GEMM with a fused epilogue:
//
//   C[M,N] = act(A[M,K] · B[K,N] + bias[N]) + residual[M,N]
//
// all row-major with leading dimensions (element strides between rows):
//   A(i,k) = A[i·lda + k]            (transA = false, lda >= K)
//   A(i,k) = A[k·lda + i]            (transA = true:  A is stored as Aᵀ [K,M], lda >= M)
//   B(k,j) = B[k·ldb + j]            (transB = false, ldb >= N)
//   B(k,j) = B[j·ldb + k]            (transB = true:  B is stored as Bᵀ [N,K], ldb >= K)
//   C(i,j) = C[i·ldc + j], residual(i,j) = residual[i·ldr + j]   (ldc, ldr >= N)
// bias and residual are optional (null); act is an Activation (Activation.h:
// none, relu, gelu exact with the erf of Erf-inl.h, gelu_tanh, silu). Pointers need no alignment.
//
// B is packed once (packB; weights are packed when a model loads) into panels of
// NR columns (NR = two vectors of the best Highway target: 32 floats on AVX-512,
// 16 on AVX2, 8 on SSE4): panel p holds columns [p·NR, p·NR+NR) for all k,
// k-major: B(k, p·NR + j) = data[p·K·NR + k·NR + j]; padding columns are 0.
//
// Algorithm (Goto/BLIS family; numbers for AVX-512, see gemm-inl.h): rows
// are cut into blocks of <= Mc = 128 rows whose packed A for all of K fits a
// 1 MiB L2 budget (a copy per row for row-major A); for each B panel of the
// thread's share, for each k-block of Kc = 256 (a 256×32×4 = 32 KiB sub-panel
// that stays in L1), the register-blocked micro-kernel (MR×NR accumulators:
// 14×32 on AVX-512, i.e. 28 zmm registers; 6×16 on AVX2) runs over every
// tile of the row block, while the panel's C strip stays in L1 and the
// next sub-panel of B is prefetched into L2. Row blocks are split evenly into
// tiles of <= MR rows (64 rows: 5 tiles of 13/13/13/13/12, not
// 14+14+14+14+8), so no tile is mostly empty; the last panel's columns are
// stored with masked stores. No scalar loops in the compute. A long K (the
// gradient through a vocabulary projection: K = 8000 or 37000) would leave
// row blocks of a few tiles and re-read B once per block; it runs instead
// in K chunks of whole k-blocks, one pass over C each (gemm-inl.h KChunks).
//
// Numerics: each C element is Σ_k over k-blocks in order, each block an FMA
// chain in k order, the block sums added to C in k-block order; the epilogue
// is applied once after the last block. The order depends on nothing but K
// (K chunks end on k-block boundaries), so results are bitwise identical for
// every thread count, tiling and chunking.
//
// Threads: each thread owns a region of C (a range of rows when every thread
// gets >= 128 rows, else a range of B panels) and computes it a few panels at
// a time from the front; a thread done with its own region steals from the
// back of the others' (so a thread slowed by another process does less, and
// two threads write neighbouring C columns only at region edges and one
// steal point). A unit's result does not depend on the thread. Products under
// 2^20 multiply-adds per thread use fewer threads (under 2^21: the caller
// alone). The pool may be null (single-threaded on the caller).
//
// Column pairs (GemmPairs): two epilogues combine two columns of the
// product, so B is packed with the pairs side by side (a panel's first
// vector holds one column of each pair, its second vector the other: a
// register tile holds both) and the tile is combined as it is stored:
//   rotary  the first `columns` columns hold heads of `headDim` columns;
//           within a head, column i and i + headDim/2 are rotated by the
//           angle of the row's position (transfuse.rotary, after the bias);
//           C has B's N columns. The Q and K projections of Llama.
//   gated   B is [K, 2n]: n gate columns, then n up columns; C[i, j] =
//           act(gate_j + bias_j)·(up_j + bias_{n+j}) has n columns. SwiGLU.
// A paired panel's partial sums live in a per-thread strip (rows × NR, in
// L1 like C's strip) and each tile is combined after its last k-block; the
// sums are the plain product's, so the result is the plain GEMM followed
// by the rotation or the gating (whose products and sums a compiler may
// contract to FMAs, as it may in the unfused ops). No residual with pairs,
// and no K chunks (K is one pass).
//
// Restrictions: C must not overlap A, B, bias or residual (residual == C, an
// in-place residual add, is NOT supported when K > 256: C holds partial sums).
// B's packed layout belongs to the target that packed it: gemm() repacks on
// the fly (slow) if another target is dispatched to.
#ifndef TRANSFUSE_RUNTIME_KERNELS_GEMM_H
#define TRANSFUSE_RUNTIME_KERNELS_GEMM_H

#include "runtime/kernels/Activation.h"
#include "runtime/kernels/GemmPairs.h"

#include <hwy/aligned_allocator.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace transfuse::rt {
class ThreadPool;
}

namespace transfuse::kernels {

// What is applied as C is stored (see the file comment).
struct GemmEpilogue {
  const float* bias = nullptr;      // [N] or null
  Activation activation = Activation::kNone;
  const float* residual = nullptr;  // [M, ldr] or null; must not overlap C
  size_t ldr = 0;                   // 0 means N
  // The gradient at an activation's input below this product (backward):
  // with `derivative` set (and bias, activation, residual unset), C =
  // (scale · A·B) · f'(pre), f' as ElementwiseMath.h's (relu's a multiply
  // by 1 or 0), the same bits as the product, exec::scale (when scale is
  // not 1) and kernels::activationGrad one after the other.
  Activation derivative = Activation::kNone;
  const float* pre = nullptr;  // [M, ldp]; must not overlap C
  size_t ldp = 0;              // 0 means N
  float scale = 1.0f;
  // Rotary pairs (B packed with GemmPairs::Kind::kRotary): row i of C is at
  // position positionOffset + i % seqLen (rows are [batch, seqLen]
  // flattened); invFreq holds headDim/2 inverse frequencies.
  const float* invFreq = nullptr;
  size_t seqLen = 1;
  size_t positionOffset = 0;
};

// B packed into panels (see the file comment for the layout). Movable.
struct PackedB {
  size_t k = 0, n = 0;  // logical B is [k, n]
  size_t nr = 0;        // panel width (floats) of the target that packed it
  size_t npad = 0;      // panels · nr
  GemmPairs pairs;      // how columns are paired in panels (none: in order)
  struct Free {
    void operator()(float* p) const { hwy::FreeAlignedBytes(p, nullptr, nullptr); }
  };
  std::unique_ptr<float[], Free> data;  // k·npad floats, 64-byte aligned
};

// Packs B (see the file comment for B's layouts). K or N may be 0.
// Packs over the pool's threads when one is given (panels are independent);
// the packed data does not depend on the thread count.
PackedB packB(const float* B, size_t K, size_t N, size_t ldb, bool transB,
              rt::ThreadPool* pool = nullptr, const GemmPairs& pairs = {});

// packB into `out`, reusing its buffer when it holds B's shape for the
// target now dispatched to (weights repacked after every optimizer step
// touch no fresh pages); allocates otherwise.
void repackB(PackedB& out, const float* B, size_t K, size_t N, size_t ldb, bool transB,
             rt::ThreadPool* pool = nullptr, const GemmPairs& pairs = {});

// C = epilogue(A·B) with B packed by packB (B.k = K, B.n = N; C has N
// columns, N/2 when B's pairs are gated). If B was packed for a
// target other than the one now dispatched to (only when targets are switched
// in tests), B is repacked on the fly (slow path, allocates).
void gemm(size_t M, size_t N, size_t K, const float* A, size_t lda, bool transA,
          const PackedB& B, float* C, size_t ldc, const GemmEpilogue& epilogue = {},
          rt::ThreadPool* pool = nullptr);

// Convenience: packs B for this call (allocates; prefer packB for weights).
void gemm(size_t M, size_t N, size_t K, const float* A, size_t lda, bool transA,
          const float* B, size_t ldb, bool transB, float* C, size_t ldc,
          const GemmEpilogue& epilogue = {}, rt::ThreadPool* pool = nullptr,
          const GemmPairs& pairs = {});

// The micro-kernel shape on the target now dispatched to, for reports.
struct GemmKernelInfo {
  size_t mr, nr, kc, mc;
  std::string target;
};
GemmKernelInfo gemmKernelInfo();

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_GEMM_H
