// Safetensors reader (mmap + full validation) and atomic writer; see Safetensors.h.
//
// Validation rules applied by open(), each failure an error naming the file (and the
// tensor where there is one):
//   1. the file has at least 8 bytes (the header length);
//   2. the header length is at most kMaxHeaderBytes and 8 + N <= file size;
//   3. the header is valid JSON and a JSON object;
//   4. "__metadata__", if present, is an object whose values are all strings;
//   5. each other member is an object with "dtype" (a string naming a known dtype),
//      "shape" (an array of non-negative integers) and "data_offsets" (an array of
//      exactly two non-negative integers begin <= end);
//   6. elements * dtype size does not overflow int64, and equals end - begin;
//   7. end lies inside the data section;
//   8. no tensor name (or __metadata__) appears twice;
//   9. sorted by offset, the tensors tile the data section exactly: no overlap, no
//      gap, starting at 0, and the data section ends at the last tensor's end (no
//      trailing bytes).
#include "runtime/Safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "runtime/Json.h"

namespace transfuse::rt {

namespace {

std::string prefixFor(const std::string& path) { return "safetensors file '" + path + "': "; }

// a * b into *out; false on int64 overflow. Both operands are non-negative.
bool mulNoOverflow(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

// Closes an fd on scope exit.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

std::string errnoText() { return std::strerror(errno); }

}  // namespace

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept { *this = std::move(o); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    unmap();
    path_ = std::move(o.path_);
    map_ = o.map_;
    mapSize_ = o.mapSize_;
    data_ = o.data_;
    order_ = std::move(o.order_);
    entries_ = std::move(o.entries_);
    metadata_ = std::move(o.metadata_);
    o.map_ = nullptr;
    o.mapSize_ = 0;
    o.data_ = nullptr;
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { unmap(); }

void SafetensorsFile::unmap() {
  if (map_) ::munmap(map_, mapSize_);
  map_ = nullptr;
  mapSize_ = 0;
  data_ = nullptr;
}

StatusOr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  const std::string pre = prefixFor(path);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::error(pre + "cannot open: " + errnoText());
  FdCloser closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::error(pre + "cannot stat: " + errnoText());
  if (!S_ISREG(st.st_mode)) return Status::error(pre + "not a regular file");
  const uint64_t fileSize = static_cast<uint64_t>(st.st_size);
  if (fileSize < 8)
    return Status::error(pre + "file is " + std::to_string(fileSize) +
                         " bytes, shorter than the 8-byte header length field");

  SafetensorsFile f;
  f.path_ = path;
  f.map_ = ::mmap(nullptr, fileSize, PROT_READ, MAP_PRIVATE, fd, 0);
  if (f.map_ == MAP_FAILED) {
    f.map_ = nullptr;
    return Status::error(pre + "cannot mmap: " + errnoText());
  }
  f.mapSize_ = fileSize;
  const uint8_t* base = static_cast<const uint8_t*>(f.map_);

  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | base[i];
  if (n > kMaxHeaderBytes)
    return Status::error(pre + "header length " + std::to_string(n) + " exceeds the limit of " +
                         std::to_string(kMaxHeaderBytes) + " bytes");
  if (n > fileSize - 8)
    return Status::error(pre + "header length " + std::to_string(n) +
                         " runs past the end of the file (" + std::to_string(fileSize) +
                         " bytes)");
  const uint64_t dataLen = fileSize - 8 - n;
  f.data_ = base + 8 + n;

  StatusOr<JsonValue> header =
      JsonValue::parse(std::string_view(reinterpret_cast<const char*>(base + 8), n));
  if (!header.isOk())
    return Status::error(pre + "header is not valid JSON: " + header.status().message());
  if (!header->isObject()) return Status::error(pre + "header is not a JSON object");

  bool sawMetadata = false;
  for (const auto& [name, value] : header->members()) {
    if (name == "__metadata__") {
      if (sawMetadata) return Status::error(pre + "duplicate '__metadata__' entry");
      sawMetadata = true;
      if (!value.isObject()) return Status::error(pre + "'__metadata__' is not a JSON object");
      for (const auto& [key, v] : value.members()) {
        if (!v.isString())
          return Status::error(pre + "'__metadata__' value for key '" + key +
                               "' is not a string");
        if (!f.metadata_.emplace(key, v.asString()).second)
          return Status::error(pre + "duplicate '__metadata__' key '" + key + "'");
      }
      continue;
    }
    const std::string tpre = pre + "tensor '" + name + "': ";
    if (f.entries_.count(name)) return Status::error(tpre + "duplicate tensor name");
    if (!value.isObject()) return Status::error(tpre + "entry is not a JSON object");
    const JsonValue* dtype = value.find("dtype");
    const JsonValue* shape = value.find("shape");
    const JsonValue* offsets = value.find("data_offsets");
    if (!dtype) return Status::error(tpre + "missing 'dtype'");
    if (!shape) return Status::error(tpre + "missing 'shape'");
    if (!offsets) return Status::error(tpre + "missing 'data_offsets'");
    if (!dtype->isString()) return Status::error(tpre + "'dtype' is not a string");
    Entry e;
    if (!parseDType(dtype->asString(), &e.info.dtype))
      return Status::error(tpre + "unknown dtype '" + dtype->asString() + "'");
    if (!shape->isArray()) return Status::error(tpre + "'shape' is not an array");
    int64_t elements = 1;
    for (const JsonValue& d : shape->asArray()) {
      if (!d.isInteger()) return Status::error(tpre + "shape element is not an integer");
      if (d.asInt64() < 0)
        return Status::error(tpre + "negative dimension " + std::to_string(d.asInt64()));
      e.info.shape.push_back(d.asInt64());
      if (!mulNoOverflow(elements, d.asInt64(), &elements))
        return Status::error(tpre + "element count of shape overflows int64");
    }
    int64_t byteSize = 0;
    if (!mulNoOverflow(elements, static_cast<int64_t>(dtypeSize(e.info.dtype)), &byteSize))
      return Status::error(tpre + "byte size of shape " + shapeToString(e.info.shape) +
                           " overflows int64");
    if (!offsets->isArray() || offsets->size() != 2 || !offsets->asArray()[0].isInteger() ||
        !offsets->asArray()[1].isInteger())
      return Status::error(tpre + "'data_offsets' is not an array of two integers");
    int64_t begin = offsets->asArray()[0].asInt64(), end = offsets->asArray()[1].asInt64();
    if (begin < 0 || end < 0) return Status::error(tpre + "negative data offset");
    if (begin > end)
      return Status::error(tpre + "data_offsets begin " + std::to_string(begin) +
                           " is after end " + std::to_string(end));
    if (static_cast<uint64_t>(end) > dataLen)
      return Status::error(tpre + "data_offsets end " + std::to_string(end) +
                           " is past the end of the data section (" + std::to_string(dataLen) +
                           " bytes)");
    if (end - begin != byteSize)
      return Status::error(tpre + "data_offsets span " + std::to_string(end - begin) +
                           " bytes but shape " + shapeToString(e.info.shape) + " of " +
                           dtypeName(e.info.dtype) + " needs " + std::to_string(byteSize));
    e.begin = static_cast<uint64_t>(begin);
    e.end = static_cast<uint64_t>(end);
    f.entries_.emplace(name, std::move(e));
    f.order_.push_back(name);
  }

  // Rule 9: tile the data section exactly.
  std::vector<std::pair<const std::string*, const Entry*>> sorted;
  for (const auto& [name, e] : f.entries_) sorted.emplace_back(&name, &e);
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return std::make_pair(a.second->begin, a.second->end) <
           std::make_pair(b.second->begin, b.second->end);
  });
  uint64_t cursor = 0;
  const std::string* prev = nullptr;
  for (const auto& [name, e] : sorted) {
    if (e->begin < cursor)
      return Status::error(pre + "tensor '" + *name + "' (bytes " + std::to_string(e->begin) +
                           ".." + std::to_string(e->end) + ") overlaps tensor '" + *prev +
                           "' (ending at " + std::to_string(cursor) + ")");
    if (e->begin > cursor)
      return Status::error(pre + "gap of " + std::to_string(e->begin - cursor) +
                           " unused bytes before tensor '" + *name + "' at offset " +
                           std::to_string(cursor));
    cursor = e->end;
    prev = name;
  }
  if (cursor != dataLen)
    return Status::error(pre + "data section is " + std::to_string(dataLen) +
                         " bytes but the tensors end at " + std::to_string(cursor) + " (" +
                         std::to_string(dataLen - cursor) + " trailing bytes)");
  return f;
}

