// What the CUDA test and benchmark programs share: a fatal check of CUDA
// calls, and the device probe that skips (exit 77) without a device.
#ifndef TRANSFUSE_TESTS_GPU_CUDACHECK_CUH
#define TRANSFUSE_TESTS_GPU_CUDACHECK_CUH

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK_CUDA(call)                                                              \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                          \
      std::printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

// Device 0's properties, printed; exits 77 ("`what` are skipped") when
// there is no CUDA device.
inline cudaDeviceProp deviceOrSkip(const char* what) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: %s are skipped\n", what);
    std::exit(77);
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device 0: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount);
  return prop;
}

#endif  // TRANSFUSE_TESTS_GPU_CUDACHECK_CUH
