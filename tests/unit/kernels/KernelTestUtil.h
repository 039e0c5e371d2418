// Helpers for the kernel tests: seeded random data, buffers placed at a chosen
// misalignment (offset in floats from a 64-byte boundary), and the sizes every
// kernel is swept over (0..2N for the widest vector, odd, large).
#ifndef TRANSFUSE_TESTS_UNIT_KERNELS_KERNELTESTUTIL_H
#define TRANSFUSE_TESTS_UNIT_KERNELS_KERNELTESTUTIL_H

#include <hwy/aligned_allocator.h>

#include <cstddef>
#include <random>
#include <vector>

namespace transfuse::kernels::ktest {

// n floats starting `misalign` floats past a 64-byte boundary.
class Buf {
public:
  explicit Buf(size_t n, size_t misalign = 0)
      : mem_(hwy::AllocateAligned<float>(n + misalign + 16)), p_(mem_.get() + misalign), n_(n) {
    for (size_t i = 0; i < n + misalign + 16; ++i) mem_[i] = 0.0f;
  }
  float* data() { return p_; }
  const float* data() const { return p_; }
  float& operator[](size_t i) { return p_[i]; }
  float operator[](size_t i) const { return p_[i]; }
  size_t size() const { return n_; }
  void fill(std::mt19937& rng, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    for (size_t i = 0; i < n_; ++i) p_[i] = u(rng);
  }

private:
  hwy::AlignedFreeUniquePtr<float[]> mem_;
  float* p_;
  size_t n_;
};

// 0..33 (2N + 1 for AVX-512's 16 lanes), odd and large widths.
inline std::vector<size_t> sweepSizes() {
  std::vector<size_t> s;
  for (size_t i = 0; i <= 33; ++i) s.push_back(i);
  for (size_t i : {47, 63, 64, 65, 127, 255, 511, 512, 1000, 2048, 4097}) s.push_back(i);
  return s;
}

}  // namespace transfuse::kernels::ktest

#endif
