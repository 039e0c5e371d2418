// Tensor: a dense, row-major, host-memory tensor (dtype + shape + owned bytes),
// the value type the runtime core passes around. Also the dtype table (sizes and
// safetensors spellings) and the scalar conversions between fp32 and the 16-bit
// float formats (IEEE binary16 "F16" and bfloat16 "BF16"); float->16-bit rounds to
// nearest, ties to even, keeps NaN a (quiet) NaN, and overflows to infinity.
#ifndef TRANSFUSE_RUNTIME_TENSOR_H
#define TRANSFUSE_RUNTIME_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace transfuse::rt {

enum class DType { F32, F64, F16, BF16, I32, I64, Bool };

// Bytes per element: 4, 8, 2, 2, 4, 8, 1.
size_t dtypeSize(DType dtype);
// Safetensors spelling: "F32", "F64", "F16", "BF16", "I32", "I64", "BOOL".
const char* dtypeName(DType dtype);
// Inverse of dtypeName (exact, case-sensitive). Returns false for anything else.
bool parseDType(std::string_view name, DType* out);

struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // row-major; an empty shape is a scalar (1 element)
  std::vector<uint8_t> bytes;  // numElements() * dtypeSize(dtype) bytes

  // Product of the dimensions (1 for a scalar). Assumes the shape is valid
  // (non-negative, no overflow); the safetensors reader checks that on load.
  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // Raw element pointer; the caller picks T to match dtype. The storage comes
  // from operator new and is therefore aligned for any scalar type.
  template <class T>
  T* data() {
    return reinterpret_cast<T*>(bytes.data());
  }
  template <class T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
  // A tensor of the given dtype and shape with every byte zero.
  static Tensor zeros(DType dtype, std::vector<int64_t> shape);
};

// IEEE binary16 <-> fp32. halfToFloat is exact (subnormals, inf, NaN payload kept).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
// bfloat16 <-> fp32. bf16ToFloat is exact.
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);

// The elements of a float tensor as fp32: t's own data for F32, else (F16,
// BF16: a model compiled with --dtype bf16) converted into `scratch`.
const float* floatData(const Tensor& t, std::vector<float>& scratch);

// "[2, 3]"; "[]" for a scalar.
std::string shapeToString(const std::vector<int64_t>& shape);

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_TENSOR_H
