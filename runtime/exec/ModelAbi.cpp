// The C ABI of model.h over the ModelDesc of generated code (ModelDesc.h).
//
// tf_model_create turns the ParamDesc table into rt::ParamSpecs (prepared
// params excluded: they are outputs of the prepare entry point, not weights),
// binds them from a safetensors file or draws seeded random weights exactly as
// the reference backend does (rt::randomWeights on the same specs), runs the
// prepare entry point once and packs the GEMM weights of the PackDesc table.
// tf_model_run validates the caller's tensors (rt::validateInputs, the same
// checks and messages as the reference backend's), then calls the entry point
// with an arena taken from a per-entry free list: concurrent calls each get
// their own arena, and a repeated call reuses a warm one instead of faulting in
// fresh pages. Errors go to the caller's tf_error, never to a global; no
// function lets an exception escape.
//
// A device model (ModelDesc::device, a CUDA artifact) binds its weights on
// the host as above, copies each to device memory once (and again after a
// write), runs prepare there and packs nothing; its arenas are device
// memory, each followed by the check words and a staging area for host
// inputs and outputs at their compiled maxima. A run copies host inputs in,
// runs the entry on the calling thread's stream, copies host outputs back
// and waits; tensors already in device memory are used in place.

#include "runtime/exec/model.h"

#include "runtime/exec/AbiInternal.h"

#include "runtime/Init.h"
#include "runtime/MemoryLimit.h"
#include "runtime/Safetensors.h"
#include "runtime/Tensor.h"
#include "runtime/TensorSpec.h"
#include "runtime/ThreadPool.h"
#include "runtime/WeightBinding.h"
#include "runtime/exec/ModelDesc.h"
#include "runtime/kernels/Gemm.h"
#include "runtime/kernels/Targets.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

using transfuse::exec::EntryDesc;
using transfuse::exec::ModelDesc;
using transfuse::exec::TensorDesc;
namespace rt = transfuse::rt;
namespace kernels = transfuse::kernels;

static_assert(static_cast<int>(rt::DType::F32) == TF_F32 &&
                  static_cast<int>(rt::DType::F64) == TF_F64 &&
                  static_cast<int>(rt::DType::F16) == TF_F16 &&
                  static_cast<int>(rt::DType::BF16) == TF_BF16 &&
                  static_cast<int>(rt::DType::I32) == TF_I32 &&
                  static_cast<int>(rt::DType::I64) == TF_I64 &&
                  static_cast<int>(rt::DType::Bool) == TF_BOOL,
              "tf_dtype (model.h) must number the dtypes as rt::DType does");

