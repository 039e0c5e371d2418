// A model compiled with --target cuda against the reference backend's
// outputs (computed where MLIR is, by tests/gpu/prepare.py), on the GPU
// machine, which has neither MLIR nor a toolkit: it loads DIR/libmodel.so
// through the C ABI (runtime/host, no MLIR), with the seeded weights the
// reference used, and runs each case of DIR/cases.txt ("inputs expected"
// per line, safetensors): every output within --tolerance of the
// reference relative to max(1, max |reference|), as `compile --verify`
// checks; then 4 threads run the last case at once and must reproduce its
// outputs bit for bit (their later runs are CUDA graphs' replays: the
// same launches as the first), and so must the last case run through the C ABI
// with its inputs and outputs in device memory (tf_tensor.device, a CUDA
// model only). Then decoding, against the same model compiled for
// the cpu target (DIR/cpu, itself verified against the reference where it
// was built): the stateful entries in the interface's order on one state
// of each (encode or prefill, then decode_step; each entry with outputs
// twice, the second time on the cache the first filled) with the inputs of
// DIR/decode.safetensors, then a beam-search reorder, a state copy and a
// reset, each followed by a step, every output within the tolerance; then
// the steps after the reset twice more on the same state (captured into
// CUDA graphs, then replayed). With
// --bench N it times N runs of DIR/bench.safetensors instead (median and
// best ms, GFLOP/s by the model's FLOP count), and decode steps at batch 32
// eagerly and as CUDA graphs' replays.
//
//   cuda_model_check DIR [--tolerance 1e-3] [--bench N] [--library cpu/libmodel.so]
//
// --library checks another artifact of DIR in place of libmodel.so: with
// the cpu one (ctest cuda_model_check_cpu) the cases, the reference outputs
// and the decoding protocol are exercised on machines without a GPU.
//
// Exit 0: passed; 1: a failure (printed); 77: no CUDA device (skipped).

#include "runtime/Safetensors.h"
#include "runtime/Tensor.h"
#include "runtime/exec/model.h"
#include "runtime/host/CompiledModel.h"
#include "tests/gpu/CheckUtil.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace rt = transfuse::rt;
using gpu_check::compare;
using gpu_check::readAll;
using gpu_check::sameBytes;
using gpu_check::TensorMap;