const SafetensorsFile::Info* SafetensorsFile::info(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second.info;
}

const uint8_t* SafetensorsFile::rawData(const std::string& name, size_t* size) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    *size = 0;
    return nullptr;
  }
  *size = static_cast<size_t>(it->second.end - it->second.begin);
  return data_ + it->second.begin;
}

StatusOr<Tensor> SafetensorsFile::read(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end())
    return Status::error(prefixFor(path_) + "no tensor named '" + name + "'");
  Tensor t;
  t.dtype = it->second.info.dtype;
  t.shape = it->second.info.shape;
  t.bytes.assign(data_ + it->second.begin, data_ + it->second.end);
  return t;
}

StatusOr<Tensor> SafetensorsFile::readAsF32(const std::string& name) const {
  const Info* inf = info(name);
  if (!inf) return Status::error(prefixFor(path_) + "no tensor named '" + name + "'");
  if (inf->dtype != DType::F32 && inf->dtype != DType::F16 && inf->dtype != DType::BF16)
    return Status::error(prefixFor(path_) + "tensor '" + name + "' has dtype " +
                         dtypeName(inf->dtype) + "; expected F32, F16 or BF16");
  size_t size = 0;
  const uint8_t* src = rawData(name, &size);
  if (inf->dtype == DType::F32) return read(name);
  Tensor t = Tensor::zeros(DType::F32, inf->shape);
  float* out = t.data<float>();
  const size_t n = size / 2;
  for (size_t i = 0; i < n; ++i) {
    // Little-endian 16-bit values; the mapping may be unaligned for uint16_t.
    uint16_t h = static_cast<uint16_t>(src[2 * i] | (src[2 * i + 1] << 8));
    out[i] = inf->dtype == DType::F16 ? halfToFloat(h) : bf16ToFloat(h);
  }
  return t;
}

