// The optimizer update of a train step, fp32, one fused pass per tensor:
//
//   g  = grad · gradScale                 (clipping, micro-batch weights)
//   p ← p · (1 - lr · weightDecay)        (AdamW's decoupled decay; 0: Adam)
//   m ← β1·m + (1 - β1)·g
//   v ← β2·v + (1 - β2)·g²
//   p ← p - (lr / (1 - β1^t)) · m / (sqrt(v) / sqrt(1 - β2^t) + ε)
//
// torch.optim.Adam's (and AdamW's) update at step t (from 1); the reference
// train step (codegen/reference/Train.h) computes the same in fp64. Each
// element is independent, so threaded results equal single-threaded ones
// bit for bit. Accuracy against fp64: tests/unit/kernels/optimizer_test.cpp.
#ifndef TRANSFUSE_RUNTIME_KERNELS_OPTIMIZER_H
#define TRANSFUSE_RUNTIME_KERNELS_OPTIMIZER_H

#include "runtime/ThreadPool.h"

#include <cstddef>
#include <cstdint>

namespace transfuse::kernels {

struct AdamStep {
  float lr = 0.0f, beta1 = 0.9f, beta2 = 0.98f, eps = 1e-9f;
  float weightDecay = 0.0f, gradScale = 1.0f;
  int64_t step = 1;  // t, from 1: the bias corrections
};

// Updates n elements of param, m and v in place from grad.
void adamUpdate(float* param, const float* grad, float* m, float* v, size_t n, const AdamStep& s,
                rt::ThreadPool* pool = nullptr);

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_OPTIMIZER_H
