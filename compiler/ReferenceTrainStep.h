//===- ReferenceTrainStep.h - the fp64 train step as a Trainer's step -----===//
//
// The reference backend's train step (codegen/reference/Train.h) behind the
// runtime's TrainStep interface, so that runtime/host's Trainer drives it as
// it drives a compiled train step: `transfuse train --backend reference`,
// the golden training test against PyTorch. It needs MLIR, hence it lives
// here and not in the runtime. Its weights and moments are fp64; checkpoints
// hold them as F32, so it writes them but does not resume from them.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_COMPILER_REFERENCETRAINSTEP_H
#define TRANSFUSE_COMPILER_REFERENCETRAINSTEP_H

#include "codegen/reference/Train.h"
#include "runtime/host/Trainer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <memory>

namespace mlir::transfuse::compiler {

class ReferenceTrainStep : public ::transfuse::rt::TrainStep {
public:
  /// Differentiates @loss of `module`, a training build (in place: it gains
  /// @loss_grad), and starts from `weights` (any float dtype).
  static llvm::Expected<std::unique_ptr<ReferenceTrainStep>> create(ModuleOp module,
                                                                    const reference::TensorMap &weights);

  ::transfuse::rt::StatusOr<reference::StepResult>
  step(const std::vector<reference::MicroBatch> &batches, int64_t step,
       const reference::AdamOptions &adam, uint64_t seed, bool wantGrads) override;
  ::transfuse::rt::StatusOr<reference::TensorMap> weights() const override;
  ::transfuse::rt::StatusOr<reference::TensorMap> optimizerState() const override;
  int64_t stepsTaken() const override { return state_.step; }
  ::transfuse::rt::Status restore(const reference::TensorMap &weights,
                                  const reference::TensorMap &optimizer,
                                  int64_t stepsTaken) override;

private:
  ReferenceTrainStep(func::FuncOp lossGrad, reference::TrainState state)
      : lossGrad_(lossGrad), state_(std::move(state)) {}
  func::FuncOp lossGrad_;
  reference::TrainState state_;
};

} // namespace mlir::transfuse::compiler

#endif // TRANSFUSE_COMPILER_REFERENCETRAINSTEP_H
