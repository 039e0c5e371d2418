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

#include <algorithm>
#include <cassert>
#include <vector>

namespace transfuse::kernels {

HWY_EXPORT(GemmKernelShape);
HWY_EXPORT(PackBRun);
HWY_EXPORT(GemmPacked);

PackedB packB(const float* B, size_t K, size_t N, size_t ldb, bool transB,
              rt::ThreadPool* pool) {
  PackedB out;
  HWY_DYNAMIC_DISPATCH(PackBRun)(B, K, N, ldb, transB, &out, pool, nullptr);
  return out;
}

void repackB(PackedB& out, const float* B, size_t K, size_t N, size_t ldb, bool transB,
             rt::ThreadPool* pool) {
  HWY_DYNAMIC_DISPATCH(PackBRun)(B, K, N, ldb, transB, &out, pool, nullptr);
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

void linearWeightGrad(const float* x, const float* g, size_t rows, size_t K, size_t N, float* dW,
                      bool transposeOut, float* db, rt::ThreadPool* pool) {
  if (rows == 0 || K == 0 || N == 0) {  // no product; db still sums g's rows in order
    std::fill(dW, dW + K * N, 0.0f);
    std::fill(db, db + N, 0.0f);
    for (size_t r = 0; r < rows; ++r)
      for (size_t j = 0; j < N; ++j) db[j] += g[r * N + j];
    return;
  }
  // Per-thread buffers, grown and kept: g's panels (rows·N floats), the
  // column sums (padded to the panel width) and the untransposed product.
  thread_local PackedB packed;
  thread_local std::vector<float> sums, product;
  sums.resize(N + 64);
  HWY_DYNAMIC_DISPATCH(PackBRun)(g, rows, N, N, false, &packed, pool, sums.data());
  std::copy(sums.begin(), sums.begin() + static_cast<std::ptrdiff_t>(N), db);
  float* C = dW;
  if (transposeOut) {
    product.resize(K * N);
    C = product.data();
  }
  gemm(K, N, rows, x, K, /*transA=*/true, packed, C, N, GemmEpilogue{}, pool);
  if (transposeOut) {  // dW[j, k] = C[k, j], in 32×32 blocks
    constexpr size_t kBlock = 32;
    for (size_t j0 = 0; j0 < N; j0 += kBlock)
      for (size_t k0 = 0; k0 < K; k0 += kBlock)
        for (size_t j = j0; j < std::min(N, j0 + kBlock); ++j)
          for (size_t k = k0; k < std::min(K, k0 + kBlock); ++k) dW[j * K + k] = C[k * N + j];
  }
}

GemmKernelInfo gemmKernelInfo() {
  GemmKernelInfo info;
  int64_t target;
  HWY_DYNAMIC_DISPATCH(GemmKernelShape)(&info.mr, &info.nr, &info.kc, &info.mc, &target);
  info.target = hwy::TargetName(target);
  return info;
}

const char* activationName(Activation a) {
  switch (a) {
    case Activation::kNone: return "none";
    case Activation::kRelu: return "relu";
    case Activation::kGelu: return "gelu";
    case Activation::kGeluTanh: return "gelu_tanh";
  }
  return "none";
}

std::optional<Activation> parseActivation(const std::string& name) {
  for (Activation a : {Activation::kNone, Activation::kRelu, Activation::kGelu,
                       Activation::kGeluTanh})
    if (name == activationName(a)) return a;
  return std::nullopt;
}

}  // namespace transfuse::kernels
#endif  // HWY_ONCE
