// Validation of entry-point inputs against their specs (see TensorSpec.h).

#include "runtime/TensorSpec.h"

namespace transfuse::rt {

namespace {

std::string shapeOf(const TensorRef& t) {
  return shapeToString(std::vector<int64_t>(t.shape, t.shape + t.rank));
}

}  // namespace

Status validateInputs(const std::vector<TensorSpec>& specs, const TensorRef* inputs,
                      size_t numInputs, std::vector<size_t>* order) {
  for (size_t i = 0; i < numInputs; ++i) {
    const std::string_view name = inputs[i].name;
    bool known = false;
    for (const TensorSpec& s : specs) known |= s.name == name;
    if (!known) {
      std::string expected;
      for (const TensorSpec& s : specs) expected += (expected.empty() ? "'" : ", '") + s.name + "'";
      return Status::error("input '" + std::string(name) + "' is not an input of the model (expected " +
                           expected + ")");
    }
    for (size_t j = 0; j < i; ++j)
      if (inputs[j].name == name)
        return Status::error("input '" + std::string(name) + "' is given twice");
  }
  std::vector<size_t> found(specs.size());
  const TensorRef* batchFrom = nullptr;
  std::string batchName;
  for (size_t si = 0; si < specs.size(); ++si) {
    const TensorSpec& s = specs[si];
    size_t at = numInputs;
    for (size_t i = 0; i < numInputs && at == numInputs; ++i)
      if (inputs[i].name == s.name) at = i;
    if (at == numInputs) return Status::error("missing input '" + s.name + "'");
    found[si] = at;
    const TensorRef& t = inputs[at];
    if (t.dtype != s.dtype && !(s.dtype == DType::I32 && t.dtype == DType::I64))
      return Status::error("input '" + s.name + "' has dtype " + dtypeName(t.dtype) +
                           ", expected " + dtypeName(s.dtype) +
                           (s.dtype == DType::I32 ? " (or I64)" : ""));
    if (t.rank != s.shape.size())
      return Status::error("input '" + s.name + "' has rank " + std::to_string(t.rank) +
                           " (shape " + shapeOf(t) + "), expected rank " +
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
  for (size_t si = 0; si < specs.size(); ++si) {
    const int32_t of = specs[si].sizesOf;
    if (of < 0 || static_cast<size_t>(of) >= specs.size()) continue;
    const TensorRef &t = inputs[found[si]], &u = inputs[found[of]];
    for (size_t d = 0; d < t.rank && d < u.rank; ++d)
      if (specs[si].shape[d] < 0 && t.shape[d] != u.shape[d])
        return Status::error("input '" + specs[si].name + "' has shape " + shapeOf(t) +
                             ", but it must have the sizes of '" + specs[of].name + "' " +
                             shapeOf(u));
  }
  if (order) *order = std::move(found);
  return Status::ok();
}

Status narrowIds(std::string_view name, const int64_t* ids, int64_t count, int32_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    if (ids[i] < INT32_MIN || ids[i] > INT32_MAX)
      return Status::error("input '" + std::string(name) + "' holds " + std::to_string(ids[i]) +
                           " at element " + std::to_string(i) + ", outside int32 (ids are)");
    out[i] = static_cast<int32_t>(ids[i]);
  }
  return Status::ok();
}

Status validateInputs(const std::vector<TensorSpec>& specs,
                      const std::map<std::string, Tensor>& inputs) {
  std::vector<TensorRef> refs;
  refs.reserve(inputs.size());
  for (const auto& [name, tensor] : inputs)
    refs.push_back(TensorRef{name, tensor.dtype, tensor.shape.data(), tensor.shape.size()});
  return validateInputs(specs, refs.data(), refs.size());
}

}  // namespace transfuse::rt
