// What the CUDA kernel test programs share (kernels_test.cu,
// train_kernels_test.cu): device copies of host vectors, random data, the
// comparison against references, and the failure count main() returns.
#ifndef TRANSFUSE_TESTS_GPU_TESTUTIL_CUH
#define TRANSFUSE_TESTS_GPU_TESTUTIL_CUH

#include "tests/gpu/CudaCheck.cuh"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace gpu_test {

inline int gFailures = 0;

// A device copy of a host vector (empty: null), freed by the destructor.
template <class T>
struct DeviceOf {
  T* p = nullptr;
  size_t n = 0;
  explicit DeviceOf(const std::vector<T>& h) : n(h.size()) {
    if (!n) return;
    CHECK_CUDA(cudaMalloc(&p, n * sizeof(T)));
    CHECK_CUDA(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  DeviceOf(const DeviceOf&) = delete;
  DeviceOf& operator=(const DeviceOf&) = delete;
  ~DeviceOf() { cudaFree(p); }
  std::vector<T> host() const {
    std::vector<T> h(n);
    if (n) CHECK_CUDA(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};
using Device = DeviceOf<float>;

inline std::vector<float> randomVector(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// |got - want| <= atol + rtol·|want| everywhere; prints the worst error.
inline void expectNear(const char* what, const std::vector<float>& got, const std::vector<double>& want,
                double atol, double rtol) {
  double worst = 0;
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;  // NaN copied as is
    if (double(got[i]) == want[i]) continue;                  // infinities too
    const double e = std::fabs(double(got[i]) - want[i]);
    if (!(e <= atol + rtol * std::fabs(want[i])) && bad++ < 5)
      std::printf("  %s[%zu] = %.9g, reference %.9g\n", what, i, got[i], want[i]);
    if (e > worst || std::isnan(e)) worst = e;
  }
  std::printf("%-40s max |error| %.3g%s\n", what, worst, bad ? "  FAILED" : "");
  gFailures += bad != 0;
}

// Key lengths [B] for the attention tests: row 1 of the batch has none
// (fully masked), the others between Sk/2 and Sk.
inline std::vector<int32_t> attentionKeyLengths(size_t B, size_t Sk) {
  std::vector<int32_t> len(B);
  for (size_t b = 0; b < B; ++b) len[b] = b == 1 ? 0 : int32_t(Sk - (b * 7) % (Sk + 1) / 2);
  return len;
}

}  // namespace gpu_test

#endif  // TRANSFUSE_TESTS_GPU_TESTUTIL_CUH
