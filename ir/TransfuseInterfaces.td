//===- TransfuseInterfaces.td - op interfaces ------------------*- tablegen -*-===//
//
// Interfaces of transfuse ops. Shapes are inferred through MLIR's
// InferTypeOpInterface; the gradient rule of each op (its vector-Jacobian
// product) goes through TransfuseGradientOpInterface, implemented per op by
// the autodiff work.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_INTERFACES_TD
#define TRANSFUSE_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Transfuse_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mlir::transfuse";
  let description = [{
    The reverse-mode rule of an op: given the gradients of its results (a null
    Value where a result has no gradient), build ops computing the gradients
    of its operands (null where an operand is not differentiable, such as
    token ids or masks). Dropout regenerates its mask from (seed, step,
    stream, index) instead of storing it.
  }];
  let methods = [
    InterfaceMethod<"Builds the operand gradients from the result gradients.",
      "::llvm::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // TRANSFUSE_INTERFACES_TD
