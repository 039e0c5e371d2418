// Weight binding by name with prefixes, aliases and ignored patterns; see
// WeightBinding.h for the lookup order, the checks and the message texts.
#include "runtime/WeightBinding.h"

#include "runtime/MemoryLimit.h"

#include <cstring>
#include <set>

namespace transfuse::rt {

namespace {

std::string filePrefix(const std::string& path) { return "weights file '" + path + "': "; }

// The name itself, then each prefix + name.
std::vector<std::string> spellings(const std::string& name, const BindingRules& rules) {
  std::vector<std::string> out{name};
  for (const std::string& p : rules.prefixes) out.push_back(p + name);
  return out;
}

// Reads `fileName` as F32 after checking dtype and shape against the param.
StatusOr<Tensor> readParam(const WeightFiles& files, const std::string& fileName,
                           const ParamSpec& param) {
  const SafetensorsFile& file = *files.find(fileName);
  const std::string pre = filePrefix(file.path());
  const SafetensorsFile::Info* info = file.info(fileName);
  if (info->dtype != DType::F32 && info->dtype != DType::F16 && info->dtype != DType::BF16)
    return Status::error(pre + "tensor '" + fileName + "' has dtype " +
                         dtypeName(info->dtype) + "; expected F32, F16 or BF16");
  if (info->shape != param.shape)
    return Status::error(pre + "tensor '" + fileName + "' has shape " +
                         shapeToString(info->shape) + " but the model expects " +
                         shapeToString(param.shape) +
                         (fileName == param.name ? "" : " (for parameter '" + param.name + "')"));
  StatusOr<Tensor> t = file.readAsF32(fileName);
  if (!t.isOk()) return Status::error(pre + t.status().message());
  return t;
}

}  // namespace

bool globMatch(std::string_view pattern, std::string_view name) {
  // Iterative wildcard match with single backtrack point (last '*').
  size_t p = 0, n = 0, starP = std::string_view::npos, starN = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      starP = p++;
      starN = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (starP != std::string_view::npos) {
      p = starP + 1;
      n = ++starN;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

StatusOr<std::map<std::string, Tensor>> bindWeights(const std::vector<ParamSpec>& params,
                                                   const BindingRules& rules,
                                                   const WeightFiles& file,
                                                   std::vector<std::string>* warnings) {
  if (Status s = checkParamsFit(params); !s) return s;
  const std::string pre = filePrefix(file.path());
  std::map<std::string, Tensor> out;
  std::set<std::string> consumed;
  std::map<std::string, std::string> boundFrom;  // param name -> file tensor name

  for (const ParamSpec& param : params) {
    std::string found;
    for (const std::string& s : spellings(param.name, rules)) {
      if (file.find(s)) {
        found = s;
        break;
      }
    }
    if (found.empty()) {
      for (const auto& [alias, canonical] : rules.aliases) {
        if (canonical != param.name) continue;
        for (const std::string& s : spellings(alias, rules)) {
          if (file.find(s)) {
            found = s;
            break;
          }
        }
        if (!found.empty()) break;
      }
    }
    if (found.empty()) {
      if (!param.optional)
        return Status::error(pre + "missing tensor '" + param.name + "' (expected shape " +
                             shapeToString(param.shape) + ")");
      Tensor z = Tensor::zeros(DType::F32, param.shape);
      out.emplace(param.name, std::move(z));
      continue;
    }
    StatusOr<Tensor> t = readParam(file, found, param);
    if (!t.isOk()) return t.status();
    consumed.insert(found);
    boundFrom[param.name] = found;
    out.emplace(param.name, std::move(*t));
  }

  // Every alias present in the file must equal the tensor bound to its canonical name.
  for (const auto& [alias, canonical] : rules.aliases) {
    auto bound = out.find(canonical);
    if (bound == out.end()) continue;  // canonical not a param: rule does not apply
    const ParamSpec* spec = nullptr;
    for (const ParamSpec& p : params)
      if (p.name == canonical) spec = &p;
    auto from = boundFrom.find(canonical);
    for (const std::string& s : spellings(alias, rules)) {
      if (!file.find(s)) continue;
      consumed.insert(s);
      if (from != boundFrom.end() && from->second == s) continue;  // bound from it
      StatusOr<Tensor> t = readParam(file, s, *spec);
      if (!t.isOk()) return t.status();
      const std::vector<uint8_t>& want = bound->second.bytes;
      if (t->bytes.size() != want.size() ||
          std::memcmp(t->bytes.data(), want.data(), want.size()) != 0) {
        std::string other = from != boundFrom.end() ? from->second : canonical;
        return Status::error(pre + "tensor '" + s + "' (alias of '" + canonical +
                             "') differs from tensor '" + other + "'");
      }
    }
  }

  for (const std::string& name : file.names()) {
    if (consumed.count(name)) continue;
    std::string pattern;
    for (const std::string& pat : rules.ignored) {
      bool match = globMatch(pat, name);
      for (const std::string& p : rules.prefixes) {
        if (!match && name.size() >= p.size() && name.compare(0, p.size(), p) == 0)
          match = globMatch(pat, std::string_view(name).substr(p.size()));
      }
      if (match) {
        pattern = pat;
        break;
      }
    }
    if (!warnings) continue;
    const std::string pre = filePrefix(file.find(name)->path());
    if (!pattern.empty())
      warnings->push_back(pre + "ignored buffer '" + name + "' (matches ignored pattern '" +
                          pattern + "')");
    else
      warnings->push_back(pre + "tensor '" + name + "' is not used by the model");
  }
  return out;
}

uint64_t paramStream(const std::string& name) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Status checkParamsFit(const std::vector<ParamSpec>& params) {
  uint64_t total = 0;
  const ParamSpec* largest = nullptr;
  uint64_t largestBytes = 0;
  for (const ParamSpec& p : params) {
    const uint64_t bytes = tensorBytes(p.shape.data(), p.shape.size(), sizeof(float));
    total = saturatingAdd(total, bytes);
    if (!largest || bytes > largestBytes) largest = &p, largestBytes = bytes;
  }
  if (!largest) return Status::ok();
  return checkFitsInMemory("the model's " + std::to_string(params.size()) +
                               " parameters (the largest: '" + largest->name + "' " +
                               shapeToString(largest->shape) + ")",
                           total);
}

StatusOr<std::map<std::string, Tensor>> randomWeights(const std::vector<ParamSpec>& params,
                                                      uint64_t seed) {
  if (Status s = checkParamsFit(params); !s) return s;
  std::map<std::string, Tensor> out;
  for (const ParamSpec& p : params) {
    Tensor t = Tensor::zeros(DType::F32, p.shape);
    initTensor(t, p.init, p.fanIn, p.fanOut, seed, paramStream(p.name));
    out[p.name] = std::move(t);
  }
  return out;
}

}  // namespace transfuse::rt
