//===- Runtime.cpp - the runtime's host side in Python ---------------------===//
//
// _Model: an artifact loaded through the C ABI (rt::CompiledModel). run()
// takes anything with the buffer protocol or DLPack (NumPy arrays, PyTorch
// CPU tensors) and hands the kernels its memory when the dtype and layout
// match (a strided view is copied once into a dense buffer); outputs are
// allocated here, written in place by the model and returned as NumPy
// arrays over that memory. The GIL is released while a model runs, so
// Python threads run one model at once; Ctrl-C stops decoding and training
// between steps and a forward at its end, with KeyboardInterrupt.
//
// Decoding (translate, generate, score) batches as the CLI does, so the
// same ids give the same tokens; the Trainer is runtime/host's.
//
//===----------------------------------------------------------------------===//

#include "python/src/Bindings.h"

#include "runtime/host/CompiledModel.h"
#include "runtime/host/DirectoryTokenizer.h"
#include "runtime/host/ProcessGroup.h"
#include "runtime/host/Search.h"
#include "runtime/host/Tokenizer.h"
#include "runtime/host/Trainer.h"

#ifdef TRANSFUSE_HAVE_MPI
#include "runtime/host/Mpi.h"
#endif

#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <sys/stat.h>

namespace transfuse::python {
namespace {

using Array = nb::ndarray<nb::ro>;
using rt::CompiledModel;
using rt::DType;

const char* dtypeString(DType d) {
  switch (d) {
  case DType::F32: return "float32";
  case DType::F64: return "float64";
  case DType::F16: return "float16";
  case DType::BF16: return "bfloat16";
  case DType::I32: return "int32";
  case DType::I64: return "int64";
  case DType::Bool: return "bool";
  }
  return "?";
}

bool fromDlpack(nb::dlpack::dtype t, DType* out) {
  using C = nb::dlpack::dtype_code;
  if (t.lanes != 1) return false;
  const auto code = static_cast<C>(t.code);
  if (code == C::Float && t.bits == 32) *out = DType::F32;
  else if (code == C::Float && t.bits == 64) *out = DType::F64;
  else if (code == C::Float && t.bits == 16) *out = DType::F16;
  else if (code == C::Bfloat && t.bits == 16) *out = DType::BF16;
  else if (code == C::Int && t.bits == 32) *out = DType::I32;
  else if (code == C::Int && t.bits == 64) *out = DType::I64;
  else if (code == C::Bool && t.bits == 8) *out = DType::Bool;
  else return false;
  return true;
}

nb::dlpack::dtype toDlpack(DType d) {
  switch (d) {
  case DType::F32: return nb::dtype<float>();
  case DType::F64: return nb::dtype<double>();
  case DType::F16: return {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
  case DType::BF16: return {static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
  case DType::I32: return nb::dtype<int32_t>();
  case DType::I64: return nb::dtype<int64_t>();
  case DType::Bool: return nb::dtype<bool>();
  }
  return nb::dtype<float>();
}

// An array's shape as a list with None for dynamic dimensions.
nb::list shapeList(const std::vector<int64_t>& shape) {
  nb::list out;
  for (int64_t d : shape) out.append(d < 0 ? nb::object(nb::none()) : nb::object(nb::int_(d)));
  return out;
}

nb::dict specDict(const rt::TensorSpec& s) {
  nb::dict d;
  d["name"] = s.name;
  d["dtype"] = dtypeString(s.dtype);
  d["shape"] = shapeList(s.shape);
  d["max_shape"] = s.maxShape;
  return d;
}

// A NumPy array over `bytes` bytes of fresh 64-byte-aligned memory that the
// array owns (freed with it).
nb::object newArray(DType dtype, const std::vector<int64_t>& shape, void** data) {
  size_t bytes = rt::dtypeSize(dtype);
  for (int64_t d : shape) bytes *= static_cast<size_t>(d);
  void* p = std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
  if (!p) throw std::bad_alloc();
  nb::capsule owner(p, [](void* q) noexcept { std::free(q); });
  std::vector<size_t> dims(shape.begin(), shape.end());
  *data = p;
  return nb::ndarray<nb::numpy>(p, dims.size(), dims.data(), owner, nullptr, toDlpack(dtype))
      .cast();
}

// Copies a strided array into dense row-major `out` (elements of `size` bytes).
void copyDense(const Array& a, size_t size, std::vector<uint8_t>& out) {
  const size_t rank = a.ndim();
  size_t count = 1;
  for (size_t i = 0; i < rank; ++i) count *= a.shape(i);
  out.resize(count * size);
  std::vector<size_t> index(rank, 0);
  const auto* base = static_cast<const uint8_t*>(a.data());
  for (size_t n = 0; n < count; ++n) {
    int64_t offset = 0;
    for (size_t i = 0; i < rank; ++i) offset += static_cast<int64_t>(index[i]) * a.stride(i);
    std::memcpy(out.data() + n * size, base + offset * static_cast<int64_t>(size), size);
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < a.shape(i)) break;
      index[i] = 0;
    }
  }
}

bool denseRowMajor(const Array& a) {
  int64_t expected = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expected) return false;
    expected *= static_cast<int64_t>(a.shape(i));
  }
  return true;
}

