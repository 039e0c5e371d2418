//===- Verify.cpp - an artifact against the reference backend -------------===//
//
// See Compiler.h: random inputs for an entry point, and the compiled
// library's outputs compared with the fp64 interpreter's on several sizes,
// decoding steps on one state included, then concurrent runs compared bit
// for bit.
//
//===----------------------------------------------------------------------===//

#include "compiler/Compiler.h"
#include "compiler/Support.h"

#include "ir/State.h"
#include "ir/TransfuseDialect.h"
#include "runtime/host/CompiledModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <atomic>
#include <cmath>
#include <optional>
#include <random>
#include <thread>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::compiler;
namespace rt = ::transfuse::rt;

llvm::Expected<std::map<std::string, rt::Tensor>>
compiler::randomInputs(ModuleOp module, const EntryPoint &ep, int64_t batch, int64_t srcLen,
                    int64_t tgtLen, uint64_t seed, bool pad) {
  auto func = module.lookupSymbol<func::FuncOp>(ep.name);
  if (!func)
    return error("the model has no entry point '" + ep.name + "'");
  std::mt19937_64 rng(seed);
  std::map<std::string, rt::Tensor> inputs;
  for (auto [i, spec] : llvm::enumerate(ep.inputs)) {
    int64_t len = spec.name == "src_tokens" ? srcLen : tgtLen;
    std::vector<int64_t> shape;
    for (auto [d, size] : llvm::enumerate(spec.shape))
      shape.push_back(size >= 0                ? size
                      : spec.sizesOf >= 0      ? inputs[ep.inputs[spec.sizesOf].name].shape[d]
                      : d == 0                 ? batch
                                               : len);
    for (auto [d, size] : llvm::enumerate(shape))
      if (size > spec.maxShape[d])
        return error("input '" + spec.name + "': size " + llvm::Twine(size) + " of dimension " +
                     llvm::Twine(d) + " is over the compiled maximum " +
                     llvm::Twine(spec.maxShape[d]));
    rt::Tensor t = rt::Tensor::zeros(spec.dtype, shape);
    int64_t n = t.numElements();
    if (spec.dtype == rt::DType::F32) {
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      for (int64_t k = 0; k < n; ++k)
        t.data<float>()[k] = dist(rng);
    } else if (spec.dtype == rt::DType::I32) {
      // The vocabulary: the smallest table this input indexes; padding ids
      // from the masks computed from it.
      Value arg = func.getArgument(i);
      int64_t vocab = INT32_MAX;
      std::optional<int64_t> padId;
      for (Operation *user : arg.getUsers()) {
        if (auto g = dyn_cast<GatherOp>(user))
          vocab = std::min(vocab, g.getTable().getType().getDimSize(0));
        if (auto k = dyn_cast<KeyPaddingMaskOp>(user))
          padId = k.getPadId();
        if (auto c = dyn_cast<CrossEntropyOp>(user); c && c.getLabels() == arg)
          vocab = std::min(vocab, c.getLogits().getType().getDimSize(
                                      c.getLogits().getType().getRank() - 1));
      }
      if (vocab == INT32_MAX)
        vocab = 2;
      std::uniform_int_distribution<int64_t> dist(0, vocab - 1);
      int64_t rows = shape.empty() ? 1 : shape[0], cols = rows ? n / rows : 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          int64_t id = dist(rng);
          if (padId && id == *padId)
            id = (id + 1) % vocab;
          if (pad && padId && r == rows - 1 && rows > 1 && c >= cols - cols / 3)
            id = *padId;
          t.data<int32_t>()[r * cols + c] = (int32_t)id;
        }
    } else if (spec.dtype == rt::DType::Bool) {
      for (int64_t k = 0; k < n; ++k)
        t.data<uint8_t>()[k] = rng() & 1;
    } else {
      return error("input '" + spec.name + "': random " + rt::dtypeName(spec.dtype) +
                   " inputs are not supported");
    }
    inputs[spec.name] = std::move(t);
  }
  return inputs;
}

/// The largest |out - ref| of every output of one call, and of |ref|.
static llvm::Expected<VerifyCase> compareOutputs(const std::map<std::string, rt::Tensor> &got,
                                                 const reference::TensorMap &want,
                                                 VerifyCase c) {
  for (const auto &[name, ref] : want) {
    const rt::Tensor &out = got.at(name);
    if (out.shape != ref.shape)
      return error("output '" + name + "' has shape " + rt::shapeToString(out.shape) +
                   ", the reference " + rt::shapeToString(ref.shape));
    std::vector<float> scratch;  // a bf16 model's outputs as fp32
    const float *outFloats = ref.dtype == rt::DType::F64 ? rt::floatData(out, scratch) : nullptr;
    for (int64_t k = 0; k < ref.numElements(); ++k) {
      double r, o;
      if (ref.dtype == rt::DType::F64) {
        r = ref.data<double>()[k];
        o = outFloats[k];
      } else if (ref.dtype == rt::DType::I32) {
        r = ref.data<int32_t>()[k];
        o = out.data<int32_t>()[k];
      } else {
        r = ref.data<uint8_t>()[k];
        o = out.data<uint8_t>()[k];
      }
      double err = std::isnan(o) != std::isnan(r) ? INFINITY : std::isnan(r) ? 0 : std::fabs(o - r);
      c.maxAbsError = std::max(c.maxAbsError, err);
      c.maxAbsReference = std::max(c.maxAbsReference, std::fabs(r));
    }
  }
  return c;
}

