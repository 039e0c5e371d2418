// Fuzz target: the safetensors reader, as weights and as inputs.
//
// The input is a whole file. SafetensorsFile::open must accept it or return
// an error naming the file; an accepted file is then read as every path of
// the runtime reads one: each tensor in its own dtype and as F32, bound as
// the weights of a small parameter table (prefixes, an alias, an optional
// tensor), and checked as the inputs of an entry point (rt::validateInputs).
// Invariants: no crash, no sanitizer report, every error message non-empty
// and naming the file; a read tensor holds exactly elements * dtype bytes.
#include "runtime/Safetensors.h"
#include "runtime/TensorSpec.h"
#include "runtime/WeightBinding.h"
#include "tests/fuzz/FuzzUtil.h"

#include <cstring>

namespace rt = transfuse::rt;
using transfuse::fuzz::MemFile;

namespace {

bool namesFile(const std::string& message, const std::string& path) {
  return message.find(path) != std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  MemFile file(data, size);
  auto opened = rt::SafetensorsFile::open(file.path());
  if (!opened.isOk()) {
    FUZZ_CHECK(namesFile(opened.status().message(), file.path()), "%s",
               opened.status().message().c_str());
    return 0;
  }
  const rt::WeightFiles weights(std::move(*opened));
  const rt::SafetensorsFile& st = weights.files()[0];
  std::map<std::string, rt::Tensor> asInputs;
  for (const std::string& name : st.names()) {
    const rt::SafetensorsFile::Info* info = st.info(name);
    FUZZ_CHECK(info, "listed tensor '%s' has no info", name.c_str());
    auto t = st.read(name);
    FUZZ_CHECK(t.isOk(), "%s", t.status().message().c_str());
    FUZZ_CHECK(t->bytes.size() == static_cast<size_t>(t->numElements()) * rt::dtypeSize(t->dtype),
               "tensor '%s': %zu bytes", name.c_str(), t->bytes.size());
    auto f = st.readAsF32(name);
    if (f.isOk())
      FUZZ_CHECK(f->dtype == rt::DType::F32 && f->numElements() == t->numElements(),
                 "tensor '%s' as F32", name.c_str());
    else
      FUZZ_CHECK(namesFile(f.status().message(), file.path()), "%s",
                 f.status().message().c_str());
    asInputs.emplace(name, std::move(*t));
  }

  // As weights of a small table.
  std::vector<rt::ParamSpec> params = {
      {"w", {2, 3}, rt::InitKind::XavierUniform, 3, 2, false},
      {"b", {3}, rt::InitKind::Zeros, 0, 0, true},
      {"emb", {4, 2}, rt::InitKind::Normal002, 0, 0, false},
  };
  rt::BindingRules rules;
  rules.prefixes = {"model."};
  rules.aliases = {{"head", "emb"}};
  rules.ignored = {"*.mask"};
  std::vector<std::string> warnings;
  auto bound = rt::bindWeights(params, rules, weights, &warnings);
  if (bound.isOk()) {
    FUZZ_CHECK(bound->size() == params.size(), "%zu tensors bound", bound->size());
    for (const rt::ParamSpec& p : params)
      FUZZ_CHECK(bound->count(p.name) && (*bound)[p.name].shape == p.shape, "param '%s'",
                 p.name.c_str());
  } else {
    FUZZ_CHECK(!bound.status().message().empty(), "empty error");
  }

  // As the inputs of an entry point (the encoder-decoder's forward).
  std::vector<rt::TensorSpec> specs = {
      {"src_tokens", rt::DType::I32, {-1, -1}, {4, 16}},
      {"tgt_tokens", rt::DType::I32, {-1, -1}, {4, 16}},
  };
  rt::Status valid = rt::validateInputs(specs, asInputs);
  FUZZ_CHECK(valid.isOk() || !valid.message().empty(), "empty error");
  return 0;
}