// The data pointers of the last run on this thread, by tensor name: what
// the tests read to check that an input's memory reached the kernels and
// an output's array is the memory the kernels wrote.
thread_local std::map<std::string, uintptr_t> lastPointers;

// The inputs of one call as views, with the dense copies of strided ones.
struct Inputs {
  std::vector<CompiledModel::TensorView> views;
  std::vector<std::vector<uint8_t>> copies;
  std::vector<Array> arrays;  // kept alive for the call
};

Inputs readInputs(const nb::dict& given) {
  Inputs in;
  in.copies.reserve(given.size());
  for (auto [key, value] : given) {
    std::string name = nb::cast<std::string>(key);
    Array a;
    if (!nb::try_cast(value, a, /*convert=*/false)) {
      // A list or scalar: through NumPy.
      nb::object asarray = nb::module_::import_("numpy").attr("asarray");
      if (!nb::try_cast(asarray(value), a, false))
        throw InputError("input '" + name + "': expected an array (NumPy, a PyTorch CPU tensor, "
                         "or anything with the buffer protocol or DLPack)");
    }
    if (a.device_type() != nb::device::cpu::value)
      throw InputError("input '" + name + "': the array is not in host memory (a CPU model "
                       "reads host arrays)");
    CompiledModel::TensorView v;
    v.name = std::move(name);
    if (!fromDlpack(a.dtype(), &v.dtype))
      throw InputError("input '" + v.name + "': its dtype is not one a model takes (float32, "
                       "float64, float16, bfloat16, int32, int64, bool)");
    for (size_t i = 0; i < a.ndim(); ++i) v.shape.push_back(static_cast<int64_t>(a.shape(i)));
    if (denseRowMajor(a)) {
      v.data = const_cast<void*>(a.data());
    } else {
      in.copies.emplace_back();
      copyDense(a, rt::dtypeSize(v.dtype), in.copies.back());
      v.data = in.copies.back().data();
    }
    in.arrays.push_back(std::move(a));
    in.views.push_back(std::move(v));
  }
  return in;
}

// Token id lists from Python: a list of lists of ints.
using IdLists = std::vector<std::vector<int32_t>>;

nb::list hypotheses(const std::vector<std::vector<rt::Hypothesis>>& all) {
  nb::list out;
  for (const auto& list : all) {
    nb::list row;
    for (const rt::Hypothesis& h : list) {
      nb::dict d;
      d["ids"] = h.ids;
      d["score"] = h.score;
      d["log_prob"] = h.logProb;
      d["token_log_probs"] = h.tokenLogProbs;
      row.append(d);
    }
    out.append(row);
  }
  return out;
}

