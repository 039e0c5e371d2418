// The CUDA device ops and launch checks (Cuda.cuh).

#include "runtime/exec/Cuda.cuh"

#include "runtime/exec/model.h"
#include "runtime/kernels/cuda/Train.cuh"

#include <atomic>
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
  if (rt::Status s = status(cudaSetDevice(ordinal), "cudaSetDevice"); !s) return s;
  // Scratch (Scratch) stays in the device's pool between calls: set once
  // per device (ordinals past 63 keep the default).
  static std::atomic<uint64_t> kept{0};
  const uint64_t bit = ordinal < 64 ? uint64_t(1) << ordinal : 0;
  cudaMemPool_t pool = nullptr;
  if (bit && !(kept.load() & bit) && cudaDeviceGetDefaultMemPool(&pool, ordinal) == cudaSuccess) {
    uint64_t keep = UINT64_MAX;
    if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) == cudaSuccess)
      kept.fetch_or(bit);
  }
  return rt::Status::ok();
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

rt::Status scaleAdd(float* y, const float* x, float w, size_t n) {
  return launched(transfuse::cuda::scaleAdd(y, x, w, n, stream()), "scale_add", "training");
}

rt::Status sumOfSquares(const float* x, size_t n, double* out) {
  Scratch work;
  if (rt::Status s = work.allocate(transfuse::cuda::kSumOfSquaresWork * sizeof(double),
                                   "sum_of_squares");
      !s)
    return s;
  return launched(transfuse::cuda::sumOfSquares(x, n, out, work.as<double>(), stream()),
                  "sum_of_squares", "the gradient norm");
}

rt::Status adamUpdate(float* param, const float* grad, float* m, float* v, size_t n,
                      const kernels::AdamStep& step) {
  return launched(transfuse::cuda::adamUpdate(param, grad, m, v, n, step, stream()), "adam_update",
                  "the optimizer step");
}

// Whether the environment variable `name` is set to something other than "" or "0".
bool envSet(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

bool syncEachLaunch() {
  static const bool on = envSet("TRANSFUSE_CUDA_SYNC");
  return on;
}

// Graphs unless TRANSFUSE_CUDA_GRAPHS=0, and never when each launch is
// waited for (TRANSFUSE_CUDA_SYNC names a failing kernel; a replay cannot).
bool graphsEnabled() {
  static const bool on = [] {
    const char* v = std::getenv("TRANSFUSE_CUDA_GRAPHS");
    return !(v && std::strcmp(v, "0") == 0) && !syncEachLaunch();
  }();
  return on;
}

rt::Status beginCapture() {
  // Thread-local: another thread's unsafe calls (a cudaMalloc) do not
  // spoil this capture; this thread's would, and the capture then fails.
  return status(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal),
                "cudaStreamBeginCapture");
}

rt::Status endCapture(void** graph) {
  *graph = nullptr;
  cudaGraph_t captured = nullptr;
  if (rt::Status s = status(cudaStreamEndCapture(stream(), &captured), "cudaStreamEndCapture"); !s) {
    if (captured) cudaGraphDestroy(captured);
    (void)cudaGetLastError();  // the failed capture's error is not the next launch's
    return s;
  }
  cudaGraphExec_t exec = nullptr;
  rt::Status s = status(cudaGraphInstantiate(&exec, captured, 0), "cudaGraphInstantiate");
  cudaGraphDestroy(captured);
  if (!s) {
    (void)cudaGetLastError();
    return s;
  }
  *graph = exec;
  return rt::Status::ok();
}

rt::Status launchGraph(void* graph) {
  return status(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), stream()), "cudaGraphLaunch");
}

void releaseGraph(void* graph) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph)); }

}  // namespace

const DeviceOps kCudaDevice = {
    "cuda",        TF_DEVICE_CUDA, select,       allocate,   release,    toDevice,
    toHost,        fill,           copy2D,       synchronize, scaleAdd,  sumOfSquares,
    adamUpdate,    graphsEnabled,  beginCapture, endCapture, launchGraph, releaseGraph};

rt::Status launched(cudaError_t e, const char* kernel, const char* where) {
  if (e == cudaSuccess && syncEachLaunch()) e = cudaStreamSynchronize(stream());
  if (e == cudaSuccess) return rt::Status::ok();
  return rt::Status::error(std::string("CUDA kernel '") + kernel + "' (" + where +
                           ") failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

Scratch::~Scratch() {
  if (data_) (void)cudaFreeAsync(data_, stream());
}

rt::Status Scratch::allocate(size_t bytes, const char* kernel) {
  if (data_) (void)cudaFreeAsync(data_, stream());
  data_ = nullptr;
  cudaError_t e = cudaMallocAsync(&data_, bytes > 0 ? bytes : sizeof(uint32_t), stream());
  if (e == cudaSuccess) return rt::Status::ok();
  data_ = nullptr;
  return rt::Status::error("cannot allocate " + std::to_string(bytes) +
                           " bytes of CUDA scratch for kernel '" + kernel + "': " +
                           cudaGetErrorString(e));
}

}  // namespace transfuse::exec::cuda
