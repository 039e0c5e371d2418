// Reader and writer of the safetensors format:
//   bytes [0, 8)      : N, the header length, unsigned 64-bit little-endian
//   bytes [8, 8+N)    : JSON object {"name": {"dtype": "F32", "shape": [2, 3],
//                       "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}}
//   bytes [8+N, EOF)  : the data section; offsets are relative to its start.
// SafetensorsFile::open mmaps the file read-only and validates it completely before
// returning (see Safetensors.cpp for the list of rules), so every later read is in
// bounds. Every error names the file and, where there is one, the tensor.
#ifndef TRANSFUSE_RUNTIME_SAFETENSORS_H
#define TRANSFUSE_RUNTIME_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/Status.h"
#include "runtime/Tensor.h"

namespace transfuse::rt {

class SafetensorsFile {
public:
  struct Info {
    DType dtype;
    std::vector<int64_t> shape;
  };

  // Largest header accepted (bytes).
  static constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;

  static StatusOr<SafetensorsFile> open(const std::string& path);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const { return order_; }  // in header order
  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  const Info* info(const std::string& name) const;
  // The tensor's raw bytes inside the mapping (valid while this object lives).
  // nullptr with *size = 0 for an unknown name.
  const uint8_t* rawData(const std::string& name, size_t* size) const;

  // A copy of the tensor in its stored dtype.
  StatusOr<Tensor> read(const std::string& name) const;
  // A copy converted to F32; F32, F16 and BF16 are accepted, other dtypes are an error.
  StatusOr<Tensor> readAsF32(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

private:
  struct Entry {
    Info info;
    uint64_t begin = 0, end = 0;  // relative to the data section
  };
  SafetensorsFile() = default;
  void unmap();

  std::string path_;
  void* map_ = nullptr;
  size_t mapSize_ = 0;
  const uint8_t* data_ = nullptr;  // start of the data section
  std::vector<std::string> order_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes `tensors` (in the given order, packed without gaps) and `metadata` to
// `path`. Atomic: the bytes go to a temporary file in the same directory that is
// renamed over `path` only once complete, so on any failure no file (and no partial
// file) is left at `path`. The header is padded with spaces to a multiple of 8.
// Errors: duplicate or empty names, "__metadata__" as a tensor name, a null tensor,
// byte size != elements * dtype size, any I/O failure.
Status writeSafetensors(const std::string& path,
                        const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_SAFETENSORS_H
