//===- TransfuseInterfaces.td - op interfaces ------------------*- tablegen -*-===//
//
// Interfaces of transfuse ops. Static shapes are inferred through MLIR's
// InferTypeOpInterface; the run-time size of each dynamic result dimension
// through ShapeRuleOpInterface (ir/Sizes.h); the gradient rule of each op (its vector-Jacobian
// product) goes through TransfuseGradientOpInterface, implemented per op by
// the autodiff work.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_INTERFACES_TD
#define TRANSFUSE_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Transfuse_ShapeRuleOpInterface : OpInterface<"ShapeRuleOpInterface"> {
  let cppNamespace = "::mlir::transfuse";
  let description = [{
    The shape rule of an op: the run-time size of dimension `axis` of result
    `result`, as an expression over its operands' sizes (read through
    `sizes`, which follows them back to the entry point's arguments). It is
    asked only for dynamic dimensions. The default is NumPy broadcasting
    over every tensor operand, the rule of elementwise ops. Fusion proofs,
    the memory plan, the manifest's maxima and generated size expressions all
    read sizes through this one rule (SizeAnalysis).
  }];
  let methods = [
    InterfaceMethod<"The size of dimension `axis` of result `result`.",
      "::mlir::transfuse::SizeExpr", "resultSize",
      (ins "unsigned":$result, "int64_t":$axis,
           "::mlir::transfuse::SizeAnalysis &":$sizes),
      /*methodBody=*/"", /*defaultImplementation=*/[{
        auto type = ::llvm::cast<::mlir::RankedTensorType>($_op->getResult(result).getType());
        return sizes.broadcast($_op->getOperands(), axis, type.getRank());
      }]>
  ];
}

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
