// cuBLASLt, the baseline GEMM of the cuda target, loaded at run time.
//
// The toolkit's libcublasLt.so is 540 MB and has no static form, too big to
// link into an artifact or carry to a GPU machine, so it is dlopen'ed when
// first needed: $TRANSFUSE_CUBLASLT (a path), else libcublasLt.so.13 or .12
// from the loader's search path. Where it is found, gemm() (Gemm.cuh) runs
// the products it can express through it (fp32, CUBLAS_COMPUTE_32F: no
// TF32): bias, relu, gelu_tanh (cuBLASLt's GELU is the tanh form), a
// residual when there is no activation, batches, A or B transposed. The
// rest (exact gelu, a residual after an activation, the backward's
// derivative epilogue) and everything when it is absent run on the
// CUDA-core kernel. $TRANSFUSE_CUDA_GEMM=cores forces the CUDA cores,
// =cublaslt refuses to fall back (for benchmarks).
#ifndef TRANSFUSE_RUNTIME_KERNELS_CUDA_CUBLASLT_CUH
#define TRANSFUSE_RUNTIME_KERNELS_CUDA_CUBLASLT_CUH

#include "runtime/kernels/cuda/Gemm.cuh"

#include <cuda_runtime.h>

namespace transfuse::cuda {

// Whether cuBLASLt is loaded (the first call tries to load it).
bool cublasLtAvailable();

// `args` through cuBLASLt: cudaErrorNotSupported when it is not loaded,
// cannot express them or refuses them (nothing was launched then), else the
// launch's error.
cudaError_t gemmCublasLt(const GemmArgsOf<float>& args, cudaStream_t stream = nullptr);
// bf16 operands, fp32 accumulation (CUBLAS_COMPUTE_32F), the bias in bf16.
cudaError_t gemmCublasLt(const GemmArgsOf<bf16>& args, cudaStream_t stream = nullptr);

}  // namespace transfuse::cuda

#endif  // TRANSFUSE_RUNTIME_KERNELS_CUDA_CUBLASLT_CUH