namespace transfuse::exec::abi {

constexpr size_t kArenaAlignment = 64;
constexpr int kMaxThreads = 1024;

Arena allocateDeviceBlock(const DeviceOps& device, int64_t bytes) {
  void* p = nullptr;
  const size_t size = bytes > 0 ? static_cast<size_t>(bytes) : 1;
  if (rt::Status s = device.allocate(size, &p); !s)
    throw std::runtime_error(std::string(device.name) + ": " + s.message());
  return Arena(static_cast<std::byte*>(p), BlockFree{device.release});
}

// A 64-byte aligned block of max(bytes, 64) bytes (never null: generated code
// may form the arena pointer even when it uses none of it).
Arena allocateArena(int64_t bytes) {
  size_t size = bytes > 0 ? static_cast<size_t>(bytes) : 0;
  size = (size + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  if (size == 0) size = kArenaAlignment;
  void* p = std::aligned_alloc(kArenaAlignment, size);
  if (!p) throw std::bad_alloc();
  return Arena(static_cast<std::byte*>(p));
}

void clearError(tf_error* error) {
  if (!error) return;
  error->code = 0;
  error->message[0] = '\0';
}

// Copies `message` into error->message, cut at a UTF-8 character boundary
// when it does not fit, always NUL-terminated.
int32_t setError(tf_error* error, const std::string& message) {
  if (!error) return 1;
  error->code = 1;
  size_t n = message.size();
  const size_t cap = sizeof(error->message) - 1;
  if (n > cap) {
    n = cap;
    while (n > 0 && (static_cast<unsigned char>(message[n]) & 0xC0) == 0x80) --n;
  }
  std::memcpy(error->message, message.data(), n);
  error->message[n] = '\0';
  return 1;
}

std::string str(const char* s) { return s ? s : ""; }

std::string shapeString(const int64_t* shape, int64_t rank) {
  std::string s = "[";
  for (int64_t i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<rt::TensorSpec> specsOf(const TensorDesc* descs, int32_t n) {
  std::vector<rt::TensorSpec> specs;
  for (int32_t i = 0; i < n; ++i) {
    const TensorDesc& d = descs[i];
    rt::TensorSpec s;
    s.name = str(d.name);
    s.dtype = static_cast<rt::DType>(d.dtype);
    s.shape.assign(d.shape, d.shape + d.rank);
    s.maxShape.assign(d.maxShape, d.maxShape + d.rank);
    s.sizesOf = d.sizesOf;
    specs.push_back(std::move(s));
  }
  return specs;
}

const EntryDesc* entryOf(const tf_model* m, int32_t entry) {
  if (!m || entry < 0 || entry >= m->desc->numEntries) return nullptr;
  return &m->desc->entries[entry];
}

rt::Status badEntry(const tf_model* m, int32_t entry) {
  if (!m) return rt::Status::error("the model is NULL");
  return rt::Status::error("no entry point with index " + std::to_string(entry) +
                           " (the model has " + std::to_string(m->desc->numEntries) + ")");
}

}  // namespace transfuse::exec::abi

using namespace transfuse::exec::abi;

namespace {

constexpr size_t kDeviceAlignment = 256;

size_t alignDevice(size_t bytes) {
  return (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

// A device entry's arena block: the planned arena, then the check words,
// then room for every input and output at its maxima (staged host tensors).
size_t checksOffset(const EntryDesc& e) {
  return alignDevice(static_cast<size_t>(std::max<int64_t>(e.arenaBytes, 0)));
}
size_t stagingOffset(const EntryDesc& e) {
  return checksOffset(e) + alignDevice(transfuse::exec::kDeviceCheckWords * sizeof(uint32_t));
}
// The room of one input or output there: its bytes at the maxima.
size_t stagedBytes(const TensorDesc& d) {
  return alignDevice(static_cast<size_t>(rt::tensorBytes(
      d.maxShape, std::max(d.rank, 0), rt::dtypeSize(static_cast<rt::DType>(d.dtype)))));
}
size_t stagingBytes(const EntryDesc& e) {
  size_t total = 0;
  for (int32_t i = 0; i < e.numInputs; ++i) total += stagedBytes(e.inputs[i]);
  for (int32_t i = 0; i < e.numOutputs; ++i) total += stagedBytes(e.outputs[i]);
  return total;
}

size_t tensorBytes(const tf_tensor& t) {
  size_t bytes = rt::dtypeSize(static_cast<rt::DType>(t.dtype));
  for (int32_t d = 0; d < t.rank; ++d) bytes *= static_cast<size_t>(t.shape[d]);
  return bytes;
}

const char* deviceName(const tf_model* m) {
  return m->desc->device ? m->desc->device->name : "cpu";
}

// A tensor is in host memory or in the model's device memory.
rt::Status checkDevice(const tf_model* m, const tf_tensor& t, const char* role) {
  if (t.device == TF_DEVICE_CPU) return rt::Status::ok();
  if (m->desc->device && t.device == m->desc->device->kind) return rt::Status::ok();
  return rt::Status::error(std::string(role) + " '" + str(t.name) + "' has device " +
                           std::to_string(t.device) + "; the model runs on " + deviceName(m) +
                           " (tensors are in host memory, TF_DEVICE_CPU, or in the model's)");
}

// Checks the caller's input array and returns, per input spec, the index of
// its tensor in `inputs`.
rt::Status validateInputs(const tf_model* m, int32_t entry, const tf_tensor* inputs,
                          int32_t numInputs, std::vector<size_t>* order) {
  const EntryDesc* e = entryOf(m, entry);
  if (!e) return badEntry(m, entry);
  if (numInputs < 0) return rt::Status::error("negative input count");
  if (numInputs > 0 && !inputs) return rt::Status::error("the input array is NULL");
  std::vector<rt::TensorRef> refs(static_cast<size_t>(numInputs));
  for (int32_t i = 0; i < numInputs; ++i) {
    const tf_tensor& t = inputs[i];
    if (!t.name) return rt::Status::error("input " + std::to_string(i) + " has no name");
    std::string name = t.name;
    if (t.dtype < TF_F32 || t.dtype > TF_BOOL)
      return rt::Status::error("input '" + name + "' has unknown dtype " + std::to_string(t.dtype));
    if (t.rank < 0 || t.rank > transfuse::exec::kMaxRank)
      return rt::Status::error("input '" + name + "' has rank " + std::to_string(t.rank) +
                               ", outside [0, " + std::to_string(transfuse::exec::kMaxRank) + "]");
    if (t.rank > 0 && !t.shape) return rt::Status::error("input '" + name + "' has no shape");
    refs[i] = rt::TensorRef{t.name, static_cast<rt::DType>(t.dtype), t.shape,
                            static_cast<size_t>(t.rank)};
  }
  return rt::validateInputs(m->inputSpecs[entry], refs.data(), refs.size(), order);
}

// Output shapes for validated inputs (ordered by spec): shapes[i] holds
// output i's dims.
std::vector<std::vector<int64_t>> outputShapes(const EntryDesc& e,
                                               const std::vector<const int64_t*>& inShapes) {
  std::vector<std::vector<int64_t>> shapes(e.numOutputs);
  std::vector<int64_t*> ptrs(e.numOutputs);
  for (int32_t i = 0; i < e.numOutputs; ++i) {
    // Static dims as declared; the shape function fills every dim anyway.
    shapes[i].assign(e.outputs[i].shape, e.outputs[i].shape + e.outputs[i].rank);
    shapes[i].resize(std::max<int32_t>(e.outputs[i].rank, 1));  // never a null pointer
    ptrs[i] = shapes[i].data();
  }
  if (e.outputShapes) e.outputShapes(inShapes.data(), ptrs.data());
  for (int32_t i = 0; i < e.numOutputs; ++i) shapes[i].resize(e.outputs[i].rank);
  return shapes;
}

std::vector<const int64_t*> orderedShapes(const tf_tensor* inputs,
                                          const std::vector<size_t>& order) {
  std::vector<const int64_t*> s(order.size());
  for (size_t i = 0; i < order.size(); ++i) s[i] = inputs[order[i]].shape;
  return s;
}

rt::Status checkOutputs(const EntryDesc& e, const tf_tensor* outputs, int32_t numOutputs,
                        const std::vector<std::vector<int64_t>>& expected,
                        std::vector<size_t>* order) {
  if (numOutputs < 0) return rt::Status::error("negative output count");
  if (numOutputs > 0 && !outputs) return rt::Status::error("the output array is NULL");
  std::string declared;
  for (int32_t i = 0; i < e.numOutputs; ++i)
    declared += (declared.empty() ? "'" : ", '") + str(e.outputs[i].name) + "'";
  for (int32_t i = 0; i < numOutputs; ++i) {
    if (!outputs[i].name) return rt::Status::error("output " + std::to_string(i) + " has no name");
    bool known = false;
    for (int32_t j = 0; j < e.numOutputs; ++j) known |= str(e.outputs[j].name) == outputs[i].name;
    if (!known)
      return rt::Status::error("output '" + std::string(outputs[i].name) +
                               "' is not an output of entry point '" + str(e.name) +
                               "' (expected " + declared + ")");
    for (int32_t j = 0; j < i; ++j)
      if (outputs[j].name && std::strcmp(outputs[j].name, outputs[i].name) == 0)
        return rt::Status::error("output '" + std::string(outputs[i].name) + "' is given twice");
  }
  order->assign(e.numOutputs, 0);
  for (int32_t j = 0; j < e.numOutputs; ++j) {
    const TensorDesc& d = e.outputs[j];
    const std::string name = str(d.name);
    int32_t at = -1;
    for (int32_t i = 0; i < numOutputs && at < 0; ++i)
      if (name == outputs[i].name) at = i;
    if (at < 0) return rt::Status::error("missing output '" + name + "'");
    const tf_tensor& t = outputs[at];
    if (t.dtype != d.dtype) {
      std::string got = t.dtype >= TF_F32 && t.dtype <= TF_BOOL
                            ? rt::dtypeName(static_cast<rt::DType>(t.dtype))
                            : "unknown dtype " + std::to_string(t.dtype);
      return rt::Status::error("output '" + name + "' has dtype " + got + ", expected " +
                               rt::dtypeName(static_cast<rt::DType>(d.dtype)));
    }
    const std::vector<int64_t>& want = expected[j];
    bool same = t.rank == static_cast<int32_t>(want.size()) && (t.rank == 0 || t.shape);
    for (int32_t k = 0; same && k < t.rank; ++k) same = t.shape[k] == want[k];
    if (!same) {
      std::string got = t.rank < 0 || t.rank > transfuse::exec::kMaxRank || (t.rank > 0 && !t.shape)
                            ? "rank " + std::to_string(t.rank)
                            : "shape " + shapeString(t.shape, t.rank);
      return rt::Status::error("output '" + name + "' has " + got + ", expected shape " +
                               shapeString(want.data(), static_cast<int64_t>(want.size())) +
                               " for these inputs");
    }
    int64_t numel = 1;
    for (int64_t v : want) numel *= v;
    if (numel > 0 && !t.data) return rt::Status::error("output '" + name + "' has no data");
    (*order)[j] = static_cast<size_t>(at);
  }
  return rt::Status::ok();
}

// Output buffers must not overlap the inputs or each other: generated code
// writes outputs while it still reads inputs.
rt::Status checkOverlap(const tf_tensor* inputs, const std::vector<size_t>& inOrder,
                        const tf_tensor* outputs, const std::vector<size_t>& outOrder) {
  auto range = [](const tf_tensor& t) {
    size_t bytes = rt::dtypeSize(static_cast<rt::DType>(t.dtype));
    for (int32_t d = 0; d < t.rank; ++d) bytes *= static_cast<size_t>(t.shape[d]);
    auto begin = reinterpret_cast<uintptr_t>(t.data);
    return std::make_pair(begin, begin + bytes);
  };
  auto overlaps = [&](const tf_tensor& a, const tf_tensor& b) {
    auto [a0, a1] = range(a);
    auto [b0, b1] = range(b);
    return a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1;
  };
  for (size_t i = 0; i < outOrder.size(); ++i) {
    const tf_tensor& o = outputs[outOrder[i]];
    for (size_t k : inOrder)
      if (overlaps(o, inputs[k]))
        return rt::Status::error("output '" + str(o.name) + "' overlaps input '" +
                                 str(inputs[k].name) + "'");
    for (size_t j = 0; j < i; ++j)
      if (overlaps(o, outputs[outOrder[j]]))
        return rt::Status::error("output '" + str(o.name) + "' overlaps output '" +
                                 str(outputs[outOrder[j]].name) + "'");
  }
  return rt::Status::ok();
}

// Takes an arena of entry `entry` from the free list (or allocates one) and
// gives it back when destroyed.
class ArenaLease {
public:
  ArenaLease(tf_model* m, int32_t entry) : m_(m), entry_(entry) {
    {
      std::lock_guard<std::mutex> lock(m->arenaMutex);
      auto& list = m->freeArenas[entry];
      if (!list.empty()) {
        arena_ = std::move(list.back());
        list.pop_back();
      }
    }
    if (arena_) return;
    const EntryDesc& e = m->desc->entries[entry];
    if (const transfuse::exec::DeviceOps* device = m->desc->device)
      arena_ = allocateDeviceBlock(*device, static_cast<int64_t>(stagingOffset(e) + stagingBytes(e)));
    else
      arena_ = allocateArena(e.arenaBytes);
  }
  ~ArenaLease() {
    try {
      std::lock_guard<std::mutex> lock(m_->arenaMutex);
      m_->freeArenas[entry_].push_back(std::move(arena_));
    } catch (...) {
      // Out of memory growing the list: the arena is freed instead.
    }
  }
  std::byte* get() const { return arena_.get(); }

private:
  tf_model* m_;
  int32_t entry_;
  Arena arena_;
};

// What a model holds (every parameter, the packed GEMM weights) and what a
// run takes (the largest arena), against the machine's memory, before any of
// it is allocated.
rt::Status checkMemory(const ModelDesc& desc) {
  uint64_t total = 0;
  for (int32_t i = 0; i < desc.numParams; ++i)
    total = rt::saturatingAdd(
        total, rt::tensorBytes(desc.params[i].shape, std::max(desc.params[i].rank, 0), sizeof(float)));
  for (int32_t i = 0; i < desc.numPacks; ++i) {
    const int64_t kn[2] = {desc.packs[i].k, desc.packs[i].n};
    total = rt::saturatingAdd(total, rt::tensorBytes(kn, 2, sizeof(float)));
  }
  // A device model's arenas are device memory (cudaMalloc says when they
  // do not fit); its parameters are held on the host too.
  int64_t arena = desc.prepare && !desc.device ? desc.prepare->arenaBytes : 0;
  for (int32_t e = 0; e < desc.numEntries && !desc.device; ++e)
    arena = std::max(arena, desc.entries[e].arenaBytes);
  total = rt::saturatingAdd(total, arena > 0 ? static_cast<uint64_t>(arena) : 0);
  return rt::checkFitsInMemory(
      "the model (" + std::to_string(desc.numParams) + " parameters" +
          (desc.device ? ")" : ", their packed GEMM copies and one arena)"),
      total);
}

// Params, prepare and packing (see the file comment).
rt::Status createModel(const char* weightsPath, const tf_options* options, tf_model* m) {
  const ModelDesc* desc = m->desc;
  if (desc->abiVersion != TF_ABI_VERSION)
    return rt::Status::error("the generated model has ABI version " +
                             std::to_string(desc->abiVersion) + "; this runtime is version " +
                             std::to_string(TF_ABI_VERSION));
  // This artifact links its own copy of the kernels, whose int8 path
  // toggles the driver's do not reach: $TRANSFUSE_ISA applies here too (the
  // Highway target lives in the shared libhwy and is set once more).
  static const rt::Status isa = transfuse::kernels::forceTargetFromEnvironment();
  if (!isa) return isa;
  int threads = options ? options->num_threads : 0;
  if (threads <= 0) threads = rt::ThreadPool::hardwareThreads();
  if (threads > kMaxThreads)
    return rt::Status::error("num_threads " + std::to_string(threads) + " is over the maximum " +
                             std::to_string(kMaxThreads));
  m->pool = std::make_unique<rt::ThreadPool>(threads);
  if (const transfuse::exec::DeviceOps* device = desc->device) {
    m->deviceOrdinal = options ? options->device_ordinal : 0;
    m->graphs.device = device;
    if (rt::Status s = device->select(m->deviceOrdinal); !s) return s;
  } else if (options && options->device_ordinal != 0) {
    return rt::Status::error("device ordinal " + std::to_string(options->device_ordinal) +
                             " given, but the model runs on the cpu (compiled for the cpu target)");
  }

  // The weights: every param that is not prepared.
  std::vector<rt::ParamSpec> specs;
  for (int32_t i = 0; i < desc->numParams; ++i) {
    const transfuse::exec::ParamDesc& p = desc->params[i];
    if (p.prepared) continue;
    rt::ParamSpec s;
    s.name = str(p.name);
    s.shape.assign(p.shape, p.shape + p.rank);
    if (!rt::parseInitKind(str(p.init), &s.init))
      return rt::Status::error("parameter '" + s.name + "' has unknown initializer '" +
                               str(p.init) + "'");
    s.fanIn = p.fanIn;
    s.fanOut = p.fanOut;
    s.optional = p.optional;
    specs.push_back(std::move(s));
  }
  if (rt::Status s = checkMemory(*desc); !s) return s;
  std::map<std::string, rt::Tensor> weights;
  if (weightsPath) {
    auto file = rt::WeightFiles::open(weightsPath);
    if (!file) return file.status();
    rt::BindingRules rules;
    for (int32_t i = 0; i < desc->numAliases; ++i)
      rules.aliases[str(desc->aliases[2 * i])] = str(desc->aliases[2 * i + 1]);
    for (int32_t i = 0; i < desc->numIgnored; ++i) rules.ignored.push_back(str(desc->ignored[i]));
    for (int32_t i = 0; i < desc->numPrefixes; ++i)
      rules.prefixes.push_back(str(desc->prefixes[i]));
    auto bound = rt::bindWeights(specs, rules, *file, /*warnings=*/nullptr);
    if (!bound) return bound.status();
    weights = std::move(*bound);
  } else {
    auto random = rt::randomWeights(specs, options ? options->seed : 0);
    if (!random) return random.status();
    weights = std::move(*random);
  }

  m->params.resize(desc->numParams);
  m->paramPtrs.resize(desc->numParams);
  for (int32_t i = 0; i < desc->numParams; ++i) {
    const transfuse::exec::ParamDesc& p = desc->params[i];
    std::vector<int64_t> shape(p.shape, p.shape + p.rank);
    if (p.prepared) {
      m->params[i] = rt::Tensor::zeros(rt::DType::F32, shape);
    } else {
      auto it = weights.find(str(p.name));
      if (it == weights.end() || it->second.dtype != rt::DType::F32 || it->second.shape != shape)
        return rt::Status::error("internal error: parameter '" + str(p.name) + "' was not bound");
      m->params[i] = std::move(it->second);
    }
    m->paramPtrs[i] = m->params[i].data<float>();
    if (desc->device) {
      const size_t bytes = m->params[i].numElements() * (desc->bf16 ? sizeof(uint16_t) : sizeof(float));
      m->deviceParams.push_back(allocateDeviceBlock(*desc->device, static_cast<int64_t>(bytes)));
      m->paramPtrs[i] = reinterpret_cast<const float*>(m->deviceParams.back().get());
      // Prepare sees prepared params zero, as on the host (weights are
      // uploaded by refreshPrepared).
      if (p.prepared)
        if (rt::Status s = desc->device->fill(m->deviceParams.back().get(), 0, bytes); !s) return s;
    }
  }
  weights.clear();

  m->changed.assign(desc->numParams, 1);
  if (rt::Status s = refreshPrepared(m); !s) return s;

  for (int32_t e = 0; e < desc->numEntries; ++e)
    m->inputSpecs.push_back(specsOf(desc->entries[e].inputs, desc->entries[e].numInputs));
  m->freeArenas.resize(desc->numEntries);
  return rt::Status::ok();
}

}  // namespace

namespace transfuse::exec::abi {

namespace {

// A device entry's check words (EntryDesc::checkWords), read back after its
// work: ok, or the error of the first word a kernel set.
rt::Status readCheckWords(const DeviceOps& device, const EntryDesc& e, const uint32_t* words) {
  if (e.numDeviceChecks <= 0 || !e.checkWords) return rt::Status::ok();
  std::vector<uint32_t> host(static_cast<size_t>(e.numDeviceChecks));
  if (rt::Status s = device.toHost(host.data(), words, host.size() * sizeof(uint32_t)); !s) return s;
  if (rt::Status s = device.synchronize(); !s) return s;
  return e.checkWords(host.data());
}

constexpr int kMaxGraphs = 256;        // captured per model
constexpr size_t kMaxGraphKeys = 4096;  // keys counted per model

// The host side of a state that a run's host statements change, put back
// when a capture that ran them fails (the run then runs again eagerly).
struct StateSnapshot {
  explicit StateSnapshot(tf_state* s) : state(s) {
    if (!s) return;
    length = s->length;
    serial = s->serial;
    extents = s->extents;
    rowIds = s->rowIds;
  }
  void restore() const {
    if (!state) return;
    state->length = length;
    state->serial = serial;
    state->extents = extents;
    for (size_t i = 0; i < rowIds.size(); ++i)  // in place: rowIdPtrs point into them
      std::copy(rowIds[i].begin(), rowIds[i].end(), state->rowIds[i].begin());
  }
  tf_state* state;
  int64_t length = 0;
  uint64_t serial = 0;
  std::vector<int64_t> extents;
  std::vector<std::vector<uint64_t>> rowIds;
};

// Runs a device entry: eagerly, or as the CUDA graph of earlier runs with
// the same `key` (empty: always eagerly). A replay then runs the entry's
// host statements, which a capture ran as part of the run.
rt::Status runOnDevice(tf_model* m, const EntryDesc& e, const transfuse::exec::Call& call,
                       tf_state* state, const std::vector<int64_t>& key) {
  const DeviceOps& device = *m->desc->device;
  if (key.empty() || !device.graphsEnabled()) return e.run(call);
  GraphCache& cache = m->graphs;
  void* exec = nullptr;
  bool capture = false;
  {  // (the runs themselves happen outside the lock)
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.graphs.find(key);
    if (it == cache.graphs.end()) {
      if (cache.graphs.size() < kMaxGraphKeys) cache.graphs[key].seen = 1;  // the first time
    } else if (it->second.seen >= 0) {
      GraphCache::Graph& g = it->second;
      ++g.seen;
      exec = g.exec;
      capture = !exec && cache.captured < kMaxGraphs;
      if (capture) ++cache.captured;  // reserved; given back if the capture fails
    }
  }
  if (exec) {
    if (rt::Status s = device.launchGraph(exec); !s) return s;
    if (e.hostStatements) e.hostStatements(call);
    return rt::Status::ok();
  }
  if (!capture) return e.run(call);
  // The run's launches are recorded, not run; its host statements run.
  const StateSnapshot snapshot(state);
  void* graph = nullptr;
  rt::Status captured = device.beginCapture();
  rt::Status ran = captured ? e.run(call) : rt::Status::ok();
  if (captured) captured = device.endCapture(&graph);
  if (captured && ran) {
    {
      std::lock_guard<std::mutex> lock(cache.mutex);
      cache.graphs[key].exec = graph;
    }
    return device.launchGraph(graph);
  }
  if (graph) device.releaseGraph(graph);
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    --cache.captured;
    if (!captured) cache.graphs[key].seen = -1;  // the entry's launches cannot be captured
  }
  if (captured) return ran;  // the run's own error (a shape check), not the capture's
  // The capture failed (then the run's launches fail too, from the first
  // that a graph cannot hold): nothing ran; again, eagerly.
  snapshot.restore();
  return e.run(call);
}

}  // namespace

void markChanged(tf_model* m, int32_t index) {
  m->changed[index] = 1;
  m->stale.store(true);
}

// The prepare entry point (its outputs are the prepared params, by name),
// then the GEMM weight packing; at create and after weights are written.
rt::Status refreshPrepared(tf_model* m) {
  const ModelDesc* desc = m->desc;
  const transfuse::exec::DeviceOps* device = desc->device;
  bool weightChanged = false;
  for (int32_t i = 0; i < desc->numParams; ++i)
    weightChanged |= !desc->params[i].prepared && m->changed[i];
  // Under --dtype bf16 the uploads' bf16 copies, alive until the uploads end.
  std::vector<std::vector<uint16_t>> rounded;
  if (device) {  // the weights written on the host go to the device (not those trained there)
    if (rt::Status s = device->select(m->deviceOrdinal); !s) return s;
    for (int32_t i = 0; i < desc->numParams; ++i) {
      if (desc->params[i].prepared || !m->changed[i] ||
          (i < static_cast<int32_t>(m->hostStale.size()) && m->hostStale[i]))
        continue;
      const float* from = m->params[i].data<float>();
      const size_t n = static_cast<size_t>(m->params[i].numElements());
      rt::Status s = rt::Status::ok();
      if (desc->bf16) {
        rounded.emplace_back(n);
        for (size_t k = 0; k < n; ++k) rounded.back()[k] = rt::floatToBf16(from[k]);
        s = device->toDevice(m->deviceParams[i].get(), rounded.back().data(), n * sizeof(uint16_t));
      } else {
        s = device->toDevice(m->deviceParams[i].get(), from, n * sizeof(float));
      }
      if (!s) {
        (void)device->synchronize();  // nothing reads `rounded` after it goes
        return s;
      }
    }
  }
  if (const EntryDesc* prep = desc->prepare; prep && weightChanged) {
    if (prep->numInputs != 0)
      return rt::Status::error("internal error: the prepare entry point has inputs");
    std::vector<void*> outs(prep->numOutputs);
    std::vector<bool> produced(desc->numParams, false);
    for (int32_t o = 0; o < prep->numOutputs; ++o) {
      const TensorDesc& d = prep->outputs[o];
      int32_t at = -1;
      for (int32_t i = 0; i < desc->numParams && at < 0; ++i)
        if (desc->params[i].prepared && str(desc->params[i].name) == str(d.name)) at = i;
      if (at < 0)
        return rt::Status::error("internal error: prepare output '" + str(d.name) +
                                 "' is not a prepared parameter");
      const rt::Tensor& t = m->params[at];
      if (d.dtype != (desc->bf16 ? TF_BF16 : TF_F32) ||
          t.shape != std::vector<int64_t>(d.shape, d.shape + d.rank))
        return rt::Status::error("internal error: prepare output '" + str(d.name) + "' has shape " +
                                 shapeString(d.shape, d.rank) + ", the parameter " +
                                 rt::shapeToString(t.shape));
      outs[o] = device ? static_cast<void*>(m->deviceParams[at].get()) : m->params[at].data<float>();
      produced[at] = true;
    }
    for (int32_t i = 0; i < desc->numParams; ++i)
      if (desc->params[i].prepared && !produced[i])
        return rt::Status::error("internal error: prepared parameter '" + str(desc->params[i].name) +
                                 "' is not an output of the prepare entry point");
    Arena arena = device ? allocateDeviceBlock(*device, static_cast<int64_t>(stagingOffset(*prep)))
                         : allocateArena(prep->arenaBytes);
    std::vector<const kernels::PackedB*> noPacks(desc->numPacks, nullptr);
    transfuse::exec::Call call{nullptr,       nullptr,        outs.data(),     m->paramPtrs.data(),
                               noPacks.data(), arena.get(), m->pool.get()};
    if (device) {
      call.deviceChecks = reinterpret_cast<uint32_t*>(arena.get() + checksOffset(*prep));
      if (rt::Status s = device->fill(call.deviceChecks, 0xff,
                                      transfuse::exec::kDeviceCheckWords * sizeof(uint32_t));
          !s)
        return s;
    }
    rt::Status s = prep->run(call);
    if (device) {
      rt::Status done = device->synchronize();
      if (s) s = done;
      if (s) s = readCheckWords(*device, *prep, call.deviceChecks);
    }
    if (!s) return rt::Status::error("prepare: " + s.message());
    for (int32_t i = 0; i < desc->numParams; ++i)
      if (desc->params[i].prepared) m->changed[i] = 1;
  } else if (!desc->prepare) {
    for (int32_t i = 0; i < desc->numParams; ++i)
      if (desc->params[i].prepared)
        return rt::Status::error("internal error: prepared parameter '" + str(desc->params[i].name) +
                                 "' but no prepare entry point");
  }

  // GEMM weight packing of what changed (in place: the pointers in
  // packedPtrs stay valid).
  if (device && desc->numPacks > 0)
    return rt::Status::error(std::string("internal error: a model on ") + device->name +
                             " has packed weights");
  m->packed.resize(desc->numPacks);
  m->packedPtrs.resize(desc->numPacks);
  m->quantized.resize(desc->numPacks);
  m->quantizedPtrs.resize(desc->numPacks);
  m->bf16Packed.resize(desc->numPacks);
  m->bf16PackedPtrs.resize(desc->numPacks);
  for (int32_t i = 0; i < desc->numPacks; ++i) {
    const transfuse::exec::PackDesc& pk = desc->packs[i];
    if (pk.param < 0 || pk.param >= desc->numParams || pk.k < 0 || pk.n < 0 ||
        m->params[pk.param].numElements() != pk.k * pk.n || pk.pairKind < 0 || pk.pairKind > 2)
      return rt::Status::error("internal error: pack " + std::to_string(i) +
                               " does not match its parameter");
    if (!m->changed[pk.param]) continue;
    const kernels::GemmPairs pairs{static_cast<kernels::GemmPairs::Kind>(pk.pairKind),
                                   static_cast<size_t>(pk.headDim),
                                   static_cast<size_t>(pk.pairColumns)};
    if (pk.int8) {  // quantized per output column, for kernels::gemmInt8
      m->quantized[i] = kernels::quantizePackB(m->paramPtrs[pk.param], pk.transB ? pk.k : pk.n,
                                               pk.transB, pk.k, pk.n, pairs);
      m->quantizedPtrs[i] = &m->quantized[i];
      continue;
    }
    if (pk.bf16) {  // rounded and packed for kernels::gemmBf16 (in place after a step)
      kernels::packBf16(m->bf16Packed[i], m->paramPtrs[pk.param], pk.transB ? pk.k : pk.n,
                        pk.transB, pk.k, pk.n, pairs, m->pool.get());
      m->bf16PackedPtrs[i] = &m->bf16Packed[i];
      continue;
    }
    kernels::repackB(m->packed[i], m->paramPtrs[pk.param], pk.k, pk.n, pk.transB ? pk.k : pk.n,
                     pk.transB, m->pool.get(), pairs);
    m->packedPtrs[i] = &m->packed[i];
  }
  // Uploads are asynchronous on this thread's stream; runs on other threads'
  // streams must see them complete.
  if (device)
    if (rt::Status s = device->synchronize(); !s) return s;
  std::fill(m->changed.begin(), m->changed.end(), 0);
  m->stale.store(false);
  return rt::Status::ok();
}

rt::Status runLocked(tf_model* model, int32_t entry, tf_state* state, const tf_tensor* inputs,
                     int32_t num_inputs, const tf_tensor* outputs, int32_t num_outputs,
                     uint64_t seed, uint64_t step) {
  std::vector<size_t> inOrder;
  rt::Status s = validateInputs(model, entry, inputs, num_inputs, &inOrder);
  if (!s) return s;
  const EntryDesc& e = *entryOf(model, entry);
  if (e.usesState && !state)
    return rt::Status::error("entry point '" + str(e.name) +
                             "' reads and writes state: run it with tf_model_run_with_state");
  if (!e.usesState && state)
    return rt::Status::error("entry point '" + str(e.name) + "' takes no state");
  std::vector<const void*> inData(e.numInputs);
  std::vector<size_t> inBytes(e.numInputs);
  std::vector<std::vector<int32_t>> narrowed(e.numInputs);  // I64 ids as the I32 the code reads
  std::vector<const int64_t*> inShapes = orderedShapes(inputs, inOrder);
  for (int32_t i = 0; i < e.numInputs; ++i) {
    const tf_tensor& t = inputs[inOrder[i]];
    int64_t numel = 1;
    for (int32_t d = 0; d < t.rank; ++d) numel *= t.shape[d];
    if (numel > 0 && !t.data) return rt::Status::error("input '" + str(t.name) + "' has no data");
    if (rt::Status d = checkDevice(model, t, "input"); !d) return d;
    inData[i] = t.data;
    inBytes[i] = tensorBytes(t);
    if (t.dtype == TF_I64 && e.inputs[i].dtype == TF_I32) {
      if (t.device != TF_DEVICE_CPU)
        return rt::Status::error("input '" + str(t.name) +
                                 "': I64 ids are taken from host memory only (pass I32)");
      narrowed[i].resize(static_cast<size_t>(numel));
      if (rt::Status n = rt::narrowIds(t.name, static_cast<const int64_t*>(t.data), numel,
                                       narrowed[i].data());
          !n)
        return n;
      inData[i] = narrowed[i].data();
      inBytes[i] = narrowed[i].size() * sizeof(int32_t);
    }
  }
  auto shapes = outputShapes(e, inShapes);
  std::vector<size_t> outOrder;
  s = checkOutputs(e, outputs, num_outputs, shapes, &outOrder);
  if (s) s = checkOverlap(inputs, inOrder, outputs, outOrder);
  if (!s) return s;
  std::vector<void*> outData(e.numOutputs);
  for (int32_t i = 0; i < e.numOutputs; ++i) {
    outData[i] = outputs[outOrder[i]].data;
    if (rt::Status d = checkDevice(model, outputs[outOrder[i]], "output"); !d) return d;
  }

  const transfuse::exec::DeviceOps* device = model->desc->device;
  // The device is current on this thread before its arena is allocated.
  if (device)
    if (rt::Status d = device->select(model->deviceOrdinal); !d) return d;
  ArenaLease arena(model, entry);
  uint32_t* checks = nullptr;
  if (device) {
    // Host tensors are staged in the arena block, at offsets within the
    // room stagingBytes gave them (shapes are within the maxima).
    std::byte* staging = arena.get() + stagingOffset(e);
    for (int32_t i = 0; i < e.numInputs; ++i) {
      const tf_tensor& t = inputs[inOrder[i]];
      if (t.device == TF_DEVICE_CPU) {
        if (rt::Status d = device->toDevice(staging, inData[i], inBytes[i]); !d) {
          (void)device->synchronize();  // nothing in flight when the arena is reused
          return d;
        }
        inData[i] = staging;
      }
      staging += stagedBytes(e.inputs[i]);
    }
    for (int32_t i = 0; i < e.numOutputs; ++i) {
      if (outputs[outOrder[i]].device == TF_DEVICE_CPU) outData[i] = staging;
      staging += stagedBytes(e.outputs[i]);
    }
    checks = reinterpret_cast<uint32_t*>(arena.get() + checksOffset(e));
    if (rt::Status d = device->fill(checks, 0xff, transfuse::exec::kDeviceCheckWords * sizeof(uint32_t));
        !d) {
      (void)device->synchronize();
      return d;
    }
  }
  transfuse::exec::Call call{inData.data(),         inShapes.data(),
                             outData.data(),        model->paramPtrs.data(),
                             model->packedPtrs.data(), arena.get(),
                             model->pool.get(),     state ? state->ptrs.data() : nullptr,
                             state ? &state->length : nullptr,
                             state ? state->extents.data() : nullptr,
                             state ? state->rowIdPtrs.data() : nullptr,
                             state ? &state->serial : nullptr};
  call.seed = seed;
  call.step = step;
  call.deviceChecks = checks;
  call.quantized = model->quantizedPtrs.data();
  call.bf16Packed = model->bf16PackedPtrs.data();
  if (!device) return e.run(call);
  // What the launches depend on (a train step's dropout key changes each
  // step: those run eagerly).
  std::vector<int64_t> key;
  if (seed == 0 && step == 0) {
    key = {entry, reinterpret_cast<intptr_t>(arena.get())};
    for (int32_t i = 0; i < e.numInputs; ++i) {
      key.push_back(reinterpret_cast<intptr_t>(inData[i]));
      key.insert(key.end(), inShapes[i], inShapes[i] + e.inputs[i].rank);
    }
    for (void* p : outData) key.push_back(reinterpret_cast<intptr_t>(p));
    if (state) {
      for (void* p : state->ptrs) key.push_back(reinterpret_cast<intptr_t>(p));
      key.push_back(state->length);
    }
  }
  rt::Status result;
  try {
    result = runOnDevice(model, e, call, state, key);
    if (result) result = readCheckWords(*device, e, checks);
    for (int32_t i = 0; result && i < e.numOutputs; ++i) {
      const tf_tensor& t = outputs[outOrder[i]];
      if (t.device == TF_DEVICE_CPU) result = device->toHost(t.data, outData[i], tensorBytes(t));
    }
  } catch (...) {
    (void)device->synchronize();  // nothing in flight when the arena is reused
    throw;
  }
  // The arena goes back to the free list only when its work is done.
  rt::Status done = device->synchronize();
  return result ? done : result;
}

int32_t run(tf_model* model, int32_t entry, tf_state* state, const tf_tensor* inputs,
            int32_t num_inputs, const tf_tensor* outputs, int32_t num_outputs, tf_error* error,
            const char* function) {
  clearError(error);
  try {
    if (!model) return setError(error, "the model is NULL");
    for (;;) {
      {
        std::shared_lock<std::shared_mutex> lock(model->paramMutex);
        if (!model->stale.load()) {
          rt::Status s =
              runLocked(model, entry, state, inputs, num_inputs, outputs, num_outputs, 0, 0);
          if (!s) return setError(error, s.message());
          return 0;
        }
      }
      // Weights were written: prepare and pack before running.
      std::unique_lock<std::shared_mutex> lock(model->paramMutex);
      if (model->stale.load())
        if (rt::Status s = refreshPrepared(model); !s) return setError(error, s.message());
    }
  } catch (const std::exception& ex) {
    return setError(error, std::string(function) + ": " + ex.what());
  } catch (...) {
    return setError(error, std::string(function) + ": unknown exception");
  }
}

}  // namespace transfuse::exec::abi

extern "C" {

uint32_t tf_abi_version(void) { return TF_ABI_VERSION; }

int32_t tf_model_create(const char* weights_path, const tf_options* options, tf_model** model,
                        tf_error* error) {
  clearError(error);
  if (!model) return setError(error, "tf_model_create: the model pointer is NULL");
  *model = nullptr;
  try {
    const ModelDesc* desc = transfuse_generated_model();
    if (!desc) return setError(error, "the artifact has no model description");
    auto m = std::make_unique<tf_model>();
    m->desc = desc;
    rt::Status s = createModel(weights_path, options, m.get());
    if (!s) return setError(error, s.message());
    *model = m.release();
    return 0;
  } catch (const std::exception& e) {
    return setError(error, std::string("tf_model_create: ") + e.what());
  } catch (...) {
    return setError(error, "tf_model_create: unknown exception");
  }
}

void tf_model_destroy(tf_model* model) {
  if (model && model->desc->device) (void)model->desc->device->select(model->deviceOrdinal);
  delete model;
}

const char* tf_model_fusion(const tf_model* model) {
  if (!model) return nullptr;
  return model->desc->fusion ? model->desc->fusion : "";
}

const char* tf_model_config_json(const tf_model* model) {
  if (!model) return nullptr;
  return model->desc->configJson ? model->desc->configJson : "";
}

int32_t tf_model_num_threads(const tf_model* model) {
  return model ? model->pool->numThreads() : -1;
}

int32_t tf_model_device(const tf_model* model) {
  if (!model) return -1;
  return model->desc->device ? model->desc->device->kind : TF_DEVICE_CPU;
}

int32_t tf_model_num_entry_points(const tf_model* model) {
  return model ? model->desc->numEntries : -1;
}

const char* tf_model_entry_point_name(const tf_model* model, int32_t entry) {
  const EntryDesc* e = entryOf(model, entry);
  return e ? e->name : nullptr;
}

int32_t tf_model_find_entry_point(const tf_model* model, const char* name) {
  if (!model || !name) return -1;
  for (int32_t i = 0; i < model->desc->numEntries; ++i)
    if (model->desc->entries[i].name && std::strcmp(model->desc->entries[i].name, name) == 0)
      return i;
  return -1;
}

int32_t tf_model_num_inputs(const tf_model* model, int32_t entry) {
  const EntryDesc* e = entryOf(model, entry);
  return e ? e->numInputs : -1;
}

int32_t tf_model_num_outputs(const tf_model* model, int32_t entry) {
  const EntryDesc* e = entryOf(model, entry);
  return e ? e->numOutputs : -1;
}

static int32_t specOf(const tf_model* model, int32_t entry, int32_t index, tf_tensor_spec* spec,
                      tf_error* error, bool input) {
  clearError(error);
  const EntryDesc* e = entryOf(model, entry);
  if (!e) {
    try {
      return setError(error, badEntry(model, entry).message());
    } catch (...) {
      return setError(error, "bad entry point");
    }
  }
  int32_t n = input ? e->numInputs : e->numOutputs;
  if (index < 0 || index >= n) {
    try {
      return setError(error, std::string("entry point '") + str(e->name) + "' has no " +
                                 (input ? "input" : "output") + " with index " +
                                 std::to_string(index) + " (it has " + std::to_string(n) + ")");
    } catch (...) {
      return setError(error, "bad tensor index");
    }
  }
  if (!spec) return setError(error, "the spec pointer is NULL");
  const TensorDesc& d = (input ? e->inputs : e->outputs)[index];
  *spec = tf_tensor_spec{d.name, d.dtype, d.rank, d.shape, d.maxShape};
  return 0;
}

int32_t tf_model_input_spec(const tf_model* model, int32_t entry, int32_t index,
                            tf_tensor_spec* spec, tf_error* error) {
  return specOf(model, entry, index, spec, error, /*input=*/true);
}

int32_t tf_model_output_spec(const tf_model* model, int32_t entry, int32_t index,
                             tf_tensor_spec* spec, tf_error* error) {
  return specOf(model, entry, index, spec, error, /*input=*/false);
}

int32_t tf_model_output_shape(const tf_model* model, int32_t entry, const tf_tensor* inputs,
                              int32_t num_inputs, int32_t index, int64_t* shape,
                              tf_error* error) {
  clearError(error);
  try {
    std::vector<size_t> order;
    rt::Status s = validateInputs(model, entry, inputs, num_inputs, &order);
    if (!s) return setError(error, s.message());
    const EntryDesc& e = *entryOf(model, entry);
    if (index < 0 || index >= e.numOutputs)
      return setError(error, "entry point '" + str(e.name) + "' has no output with index " +
                                 std::to_string(index) + " (it has " +
                                 std::to_string(e.numOutputs) + ")");
    if (!shape && e.outputs[index].rank > 0) return setError(error, "the shape pointer is NULL");
    auto shapes = outputShapes(e, orderedShapes(inputs, order));
    std::copy(shapes[index].begin(), shapes[index].end(), shape);
    return 0;
  } catch (const std::exception& ex) {
    return setError(error, std::string("tf_model_output_shape: ") + ex.what());
  } catch (...) {
    return setError(error, "tf_model_output_shape: unknown exception");
  }
}

int32_t tf_model_run(tf_model* model, int32_t entry, const tf_tensor* inputs, int32_t num_inputs,
                     const tf_tensor* outputs, int32_t num_outputs, tf_error* error) {
  return transfuse::exec::abi::run(model, entry, nullptr, inputs, num_inputs, outputs, num_outputs,
                                   error, "tf_model_run");
}

int64_t tf_model_arena_bytes(const tf_model* model, int32_t entry) {
  const EntryDesc* e = entryOf(model, entry);
  return e ? e->arenaBytes : -1;
}

int64_t tf_model_kernel_calls(const tf_model* model, int32_t entry) {
  const EntryDesc* e = entryOf(model, entry);
  return e ? e->kernelCalls : -1;
}

int32_t tf_model_flops(const tf_model* model, int32_t entry, const tf_tensor* inputs,
                       int32_t num_inputs, double* flops, tf_error* error) {
  clearError(error);
  try {
    std::vector<size_t> order;
    rt::Status s = validateInputs(model, entry, inputs, num_inputs, &order);
    if (!s) return setError(error, s.message());
    if (!flops) return setError(error, "the flops pointer is NULL");
    const EntryDesc& e = *entryOf(model, entry);
    *flops = e.flops ? e.flops(orderedShapes(inputs, order).data()) : 0.0;
    return 0;
  } catch (const std::exception& ex) {
    return setError(error, std::string("tf_model_flops: ") + ex.what());
  } catch (...) {
    return setError(error, "tf_model_flops: unknown exception");
  }
}

}  // extern "C"
