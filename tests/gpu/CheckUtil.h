// What the model checkers share (model_check.cpp, train_check.cpp):
// safetensors files as tensor maps, the tolerance rule of `compile
// --verify`, byte equality.
#ifndef TRANSFUSE_TESTS_GPU_CHECKUTIL_H
#define TRANSFUSE_TESTS_GPU_CHECKUTIL_H

#include "runtime/Safetensors.h"
#include "runtime/Tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace gpu_check {

namespace rt = transfuse::rt;
using TensorMap = std::map<std::string, rt::Tensor>;

// Every tensor of a safetensors file; exits printing the error when it cannot be read.
inline TensorMap readAll(const std::string& path) {
  auto file = rt::SafetensorsFile::open(path);
  if (!file) {
    std::printf("%s\n", file.status().message().c_str());
    std::exit(1);
  }
  TensorMap tensors;
  for (const std::string& name : file->names()) {
    auto t = file->read(name);
    if (!t) {
      std::printf("%s\n", t.status().message().c_str());
      std::exit(1);
    }
    tensors[name] = std::move(*t);
  }
  return tensors;
}

inline double value(const rt::Tensor& t, int64_t i) {
  return t.dtype == rt::DType::F64 ? t.data<double>()[i] : t.data<float>()[i];
}

// Returns whether every tensor of `want` is in `got` with its shape and
// within tolerance · max(1, max |want|); prints a line per tensor (`each`),
// else the failures and one summary line.
inline bool compare(const std::string& what, const TensorMap& got, const TensorMap& want,
                    double tolerance, bool each = true) {
  bool ok = true;
  double worstRatio = 0;  // of the error to its bound
  for (const auto& [name, ref] : want) {
    auto it = got.find(name);
    if (it == got.end() || it->second.shape != ref.shape) {
      std::printf("%s: output '%s' missing or of another shape  FAILED\n", what.c_str(), name.c_str());
      ok = false;
      continue;
    }
    double worst = 0, scale = 1;
    for (int64_t i = 0; i < ref.numElements(); ++i) {
      const double r = value(ref, i), e = std::fabs(value(it->second, i) - r);
      scale = std::max(scale, std::fabs(r));
      if (e > worst || std::isnan(e)) worst = std::isnan(e) ? INFINITY : e;
    }
    const bool pass = worst <= tolerance * scale;
    ok &= pass;
    worstRatio = std::max(worstRatio, worst / (tolerance * scale));
    if (each || !pass)
      std::printf("%s %s: max |cuda - reference| = %.3g (bound %.3g) %s\n", what.c_str(),
                  name.c_str(), worst, tolerance * scale, pass ? "ok" : "FAILED");
  }
  if (!each)
    std::printf("%s: %zu tensors, the largest error %.3g of its bound %s\n", what.c_str(),
                want.size(), worstRatio, ok ? "ok" : "FAILED");
  return ok;
}

inline bool sameBytes(const TensorMap& a, const TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.bytes != t.bytes) return false;
  }
  return true;
}

}  // namespace gpu_check

#endif  // TRANSFUSE_TESTS_GPU_CHECKUTIL_H