// The search options of a call, by the CLI's names (--beam: beam, ...).
rt::SearchOptions searchOptions(const nb::dict& o) {
  rt::SearchOptions s;
  auto get = [&](const char* key, auto& field) {
    if (o.contains(key) && !o[key].is_none())
      field = nb::cast<std::remove_reference_t<decltype(field)>>(o[key]);
  };
  get("beam", s.beam);
  get("alpha", s.alpha);
  get("max_len", s.maxLen);
  get("min_len", s.minLen);
  get("n_best", s.nBest);
  get("no_repeat_ngram", s.noRepeatNgram);
  get("repetition_penalty", s.repetitionPenalty);
  get("sample", s.sample);
  get("temperature", s.temperature);
  get("top_k", s.topK);
  get("top_p", s.topP);
  get("seed", s.seed);
  get("stop_ids", s.stopIds);
  if (s.beam < 1) throw InputError("beam " + std::to_string(s.beam) + " is not >= 1");
  if (s.nBest < 1 || s.nBest > s.beam)
    throw InputError("n_best " + std::to_string(s.nBest) + " is not in [1, beam " +
                     std::to_string(s.beam) + "]");
  if (s.sample && s.beam != 1)
    throw InputError("sample draws one hypothesis per input: use it with beam 1");
  if (s.temperature <= 0) throw InputError("temperature must be > 0");
  if (!(s.topP > 0 && s.topP <= 1)) throw InputError("top_p must be in (0, 1]");
  if (s.repetitionPenalty <= 0) throw InputError("repetition_penalty must be > 0");
  return s;
}

// A stop hook for a search or the Trainer run with the GIL released: it
// takes the GIL and asks Python whether a signal arrived; the exception is
// kept and raised when the call returns.
struct Interrupts {
  std::optional<nb::python_error> error;
  std::function<bool()> hook() {
    return [this] {
      nb::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() == 0) return false;
      error.emplace();
      return true;
    };
  }
  // After the call (GIL held): the kept exception, else `status`'s.
  void rethrow(const rt::Status& status) {
    if (error) throw std::move(*error);
    check(status);
  }
};

// The ranks of a data-parallel run when mpirun started this Python (MPI is
// initialized on first use and finalized at exit), else null.
rt::ProcessGroup* ranks() {
  if (rt::launchedRanks() <= 1) return nullptr;
#ifdef TRANSFUSE_HAVE_MPI
  static std::unique_ptr<rt::MpiGroup> group = check(rt::MpiGroup::join());
  return group.get();
#else
  throw Error("this transfuse was built without MPI, and mpirun started " +
              std::to_string(rt::launchedRanks()) + " of this Python: install Open MPI "
              "(libopenmpi-dev, openmpi-bin) and rebuild for data-parallel training");
#endif
}

int64_t defaultBatch(int64_t rows, int beam) {
  return std::max<int64_t>(1, std::min<int64_t>(32, rows / beam));
}

class Model {
public:
  Model(const std::string& library, const std::optional<std::string>& weights, uint64_t seed,
        int threads, const std::string& manifest)
      : manifest_(manifest) {
    rt::LoadOptions load;
    load.weightsPath = weights.value_or("");
    load.seed = seed;
    load.threads = threads;
    model_ = check(CompiledModel::load(library, load));
  }

  std::vector<std::string> entries() const { return model_->entryPoints(); }
  std::string fusion() const { return model_->fusion(); }
  int threads() const { return model_->threads(); }

  nb::dict signature(const std::string& entry) const {
    nb::list inputs, outputs;
    for (const rt::TensorSpec& s : check<InputError>(model_->inputs(entry)))
      inputs.append(specDict(s));
    for (const rt::TensorSpec& s : check<InputError>(model_->outputs(entry)))
      outputs.append(specDict(s));
    nb::dict d;
    d["inputs"] = inputs;
    d["outputs"] = outputs;
    d["uses_state"] = model_->usesState(entry);
    return d;
  }

  nb::dict run(const std::string& entry, const nb::dict& given) {
    Inputs in = readInputs(given);
    // Shapes first: a wrong name, dtype or shape is refused here, before
    // anything runs or is allocated.
    std::vector<rt::TensorSpec> specs = check<InputError>(model_->outputShapes(entry, in.views));
    if (model_->usesState(entry))
      throw InputError("entry point '" + entry + "' reads and writes a KV cache: use "
                       "translate, generate or score");
    nb::dict result;
    std::vector<CompiledModel::TensorView> out;
    out.reserve(specs.size());
    for (rt::TensorSpec& s : specs) {
      void* data = nullptr;
      result[s.name.c_str()] = newArray(s.dtype, s.shape, &data);
      out.push_back({s.name, s.dtype, std::move(s.shape), data});
    }
    lastPointers.clear();
    for (const auto& v : in.views) lastPointers[v.name] = reinterpret_cast<uintptr_t>(v.data);
    for (const auto& v : out) lastPointers[v.name] = reinterpret_cast<uintptr_t>(v.data);
    rt::Status status;
    {
      nb::gil_scoped_release released;
      status = model_->runViews(entry, in.views, out);
    }
    check(status);
    raisePendingSignals();
    return result;
  }

