//===- Train.h - the reference backend's train step -----------------------===//
//
// One optimizer step in fp64 over a training build's @loss_grad
// (--transfuse-autodiff): the loss and gradients from the interpreter, then
// gradient-norm clipping (optional) and Adam as torch.optim.Adam computes it
// (AdamW's decoupled weight decay when set), at the learning rate of the
// paper's schedule (runtime/host/Trainer.h's AdamOptions, micro-batches and
// step result). The correctness oracle of compiled train steps, and what
// `transfuse train --backend reference` runs through the compiler library's
// ReferenceTrainStep (docs/training.md).
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_REFERENCE_TRAIN_H
#define TRANSFUSE_CODEGEN_REFERENCE_TRAIN_H

#include "codegen/reference/Interpreter.h"
#include "runtime/host/Trainer.h"

namespace mlir::transfuse::reference {

using ::transfuse::rt::AdamOptions;
using ::transfuse::rt::learningRate;
using ::transfuse::rt::MicroBatch;
using ::transfuse::rt::microBatchWeight;
using ::transfuse::rt::StepResult;

/// Parameters (F64, by name) and Adam's moments; `step` counts the steps done.
struct TrainState {
  TensorMap weights, m, v;
  int64_t step = 0;
};

/// The parameters of `weights` (any float dtype) as a TrainState at step 0.
TrainState startTraining(const TensorMap &weights);

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