llvm::Expected<VerifyResult> compiler::verify(ModuleOp module, const ModelInterface &mi,
                                                   StringRef dir, uint64_t seed) {
  rt::LoadOptions load;
  load.seed = seed;
  auto compiled = fromStatus(rt::CompiledModel::load((dir + "/libmodel.so").str(), load));
  if (!compiled)
    return compiled.takeError();
  auto weights = fromStatus(rt::randomWeights(mi.params, seed));
  if (!weights)
    return weights.takeError();
  // One token, a short batch with padding, and the longest sizes (kept
  // small: the reference backend is a plain fp64 interpreter).
  constexpr size_t kCases = 3;
  auto sizesFor = [](const EntryPoint &ep) {
    int64_t maxB = 1, maxS = 1;
    for (const rt::TensorSpec &s : ep.inputs)
      for (auto [d, size] : llvm::enumerate(s.shape))
        if (size < 0)
          (d == 0 ? maxB : maxS) = std::max(d == 0 ? maxB : maxS, s.maxShape[d]);
    return std::array<std::array<int64_t, 3>, kCases>{
        {{1, 1, 1},
         {std::min<int64_t>(3, maxB), std::min<int64_t>(7, maxS), std::min<int64_t>(5, maxS)},
         {std::min<int64_t>(2, maxB), std::min<int64_t>(16, maxS), std::min<int64_t>(13, maxS)}}};
  };
  // Entries that use state run per case in the interface's order (encode
  // before decode_step, prefill before decode_step) on one state of each
  // backend, sharing the inputs of one name; each one with outputs runs
  // twice, the second time on the cache the calls before it filled, so up
  // to four calls append and targets take at most a quarter of the
  // capacity.
  std::array<std::unique_ptr<rt::ModelState>, kCases> states;
  std::array<std::optional<reference::State>, kCases> refStates;
  std::array<std::map<std::string, rt::Tensor>, kCases> shared;
  VerifyResult result;
  for (const EntryPoint &ep : mi.entryPoints) {
    if (ep.name == kPrepareFunction)
      continue;
    auto func = module.lookupSymbol<func::FuncOp>(ep.name);
    bool stateful = usesState(func);
    auto sizes = sizesFor(ep);
    for (size_t i = 0; i < kCases; ++i) {
      auto [b, s, t] = sizes[i];
      if (stateful)
        t = std::max<int64_t>(1, std::min(t, sizes[2][2] / 4));
      auto inputs = randomInputs(module, ep, b, s, t, seed + b * 31 + s, /*pad=*/true);
      if (!inputs)
        return inputs.takeError();
      rt::ModelState *state = nullptr;
      reference::State *refState = nullptr;
      if (stateful) {
        if (!states[i]) {
          auto created = fromStatus((*compiled)->createState());
          auto ref = reference::createState(module);
          if (!created)
            return created.takeError();
          if (!ref)
            return ref.takeError();
          states[i] = std::move(*created);
          refStates[i] = std::move(*ref);
        }
        state = states[i].get();
        refState = &*refStates[i];
        for (auto &[name, tensor] : *inputs)
          tensor = shared[i].try_emplace(name, tensor).first->second;
      }
      int calls = stateful && !ep.outputs.empty() ? 2 : 1;
      for (int call = 0; call < calls; ++call) {
        auto got = fromStatus((*compiled)->run(ep.name, *inputs, state));
        if (!got)
          return got.takeError();
        auto want = reference::run(func, *weights, *inputs, /*f64Outputs=*/true, refState);
        if (!want)
          return want.takeError();
        if (ep.outputs.empty())
          continue; // what it wrote, the next entry's outputs show
        auto c = compareOutputs(*got, *want, VerifyCase{ep.name, call, b, s, t, 0, 0});
        if (!c)
          return c.takeError();
        result.cases.push_back(*c);
        if (i + 1 != kCases || stateful)
          continue;
        // The largest call again, from 4 threads at once: identical bytes.
        std::vector<std::thread> threads;
        std::atomic<bool> same{true};
        for (int k = 0; k < 4; ++k)
          threads.emplace_back([&] {
            for (int r = 0; r < 3; ++r) {
              auto again = (*compiled)->run(ep.name, *inputs);
              if (!again.isOk())
                same = false;
              else
                for (const auto &[name, tensor] : *again)
                  same = same && tensor.bytes == got->at(name).bytes;
            }
          });
        for (std::thread &th : threads)
          th.join();
        result.concurrentRuns += 12;
        result.concurrentIdentical = result.concurrentIdentical && same;
      }
    }
  }
  return result;
}