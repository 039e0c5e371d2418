//===- Gradients.h - gradient rules (GradientOpInterface) -----------------===//
#ifndef TRANSFUSE_IR_GRADIENTS_H
#define TRANSFUSE_IR_GRADIENTS_H

#include "mlir/IR/Builders.h"

namespace mlir::transfuse {

/// Attaches the gradient rule of every differentiable op (Gradients.cpp);
/// the dialect does at load.
void attachGradientRules(MLIRContext *ctx);

/// `grad` (of a broadcast result) summed back to `target`'s shape: over the
/// leading dimensions target lacks and those where it is 1.
Value unbroadcast(OpBuilder &b, Location loc, Value grad, Type target);

} // namespace mlir::transfuse

#endif // TRANSFUSE_IR_GRADIENTS_H
