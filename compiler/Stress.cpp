//===- Stress.cpp - compiled models under concurrent load -----------------===//
//
// See Stress.h. The serial results are computed first, one call at a
// time; the threads then draw (model, case) pairs from their own seeded
// generators, so a run is reproducible from --seed and the thread count.
//
//===----------------------------------------------------------------------===//

#include "compiler/Stress.h"

#include "models/Models.h"
#include "runtime/Safetensors.h"
#include "runtime/host/CompiledModel.h"
#include "compiler/Compiler.h"
#include "compiler/Support.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <unistd.h>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::compiler;
namespace rt = ::transfuse::rt;

namespace {

using TensorMap = std::map<std::string, rt::Tensor>;

// ASan's quarantine of freed blocks and TSan's shadow memory grow the
// resident set by design, so the lifecycle's memory check is for plain builds
// (under ASan, LeakSanitizer checks at exit).
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TRANSFUSE_SANITIZED 1
#endif
#endif
#if defined(TRANSFUSE_SANITIZED) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

/// Inputs the model must refuse, and a word its error must contain.
struct BadCase {
  TensorMap inputs;
  std::string expect;
};

struct Model {
  std::string name, library;
  std::unique_ptr<rt::CompiledModel> compiled;
  std::vector<TensorMap> inputs;  // good cases
  std::vector<TensorMap> serial;  // their serial outputs
  std::vector<BadCase> bad;
};

int64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * ::sysconf(_SC_PAGE_SIZE);
}

bool sameBytes(const TensorMap &a, const TensorMap &b) {
  if (a.size() != b.size())
    return false;
  for (const auto &[name, t] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.shape != t.shape || it->second.bytes != t.bytes)
      return false;
  }
  return true;
}

/// Bad variants of good inputs: each a mistake an app makes.
std::vector<BadCase> badCases(const TensorMap &good, const EntryPoint &ep) {
  std::vector<BadCase> out;
  const rt::TensorSpec &first = ep.inputs.front();
  {
    BadCase c{good, "outside the vocabulary"};
    rt::Tensor &t = c.inputs[first.name];
    if (t.dtype == rt::DType::I32 && t.numElements() > 0) {
      t.data<int32_t>()[t.numElements() - 1] = 1 << 30;
      out.push_back(std::move(c));
    }
  }
  {
    BadCase c{good, first.name};
    std::vector<int64_t> shape = c.inputs[first.name].shape;
    for (auto [d, size] : llvm::enumerate(first.shape))
      if (size < 0)
        shape[d] = first.maxShape[d] + 1;
    c.inputs[first.name] = rt::Tensor::zeros(first.dtype, shape);
    out.push_back(std::move(c));
  }
  {
    BadCase c{good, first.name};
    c.inputs[first.name] = rt::Tensor::zeros(first.dtype == rt::DType::F32 ? rt::DType::I32
                                                                           : rt::DType::F32,
                                             c.inputs[first.name].shape);
    out.push_back(std::move(c));
  }
  {
    BadCase c{good, "bogus"};
    c.inputs["bogus"] = rt::Tensor::zeros(rt::DType::F32, {1});
    out.push_back(std::move(c));
  }
  {
    BadCase c{good, first.name};
    c.inputs.erase(first.name);
    out.push_back(std::move(c));
  }
  return out;
}

