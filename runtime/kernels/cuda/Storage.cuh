// The element types the cuda target stores tensors in: fp32, or bf16 with
// `--dtype bf16` (docs/cuda.md). Kernels read each into fp32, compute and
// accumulate in fp32, and round to the storage type once when they store
// (to nearest even).
#ifndef TRANSFUSE_RUNTIME_KERNELS_CUDA_STORAGE_CUH
#define TRANSFUSE_RUNTIME_KERNELS_CUDA_STORAGE_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <type_traits>

namespace transfuse::cuda {

using bf16 = __nv_bfloat16;

__host__ __device__ __forceinline__ float toFloat(float x) { return x; }
__host__ __device__ __forceinline__ float toFloat(bf16 x) { return __bfloat162float(x); }

// fp32 to the storage type T.
template <class T>
__host__ __device__ __forceinline__ T fromFloat(float x) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16>, "fp32 or bf16 storage");
  if constexpr (std::is_same_v<T, float>)
    return x;
  else
    return __float2bfloat16_rn(x);
}

}  // namespace transfuse::cuda

#endif  // TRANSFUSE_RUNTIME_KERNELS_CUDA_STORAGE_CUH
