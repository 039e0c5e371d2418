//===- ReferenceTrainStep.cpp - the fp64 train step as a Trainer's step ---===//

#include "compiler/ReferenceTrainStep.h"
#include "compiler/Compiler.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::compiler;
namespace rt = ::transfuse::rt;

namespace {

/// `tensors` (F64) as F32, each name given `prefix`.
reference::TensorMap toF32(const reference::TensorMap &tensors, const std::string &prefix = "") {
  reference::TensorMap out;
  for (const auto &[name, t] : tensors) {
    rt::Tensor f = rt::Tensor::zeros(rt::DType::F32, t.shape);
    for (int64_t i = 0; i < t.numElements(); ++i)
      f.data<float>()[i] = (float)t.data<double>()[i];
    out.emplace(prefix + name, std::move(f));
  }
  return out;
}

} // namespace

llvm::Expected<std::unique_ptr<ReferenceTrainStep>>
ReferenceTrainStep::create(ModuleOp module, const reference::TensorMap &weights) {
  if (llvm::Error e = differentiateLoss(module))
    return std::move(e);
  auto lossGrad = module.lookupSymbol<func::FuncOp>("loss_grad");
  if (!lossGrad)
    return llvm::createStringError("the model has no @loss to differentiate");
  return std::unique_ptr<ReferenceTrainStep>(
      new ReferenceTrainStep(lossGrad, reference::startTraining(weights)));
}

rt::StatusOr<reference::StepResult>
ReferenceTrainStep::step(const std::vector<reference::MicroBatch> &batches, int64_t step,
                         const reference::AdamOptions &adam, uint64_t seed, bool wantGrads) {
  if (step != state_.step + 1)
    return rt::Status::error("the reference train step is at step " + std::to_string(state_.step) +
                             ", asked for step " + std::to_string(step));
  auto result = reference::trainStep(lossGrad_, state_, batches, adam, seed);
  if (!result)
    return rt::Status::error(llvm::toString(result.takeError()));
  if (!wantGrads)
    result->grads.clear();
  return std::move(*result);
}

rt::StatusOr<reference::TensorMap> ReferenceTrainStep::weights() const {
  return toF32(state_.weights);
}

rt::StatusOr<reference::TensorMap> ReferenceTrainStep::optimizerState() const {
  reference::TensorMap out = toF32(state_.m, "adam_m."), v = toF32(state_.v, "adam_v.");
  out.merge(v);
  return out;
}

rt::Status ReferenceTrainStep::restore(const reference::TensorMap &, const reference::TensorMap &,
                                       int64_t) {
  return rt::Status::error("the reference backend trains in fp64 and does not resume from a "
                           "checkpoint's F32 tensors");
}
