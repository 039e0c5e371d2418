// A model compiled with --target cuda against the reference backend's
// outputs (computed where MLIR is, by tests/gpu/prepare.py), on the GPU
// machine, which has neither MLIR nor a toolkit: it loads DIR/libmodel.so
// through the C ABI (runtime/host, no MLIR), with the seeded weights the
// reference used, and runs each case of DIR/cases.txt ("inputs expected"
// per line, safetensors): every output within --tolerance of the
// reference relative to max(1, max |reference|), as `compile --verify`
// checks; then 4 threads run the last case at once and must reproduce its
// outputs bit for bit. With --bench N it times N runs of DIR/bench.safetensors
// instead (median and best ms, GFLOP/s by the model's FLOP count).
//
//   cuda_model_check DIR [--tolerance 1e-3] [--bench N]
//
// Exit 0: passed; 1: a failure (printed); 77: no CUDA device (skipped).

#include "runtime/Safetensors.h"
#include "runtime/Tensor.h"
#include "runtime/host/CompiledModel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace rt = transfuse::rt;
using TensorMap = std::map<std::string, rt::Tensor>;

namespace {

TensorMap readAll(const std::string& path) {
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

double value(const rt::Tensor& t, int64_t i) {
  return t.dtype == rt::DType::F64 ? t.data<double>()[i] : t.data<float>()[i];
}

// Prints and returns whether every output is within the tolerance.
bool compare(const std::string& what, const TensorMap& got, const TensorMap& want, double tolerance) {
  bool ok = true;
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
    std::printf("%s %s: max |cuda - reference| = %.3g (bound %.3g) %s\n", what.c_str(),
                name.c_str(), worst, tolerance * scale, pass ? "ok" : "FAILED");
  }
  return ok;
}

bool sameBytes(const TensorMap& a, const TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.bytes != t.bytes) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::printf("usage: %s DIR [--tolerance X] [--bench N]\n", argv[0]);
    return 1;
  }
  const std::string dir = argv[1];
  double tolerance = 1e-3;
  int bench = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--tolerance") tolerance = std::atof(argv[i + 1]);
    else if (flag == "--bench") bench = std::atoi(argv[i + 1]);
    else {
      std::printf("unknown flag %s\n", flag.c_str());
      return 1;
    }
  }
  rt::LoadOptions load;  // seed 0: the weights prepare.py's reference drew
  auto loaded = rt::CompiledModel::load(dir + "/libmodel.so", load);
  if (!loaded) {
    const std::string& m = loaded.status().message();
    std::printf("%s\n", m.c_str());
    return m.find("no CUDA device") != std::string::npos ? 77 : 1;
  }
  rt::CompiledModel& model = **loaded;

  if (bench > 0) {
    const TensorMap inputs = readAll(dir + "/bench.safetensors");
    TensorMap outputs;
    for (int i = 0; i < 3; ++i)
      if (rt::Status s = model.runInto("forward", inputs, outputs); !s) {
        std::printf("%s\n", s.message().c_str());
        return 1;
      }
    std::vector<double> ms;
    for (int i = 0; i < bench; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      if (rt::Status s = model.runInto("forward", inputs, outputs); !s) {
        std::printf("%s\n", s.message().c_str());
        return 1;
      }
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                       .count());
    }
    std::sort(ms.begin(), ms.end());
    auto counted = model.flops("forward", inputs);
    const double flops = counted ? *counted : 0.0;
    std::printf("%s forward: median %.3f ms, best %.3f ms, %.1f GFLOP/s at the median "
                "(host inputs and outputs copied each run)\n",
                dir.c_str(), ms[ms.size() / 2], ms[0], flops / (ms[ms.size() / 2] * 1e6));
    return 0;
  }

  std::ifstream cases(dir + "/cases.txt");
  std::string line, in, expected;
  bool ok = true;
  TensorMap lastInputs, lastOutputs;
  int n = 0;
  while (std::getline(cases, line)) {
    std::istringstream words(line);
    if (!(words >> in >> expected)) continue;
    TensorMap inputs = readAll(dir + "/" + in);
    auto outputs = model.run("forward", inputs);
    if (!outputs) {
      std::printf("%s: %s  FAILED\n", in.c_str(), outputs.status().message().c_str());
      ok = false;
      continue;
    }
    ok &= compare(dir + " " + in, *outputs, readAll(dir + "/" + expected), tolerance);
    lastInputs = std::move(inputs);
    lastOutputs = std::move(*outputs);
    ++n;
  }
  if (n == 0) {
    std::printf("%s/cases.txt lists no case  FAILED\n", dir.c_str());
    return 1;
  }
  // Concurrent runs: each thread its own arena and stream, the same bytes.
  std::vector<int> same(4, 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 5; ++r) {
        auto out = model.run("forward", lastInputs);
        same[t] &= out.isOk() && sameBytes(*out, lastOutputs);
      }
    });
  for (std::thread& t : threads) t.join();
  const bool identical = std::count(same.begin(), same.end(), 1) == 4;
  std::printf("%s: 20 runs from 4 threads at once: %s\n", dir.c_str(),
              identical ? "identical outputs" : "OUTPUTS DIFFER  FAILED");
  ok &= identical;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