  // Seconds for `iterations` runs of `entry` through the C ABI on inputs
  // read once and outputs allocated once: the baseline that
  // bench/python_overhead.py subtracts from run()'s time per call.
  double timeRuns(const std::string& entry, const nb::dict& given, int64_t iterations) {
    Inputs in = readInputs(given);
    std::vector<rt::TensorSpec> specs = check<InputError>(model_->outputShapes(entry, in.views));
    std::vector<nb::object> arrays;
    std::vector<CompiledModel::TensorView> out;
    for (rt::TensorSpec& s : specs) {
      void* data = nullptr;
      arrays.push_back(newArray(s.dtype, s.shape, &data));
      out.push_back({s.name, s.dtype, std::move(s.shape), data});
    }
    rt::Status status;
    double seconds = 0;
    {
      nb::gil_scoped_release released;
      const auto start = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < iterations && status.isOk(); ++i)
        status = model_->runViews(entry, in.views, out);
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    check(status);
    return seconds;
  }

  // Parameters: (name, role, shape) rows; roles 0 weight, 1 Adam's m, 2 v.
  nb::list parameters() const {
    nb::list out;
    for (const auto& p : model_->params())
      out.append(nb::make_tuple(p.name, static_cast<int>(p.role), p.shape));
    return out;
  }
  nb::object readParam(const std::string& name, int role) const {
    rt::Tensor t = check<InputError>(
        model_->readParam(name, static_cast<CompiledModel::ParamRole>(role)));
    void* data = nullptr;
    nb::object a = newArray(DType::F32, t.shape, &data);
    std::memcpy(data, t.bytes.data(), t.bytes.size());
    return a;
  }
  void writeParam(const std::string& name, int role, const nb::object& value) {
    nb::dict one;
    one[name.c_str()] = value;
    Inputs in = readInputs(one);
    const CompiledModel::TensorView& v = in.views[0];
    if (v.dtype != DType::F32)
      throw InputError("parameter '" + name + "': float32 values expected, got " +
                       dtypeString(v.dtype));
    rt::Tensor t = rt::Tensor::zeros(DType::F32, v.shape);
    std::memcpy(t.bytes.data(), v.data, t.bytes.size());
    rt::Status status;
    {
      nb::gil_scoped_release released;
      status = model_->writeParam(name, static_cast<CompiledModel::ParamRole>(role), t);
    }
    check<InputError>(status);
  }

  // --- decoding: one search at a time per model (it holds the KV cache).
  nb::list translate(const IdLists& sources, const nb::dict& options,
                     const std::optional<IdLists>& prefixes, std::optional<int64_t> batchSize) {
    rt::SearchOptions o = searchOptions(options);
    if (prefixes && prefixes->size() != sources.size())
      throw InputError("prefixes has " + std::to_string(prefixes->size()) + " lists for " +
                       std::to_string(sources.size()) + " sources");
    Interrupts interrupts;
    o.stop = interrupts.hook();
    std::vector<std::vector<rt::Hypothesis>> all;
    rt::Status status;
    {
      nb::gil_scoped_release released;
      std::lock_guard<std::mutex> lock(decodeMutex_);
      status = [&]() -> rt::Status {
        if (rt::Status s = ensureTranslator(); !s.isOk()) return s;
        const int64_t batch = batchSize.value_or(defaultBatch(translator_->rows(), o.beam));
        if (batch < 1 || batch * o.beam > translator_->rows())
          return rt::Status::error("batch_size " + std::to_string(batch) + " with beam " +
                                   std::to_string(o.beam) + " needs " +
                                   std::to_string(batch * o.beam) + " rows; the artifact has " +
                                   std::to_string(translator_->rows()) +
                                   " (compile with a larger max_batch or max_beam)");
        for (size_t first = 0; first < sources.size(); first += batch) {
          const size_t end = std::min(sources.size(), first + static_cast<size_t>(batch));
          IdLists part(sources.begin() + first, sources.begin() + end), partPrefixes;
          if (prefixes) partPrefixes.assign(prefixes->begin() + first, prefixes->begin() + end);
          auto r = translator_->translate(part, o, prefixes ? &partPrefixes : nullptr,
                                          static_cast<int64_t>(first));
          if (!r.isOk()) return r.status();
          all.insert(all.end(), r->begin(), r->end());
        }
        return rt::Status::ok();
      }();
    }
    interrupts.rethrow(status);
    return hypotheses(all);
  }

