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
              rt::ThreadPool* pool) {
  PackedB out;
  HWY_DYNAMIC_DISPATCH(PackBRun)(B, K, N, ldb, transB, &out, pool);
  return out;
}

void repackB(PackedB& out, const float* B, size_t K, size_t N, size_t ldb, bool transB,
             rt::ThreadPool* pool) {
  HWY_DYNAMIC_DISPATCH(PackBRun)(B, K, N, ldb, transB, &out, pool);
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
    for (size_t j = 0; j < N; ++j) {
      const float* panel = B.data.get() + (j / B.nr) * K * B.nr + j % B.nr;
      for (size_t k = 0; k < K; ++k) dense[k * N + j] = panel[k * B.nr];
    }
    PackedB again = packB(dense.data(), K, N, N, false);
    HWY_DYNAMIC_DISPATCH(GemmPacked)(M, N, K, A, lda, transA, &again, C, ldc, &epilogue, pool);
    return;
  }
  HWY_DYNAMIC_DISPATCH(GemmPacked)(M, N, K, A, lda, transA, &B, C, ldc, &epilogue, pool);
}

void gemm(size_t M, size_t N, size_t K, const float* A, size_t lda, bool transA,
          const float* B, size_t ldb, bool transB, float* C, size_t ldc,
          const GemmEpilogue& epilogue, rt::ThreadPool* pool) {
  if (M == 0 || N == 0) return;
  PackedB packed = packB(B, K, N, ldb, transB, pool);
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
