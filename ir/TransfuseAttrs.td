//===- TransfuseAttrs.td - enum attributes of the dialect ------*- tablegen -*-===//
//
// Choices an op makes among a fixed set are enum attributes, printed as
// `#transfuse.activation<gelu_tanh>`, so that a misspelling is a parse
// error and C++ switches over them are checked by the compiler.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_ATTRS_TD
#define TRANSFUSE_ATTRS_TD

include "ir/TransfuseDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

// The activation of a linear op's epilogue and of activation_grad: the
// cases, values and spellings of runtime/kernels/Activation.h (the one enum
// the kernels see), converted in one place (codegen/lowering/OpMath.cpp,
// which checks that they agree).
def TF_Activation : I32EnumAttr<"Activation", "an activation", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Relu", 1, "relu">,
    I32EnumAttrCase<"Gelu", 2, "gelu">,          // exact: x/2 · (1 + erf(x/√2))
    I32EnumAttrCase<"GeluTanh", 3, "gelu_tanh">, // GPT-2's tanh approximation
    I32EnumAttrCase<"Silu", 4, "silu">           // x · sigmoid(x)
  ]> {
  let cppNamespace = "::mlir::transfuse";
  let genSpecializedAttr = 0;
}
def TF_ActivationAttr : EnumAttr<Transfuse_Dialect, TF_Activation, "activation"> {
  let assemblyFormat = "`<` $value `>`";
}

def TF_GeluApproximation : I32EnumAttr<"GeluApproximation", "how gelu is computed", [
    I32EnumAttrCase<"None", 0, "none">,  // exact (erf)
    I32EnumAttrCase<"Tanh", 1, "tanh">
  ]> {
  let cppNamespace = "::mlir::transfuse";
  let genSpecializedAttr = 0;
}
def TF_GeluApproximationAttr : EnumAttr<Transfuse_Dialect, TF_GeluApproximation, "approximation"> {
  let assemblyFormat = "`<` $value `>`";
}

// How pool reduces a sequence to one vector (sentence-transformers' pooling
// modes); the kernels take the same numbers (runtime/kernels/Norm.h).
def TF_Pooling : I32EnumAttr<"Pooling", "a pooling over the sequence", [
    I32EnumAttrCase<"Cls", 0, "cls">,   // the first token's vector
    I32EnumAttrCase<"Mean", 1, "mean">, // the mean over the kept tokens
    I32EnumAttrCase<"Max", 2, "max">    // the maximum over the kept tokens
  ]> {
  let cppNamespace = "::mlir::transfuse";
  let genSpecializedAttr = 0;
}
def TF_PoolingAttr : EnumAttr<Transfuse_Dialect, TF_Pooling, "pooling"> {
  let assemblyFormat = "`<` $value `>`";
}

// How random weights are drawn when no weights file is given: runtime/Init.h
// (rt::InitKind, same order and spellings).
def TF_InitKind : I32EnumAttr<"InitKind", "how a parameter's random weights are drawn", [
    I32EnumAttrCase<"Zeros", 0, "zeros">,
    I32EnumAttrCase<"Ones", 1, "ones">,
    I32EnumAttrCase<"XavierUniform", 2, "xavier_uniform">,
    I32EnumAttrCase<"Normal002", 3, "normal_0.02">,
    I32EnumAttrCase<"UniformFanIn", 4, "uniform_fan_in">
  ]> {
  let cppNamespace = "::mlir::transfuse";
  let genSpecializedAttr = 0;
}
def TF_InitKindAttr : EnumAttr<Transfuse_Dialect, TF_InitKind, "init"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // TRANSFUSE_ATTRS_TD
