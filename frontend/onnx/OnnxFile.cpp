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

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <cstring>
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

namespace {

// IEEE half to float, exactly (subnormals, infinities and NaN included).
float halfToFloat(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff, bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else { // subnormal: normalize
    exponent = 113;
    while (!(mantissa & 0x400)) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float bf16ToFloat(uint16_t b) {
  const uint32_t bits = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Little-endian element `i` of width `width` bytes in `raw`.
uint64_t rawElement(const std::string &raw, size_t i, size_t width) {
  uint64_t v = 0;
  for (size_t b = 0; b < width; ++b)
    v |= (uint64_t)(uint8_t)raw[i * width + b] << (8 * b);
  return v;
}

} // namespace

bool onnx_import::TensorValues::isFloat() const {
  return dataType == onnx::TensorProto::FLOAT || dataType == onnx::TensorProto::FLOAT16 ||
         dataType == onnx::TensorProto::BFLOAT16 || dataType == onnx::TensorProto::DOUBLE;
}

llvm::Expected<onnx_import::TensorValues> onnx_import::readTensor(const onnx::TensorProto &t,
                                                                  llvm::StringRef where) {
  using T = onnx::TensorProto;
  const std::string what = where.str() + ": tensor '" + t.name() + "'";
  TensorValues v;
  v.dataType = t.data_type();
  uint64_t count = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && count > (uint64_t{1} << 40) / (uint64_t)d))
      return fail(what + ": dims [" + llvm::join(llvm::map_range(t.dims(), [](int64_t x) {
                    return std::to_string(x);
                  }), ", ") + "] are negative or too large");
    count *= (uint64_t)d;
    v.dims.push_back(d);
  }
  std::optional<int64_t> width = elementBytes(t.data_type());
  const bool known = width && t.data_type() != T::UINT16 && t.data_type() != T::INT16 &&
                     t.data_type() != T::UINT32 && t.data_type() != T::UINT64;
  if (!known)
    return fail(what + ": data type " + llvm::Twine(t.data_type()) +
                " is not supported (float, float16, bfloat16, double, int64, int32, int8, "
                "uint8, bool are)");
  const bool raw = t.has_raw_data();
  // The typed field each type is stored in (onnx.proto), and its length.
  int64_t typed = 0;
  switch (t.data_type()) {
  case T::FLOAT: typed = t.float_data_size(); break;
  case T::DOUBLE: typed = t.double_data_size(); break;
  case T::INT64: typed = t.int64_data_size(); break;
  default: typed = t.int32_data_size(); break; // int32, int8, uint8, bool, float16, bfloat16
  }
  const uint64_t have = raw ? t.raw_data().size() / (uint64_t)*width : (uint64_t)typed;
  if ((raw && t.raw_data().size() % *width) || have != count)
    return fail(what + ": holds " + llvm::Twine(raw ? t.raw_data().size() : (uint64_t)typed) +
                (raw ? " bytes" : " values") + " for dims that need " + llvm::Twine(count) +
                (raw ? " values of " + llvm::Twine(*width) + " bytes" : llvm::Twine(" values")));
  for (uint64_t i = 0; i < count; ++i) {
    switch (t.data_type()) {
    case T::FLOAT: {
      if (raw) {
        uint32_t bits = (uint32_t)rawElement(t.raw_data(), i, 4);
        float f;
        std::memcpy(&f, &bits, sizeof f);
        v.floats.push_back(f);
      } else {
        v.floats.push_back(t.float_data((int)i));
      }
      break;
    }
    case T::DOUBLE: {
      double d;
      if (raw) {
        uint64_t bits = rawElement(t.raw_data(), i, 8);
        std::memcpy(&d, &bits, sizeof d);
      } else {
        d = t.double_data((int)i);
      }
      v.floats.push_back((float)d);
      break;
    }
    case T::FLOAT16:
    case T::BFLOAT16: {
      uint16_t bits = raw ? (uint16_t)rawElement(t.raw_data(), i, 2) : (uint16_t)t.int32_data((int)i);
      v.floats.push_back(t.data_type() == T::FLOAT16 ? halfToFloat(bits) : bf16ToFloat(bits));
      break;
    }
    case T::INT64:
      v.ints.push_back(raw ? (int64_t)rawElement(t.raw_data(), i, 8) : t.int64_data((int)i));
      break;
    case T::INT32:
      v.ints.push_back(raw ? (int64_t)(int32_t)rawElement(t.raw_data(), i, 4) : t.int32_data((int)i));
      break;
    case T::INT8:
      v.ints.push_back(raw ? (int64_t)(int8_t)rawElement(t.raw_data(), i, 1) : t.int32_data((int)i));
      break;
    default: // UINT8, BOOL
      v.ints.push_back(raw ? (int64_t)rawElement(t.raw_data(), i, 1) : t.int32_data((int)i));
      break;
    }
  }
  return v;
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