namespace {

// The tensors of `all` that entry `entry` of `model` takes.
TensorMap inputsOf(rt::CompiledModel& model, const std::string& entry, const TensorMap& all) {
  TensorMap picked;
  auto specs = model.inputs(entry);
  if (specs)
    for (const rt::TensorSpec& s : *specs)
      if (auto it = all.find(s.name); it != all.end()) picked[s.name] = it->second;
  return picked;
}

// FlashAttention's rule for a bf16 model: each output's max |error| against
// the reference at most twice the unfused bf16 model's (plus 1e-6 of the
// reference's scale, for outputs both get exactly).
bool compareBf16(const std::string& what, const TensorMap& fused, const TensorMap& unfused,
                 const TensorMap& want) {
  bool ok = true;
  for (const auto& [name, ref] : want) {
    auto f = fused.find(name), u = unfused.find(name);
    if (f == fused.end() || u == unfused.end() || f->second.shape != ref.shape ||
        u->second.shape != ref.shape) {
      std::printf("%s: output '%s' missing or of another shape  FAILED\n", what.c_str(), name.c_str());
      ok = false;
      continue;
    }
    std::vector<float> fs, us;
    const float* fv = rt::floatData(f->second, fs);
    const float* uv = rt::floatData(u->second, us);
    double fe = 0, ue = 0, scale = 1;
    for (int64_t i = 0; i < ref.numElements(); ++i) {
      const double r = gpu_check::value(ref, i);
      scale = std::max(scale, std::fabs(r));
      const double e1 = std::fabs(fv[i] - r), e2 = std::fabs(uv[i] - r);
      fe = std::isnan(e1) ? INFINITY : std::max(fe, e1);
      ue = std::isnan(e2) ? INFINITY : std::max(ue, e2);
    }
    const bool pass = fe <= 2.0 * ue + 1e-6 * scale;
    ok &= pass;
    std::printf("%s %s: bf16 fused max |error| %.3g, unfused %.3g %s\n", what.c_str(),
                name.c_str(), fe, ue, pass ? "ok" : "FAILED (more than twice the unfused error)");
  }
  return ok;
}

// Decoding on the cuda model against the cpu model (see the file comment).
bool checkDecoding(const std::string& dir, rt::CompiledModel& cuda, double tolerance) {
  rt::LoadOptions load;
  auto cpu = rt::CompiledModel::load(dir + "/cpu/libmodel.so", load);
  if (!cpu) {
    std::printf("%s  FAILED\n", cpu.status().message().c_str());
    return false;
  }
  const TensorMap all = readAll(dir + "/decode.safetensors");
  auto cudaState = cuda.createState();
  auto cpuState = (*cpu)->createState();
  if (!cudaState || !cpuState) {
    std::printf("creating states: %s%s  FAILED\n", cudaState ? "" : cudaState.status().message().c_str(),
                cpuState ? "" : cpuState.status().message().c_str());
    return false;
  }
  std::vector<std::string> entries;
  for (const std::string& e : cuda.entryPoints())
    if (e != "forward") entries.push_back(e);
  if (entries.empty()) {
    std::printf("%s: no decoding entries  FAILED\n", dir.c_str());
    return false;
  }
  bool ok = true;
  auto step = [&](const std::string& entry, const std::string& what) {
    const TensorMap inputs = inputsOf(cuda, entry, all);
    auto got = cuda.run(entry, inputs, cudaState->get());
    auto want = (*cpu)->run(entry, inputs, cpuState->get());
    if (!got || !want) {
      std::printf("%s %s: %s%s  FAILED\n", dir.c_str(), what.c_str(),
                  got ? "" : got.status().message().c_str(), want ? "" : want.status().message().c_str());
      ok = false;
      return;
    }
    if (!want->empty()) ok &= compare(dir + " " + what + " (against the cpu target)", *got, *want, tolerance);
    if ((*cudaState)->length() != (*cpuState)->length()) {
      std::printf("%s %s: state lengths %lld and %lld  FAILED\n", dir.c_str(), what.c_str(),
                  (long long)(*cudaState)->length(), (long long)(*cpuState)->length());
      ok = false;
    }
  };
  for (const std::string& e : entries) {
    auto outs = cuda.outputs(e);
    const int calls = outs && !outs->empty() ? 2 : 1;
    for (int c = 0; c < calls; ++c) step(e, "@" + e + (c ? " (cached)" : ""));
  }
  const std::string last = entries.back();
  // Beam search: rows reversed, row 0 taken twice.
  int64_t rows = all.begin()->second.shape.empty() ? 1 : all.begin()->second.shape[0];
  std::vector<int32_t> order;
  for (int64_t r = rows - 1; r >= 0; --r) order.push_back(static_cast<int32_t>(r));
  if (rows > 1) order[rows - 1] = 0, order[0] = 0;
  for (auto* s : {cudaState->get(), cpuState->get()})
    if (rt::Status st = s->reorder(order); !st) {
      std::printf("reorder: %s  FAILED\n", st.message().c_str());
      return false;
    }
  step(last, "@" + last + " after a reorder");
  auto cudaCopy = cuda.createState();
  auto cpuCopy = (*cpu)->createState();
  if (!cudaCopy || !cpuCopy || !(*cudaCopy)->copyFrom(**cudaState) || !(*cpuCopy)->copyFrom(**cpuState)) {
    std::printf("copying a state  FAILED\n");
    return false;
  }
  std::swap(*cudaState, *cudaCopy);
  std::swap(*cpuState, *cpuCopy);
  step(last, "@" + last + " on a copied state");
  for (auto* s : {cudaState->get(), cpuState->get()})
    if (rt::Status st = s->reset(); !st) {
      std::printf("reset: %s  FAILED\n", st.message().c_str());
      return false;
    }
  for (const std::string& e : entries) step(e, "@" + e + " after a reset");
  // The same calls on the same state twice more: the second time their
  // launches are captured into CUDA graphs, the third time those replay.
  for (const char* pass : {" (captured)", " (replayed)"}) {
    for (auto* s : {cudaState->get(), cpuState->get()})
      if (rt::Status st = s->reset(); !st) {
        std::printf("reset: %s  FAILED\n", st.message().c_str());
        return false;
      }
    for (const std::string& e : entries) step(e, "@" + e + " after a reset" + pass);
  }
  return ok;
}

// The forward entry through the C ABI with every input and output in device
// memory (cudaMalloc; the model's CUDA runtime shares the device's primary
// context with this program's): the outputs must be the bytes of `want`.
bool checkDeviceTensors(const std::string& library, const TensorMap& inputs, const TensorMap& want) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  auto create = lib ? reinterpret_cast<decltype(&tf_model_create)>(dlsym(lib, "tf_model_create")) : nullptr;
  auto run = lib ? reinterpret_cast<decltype(&tf_model_run)>(dlsym(lib, "tf_model_run")) : nullptr;
  auto find = lib ? reinterpret_cast<decltype(&tf_model_find_entry_point)>(
                        dlsym(lib, "tf_model_find_entry_point"))
                  : nullptr;
  auto device = lib ? reinterpret_cast<decltype(&tf_model_device)>(dlsym(lib, "tf_model_device")) : nullptr;
  auto destroy = lib ? reinterpret_cast<decltype(&tf_model_destroy)>(dlsym(lib, "tf_model_destroy")) : nullptr;
  if (!create || !run || !find || !device || !destroy) {
    std::printf("%s: the C ABI's functions not found  FAILED\n", library.c_str());
    return false;
  }
  tf_model* m = nullptr;
  tf_error err;
  tf_options options = {};
  if (create(nullptr, &options, &m, &err) != 0) {
    std::printf("%s  FAILED\n", err.message);
    return false;
  }
  bool ok = true;
  if (device(m) == TF_DEVICE_CUDA) {
    std::vector<void*> buffers;
    // A device buffer of t's size holding its bytes (inputs) or NaN
    // (outputs, so that one the run does not write cannot pass).
    auto deviceBuffer = [&](const rt::Tensor& t, bool copy) -> void* {
      void* p = nullptr;
      const size_t bytes = std::max<size_t>(t.bytes.size(), 1);
      if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
      buffers.push_back(p);
      const cudaError_t e = copy ? cudaMemcpy(p, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice)
                                 : cudaMemset(p, 0xff, bytes);
      return e == cudaSuccess ? p : nullptr;
    };
    std::vector<tf_tensor> ins, outs;
    for (const auto& [name, t] : inputs)
      ins.push_back({name.c_str(), int32_t(t.dtype), int32_t(t.shape.size()), t.shape.data(),
                     deviceBuffer(t, true), TF_DEVICE_CUDA});
    for (const auto& [name, t] : want)
      outs.push_back({name.c_str(), int32_t(t.dtype), int32_t(t.shape.size()), t.shape.data(),
                      deviceBuffer(t, false), TF_DEVICE_CUDA});
    for (const tf_tensor& t : ins) ok &= t.data != nullptr;
    for (const tf_tensor& t : outs) ok &= t.data != nullptr;
    if (!ok) {
      std::printf("device tensors: cudaMalloc or a copy failed  FAILED\n");
    } else if (run(m, find(m, "forward"), ins.data(), int32_t(ins.size()), outs.data(),
                   int32_t(outs.size()), &err) != 0) {
      std::printf("device tensors: %s  FAILED\n", err.message);
      ok = false;
    }
    size_t k = 0;
    for (const auto& [name, t] : want) {
      std::vector<uint8_t> got(t.bytes.size());
      const void* from = outs[k++].data;
      if (ok && cudaMemcpy(got.data(), from, got.size(), cudaMemcpyDeviceToHost) != cudaSuccess) {
        std::printf("device tensors: reading output '%s' back failed  FAILED\n", name.c_str());
        ok = false;
      }
      if (ok && got != t.bytes) {
        std::printf("device tensors: output '%s' differs from the host run  FAILED\n", name.c_str());
        ok = false;
      }
    }
    for (void* p : buffers) cudaFree(p);
    if (ok) std::printf("%s: inputs and outputs in device memory: identical outputs\n", library.c_str());
  }
  destroy(m);
  return ok;
}

