//===- Train.h - the reference backend's train step -----------------------===//
//
// One optimizer step in fp64 over a training build's @loss_grad
// (--transfuse-autodiff): the loss and gradients from the interpreter, then
// gradient-norm clipping (optional) and Adam as torch.optim.Adam computes it
// (AdamW's decoupled weight decay when set), at the learning rate of the
// paper's schedule. The correctness oracle of compiled train steps, and what
// `transfuse train --backend reference` runs (docs/training.md).
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_REFERENCE_TRAIN_H
#define TRANSFUSE_CODEGEN_REFERENCE_TRAIN_H

#include "codegen/reference/Interpreter.h"

namespace mlir::transfuse::reference {

struct AdamOptions {
  double beta1 = 0.9, beta2 = 0.98, eps = 1e-9;
  /// The rate at step s (from 1): factor · d_model^-0.5 · min(s^-0.5, s · warmup^-1.5).
  double lrFactor = 1.0;
  int64_t warmup = 4000;
  int64_t dModel = 512;
  /// > 0: gradients scaled so that their global L2 norm is at most this
  /// (torch.nn.utils.clip_grad_norm_, with its 1e-6).
  double clipNorm = 0.0;
  /// AdamW: p ← p · (1 - lr · weightDecay) before the Adam update.
  double weightDecay = 0.0;
};

/// The learning rate applied at step `step` (counting from 1).
double learningRate(const AdamOptions &options, int64_t step);

/// Parameters (F64, by name) and Adam's moments; `step` counts the steps done.
struct TrainState {
  TensorMap weights, m, v;
  int64_t step = 0;
};

/// The parameters of `weights` (any float dtype) as a TrainState at step 0.
TrainState startTraining(const TensorMap &weights);

struct StepResult {
  double loss = 0.0;  // before the update
  double lr = 0.0;    // the rate applied
  double gradNorm = 0.0;  // before clipping
  TensorMap grads;    // grad.<name>, F64, before clipping
};

/// One micro-batch of a step: its inputs and the tokens its loss averages
/// over (the non-ignored labels).
struct MicroBatch {
  TensorMap inputs;
  int64_t tokens = 0;
};

/// The weight of micro-batch `i` of a step: its share of the step's tokens
/// (1 when it is the only one, also when it has no token).
double microBatchWeight(const std::vector<MicroBatch> &batches, size_t i);

/// Runs `lossGrad` on each micro-batch at `state`'s weights and applies one
/// update. With several, the loss and gradients are the whole batch's mean
/// over its tokens: each micro-batch's mean weighted by its share of them
/// (the summed losses divided by the batch's total).
/// Dropout draws with DropoutKey{seed, the step's number (from 1)}, the
/// key a compiled train step uses.
llvm::Expected<StepResult> trainStep(func::FuncOp lossGrad, TrainState &state,
                                     const std::vector<MicroBatch> &batches,
                                     const AdamOptions &options, uint64_t seed = 0);

} // namespace mlir::transfuse::reference

#endif // TRANSFUSE_CODEGEN_REFERENCE_TRAIN_H
