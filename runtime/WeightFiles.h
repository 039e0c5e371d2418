// WeightFiles: the safetensors files a model's weights come from. One file, or
// the shards of a Hugging Face index (model.safetensors.index.json):
//   {"metadata": {...}, "weight_map": {"tensor name": "model-00001-of-00002.safetensors", ...}}
// open() takes a .safetensors file, an index (.json), or a directory holding
// model.safetensors (preferred, as Hugging Face does) or model.safetensors.index.json.
// Every shard is opened (and so fully validated) at once. Errors name the index
// and, where there is one, the shard and the tensor:
//   - the index is not JSON, has no "weight_map" object, or maps a tensor to a
//     non-string, an empty name, a path (absolute, with '/' or '..': shards live
//     beside the index), or a file that does not open as safetensors;
//   - a tensor is in two shards (shards overlap);
//   - a tensor the index maps to a shard is not in that shard.
// A tensor in a shard that the index does not list is found all the same (the
// shards' contents are the weights, as in Hugging Face's loader).
#ifndef TRANSFUSE_RUNTIME_WEIGHTFILES_H
#define TRANSFUSE_RUNTIME_WEIGHTFILES_H

#include <map>
#include <string>
#include <vector>

#include "runtime/Safetensors.h"
#include "runtime/Status.h"

namespace transfuse::rt {

class WeightFiles {
public:
  static constexpr const char* kSingleFile = "model.safetensors";
  static constexpr const char* kIndexFile = "model.safetensors.index.json";
  // Largest index file read (bytes).
  static constexpr uint64_t kMaxIndexBytes = 64ull * 1000 * 1000;

  static StatusOr<WeightFiles> open(const std::string& path);
  explicit WeightFiles(SafetensorsFile file);

  // The file opened: the safetensors file or the index (a directory resolved).
  const std::string& path() const { return path_; }
  bool sharded() const { return sharded_; }
  const std::vector<SafetensorsFile>& files() const { return files_; }
  // The file that holds tensor `name`, or nullptr.
  const SafetensorsFile* find(const std::string& name) const;
  // Every tensor: file by file (the index's shards sorted by name), each in header order.
  std::vector<std::string> names() const;

private:
  WeightFiles() = default;
  Status addFile(SafetensorsFile file);

  std::string path_;
  bool sharded_ = false;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> where_;  // tensor -> index into files_
};

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_WEIGHTFILES_H