/// Loads (compiling a definition first) and prepares one model's cases.
llvm::Error prepareModel(const std::string &path, const StressOptions &o, size_t index,
                         Model &m, std::vector<TemporaryDirectory> &temps) {
  MLIRContext context;
  std::string dir = path;
  OwningOpRef<ModuleOp> module;
  if (llvm::sys::fs::is_directory(path)) {
    auto loaded = loadModelDefinition(context, path + "/model.mlir", ::mlir::transfuse::BuildOptions());
    if (!loaded)
      return loaded.takeError();
    module = std::move(*loaded);
  } else {
    ::mlir::transfuse::BuildOptions build;
    build.maxBatch = o.maxBatch;
    build.maxSeqLen = o.maxSeqLen;
    auto loaded = loadModelDefinition(context, path, build);
    if (!loaded)
      return loaded.takeError();
    module = std::move(*loaded);
    auto temp = TemporaryDirectory::create("transfuse-stress");
    if (!temp)
      return temp.takeError();
    dir = temp->path();
    temps.push_back(std::move(*temp));
    auto strategy = FusionStrategy::parse("all");
    if (!strategy)
      return strategy.takeError();
    auto compiled = compile(*module, dir, CompileOptions{*strategy, Emit::kShared, o.build});
    if (!compiled)
      return error("compiling " + path + ": " + llvm::toString(compiled.takeError()));
  }
  m.name = llvm::sys::path::filename(path).str();
  m.library = dir + "/libmodel.so";
  rt::LoadOptions load;
  load.seed = o.seed + index;
  load.threads = o.modelThreads;
  auto compiled = rt::CompiledModel::load(m.library, load);
  if (!compiled.isOk())
    return error(compiled.status().message());
  m.compiled = std::move(*compiled);

  auto mi = extractInterface(*module);
  if (!mi)
    return mi.takeError();
  const EntryPoint *ep = nullptr;
  for (const EntryPoint &e : mi->entryPoints)
    if (e.name == "forward")
      ep = &e;
  if (!ep)
    return error(path + " has no forward entry point");
  int64_t maxB = 1, maxS = 1;
  for (const rt::TensorSpec &s : ep->inputs)
    for (auto [d, size] : llvm::enumerate(s.shape))
      if (size < 0)
        (d == 0 ? maxB : maxS) = std::max(d == 0 ? maxB : maxS, s.maxShape[d]);
  // Mixed sizes: the smallest, the largest and random ones between, some padded.
  std::mt19937_64 rng(o.seed * 7919 + index);
  std::uniform_int_distribution<int64_t> batch(1, maxB), len(1, maxS);
  for (int c = 0; c < 12; ++c) {
    int64_t b = c == 0 ? 1 : c == 1 ? maxB : batch(rng);
    int64_t s = c == 0 ? 1 : c == 1 ? maxS : len(rng), t = c == 0 ? 1 : c == 1 ? maxS : len(rng);
    auto inputs = randomInputs(*module, *ep, b, s, t, rng(), /*pad=*/c % 2 == 0);
    if (!inputs)
      return inputs.takeError();
    auto out = m.compiled->run("forward", *inputs);
    if (!out.isOk())
      return error(m.name + ": serial run: " + out.status().message());
    m.serial.push_back(std::move(*out));
    for (BadCase &bc : badCases(*inputs, *ep))
      m.bad.push_back(std::move(bc));
    m.inputs.push_back(std::move(*inputs));
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<StressResult> compiler::stressModels(const StressOptions &o) {
  if (o.models.empty())
    return error("stress needs at least one model");
  std::vector<TemporaryDirectory> temps;
  std::vector<Model> models(o.models.size());
  for (size_t i = 0; i < o.models.size(); ++i)
    if (llvm::Error e = prepareModel(o.models[i], o, i, models[i], temps))
      return std::move(e);

  StressResult result;
  for (const Model &m : models)
    result.cases += static_cast<int64_t>(m.inputs.size() + m.bad.size());
  std::mutex failMutex;
  auto fail = [&](std::string what) {
    std::lock_guard<std::mutex> lock(failMutex);
    if (result.failures.size() < 20)
      result.failures.push_back(std::move(what));
  };
  std::atomic<int64_t> good{0}, bad{0};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(o.seed * 1000003 + t);
      TensorMap outputs; // reused across runs, as a serving loop does
      for (int64_t r = 0; r < o.runs; ++r) {
        Model &m = models[rng() % models.size()];
        if (rng() % o.badEvery == 0) {
          const BadCase &c = m.bad[rng() % m.bad.size()];
          rt::Status s = m.compiled->runInto("forward", c.inputs, outputs);
          if (s.isOk())
            fail(m.name + ": a bad input (expected an error naming '" + c.expect +
                 "') was accepted");
          else if (s.message().find(c.expect) == std::string::npos)
            fail(m.name + ": the error '" + s.message() + "' does not name '" + c.expect + "'");
          ++bad;
          continue;
        }
        size_t k = rng() % m.inputs.size();
        rt::Status s = m.compiled->runInto("forward", m.inputs[k], outputs);
        if (!s.isOk())
          fail(m.name + ": case " + std::to_string(k) + " failed: " + s.message());
        else if (!sameBytes(outputs, m.serial[k]))
          fail(m.name + ": case " + std::to_string(k) +
               " differs from its serial result under concurrent load");
        ++good;
      }
    });
  for (std::thread &t : threads)
    t.join();
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  result.goodRuns = good;
  result.badRuns = bad;

  // Every model still gives its serial results.
  for (Model &m : models)
    for (size_t k = 0; k < m.inputs.size(); ++k) {
      auto out = m.compiled->run("forward", m.inputs[k]);
      if (!out.isOk() || !sameBytes(*out, m.serial[k]))
        fail(m.name + ": case " + std::to_string(k) + " after the load: " +
             (out.isOk() ? "differs from its serial result" : out.status().message()));
    }

  // Lifecycle: create, run and destroy the first model; load a bad file.
  if (o.lifecycle > 0) {
    Model &m = models.front();
    llvm::SmallString<128> badPath;
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile("transfuse-bad", "safetensors",
                                                                badPath))
      return error("cannot create a temporary file: " + ec.message());
    {
      // A valid header length, then a header whose tensor entry is a number.
      const std::string header = R"({"w": 1})";
      std::string bytes(8, '\0');
      bytes[0] = static_cast<char>(header.size());
      std::ofstream bad(badPath.str().str(), std::ios::binary);
      bad << bytes << header;
    }
    rt::LoadOptions load;
    load.seed = o.seed;
    load.threads = o.modelThreads;
    rt::LoadOptions badLoad = load;
    badLoad.weightsPath = badPath.str().str();
    for (int64_t i = 0; i < o.lifecycle; ++i) {
      if (i == std::max<int64_t>(1, o.lifecycle / 10))
        result.rssWarm = residentBytes();
      load.seed = o.seed; // the first model's seed: its serial results apply
      auto loaded = rt::CompiledModel::load(m.library, load);
      if (!loaded.isOk()) {
        fail("lifecycle " + std::to_string(i) + ": " + loaded.status().message());
        break;
      }
      auto out = (*loaded)->run("forward", m.inputs[i % m.inputs.size()]);
      if (!out.isOk() || !sameBytes(*out, m.serial[i % m.inputs.size()]))
        fail("lifecycle " + std::to_string(i) + ": a fresh model differs from the first");
      auto refused = rt::CompiledModel::load(m.library, badLoad);
      if (refused.isOk() || refused.status().message().find(badLoad.weightsPath) == std::string::npos)
        fail("lifecycle " + std::to_string(i) + ": the bad weights file was not refused by name");
      result.cycles = i + 1;
    }
    result.rssEnd = residentBytes();
    llvm::sys::fs::remove(badPath);
    // Steady memory: a leak of 16 KiB a cycle shows over 1000 cycles.
    constexpr int64_t kSlack = 16 << 20;
    if (!kSanitized && o.lifecycle >= 100 && result.rssEnd - result.rssWarm > kSlack)
      fail("lifecycle: resident memory grew from " + std::to_string(result.rssWarm) + " to " +
           std::to_string(result.rssEnd) + " bytes over " + std::to_string(o.lifecycle) +
           " cycles");
  }
  return result;
}
