//===- Interface.h - what a compiled model exposes, read off its IR -------===//
//
// Extracts from a module the entry points (named input and output tensors
// with dtypes, shapes and maxima), the parameter table and the weight-binding
// rules. The manifest, the reference backend and later backends all read
// the model through this one description.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_INTERFACE_H
#define TRANSFUSE_CODEGEN_INTERFACE_H

#include "runtime/TensorSpec.h"
#include "runtime/WeightBinding.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

namespace mlir::transfuse {

struct EntryPoint {
  std::string name;
  std::vector<::transfuse::rt::TensorSpec> inputs, outputs;
};

struct ModelInterface {
  std::vector<EntryPoint> entryPoints;
  std::vector<::transfuse::rt::ParamSpec> params;
  ::transfuse::rt::BindingRules rules;
  std::string configJson; // empty for models given as MLIR without a config
};

/// Reads the interface of `module`; fails, naming the op, on a module that
/// cannot be run (a parameter name with two types, an unnamed argument,
/// a dynamic dimension without a maximum, ...).
llvm::Expected<ModelInterface> extractInterface(ModuleOp module);

/// The compiler version recorded in every manifest.
llvm::StringRef compilerVersion();

/// The runtime dtype of an MLIR element type (f32, f64, f16, bf16, i32, i1);
/// none for others.
std::optional<::transfuse::rt::DType> dtypeOf(Type elementType);

/// Writes DIR/model.mlir, DIR/manifest.json and DIR/report.json (the
/// fusion report), and DIR/kernels.mlir when `kernels` (the kernel IR of
/// `module`) is given; all are written to temporary names first, then
/// renamed. Each entry point's arena bytes in the manifest are the kernel
/// IR's memory plan, or without it the graph-level plan of
/// passes/MemoryPlan.h (an upper bound: it knows no strided views). The
/// manifest names the fusion strategy and the dtype (f32, bf16, int8).
llvm::Error writeMlirArtifact(ModuleOp module, ModuleOp kernels, const ModelInterface &interface,
                              llvm::StringRef dir, llvm::StringRef fusion, llvm::StringRef dtype,
                              llvm::json::Value report);

} // namespace mlir::transfuse

#endif // TRANSFUSE_CODEGEN_INTERFACE_H