  nb::list score(const IdLists& sources, const IdLists& targets, std::optional<int64_t> batchSize) {
    if (sources.size() != targets.size())
      throw InputError("targets has " + std::to_string(targets.size()) + " lists for " +
                       std::to_string(sources.size()) + " sources");
    std::vector<rt::Hypothesis> all;
    rt::Status status;
    {
      nb::gil_scoped_release released;
      std::lock_guard<std::mutex> lock(decodeMutex_);
      status = [&]() -> rt::Status {
        if (rt::Status s = ensureTranslator(); !s.isOk()) return s;
        const int64_t batch = batchSize.value_or(std::min<int64_t>(32, translator_->rows()));
        if (batch < 1 || batch > translator_->rows())
          return rt::Status::error("batch_size " + std::to_string(batch) + " is not in [1, " +
                                   std::to_string(translator_->rows()) + "]");
        for (size_t first = 0; first < sources.size(); first += batch) {
          const size_t end = std::min(sources.size(), first + static_cast<size_t>(batch));
          auto r = translator_->score({sources.begin() + first, sources.begin() + end},
                                      {targets.begin() + first, targets.begin() + end},
                                      static_cast<int64_t>(first));
          if (!r.isOk()) return r.status();
          all.insert(all.end(), r->begin(), r->end());
        }
        return rt::Status::ok();
      }();
    }
    check(status);
    raisePendingSignals();
    return hypotheses({all})[0];
  }

