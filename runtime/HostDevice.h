// TRANSFUSE_HD marks functions that host and CUDA device code share (the
// elementwise formulas, Philox): __host__ __device__ under nvcc, nothing
// elsewhere.
#ifndef TRANSFUSE_RUNTIME_HOSTDEVICE_H
#define TRANSFUSE_RUNTIME_HOSTDEVICE_H

#ifdef __CUDACC__
#define TRANSFUSE_HD __host__ __device__
#else
#define TRANSFUSE_HD
#endif

#endif  // TRANSFUSE_RUNTIME_HOSTDEVICE_H
