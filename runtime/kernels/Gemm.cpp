// GEMM entry points (Gemm.h): dynamic dispatch to the per-target code of
// gemm-inl.h, compiled once per Highway target through foreach_target.h.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/kernels/Gemm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include "runtime/kernels/gemm-inl.h"

#if HWY_ONCE
#include "runtime/kernels/Parallel.h"

#include <hwy/aligned_allocator.h>
#include <hwy/targets.h>

#include <cassert>
#include <vector>

namespace transfuse::kernels {

HWY_EXPORT(GemmKernelShape);
HWY_EXPORT(PackBRun);
HWY_EXPORT(GemmPacked);

PackedB packB(const float* B, size_t K, size_t N, size_t ldb, bool transB,
              rt::ThreadPool* pool, const GemmPairs& pairs) {
  PackedB out;
  HWY_DYNAMIC_DISPATCH(PackBRun)(B, K, N, ldb, transB, &pairs, &out, pool);
  return out;
}

void repackB(PackedB& out, const float* B, size_t K, size_t N, size_t ldb, bool transB,
             rt::ThreadPool* pool, const GemmPairs& pairs) {
  HWY_DYNAMIC_DISPATCH(PackBRun)(B, K, N, ldb, transB, &pairs, &out, pool);
}

void gemm(size_t M, size_t N, size_t K, const float* A, size_t lda, bool transA,
          const PackedB& B, float* C, size_t ldc, const GemmEpilogue& epilogue,
          rt::ThreadPool* pool) {
  assert(B.k == K && B.n == N);
  if (M == 0 || N == 0) return;
  size_t mr, nr, kc, mc;
  int64_t target;
  HWY_DYNAMIC_DISPATCH(GemmKernelShape)(&mr, &nr, &kc, &mc, &target);
  if (K != 0 && B.nr != nr) {
    // Packed on another target (tests switch targets): unpack and repack.
    std::vector<float> dense(K * N);
    const size_t L = B.nr / 2;
    for (size_t p = 0; p < B.npad / B.nr; ++p) {
      const PanelColumns cols = panelColumns(B.pairs, N, L, p);
      const float* panel = B.data.get() + p * K * B.nr;
      for (size_t k = 0; k < K; ++k) {
        for (size_t j = 0; j < cols.n0; ++j) dense[k * N + cols.c0 + j] = panel[k * B.nr + j];
        for (size_t j = 0; j < cols.n1; ++j) dense[k * N + cols.c1 + j] = panel[k * B.nr + L + j];
      }
    }
    PackedB again = packB(dense.data(), K, N, N, false, nullptr, B.pairs);
    HWY_DYNAMIC_DISPATCH(GemmPacked)(M, N, K, A, lda, transA, &again, C, ldc, &epilogue, pool);
    return;
  }
  HWY_DYNAMIC_DISPATCH(GemmPacked)(M, N, K, A, lda, transA, &B, C, ldc, &epilogue, pool);
}

void gemm(size_t M, size_t N, size_t K, const float* A, size_t lda, bool transA,
          const float* B, size_t ldb, bool transB, float* C, size_t ldc,
          const GemmEpilogue& epilogue, rt::ThreadPool* pool, const GemmPairs& pairs) {
  if (M == 0 || N == 0) return;
  PackedB packed = packB(B, K, N, ldb, transB, pool, pairs);
  gemm(M, N, K, A, lda, transA, packed, C, ldc, epilogue, pool);
}

GemmKernelInfo gemmKernelInfo() {
  GemmKernelInfo info;
  int64_t target;
  HWY_DYNAMIC_DISPATCH(GemmKernelShape)(&info.mr, &info.nr, &info.kc, &info.mc, &target);
  info.target = hwy::TargetName(target);
  return info;
}

}  // namespace transfuse::kernels
#endif  // HWY_ONCE