  // Prompts batch in length order (as the CLI's), outputs in input order;
  // sampling keys each prompt's draws by its index.
  nb::list generate(const IdLists& prompts, const nb::dict& options, std::optional<int64_t> eos,
                    std::optional<int64_t> batchSize) {
    rt::SearchOptions o = searchOptions(options);
    if (o.maxLen < 1) throw InputError("max_new must be >= 1");
    rt::TokenIds ids = tokenIds();
    if (eos) ids.eos = static_cast<int32_t>(*eos);
    Interrupts interrupts;
    o.stop = interrupts.hook();
    std::vector<std::vector<rt::Hypothesis>> all(prompts.size());
    rt::Status status;
    {
      nb::gil_scoped_release released;
      std::lock_guard<std::mutex> lock(decodeMutex_);
      status = [&]() -> rt::Status {
        auto generator = rt::Generator::create(*model_, ids);
        if (!generator.isOk()) return generator.status();
        rt::Generator& g = **generator;
        const int64_t batch = batchSize.value_or(defaultBatch(g.rows(), o.beam));
        if (batch < 1 || batch * o.beam > g.rows())
          return rt::Status::error("batch_size " + std::to_string(batch) + " with beam " +
                                   std::to_string(o.beam) + " needs " +
                                   std::to_string(batch * o.beam) + " rows; the artifact has " +
                                   std::to_string(g.rows()) +
                                   " (compile with a larger max_batch or max_beam)");
        std::vector<size_t> order(prompts.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
          return prompts[x].size() < prompts[y].size();
        });
        for (size_t first = 0; first < order.size(); first += batch) {
          const size_t end = std::min(order.size(), first + static_cast<size_t>(batch));
          IdLists part;
          for (size_t m = first; m < end; ++m) part.push_back(prompts[order[m]]);
          std::vector<int64_t> lines(order.begin() + first, order.begin() + end);
          auto r = g.generate(part, o, lines);
          if (!r.isOk()) return r.status();
          for (size_t m = first; m < end; ++m) all[order[m]] = std::move((*r)[m - first]);
        }
        return rt::Status::ok();
      }();
    }
    interrupts.rethrow(status);
    return hypotheses(all);
  }

  nb::dict tokenIdsDict() const {
    rt::TokenIds ids = tokenIds();
    nb::dict d;
    d["pad"] = ids.pad;
    d["bos"] = ids.bos;
    d["eos"] = ids.eos;
    d["source_bos"] = ids.sourceBos;
    d["src_vocab"] = ids.srcVocab;
    d["tgt_vocab"] = ids.tgtVocab;
    return d;
  }

  // --- training: the Trainer over this model's compiled train step.
  // `validate` (None, or a callable returning {"loss", "bleu"?, "accuracy"?})
  // runs at each epoch's end, its loss ranking checkpoints; `onValidation`
  // gets {"epoch", "step", "valid_loss", ...} after it.
  nb::dict train(const IdLists& sources, const std::optional<IdLists>& targets,
                 const nb::dict& options, nb::object onStep, nb::object validate,
                 nb::object onValidation, bool resume) {
    const rt::TokenIds ids = tokenIds();
    rt::TrainingData data;
    data.decoderOnly = !targets.has_value();
    data.pad = ids.pad >= 0 ? ids.pad : -100;
    if (targets && targets->size() != sources.size())
      throw InputError("targets has " + std::to_string(targets->size()) + " lists for " +
                       std::to_string(sources.size()) + " sources");
    for (size_t i = 0; i < sources.size(); ++i) {
      rt::Example e = rt::makeExample(ids, sources[i], targets ? &(*targets)[i] : nullptr);
      if (e.labels.empty())
        throw InputError("example " + std::to_string(i) + ": fewer than 2 tokens to train on");
      e.line = static_cast<int64_t>(i) + 1;
      data.examples.push_back(std::move(e));
    }
    rt::TrainerOptions o;
    auto get = [&](const char* key, auto& field) {
      if (options.contains(key) && !options[key].is_none())
        field = nb::cast<std::remove_reference_t<decltype(field)>>(options[key]);
    };
    get("seed", o.seed);
    get("dtype", o.dtype);
    o.batching.seed = o.seed;
    get("batch_tokens", o.batching.batchTokens);
    get("max_sentences", o.batching.maxRows);
    get("bucket", o.batching.bucket);
    get("accumulate", o.accumulate);
    get("steps", o.maxSteps);
    get("epochs", o.maxEpochs);
    get("time_limit", o.timeLimitMinutes);
    get("checkpoint_dir", o.checkpointDir);
    get("save_every", o.saveEvery);
    get("keep", o.keep);
    get("warmup", o.adam.warmup);
    get("lr_factor", o.adam.lrFactor);
    get("clip_norm", o.adam.clipNorm);
    get("weight_decay", o.adam.weightDecay);
    get("d_model", o.adam.dModel);
    if (options.contains("run_info"))
      o.runInfo = check(rt::JsonValue::parse(nb::cast<std::string>(options["run_info"])));
    get("shards", o.shards);
    o.group = ranks();
    if (o.group) {
      if (options.contains("shards") && o.shards > 1 && o.shards != o.group->size())
        throw InputError("shards " + std::to_string(o.shards) + " under mpirun with " +
                         std::to_string(o.group->size()) +
                         " ranks: a data-parallel run has one shard per rank");
      o.shards = o.group->size();
    }
    // A data-parallel run's rank 0 reports; the other ranks' callbacks stay silent.
    if (o.group && o.group->rank() != 0) onStep = onValidation = nb::none();
    rt::CompiledTrainStep step(*model_);
    Interrupts interrupts;
    std::optional<nb::python_error> callbackError;
    rt::TrainerCallbacks callbacks;
    callbacks.stop = interrupts.hook();
    if (!onStep.is_none())
      callbacks.onStep = [&](const rt::StepReport& r) {
        nb::gil_scoped_acquire gil;
        if (callbackError) return;
        nb::dict d;
        d["step"] = r.step;
        d["epoch"] = r.epoch;
        d["loss"] = r.result->loss;
        d["lr"] = r.result->lr;
        d["grad_norm"] = r.result->gradNorm;
        d["tokens"] = r.tokens;
        d["seconds"] = r.seconds;
        d["tokens_per_s"] = r.tokensPerSecond;
        try {
          onStep(d);
        } catch (nb::python_error& e) {
          callbackError.emplace(std::move(e));
        }
      };
    if (!validate.is_none())
      callbacks.validate = [&]() -> rt::StatusOr<rt::Validation> {
        nb::gil_scoped_acquire gil;
        rt::Validation v;
        try {
          nb::dict d = nb::cast<nb::dict>(validate());
          v.loss = nb::cast<double>(d["loss"]);
          if (d.contains("bleu")) v.bleu = nb::cast<double>(d["bleu"]);
          if (d.contains("accuracy")) v.accuracy = nb::cast<double>(d["accuracy"]);
        } catch (nb::python_error& e) {
          callbackError.emplace(std::move(e));
          return rt::Status::error("validation failed");
        } catch (const std::exception& e) {
          return rt::Status::error(std::string("validation: ") + e.what());
        }
        return v;
      };
    if (!onValidation.is_none())
      callbacks.onValidation = [&](int64_t epoch, int64_t step, const rt::Validation& v) {
        nb::gil_scoped_acquire gil;
        if (callbackError) return;
        nb::dict d;
        d["epoch"] = epoch;
        d["step"] = step;
        d["valid_loss"] = v.loss;
        if (v.bleu) d["valid_bleu"] = *v.bleu;
        if (v.accuracy) d["valid_accuracy"] = *v.accuracy;
        try {
          onValidation(d);
        } catch (nb::python_error& e) {
          callbackError.emplace(std::move(e));
        }
      };
    auto stop = callbacks.stop;
    callbacks.stop = [&, stop] {
      if (callbackError) return true;  // (onStep ran with the GIL: no race)
      return stop();
    };
    rt::Trainer trainer(step, data, o, std::move(callbacks));
    rt::Status status;
    nb::dict result;
    std::string resumed;
    {
      nb::gil_scoped_release released;
      std::lock_guard<std::mutex> lock(decodeMutex_);
      status = [&]() -> rt::Status {
        if (resume) {
          auto point = trainer.resume();
          if (!point.isOk()) return point.status();
          resumed = point->checkpoint;
        }
        return trainer.run();
      }();
    }
    if (callbackError) throw std::move(*callbackError);
    interrupts.rethrow(status);
    result["step"] = trainer.step();
    result["epoch"] = trainer.epoch();
    result["resumed_from"] = resumed;
    return result;
  }

  CompiledModel& model() { return *model_; }

