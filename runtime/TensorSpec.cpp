// Validation of entry-point inputs against their specs (see TensorSpec.h).

#include "runtime/TensorSpec.h"

namespace transfuse::rt {

Status validateInputs(const std::vector<TensorSpec>& specs,
                      const std::map<std::string, Tensor>& inputs) {
  for (const auto& [name, tensor] : inputs) {
    bool known = false;
    for (const TensorSpec& s : specs) known |= s.name == name;
    if (!known) {
      std::string expected;
      for (const TensorSpec& s : specs) expected += (expected.empty() ? "'" : ", '") + s.name + "'";
      return Status::error("input '" + name + "' is not an input of the model (expected " +
                           expected + ")");
    }
  }
  const Tensor* batchFrom = nullptr;
  std::string batchName;
  for (const TensorSpec& s : specs) {
    auto it = inputs.find(s.name);
    if (it == inputs.end()) return Status::error("missing input '" + s.name + "'");
    const Tensor& t = it->second;
    if (t.dtype != s.dtype)
      return Status::error("input '" + s.name + "' has dtype " + dtypeName(t.dtype) +
                           ", expected " + dtypeName(s.dtype));
    if (t.shape.size() != s.shape.size())
      return Status::error("input '" + s.name + "' has rank " + std::to_string(t.shape.size()) +
                           " (shape " + shapeToString(t.shape) + "), expected rank " +
                           std::to_string(s.shape.size()));
    for (size_t d = 0; d < s.shape.size(); ++d) {
      int64_t got = t.shape[d];
      if (s.shape[d] >= 0 && got != s.shape[d])
        return Status::error("input '" + s.name + "' has size " + std::to_string(got) +
                             " in dimension " + std::to_string(d) + ", expected " +
                             std::to_string(s.shape[d]));
      if (s.shape[d] < 0 && (got < 1 || got > s.maxShape[d]))
        return Status::error("input '" + s.name + "' has size " + std::to_string(got) +
                             " in dimension " + std::to_string(d) + ", outside [1, " +
                             std::to_string(s.maxShape[d]) + "] (the compiled maximum)");
    }
    if (!s.shape.empty() && s.shape[0] < 0) {
      if (batchFrom && batchFrom->shape[0] != t.shape[0])
        return Status::error("inputs '" + batchName + "' and '" + s.name +
                             "' have different batch sizes (" +
                             std::to_string(batchFrom->shape[0]) + " vs " +
                             std::to_string(t.shape[0]) + ")");
      batchFrom = &t;
      batchName = s.name;
    }
  }
  return Status::ok();
}

}  // namespace transfuse::rt
