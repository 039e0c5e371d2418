// WeightFiles: one safetensors file or the shards of an index; see WeightFiles.h.
#include "runtime/WeightFiles.h"

#include <sys/stat.h>

#include <fstream>
#include <set>

#include "runtime/Json.h"

namespace transfuse::rt {

namespace {

bool isDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string join(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string parentOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A shard name the index may use: a plain file name beside the index.
bool plainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

}  // namespace

WeightFiles::WeightFiles(SafetensorsFile file) {
  path_ = file.path();
  Status s = addFile(std::move(file));
  (void)s;  // one file cannot overlap itself (its header has no duplicate names)
}

Status WeightFiles::addFile(SafetensorsFile file) {
  const size_t index = files_.size();
  for (const std::string& name : file.names()) {
    auto [it, fresh] = where_.emplace(name, index);
    if (!fresh)
      return Status::error("weights index '" + path_ + "': tensor '" + name + "' is in both '" +
                           files_[it->second].path() + "' and '" + file.path() +
                           "' (shards overlap)");
  }
  files_.push_back(std::move(file));
  return Status::ok();
}

StatusOr<WeightFiles> WeightFiles::open(const std::string& path) {
  if (isDirectory(path)) {
    if (exists(join(path, kSingleFile))) return open(join(path, kSingleFile));
    if (exists(join(path, kIndexFile))) return open(join(path, kIndexFile));
    return Status::error("weights directory '" + path + "' has neither " + kSingleFile +
                         " nor " + kIndexFile);
  }
  if (!endsWith(path, ".json")) {
    StatusOr<SafetensorsFile> file = SafetensorsFile::open(path);
    if (!file.isOk()) return file.status();
    return WeightFiles(std::move(*file));
  }

  const std::string pre = "weights index '" + path + "': ";
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(pre + "cannot open");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || static_cast<uint64_t>(size) > kMaxIndexBytes)
    return Status::error(pre + "larger than " + std::to_string(kMaxIndexBytes) + " bytes");
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  if (!in.read(text.data(), size)) return Status::error(pre + "cannot read");
  StatusOr<JsonValue> json = JsonValue::parse(text);
  if (!json.isOk()) return Status::error(pre + "not valid JSON: " + json.status().message());
  const JsonValue* map = json->isObject() ? json->find("weight_map") : nullptr;
  if (!map || !map->isObject())
    return Status::error(pre + "no \"weight_map\" object (tensor name -> shard file)");
  if (map->size() == 0) return Status::error(pre + "\"weight_map\" is empty");

  std::map<std::string, std::string> shardOf;  // tensor -> shard file name
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : map->members()) {
    if (!shard.isString())
      return Status::error(pre + "tensor '" + tensor + "' maps to a non-string");
    if (!plainFileName(shard.asString()))
      return Status::error(pre + "tensor '" + tensor + "' maps to '" + shard.asString() +
                           "', which is not a file name beside the index");
    if (!shardOf.emplace(tensor, shard.asString()).second)
      return Status::error(pre + "tensor '" + tensor + "' is listed twice");
    shards.insert(shard.asString());
  }

  WeightFiles out;
  out.path_ = path;
  out.sharded_ = true;
  const std::string dir = parentOf(path);
  for (const std::string& shard : shards) {  // sorted: a fixed order
    StatusOr<SafetensorsFile> file = SafetensorsFile::open(dir + shard);
    if (!file.isOk()) return Status::error(pre + "shard '" + shard + "': " + file.status().message());
    if (Status s = out.addFile(std::move(*file)); !s) return s;
  }
  for (const auto& [tensor, shard] : shardOf) {
    const SafetensorsFile* holder = out.find(tensor);
    if (!holder || holder->path() != dir + shard)
      return Status::error(pre + "tensor '" + tensor + "' is not in its shard '" + shard + "'" +
                           (holder ? " (it is in '" + holder->path() + "')" : ""));
  }
  return out;
}

const SafetensorsFile* WeightFiles::find(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : &files_[it->second];
}

std::vector<std::string> WeightFiles::names() const {
  std::vector<std::string> out;
  for (const SafetensorsFile& f : files_)
    for (const std::string& n : f.names()) out.push_back(n);
  return out;
}

}  // namespace transfuse::rt