private:
  // The Translator over this model's KV cache, created on first use (the
  // caller holds decodeMutex_).
  rt::Status ensureTranslator() {
    if (translator_) return rt::Status::ok();
    auto t = rt::Translator::create(*model_, tokenIds());
    if (!t.isOk()) return t.status();
    translator_ = std::move(*t);
    return rt::Status::ok();
  }

  rt::TokenIds tokenIds() const {
    if (manifest_.empty()) throw Error("the model was loaded without its manifest.json");
    return check(rt::readTokenIds(manifest_));
  }

  std::string manifest_;
  std::unique_ptr<CompiledModel> model_;
  std::mutex decodeMutex_;
  std::unique_ptr<rt::Translator> translator_;
};

// Text in and out: what a directory carries (DirectoryTokenizer), or a
// Marian directory's SentencePiece models.
class Tokenizer {
public:
  Tokenizer(const std::string& dir, const std::string& kind) {
    if (kind == "marian")
      marian_ = check(rt::MarianTokenizer::load(dir));
    else
      directory_ = check(rt::DirectoryTokenizer::load(dir));
  }
  std::vector<int32_t> encode(const std::string& text, bool specials, int64_t maxLength,
                              bool truncate) const {
    if (marian_) return marian_->encode(text);
    if (directory_->json) {
      auto e = directory_->json->encode(text, nullptr, maxLength, truncate, specials);
      return check<InputError>(std::move(e)).ids;
    }
    return check<InputError>(directory_->encode(text, !specials));
  }
  std::string decode(const std::vector<int32_t>& ids, bool keepSpecials) const {
    return marian_ ? marian_->decode(ids) : directory_->decode(ids, keepSpecials);
  }
  int32_t idOf(const std::string& token) const {
    return directory_ ? directory_->idOf(token) : -1;
  }
  int64_t modelMaxLength() const {
    return directory_ && directory_->json ? directory_->json->modelMaxLength() : 0;
  }
  std::vector<int32_t> stopIds(const std::string& dir, int32_t eos) const {
    return rt::stopIds(dir, directory_ ? &*directory_ : nullptr, eos);
  }

private:
  std::optional<rt::DirectoryTokenizer> directory_;
  std::unique_ptr<rt::MarianTokenizer> marian_;
};

}  // namespace

