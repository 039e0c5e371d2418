// Vectors whose data start on a 64-byte cache line. The AMX GEMMs' buffers
// (packed weights, A laid out as tiles, sums) are read and written as tile
// rows of 64 bytes: a row straddling two lines costs both (measured: the
// bf16 tile kernel at half speed on malloc's 16-byte-aligned buffers).
#ifndef TRANSFUSE_RUNTIME_KERNELS_LINEALIGNED_H
#define TRANSFUSE_RUNTIME_KERNELS_LINEALIGNED_H

#include <cstddef>
#include <new>
#include <vector>

namespace transfuse::kernels {

template <class T>
struct LineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  LineAllocator() = default;
  template <class U>
  LineAllocator(const LineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlign); }
  template <class U>
  bool operator==(const LineAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const LineAllocator<U>&) const { return false; }
};

template <class T>
using LineVector = std::vector<T, LineAllocator<T>>;

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_LINEALIGNED_H
