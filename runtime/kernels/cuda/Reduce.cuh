// Block-wide reductions shared by the CUDA row kernels (Norm.cu, Decode.cu).
#ifndef TRANSFUSE_RUNTIME_KERNELS_CUDA_REDUCE_CUH
#define TRANSFUSE_RUNTIME_KERNELS_CUDA_REDUCE_CUH

#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>

namespace transfuse::cuda {

// The sum (kMax: the max) of v over a block of kThreads threads (a multiple
// of 32, at most 1024); every thread gets the result, the same bits on every
// run (a fixed tree). T is float or double (sums only). `scratch` holds one
// T per warp. Its first __syncthreads also orders the block's earlier
// shared-memory writes before what follows.
template <int kThreads, bool kMax, class T>
__device__ T blockReduce(T v, T* scratch) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, one block");
  static_assert(!kMax || std::is_same_v<T, float>, "a max of floats");
  auto combine = [](T a, T b) {
    if constexpr (kMax)
      return fmaxf(a, b);
    else
      return a + b;
  };
  for (int offset = 16; offset > 0; offset /= 2) v = combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  // The identity of the operation (-inf for the max, so that a row of -inf
  // reduces to -inf and softmax sees it fully masked).
  v = lane < kThreads / 32 ? scratch[lane] : (kMax ? T(-INFINITY) : T(0));
  for (int offset = 16; offset > 0; offset /= 2) v = combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

}  // namespace transfuse::cuda

#endif  // TRANSFUSE_RUNTIME_KERNELS_CUDA_REDUCE_CUH
