// Helpers shared by the runtime unit tests: filled tensors, a self-deleting
// temporary directory and writers for raw (possibly malformed) safetensors files.
#ifndef TRANSFUSE_TESTS_UNIT_RUNTIME_TESTUTIL_H
#define TRANSFUSE_TESTS_UNIT_RUNTIME_TESTUTIL_H

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/Tensor.h"

namespace transfuse::rt::testing {

// An F32 tensor holding start, start + step, start + 2·step, ...
inline Tensor filled(std::vector<int64_t> shape, float start, float step = 0.5f) {
  Tensor t = Tensor::zeros(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numElements(); ++i) t.data<float>()[i] = start + step * i;
  return t;
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class TempDir {
public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "transfuse_rt_XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    path_ = ::mkdtemp(buf.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

inline void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// 8-byte little-endian length of `header`, the header, then `data`.
inline std::string rawSafetensors(const std::string& header, const std::string& data,
                                  uint64_t declaredLen = UINT64_MAX) {
  uint64_t n = declaredLen == UINT64_MAX ? header.size() : declaredLen;
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

}  // namespace transfuse::rt::testing

#endif
