//===- OnnxFile.h - an ONNX model file, read whole ------------------------===//
//
// The first step of the ONNX frontend (docs/onnx.md): a .onnx file parsed by
// Debian's libonnx (its generated protobuf classes; no parser of ours), with
// the bytes of every initializer stored as external data read into the
// tensor's raw_data, so that what comes after sees one self-contained
// ModelProto.
//
// External data (TensorProto.data_location EXTERNAL, external_data keys
// "location", "offset", "length"): the location is a path relative to the
// model's folder; an absolute path, a ".." component or a path that leaves
// the folder through a symbolic link is refused, as is a range past the
// file's end or a length that disagrees with the tensor's dims and type.
// Every error names the model file and, for a tensor, the tensor.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_FRONTEND_ONNX_ONNXFILE_H
#define TRANSFUSE_FRONTEND_ONNX_ONNXFILE_H

#include "onnx/onnx.pb.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace mlir::transfuse::onnx_import {

/// The model at `path`, its external data read in.
llvm::Expected<onnx::ModelProto> readOnnxModel(llvm::StringRef path);

/// Bytes per element of an ONNX TensorProto data type; none for a type
/// without a fixed width (STRING) or one this frontend does not know.
std::optional<int64_t> elementBytes(int32_t dataType);

/// A tensor's values as the importer binds them: float32 (float16 and
/// bfloat16 widened exactly, double narrowed) in `floats`, or int64, int32,
/// uint8, int8 and bool in `ints`; from raw_data (little-endian) or the
/// typed field the ONNX schema stores that type in.
struct TensorValues {
  int32_t dataType = 0;
  std::vector<int64_t> dims;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  bool isFloat() const;
};

/// Errors name `where` (the file) and the tensor: a value count that
/// disagrees with the dims, negative dims, another data type.
llvm::Expected<TensorValues> readTensor(const onnx::TensorProto &tensor, llvm::StringRef where);

} // namespace mlir::transfuse::onnx_import

#endif // TRANSFUSE_FRONTEND_ONNX_ONNXFILE_H
