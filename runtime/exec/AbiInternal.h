// Internal to runtime/exec: what the C ABI's translation units share
// (ModelAbi.cpp: models and runs; StateAbi.cpp: state). Not installed, not
// part of model.h.
#ifndef TRANSFUSE_RUNTIME_EXEC_ABIINTERNAL_H
#define TRANSFUSE_RUNTIME_EXEC_ABIINTERNAL_H

#include "runtime/Status.h"
#include "runtime/Tensor.h"
#include "runtime/TensorSpec.h"
#include "runtime/ThreadPool.h"
#include "runtime/exec/ModelDesc.h"
#include "runtime/exec/model.h"
#include "runtime/kernels/Gemm.h"
#include "runtime/kernels/Bf16Gemm.h"
#include "runtime/kernels/Int8Gemm.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

namespace transfuse::exec::abi {

// Frees a block of host memory (std::free) or of a device's (its release).
struct BlockFree {
  void (*release)(void*) = nullptr;
  void operator()(std::byte* p) const { release ? release(p) : std::free(p); }
};
using Arena = std::unique_ptr<std::byte, BlockFree>;

// A 64-byte aligned block of max(bytes, 64) bytes, never null.
Arena allocateArena(int64_t bytes);
// The same in the memory of `device` (256-byte aligned); throws
// std::runtime_error with the device's message when it fails.
Arena allocateDeviceBlock(const DeviceOps& device, int64_t bytes);

// A device model's CUDA graphs (ModelAbi.cpp: runOnDevice), by the key of
// everything a run's launches depend on: a key seen once runs eagerly, the
// second time it is captured, after that its graph is replayed.
struct GraphCache {
  struct Graph {
    int seen = 0;           // runs with this key; -1: its capture failed, never again
    void* exec = nullptr;   // the instantiated graph
  };
  const DeviceOps* device = nullptr;
  std::mutex mutex;
  std::map<std::vector<int64_t>, Graph> graphs;
  int captured = 0;
  GraphCache() = default;
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;
  ~GraphCache() {
    for (auto& [key, g] : graphs)
      if (g.exec) device->releaseGraph(g.exec);
  }
};

void clearError(tf_error* error);
// Copies `message` into *error (cut at a UTF-8 boundary); returns 1.
int32_t setError(tf_error* error, const std::string& message);
std::string str(const char* s);

}  // namespace transfuse::exec::abi

struct tf_model {
  const transfuse::exec::ModelDesc* desc = nullptr;
  std::unique_ptr<transfuse::rt::ThreadPool> pool;
  std::vector<transfuse::rt::Tensor> params;  // the ParamDesc order, F32
  std::vector<const float*> paramPtrs;        // params, or deviceParams on a device
  // A device model (desc->device): each param's copy in device memory
  // (prepared params live only there), and the device's ordinal.
  std::vector<transfuse::exec::abi::Arena> deviceParams;
  int32_t deviceOrdinal = 0;
  transfuse::exec::abi::GraphCache graphs;
  std::vector<transfuse::kernels::PackedB> packed;  // the PackDesc order
  std::vector<const transfuse::kernels::PackedB*> packedPtrs;
  std::vector<transfuse::kernels::Int8Weights> quantized;  // the PackDesc order (int8 packs)
  std::vector<const transfuse::kernels::Int8Weights*> quantizedPtrs;
  std::vector<transfuse::kernels::Bf16Weights> bf16Packed;  // the PackDesc order (bf16 packs)
  std::vector<const transfuse::kernels::Bf16Weights*> bf16PackedPtrs;
  std::vector<std::vector<transfuse::rt::TensorSpec>> inputSpecs;  // per entry point
  std::mutex arenaMutex;
  std::vector<std::vector<transfuse::exec::abi::Arena>> freeArenas;  // per entry point
  // Runs hold it shared; parameter writes and optimizer steps alone.
  std::shared_mutex paramMutex;
  // Per param (ParamDesc order): written since prepare and packing last
  // ran. `stale` says whether any is; the next call refreshes them first.
  std::vector<char> changed;
  std::atomic<bool> stale{false};
  // Training (TrainAbi.cpp), per param in the ParamDesc order (empty for
  // prepared params and until first used): the accumulated gradients, a
  // scratch for further micro-batches, Adam's moments. In host memory, or
  // for a device model in the device's (and then the optimizer runs there).
  std::vector<transfuse::rt::Tensor> grads, gradScratch, adamM, adamV;
  std::vector<transfuse::exec::abi::Arena> deviceGrads, deviceGradScratch, deviceAdamM,
      deviceAdamV;
  transfuse::exec::abi::Arena deviceNorms;  // per param, its gradient's Σg² (double)
  // Per param: trained on the device since its host copy was last read or
  // written, so the device's copy is the one to read (and not to upload).
  std::vector<char> hostStale;
  bool gradsHeld = false;  // grads hold a micro-batch's sum
  int64_t trainSteps = 0;
};

// Every state tensor of a model at its capacity (the ModelDesc's states),
// zeroed at create and reset, and the positions filled so far.
struct tf_state {
  const tf_model* model = nullptr;
  std::vector<transfuse::exec::abi::Arena> tensors;
  std::vector<size_t> bytes;  // per tensor
  std::vector<void*> ptrs;    // what Call::state points to
  std::vector<int64_t> extents;  // Call::stateExtents
  std::vector<std::vector<uint64_t>> rowIds;  // Call::stateRowIds, per tensor
  std::vector<uint64_t*> rowIdPtrs;
  uint64_t serial = 0;  // the last row id given out
  int64_t length = 0;
  std::atomic<bool> busy{false};  // one call at a time
  // A device model's state: where tf_state_reorder saves rows (grown as needed).
  transfuse::exec::abi::Arena scratch;
  size_t scratchBytes = 0;
};

namespace transfuse::exec::abi {

const EntryDesc* entryOf(const tf_model* m, int32_t entry);
rt::Status badEntry(const tf_model* m, int32_t entry);

// tf_model_run and tf_model_run_with_state: validates the tensors, checks
// that a state is given exactly when the entry uses one, and runs the entry;
// `function` names the caller in messages about exceptions.
int32_t run(tf_model* model, int32_t entry, tf_state* state, const tf_tensor* inputs,
            int32_t num_inputs, const tf_tensor* outputs, int32_t num_outputs, tf_error* error,
            const char* function);
// run() for a caller that holds paramMutex (and has refreshed stale params).
rt::Status runLocked(tf_model* model, int32_t entry, tf_state* state, const tf_tensor* inputs,
                     int32_t num_inputs, const tf_tensor* outputs, int32_t num_outputs,
                     uint64_t seed, uint64_t step);
// Marks param `index` written (a weight: prepare and packing follow).
void markChanged(tf_model* model, int32_t index);
// Reruns prepare when a weight changed, and repacks the packed weights whose
// param changed (a prepared param changes with prepare); the caller holds
// paramMutex alone (or owns the model, at create).
rt::Status refreshPrepared(tf_model* model);

}  // namespace transfuse::exec::abi

#endif  // TRANSFUSE_RUNTIME_EXEC_ABIINTERNAL_H