// Decode steps at batch 32 (what CUDA graphs are for: each step's work is
// small and its launches many): three rounds of a 16-token prefix and 24
// one-token steps (fewer where the state holds fewer positions) on one
// state, reset between them. Round 1 runs eagerly,
// round 2 captures each step's graph, round 3 replays them; prints the
// median step of rounds 1 and 3.
bool benchDecoding(const std::string& dir, rt::CompiledModel& model) {
  std::vector<std::string> entries;
  for (const std::string& e : model.entryPoints())
    if (e != "forward" && e != "loss" && e != "loss_grad") entries.push_back(e);
  if (entries.empty() || entries.back() != "decode_step") return true;
  auto state = model.createState();
  if (!state) {
    std::printf("%s\n", state.status().message().c_str());
    return false;
  }
  // A prefix and steps within the positions the state holds (the first
  // entry's compiled maximum length).
  int64_t positions = 16;
  if (auto specs = model.inputs(entries.front()); specs && !specs->empty())
    positions = specs->front().maxShape.size() > 1 ? specs->front().maxShape[1] : positions;
  const int64_t prefix = std::min<int64_t>(16, positions / 4);
  const int steps = static_cast<int>(std::min<int64_t>(24, positions - prefix));
  auto inputsFor = [&](const std::string& entry) {
    TensorMap inputs;
    auto specs = model.inputs(entry);
    for (const rt::TensorSpec& spec : specs ? *specs : std::vector<rt::TensorSpec>()) {
      std::vector<int64_t> shape = spec.shape;
      for (size_t d = 0; d < shape.size(); ++d)
        if (shape[d] < 0) shape[d] = d == 0 ? 32 : entry == "decode_step" ? 1 : prefix;
      rt::Tensor t = rt::Tensor::zeros(spec.dtype, shape);
      if (spec.dtype == rt::DType::I32)
        for (int64_t i = 0; i < t.numElements(); ++i) t.data<int32_t>()[i] = 1 + i % 7;
      inputs[spec.name] = std::move(t);
    }
    return inputs;
  };
  std::vector<double> rounds[3];
  for (int round = 0; round < 3; ++round) {
    if (rt::Status s = (*state)->reset(); !s) {
      std::printf("%s\n", s.message().c_str());
      return false;
    }
    for (const std::string& e : entries) {
      const TensorMap inputs = inputsFor(e);
      const int calls = e == "decode_step" ? steps : 1;
      for (int i = 0; i < calls; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        auto out = model.run(e, inputs, state->get());
        if (!out) {
          std::printf("@%s: %s\n", e.c_str(), out.status().message().c_str());
          return false;
        }
        if (e == "decode_step")
          rounds[round].push_back(
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("%s decode_step at batch 32: median %.3f ms eager, %.3f ms replaying CUDA graphs "
              "(%.2fx; host inputs and outputs copied each step)\n",
              dir.c_str(), median(rounds[0]), median(rounds[2]), median(rounds[0]) / median(rounds[2]));
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
  std::string library = "libmodel.so";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--tolerance") tolerance = std::atof(argv[i + 1]);
    else if (flag == "--bench") bench = std::atoi(argv[i + 1]);
    else if (flag == "--library") library = argv[i + 1];
    else {
      std::printf("unknown flag %s\n", flag.c_str());
      return 1;
    }
  }
  rt::LoadOptions load;  // seed 0: the weights prepare.py's reference drew
  auto loaded = rt::CompiledModel::load(dir + "/" + library, load);
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
    return benchDecoding(dir, model) ? 0 : 1;
  }

  // A bf16 model (--dtype bf16) has its unfused bf16 build beside it: each
  // output's error against the reference is held to FlashAttention's rule
  // (at most twice the unfused bf16 model's) instead of the tolerance.
  std::unique_ptr<rt::CompiledModel> unfused;
  if (std::ifstream(dir + "/unfused/libmodel.so").good()) {
    auto u = rt::CompiledModel::load(dir + "/unfused/libmodel.so", load);
    if (!u) {
      std::printf("%s\n", u.status().message().c_str());
      return 1;
    }
    unfused = std::move(*u);
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
    // The first run from a thread that did not create the model: the
    // weights' upload must be complete and the device current there too.
    rt::StatusOr<TensorMap> outputs = rt::Status::error("not run");
    std::thread([&] { outputs = model.run("forward", inputs); }).join();
    if (!outputs) {
      std::printf("%s: %s  FAILED\n", in.c_str(), outputs.status().message().c_str());
      ok = false;
      continue;
    }
    if (unfused) {
      auto baseline = unfused->run("forward", inputs);
      if (!baseline) {
        std::printf("%s unfused: %s  FAILED\n", in.c_str(), baseline.status().message().c_str());
        ok = false;
        continue;
      }
      ok &= compareBf16(dir + " " + in, *outputs, *baseline, readAll(dir + "/" + expected));
    } else {
      ok &= compare(dir + " " + in, *outputs, readAll(dir + "/" + expected), tolerance);
    }
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
  ok &= checkDeviceTensors(dir + "/" + library, lastInputs, lastOutputs);
  if (!unfused) ok &= checkDecoding(dir, model, tolerance);  // against an f32 cpu build
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