Status writeSafetensors(const std::string& path,
                        const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  const std::string pre = prefixFor(path);
  JsonValue header = JsonValue::object();
  if (!metadata.empty()) {
    JsonValue md = JsonValue::object();
    for (const auto& [k, v] : metadata) md.members().emplace_back(k, JsonValue(v));
    header.members().emplace_back("__metadata__", std::move(md));
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty()) return Status::error(pre + "empty tensor name");
    if (name == "__metadata__")
      return Status::error(pre + "'__metadata__' cannot be used as a tensor name");
    if (!seen.insert(name).second) return Status::error(pre + "duplicate tensor name '" + name + "'");
    if (!t) return Status::error(pre + "tensor '" + name + "' is null");
    int64_t elements = 1;
    for (int64_t d : t->shape) {
      if (d < 0 || !mulNoOverflow(elements, d, &elements))
        return Status::error(pre + "tensor '" + name + "' has invalid shape " +
                             shapeToString(t->shape));
    }
    int64_t expect = 0;
    if (!mulNoOverflow(elements, static_cast<int64_t>(dtypeSize(t->dtype)), &expect) ||
        static_cast<uint64_t>(expect) != t->bytes.size())
      return Status::error(pre + "tensor '" + name + "' has " + std::to_string(t->bytes.size()) +
                           " bytes but shape " + shapeToString(t->shape) + " of " +
                           dtypeName(t->dtype) + " needs " + std::to_string(expect));
    JsonValue entry = JsonValue::object();
    entry.set("dtype", JsonValue(dtypeName(t->dtype)));
    JsonValue shape = JsonValue::array();
    for (int64_t d : t->shape) shape.push(JsonValue(d));
    entry.set("shape", std::move(shape));
    entry.set("data_offsets", JsonValue::array({JsonValue(offset),
                                                JsonValue(offset + t->bytes.size())}));
    header.members().emplace_back(name, std::move(entry));
    offset += t->bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t lenBytes[8];
  for (int i = 0; i < 8; ++i) lenBytes[i] = static_cast<uint8_t>(uint64_t(text.size()) >> (8 * i));

  // Temp file in the target's directory so rename() is atomic (same filesystem).
  std::string tmpl = path + ".tmp.XXXXXX";
  std::vector<char> tmpName(tmpl.begin(), tmpl.end());
  tmpName.push_back('\0');
  int fd = ::mkstemp(tmpName.data());
  if (fd < 0) return Status::error(pre + "cannot create temporary file: " + errnoText());
  const std::string tmpPath(tmpName.data());
  auto failWith = [&](const std::string& what) {
    std::string msg = pre + what + ": " + errnoText();
    if (fd >= 0) ::close(fd);
    ::unlink(tmpPath.c_str());
    return Status::error(msg);
  };
  auto writeAll = [&](const void* p, size_t size) {
    const char* c = static_cast<const char*>(p);
    while (size > 0) {
      ssize_t w = ::write(fd, c, size);
      if (w < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      c += w;
      size -= static_cast<size_t>(w);
    }
    return true;
  };
  if (::fchmod(fd, 0644) != 0) return failWith("cannot set permissions");
  if (!writeAll(lenBytes, 8) || !writeAll(text.data(), text.size()))
    return failWith("write failed");
  for (const auto& [name, t] : tensors)
    if (!writeAll(t->bytes.data(), t->bytes.size())) return failWith("write failed");
  if (::fsync(fd) != 0) return failWith("fsync failed");
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0) return failWith("close failed");
  if (::rename(tmpPath.c_str(), path.c_str()) != 0) return failWith("rename failed");
  return Status::ok();
}

}  // namespace transfuse::rt
