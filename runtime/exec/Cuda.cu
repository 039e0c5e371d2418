// The CUDA device ops and launch checks (Cuda.cuh).

#include "runtime/exec/Cuda.cuh"

#include "runtime/exec/model.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace transfuse::exec::cuda {
namespace {

rt::Status status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return rt::Status::ok();
  return rt::Status::error(std::string("CUDA error in ") + what + ": " + cudaGetErrorName(e) +
                           " (" + cudaGetErrorString(e) + ")");
}

rt::Status select(int32_t ordinal) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    return rt::Status::error(std::string("no CUDA device is available (") +
                             (e == cudaSuccess ? "none found" : cudaGetErrorString(e)) +
                             "): a model compiled with --target cuda runs on a GPU");
  if (ordinal < 0 || ordinal >= count)
    return rt::Status::error("CUDA device " + std::to_string(ordinal) + " does not exist (" +
                             std::to_string(count) + " found)");
  return status(cudaSetDevice(ordinal), "cudaSetDevice");
}

rt::Status allocate(size_t bytes, void** p) {
  cudaError_t e = cudaMalloc(p, bytes);
  if (e == cudaSuccess) return rt::Status::ok();
  *p = nullptr;
  return rt::Status::error("cannot allocate " + std::to_string(bytes) +
                           " bytes of CUDA device memory: " + cudaGetErrorString(e));
}

void release(void* p) { cudaFree(p); }

rt::Status toDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return rt::Status::ok();
  return status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()),
                "a copy to the device");
}

rt::Status toHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return rt::Status::ok();
  return status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()),
                "a copy to the host");
}

rt::Status fill(void* dst, int byte, size_t bytes) {
  return status(cudaMemsetAsync(dst, byte, bytes, stream()), "cudaMemsetAsync");
}

rt::Status copy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                  size_t height) {
  if (width == 0 || height == 0) return rt::Status::ok();
  return status(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height,
                                  cudaMemcpyDeviceToDevice, stream()),
                "a copy within the device");
}

rt::Status synchronize() {
  return status(cudaStreamSynchronize(stream()), "the run (set TRANSFUSE_CUDA_SYNC=1 to name the kernel)");
}

bool syncEachLaunch() {
  static const bool on = [] {
    const char* v = std::getenv("TRANSFUSE_CUDA_SYNC");
    return v && std::strcmp(v, "0") != 0 && *v;
  }();
  return on;
}

}  // namespace

const DeviceOps kCudaDevice = {"cuda", TF_DEVICE_CUDA, select, allocate, release, toDevice,
                               toHost, fill,           copy2D, synchronize};

rt::Status launched(cudaError_t e, const char* kernel, const char* where) {
  if (e == cudaSuccess && syncEachLaunch()) e = cudaStreamSynchronize(stream());
  if (e == cudaSuccess) return rt::Status::ok();
  return rt::Status::error(std::string("CUDA kernel '") + kernel + "' (" + where +
                           ") failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

rt::Status readChecks(const uint32_t* deviceChecks, int n, uint32_t* host) {
  if (n <= 0) return rt::Status::ok();
  if (rt::Status s = status(cudaMemcpyAsync(host, deviceChecks, n * sizeof(uint32_t),
                                            cudaMemcpyDeviceToHost, stream()),
                            "reading the run's checks");
      !s)
    return s;
  return synchronize();
}

}  // namespace transfuse::exec::cuda
