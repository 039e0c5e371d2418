// The CUDA side of runtime/exec, linked into CUDA artifacts only (built by
// nvcc into libtransfuse_cuda.a with runtime/kernels/cuda): the DeviceOps
// that ModelAbi.cpp calls for a model on a CUDA device, and what generated
// CUDA code (codegen/cuda) calls between launches.
//
// All work of a call goes to the calling thread's default stream
// (cudaStreamPerThread), so concurrent runs on one model, each with its own
// arena, do not wait for each other, and a run's copies, kernels and the
// final wait are ordered without events.
#ifndef TRANSFUSE_RUNTIME_EXEC_CUDA_CUH
#define TRANSFUSE_RUNTIME_EXEC_CUDA_CUH

#include "runtime/Status.h"
#include "runtime/exec/ModelDesc.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace transfuse::exec::cuda {

// The stream every kernel of a call is launched on.
inline cudaStream_t stream() { return cudaStreamPerThread; }

// The launch shape of generated elementwise kernels (grid-stride loops).
constexpr int kThreadsPerBlock = 256;
inline unsigned blocksFor(int64_t n) {
  const int64_t blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

// The device address of a __device__ array (a constant of generated code).
template <class T, size_t N>
T* deviceArray(T (&symbol)[N]) {
  void* p = nullptr;
  if (cudaGetSymbolAddress(&p, symbol) != cudaSuccess) return nullptr;
  return static_cast<T*>(p);
}

// The device ops of ModelDesc::device for a CUDA model.
extern const DeviceOps kCudaDevice;

// After a launch: ok, or an error naming `kernel` and `where` (the kernel
// IR op's location) with CUDA's message. With TRANSFUSE_CUDA_SYNC=1 in the
// environment it also waits for the kernel, so that a fault inside it (which
// CUDA reports only at the next wait) is named here too.
rt::Status launched(cudaError_t error, const char* kernel, const char* where);

// Device scratch of one kernel (Train.cuh's and attentionBackward's
// `work`): taken from the device's stream-ordered memory pool on the call's
// stream and given back to it when it goes out of scope, after the kernels
// queued before. The pool keeps what it was given (select() sets its release
// threshold), so a train step's scratch costs no cudaMalloc after the first.
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch();
  // At least `bytes` (one word when 0); an error naming `kernel` when the
  // device has no room.
  rt::Status allocate(size_t bytes, const char* kernel);
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
};

}  // namespace transfuse::exec::cuda

#endif  // TRANSFUSE_RUNTIME_EXEC_CUDA_CUH
