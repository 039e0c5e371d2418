//===- OnnxImport.h - an ONNX graph as a function of the transfuse dialect -===//
//
// The ONNX frontend's second step (docs/onnx.md): the graph of a ModelProto
// (OnnxFile.h) becomes @forward, its inputs and outputs named as in the
// graph. Every value the importer can know at compile time (initializers,
// Constant nodes, shapes and what is computed from them) is folded as it is
// read, so that shape-computing subgraphs (Shape -> Gather -> Concat ->
// Reshape) leave no ops behind; what is left runs on the dialect's ops.
// Float initializers and folded float tensors of 16 or more distinct values
// become parameters, named as in the graph (a folded tensor by the node
// output that holds it), whose values come back beside the module; the rest
// are constants of the IR.
//
// Dimensions: a graph input's dim_value is static; a dim_param (or a
// dimension without either) is `?`. A `?` in dimension 0 is the batch (its
// maximum --max-batch), any other the sequence (--max-seq-len); `dims` names
// a maximum per dim_param, which raises its kind's. An input whose dynamic
// dimensions are an earlier input's (the same dim_params) has its sizes.
//
// Every refusal is one error naming the node (its name, op type and the
// model's opset), the tensor or the attribute.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_FRONTEND_ONNX_ONNXIMPORT_H
#define TRANSFUSE_FRONTEND_ONNX_ONNXIMPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
} // namespace onnx

namespace mlir::transfuse::onnx_import {

/// The opsets of the default domain the importer maps: 13 to 28, the newest
/// the onnx 1.23 package defines. An op's versions after 13 add data types,
/// attributes and inputs; those the importer does not map are refused by
/// name (docs/onnx.md).
inline constexpr int64_t kMinOpset = 13, kMaxOpset = 28;

struct ImportOptions {
  /// Maxima of the batch and sequence dimensions (0: 8 and 512).
  int64_t maxBatch = 0, maxSeqLen = 0;
  /// Maxima per dim_param (`--dim NAME=MAX`).
  std::map<std::string, int64_t> dims;
};

/// A parameter's values, row-major float32.
struct Weight {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

struct ImportedModel {
  OwningOpRef<ModuleOp> module;
  std::vector<Weight> weights;
};

/// Imports `model` (read from `path`, which errors name) into a new module
/// of `context`, verified.
llvm::Expected<ImportedModel> importModel(MLIRContext &context, const onnx::ModelProto &model,
                                          llvm::StringRef path, const ImportOptions &options);

/// The op types of the default domain the importer maps (docs/onnx.md).
std::vector<std::string> supportedOps();

/// readOnnxModel, then importModel.
llvm::Expected<ImportedModel> importOnnxFile(MLIRContext &context, llvm::StringRef path,
                                             const ImportOptions &options);

} // namespace mlir::transfuse::onnx_import

#endif // TRANSFUSE_FRONTEND_ONNX_ONNXIMPORT_H
