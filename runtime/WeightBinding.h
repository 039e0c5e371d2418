// Binds a model's parameter table (names, F32 shapes, initializers) to the tensors
// of a safetensors file, resolving checkpoint naming differences through rules:
// leading prefixes (e.g. "transformer."), aliases (tied weights stored under a
// second name, e.g. "generator.weight" for "tgt_tok_emb.embedding.weight") and
// ignored patterns (buffers such as GPT-2's "h.*.attn.bias" masks). Also builds
// seeded random weights for the same table.
#ifndef TRANSFUSE_RUNTIME_WEIGHTBINDING_H
#define TRANSFUSE_RUNTIME_WEIGHTBINDING_H

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/Init.h"
#include "runtime/WeightFiles.h"
#include "runtime/Status.h"
#include "runtime/Tensor.h"

namespace transfuse::rt {

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;  // the parameter is F32
  InitKind init = InitKind::Zeros;
  int64_t fanIn = 0, fanOut = 0;
  bool optional = false;  // absent in the file -> zeros
};

struct BindingRules {
  // alias name -> canonical param name. If the canonical name is not in the
  // parameter table the rule does not apply (the alias tensor, if present, is then
  // reported as unused), so one rule set can serve several model variants.
  std::map<std::string, std::string> aliases;
  // Glob patterns; '*' matches any run of characters (possibly empty, dots
  // included), every other character matches itself. A file tensor not otherwise
  // consumed whose name (or name with an accepted prefix removed) matches is skipped
  // with an "ignored buffer" warning.
  std::vector<std::string> ignored;
  // Optional leading prefixes accepted on every name (tried in order, after the
  // bare name).
  std::vector<std::string> prefixes;
};

// Glob match used for BindingRules::ignored.
bool globMatch(std::string_view pattern, std::string_view name);

// For each param in order: look up name, then prefix+name for each prefix; then each
// alias of it (aliases in map order; bare, then prefixed). Found: dtype must be F32,
// F16 or BF16 (converted to F32) and the shape must match exactly. Not found:
// optional -> zeros, else an error. Every alias tensor present in the file (bare
// or prefixed) must equal, bitwise after conversion to F32, the tensor bound to its
// canonical param. Warnings (appended to *warnings when non-null, in file order):
//   "weights file 'F': tensor 'X' is not used by the model"
//   "weights file 'F': ignored buffer 'X' (matches ignored pattern 'P')"
// Errors name the file and the tensor:
//   "weights file 'F': missing tensor 'NAME' (expected shape [..])"
//   "weights file 'F': tensor 'NAME' has shape [..] but the model expects [..]"
//   "weights file 'F': tensor 'NAME' has dtype I32; expected F32, F16 or BF16"
//   "weights file 'F': tensor 'ALIAS' (alias of 'NAME') differs from tensor 'FOUND'"
StatusOr<std::map<std::string, Tensor>> bindWeights(const std::vector<ParamSpec>& params,
                                                   const BindingRules& rules,
                                                   const WeightFiles& file,
                                                   std::vector<std::string>* warnings);

// F32 tensors for every param, each filled by initTensor(kind, fanIn, fanOut, seed,
// paramStream(name)): a param's values depend on its name and the seed only,
// not on its place in the table, so passes that reorder params keep them.
// Error: the parameters do not fit in memory (checkParamsFit).
StatusOr<std::map<std::string, Tensor>> randomWeights(const std::vector<ParamSpec>& params,
                                                      uint64_t seed);

// The F32 bytes of all `params` against the machine's memory limit
// (runtime/MemoryLimit.h), before any of them is allocated; the error names
// the largest. bindWeights and randomWeights check it first.
Status checkParamsFit(const std::vector<ParamSpec>& params);

// The random stream of a parameter: the 64-bit FNV-1a hash of its name.
uint64_t paramStream(const std::string& name);

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_WEIGHTBINDING_H
