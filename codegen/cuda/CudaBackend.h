//===- CudaBackend.h - the cuda target: CUDA C++ over runtime/kernels/cuda -===//
//
// The kernel IR printed as one CUDA translation unit (model.cu): per entry
// point, launches of runtime/kernels/cuda on the calling thread's stream,
// each followed by its launch check, and generated __global__ kernels for
// fused elementwise regions and lone pointwise ops; built with the nvcc
// runtime/Cuda.cmake found. docs/cuda.md has the kernel table.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_CUDA_CUDABACKEND_H
#define TRANSFUSE_CODEGEN_CUDA_CUDABACKEND_H

#include "codegen/emit/Backend.h"

namespace mlir::transfuse::cuda {

const emit::Backend &backend();

} // namespace mlir::transfuse::cuda

#endif // TRANSFUSE_CODEGEN_CUDA_CUDABACKEND_H