void bindRuntime(nb::module_& m) {
  nb::class_<Model>(m, "_Model")
      .def(nb::init<const std::string&, const std::optional<std::string>&, uint64_t, int,
                    const std::string&>(),
           nb::arg("library"), nb::arg("weights").none(), nb::arg("seed"), nb::arg("threads"),
           nb::arg("manifest"))
      .def_prop_ro("entries", &Model::entries)
      .def_prop_ro("fusion", &Model::fusion)
      .def_prop_ro("threads", &Model::threads)
      .def("signature", &Model::signature, nb::arg("entry"))
      .def("run", &Model::run, nb::arg("entry"), nb::arg("inputs"))
      .def("_time_runs", &Model::timeRuns, nb::arg("entry"), nb::arg("inputs"),
           nb::arg("iterations"))
      .def("parameters", &Model::parameters)
      .def("read_param", &Model::readParam, nb::arg("name"), nb::arg("role"))
      .def("write_param", &Model::writeParam, nb::arg("name"), nb::arg("role"), nb::arg("value"))
      .def("translate", &Model::translate, nb::arg("sources"), nb::arg("options"),
           nb::arg("prefixes").none(), nb::arg("batch_size").none())
      .def("score", &Model::score, nb::arg("sources"), nb::arg("targets"),
           nb::arg("batch_size").none())
      .def("generate", &Model::generate, nb::arg("prompts"), nb::arg("options"),
           nb::arg("eos").none(), nb::arg("batch_size").none())
      .def("token_ids", &Model::tokenIdsDict)
      .def("train", &Model::train, nb::arg("sources"), nb::arg("targets").none(),
           nb::arg("options"), nb::arg("on_step").none(), nb::arg("validate").none(),
           nb::arg("on_validation").none(), nb::arg("resume"));
  nb::class_<Tokenizer>(m, "_Tokenizer")
      .def(nb::init<const std::string&, const std::string&>(), nb::arg("dir"), nb::arg("kind"))
      .def("encode", &Tokenizer::encode, nb::arg("text"), nb::arg("specials") = true,
           nb::arg("max_length") = 0, nb::arg("truncate") = true)
      .def("decode", &Tokenizer::decode, nb::arg("ids"), nb::arg("keep_specials") = false)
      .def("id_of", &Tokenizer::idOf, nb::arg("token"))
      .def("model_max_length", &Tokenizer::modelMaxLength)
      .def("stop_ids", &Tokenizer::stopIds, nb::arg("dir"), nb::arg("eos"));
  m.def(
      "_stop_ids", [](const std::string& dir, int32_t eos) { return rt::stopIds(dir, nullptr, eos); },
      nb::arg("dir"), nb::arg("eos"),
      "Ids besides `eos` that end a continuation, as the directory's config files say.");
  m.def(
      "_ranks",
      [] {
        rt::ProcessGroup* g = ranks();
        return std::make_pair(g ? g->rank() : 0, g ? g->size() : 1);
      },
      "(rank, size) of a data-parallel run under mpirun (MPI joined on first call), else (0, 1).");
  m.def("_last_run_pointers", [] { return lastPointers; },
        "The data pointers of this thread's last run by tensor name (the zero-copy tests).");
}

}  // namespace transfuse::python
