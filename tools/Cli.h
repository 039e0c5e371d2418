//===- Cli.h - the drivers' flags and errors -------------------------------===//
//
// What every command of the `transfuse` driver shares: the flag readers and the one way to fail (a message naming the flag or file,
// exit code 1). Only tools/ includes this.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_TOOLS_CLI_H
#define TRANSFUSE_TOOLS_CLI_H

#include "compiler/Compiler.h"
#include "runtime/Safetensors.h"
#include "runtime/Status.h"
#include "runtime/kernels/Bf16Gemm.h"
#include "runtime/kernels/Int8Gemm.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <array>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

namespace mlir::transfuse::tools {

namespace rt = ::transfuse::rt;

[[noreturn]] inline void die(const llvm::Twine &message) {
  llvm::outs().flush(); // what was printed comes before the error
  llvm::errs() << "transfuse: error: " << message << "\n";
  std::exit(1);
}

/// The integer value of a flag in [min, max], or `fallback` when absent.
inline int64_t intFlag(const std::map<std::string, std::string> &flags, const std::string &name,
                       int64_t fallback, int64_t min = 0, int64_t max = int64_t{1} << 30) {
  auto it = flags.find(name);
  if (it == flags.end())
    return fallback;
  int64_t v;
  if (llvm::StringRef(it->second).getAsInteger(10, v))
    die("flag " + name + " expects an integer, got '" + it->second + "'");
  if (v < min || v > max)
    die("flag " + name + " must be in [" + llvm::Twine(min) + ", " + llvm::Twine(max) +
        "], got " + llvm::Twine(v));
  return v;
}

inline std::string flag(const std::map<std::string, std::string> &flags, const std::string &name,
                        const std::string &fallback = "") {
  auto it = flags.find(name);
  return it == flags.end() ? fallback : it->second;
}

/// --dtype: one of `allowed` (the first is the default), else an error
/// naming what the command offers.
inline std::string dtypeFlag(const std::map<std::string, std::string> &flags,
                             std::initializer_list<const char *> allowed) {
  const std::string dtype = flag(flags, "--dtype", *allowed.begin());
  std::string list;
  for (const char *a : allowed) {
    if (dtype == a)
      return dtype;
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  die("--dtype " + dtype + " is not one of " + list);
}

/// A --dtype into a build (f32: neither bf16 nor int8), and back.
inline void setDtype(emit::BuildOptions &build, const std::string &dtype) {
  build.bf16 = dtype == "bf16";
  build.int8 = dtype == "int8";
}
inline std::string dtypeName(const emit::BuildOptions &build) {
  return build.bf16 ? "bf16" : build.int8 ? "int8" : "f32";
}
/// For a cpu build's report: ", bf16 amx", ", int8 amx, vnni under 16
/// rows" (the GEMM paths this process takes), or nothing for f32.
inline std::string dtypePaths(const emit::BuildOptions &build) {
  namespace tk = ::transfuse::kernels;
  if (build.bf16) return ", bf16 " + std::string(tk::bf16PathName(tk::bestBf16Path()));
  if (build.int8) return ", int8 " + tk::int8PathsInUse();
  return "";
}

/// --image-size as [height, width] from "S" (square) or "HxW"; `fallback`
/// when absent.
inline std::array<int64_t, 2> imageSizeFlag(const std::map<std::string, std::string> &flags,
                                            std::array<int64_t, 2> fallback = {0, 0}) {
  auto it = flags.find("--image-size");
  if (it == flags.end())
    return fallback;
  auto [h, w] = llvm::StringRef(it->second).split('x');
  int64_t height, width;
  if (w.empty())
    w = h;
  if (h.getAsInteger(10, height) || w.getAsInteger(10, width) || height < 1 || width < 1 ||
      height > 65536 || width > 65536)
    die("flag --image-size expects SIZE or HEIGHTxWIDTH in [1, 65536], got '" + it->second + "'");
  return {height, width};
}

template <typename T>
T orDie(llvm::Expected<T> value) {
  if (!value)
    die(llvm::toString(value.takeError()));
  return std::move(*value);
}

template <typename T>
T orDie(rt::StatusOr<T> value) {
  if (!value.isOk())
    die(value.status().message());
  return std::move(*value);
}

inline void orDie(const rt::Status &status) {
  if (!status.isOk())
    die(status.message());
}

/// The number value of a flag, or `fallback` when absent; `what` says
/// what it must be when `ok` refuses it ("a number > 0").
template <typename Ok>
double floatFlag(const std::map<std::string, std::string> &flags, const std::string &name,
                 double fallback, Ok ok, const char *what) {
  auto it = flags.find(name);
  if (it == flags.end())
    return fallback;
  double v;
  if (llvm::StringRef(it->second).getAsDouble(v) || !ok(v))
    die("flag " + name + " expects " + what + ", got '" + it->second + "'");
  return v;
}

/// Writes `tensors` to the safetensors file `path`; exits with the error.
inline void writeTensors(const std::string &path,
                         const std::map<std::string, rt::Tensor> &tensors) {
  std::vector<std::pair<std::string, const rt::Tensor *>> list;
  for (const auto &[name, t] : tensors)
    list.emplace_back(name, &t);
  orDie(rt::writeSafetensors(path, list));
}

/// Weights for `mi` from a safetensors file (its warnings on stderr) or
/// random from `seed` (compiler::loadWeights); exits with the error.
inline reference::TensorMap loadWeights(const ModelInterface &mi, const std::string &path,
                                        uint64_t seed) {
  std::vector<std::string> warnings;
  reference::TensorMap weights = orDie(compiler::loadWeights(mi, path, seed, &warnings));
  for (const std::string &w : warnings)
    llvm::errs() << "transfuse: warning: " << w << "\n";
  return weights;
}

} // namespace mlir::transfuse::tools

#endif // TRANSFUSE_TOOLS_CLI_H
