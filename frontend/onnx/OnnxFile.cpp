//===- OnnxFile.cpp - an ONNX model file, read whole ----------------------===//
//
// See OnnxFile.h.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/OnnxFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <limits>

using namespace mlir::transfuse;

namespace {

llvm::Error fail(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what.str());
}

/// Bytes a tensor of `dims` and `dataType` holds; none on overflow or an
/// unknown type.
std::optional<uint64_t> tensorBytes(const onnx::TensorProto &t) {
  std::optional<int64_t> width = onnx_import::elementBytes(t.data_type());
  if (!width)
    return std::nullopt;
  uint64_t n = (uint64_t)*width;
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && n > std::numeric_limits<uint64_t>::max() / (uint64_t)d))
      return std::nullopt;
    n *= (uint64_t)d;
  }
  return n;
}

/// Reads the external data of `t` (model file `model`, its folder `dir`).
llvm::Error readExternal(onnx::TensorProto &t, llvm::StringRef model, llvm::StringRef dir) {
  std::string location;
  std::optional<uint64_t> offset, length;
  const std::string what = model.str() + ": tensor '" + t.name() + "'";
  for (const onnx::StringStringEntryProto &kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      uint64_t v;
      if (llvm::StringRef(kv.value()).getAsInteger(10, v))
        return fail(what + ": external data " + kv.key() + " '" + kv.value() +
                    "' is not a non-negative integer");
      (kv.key() == "offset" ? offset : length) = v;
    }
  }
  if (location.empty())
    return fail(what + ": external data without a location");
  // Confined to the model's folder: relative, no "..", and not leaving it
  // through a link either.
  if (llvm::sys::path::is_absolute(location))
    return fail(what + ": external data location '" + location +
                "' is absolute (it must lie in the model's folder)");
  for (auto it = llvm::sys::path::begin(location), e = llvm::sys::path::end(location); it != e;
       ++it)
    if (*it == "..")
      return fail(what + ": external data location '" + location +
                  "' leaves the model's folder ('..')");
  llvm::SmallString<256> file(dir);
  llvm::sys::path::append(file, location);
  llvm::SmallString<256> realDir, realFile;
  if (llvm::sys::fs::real_path(dir, realDir) || llvm::sys::fs::real_path(file, realFile))
    return fail(what + ": cannot open its external data '" + location + "'");
  if (!llvm::StringRef(realFile).starts_with((realDir + llvm::sys::path::get_separator()).str()))
    return fail(what + ": external data location '" + location +
                "' leaves the model's folder (through a link)");
  auto buffer = llvm::MemoryBuffer::getFile(realFile, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail(what + ": cannot read its external data '" + location + "': " +
                buffer.getError().message());
  std::optional<uint64_t> expected = tensorBytes(t);
  if (!expected)
    return fail(what + ": data type " + llvm::Twine(t.data_type()) +
                " or dims are not a fixed number of bytes");
  const uint64_t size = (*buffer)->getBufferSize(), start = offset.value_or(0);
  const uint64_t count = length.value_or(start <= size ? size - start : 0);
  if (start > size || count > size - start)
    return fail(what + ": external data [" + llvm::Twine(start) + ", " + llvm::Twine(start + count) +
                ") lies past the end of '" + location + "' (" + llvm::Twine(size) + " bytes)");
  if (count != *expected)
    return fail(what + ": external data holds " + llvm::Twine(count) + " bytes; its dims and type need " +
                llvm::Twine(*expected));
  t.set_raw_data((*buffer)->getBufferStart() + start, count);
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::DEFAULT);
  return llvm::Error::success();
}

} // namespace

std::optional<int64_t> onnx_import::elementBytes(int32_t dataType) {
  switch (dataType) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::UINT32:
    return 4;
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::UINT64:
    return 8;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
    return 2;
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::BOOL:
    return 1;
  default:
    return std::nullopt;
  }
}

llvm::Expected<onnx::ModelProto> onnx_import::readOnnxModel(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail("cannot read '" + path + "': " + buffer.getError().message());
  if ((*buffer)->getBufferSize() > (size_t)std::numeric_limits<int>::max())
    return fail(path + ": over 2 GiB (protobuf's limit): store the weights as external data");
  onnx::ModelProto model;
  if (!model.ParseFromArray((*buffer)->getBufferStart(), (int)(*buffer)->getBufferSize()))
    return fail(path + ": not an ONNX model (the protobuf does not parse: a truncated or "
                       "foreign file)");
  if (!model.has_graph())
    return fail(path + ": an ONNX model without a graph");
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  for (onnx::TensorProto &t : *model.mutable_graph()->mutable_initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL)
      if (llvm::Error e = readExternal(t, path, dir))
        return std::move(e);
  return model;
}
