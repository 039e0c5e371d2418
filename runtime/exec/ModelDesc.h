// What generated model code provides to the runtime: a ModelDesc of tables
// (parameters, binding rules, entry points with their tensor specs, the
// weights to pack) and one function per entry point. ModelAbi.cpp builds the
// C ABI of model.h on top of it; generated code defines
// transfuse_generated_model() and nothing else with external linkage.
#ifndef TRANSFUSE_RUNTIME_EXEC_MODELDESC_H
#define TRANSFUSE_RUNTIME_EXEC_MODELDESC_H

#include "runtime/Status.h"
#include "runtime/exec/Ops.h"

#include <cstddef>
#include <cstdint>

namespace transfuse::rt {
class ThreadPool;
}
namespace transfuse::kernels {
struct AdamStep;
struct PackedB;
struct Int8Weights;
struct Bf16Weights;
}

namespace transfuse::exec {

// An entry point's input or output. dtype is a tf_dtype (model.h) value;
// shape has -1 for dynamic dimensions, maxShape the compiled maxima; an
// input's sizesOf is the earlier input whose sizes it has (-1: none).
struct TensorDesc {
  const char* name;
  int32_t dtype;
  int32_t rank;
  int64_t shape[kMaxRank];
  int64_t maxShape[kMaxRank];
  int32_t sizesOf = -1;
};

// A parameter (always F32). `init` is an initializer name of runtime/Init.h
// ("xavier_uniform", ...). Prepared params are computed by the prepare entry
// point (its outputs carry their names) instead of being read.
struct ParamDesc {
  const char* name;
  int32_t rank;
  int64_t shape[kMaxRank];
  const char* init;
  int64_t fanIn, fanOut;
  bool optional;
  bool prepared;
};

// A GEMM weight packed at load (kernels::packB): param `param` holds B as
// [k, n] (transB false) or [n, k] (transB true).
struct PackDesc {
  int32_t param;
  int64_t k, n;
  bool transB;
  // kernels::GemmPairs: its Kind as an integer, headDim and columns.
  int32_t pairKind;
  int64_t headDim, pairColumns;
  // --dtype int8: quantized per output column (kernels::quantizePackB)
  // instead, for kernels::gemmInt8 (Call::quantized).
  bool int8 = false;
  // --dtype bf16 (cpu): rounded to bf16 and packed (kernels::packBf16)
  // instead, for kernels::gemmBf16 (Call::bf16Packed).
  bool bf16 = false;
};

// One call of an entry point. Inputs and outputs are in the order of the
// entry's specs, already validated; outputs have the shapes of outputShapes.
struct Call {
  const void* const* inputs;
  const int64_t* const* inputShapes;
  void* const* outputs;
  const float* const* params;          // the param table's order
  const kernels::PackedB* const* packed;  // PackDesc order
  std::byte* arena;                    // arenaBytes, 64-byte aligned
  rt::ThreadPool* pool;                // may be null
  // Entries that use state (EntryDesc::usesState): the ModelDesc's state
  // tensors at their capacity, and the positions filled so far, which the
  // entry checks against the capacity before writing and then advances.
  void* const* state = nullptr;
  int64_t* stateLength = nullptr;
  // Per state tensor, the positions written so far (along its
  // ModelDesc::statePositionAxis): an entry that writes positions [p, p+n)
  // raises it to p + n, so reset and reorder touch only what was written.
  int64_t* stateExtents = nullptr;
  // Per state tensor, an id per row: rows of equal id hold equal data (all
  // 0 after create and reset; reorder copies a row's id with it and skips
  // rows whose source has their id). A write gives each row it writes a
  // fresh id from *stateSerial (exec::freshRowIds). Kernels may read one row
  // for rows of equal id (decode attention: beams over one source's cache).
  uint64_t* const* stateRowIds = nullptr;
  uint64_t* stateSerial = nullptr;
  // The key of dropout draws (a train step's seed and step; 0 for other
  // calls): a dropout site draws philoxUniform(its seed + seed, its step +
  // step, its stream, index).
  uint64_t seed = 0, step = 0;
  // Device entries: kDeviceCheckWords words of device memory (see there).
  uint32_t* deviceChecks = nullptr;
  // The int8 packs' weights (PackDesc order; null for the others).
  const kernels::Int8Weights* const* quantized = nullptr;
  // The bf16 packs' weights (PackDesc order; null for the others).
  const kernels::Bf16Weights* const* bf16Packed = nullptr;
};

// A device that generated code runs on (ModelDesc::device; null: the
// host). The runtime keeps the model's parameters, arenas and the staged
// copies of host inputs and outputs in its memory, and calls these around
// the entry points; everything is ordered on the calling thread's stream.
struct DeviceOps {
  const char* name;  // "cuda", for messages
  int32_t kind;      // tf_device_kind (model.h)
  rt::Status (*select)(int32_t ordinal);  // make it current on this thread
  rt::Status (*allocate)(size_t bytes, void** p);
  void (*release)(void* p);
  rt::Status (*toDevice)(void* dst, const void* src, size_t bytes);
  rt::Status (*toHost)(void* dst, const void* src, size_t bytes);
  rt::Status (*fill)(void* dst, int byte, size_t bytes);
  // `height` blocks of `width` bytes, `spitch` apart in src, to `dpitch`
  // apart in dst, both in device memory (state rows: reorder, copy).
  rt::Status (*copy2D)(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                       size_t height);
  rt::Status (*synchronize)();  // waits for the calling thread's work
  // Training on the device (TrainAbi.cpp), on device memory:
  // y = w·y (x null) or y + w·x over n floats (micro-batch gradients);
  rt::Status (*scaleAdd)(float* y, const float* x, float w, size_t n);
  // *out (device memory) = Σ x[i]² in double, the same bits on every run;
  rt::Status (*sumOfSquares)(const float* x, size_t n, double* out);
  // kernels::adamUpdate's step, with its bits.
  rt::Status (*adamUpdate)(float* param, const float* grad, float* m, float* v, size_t n,
                           const kernels::AdamStep& step);
  // Graphs of the calling thread's stream (ModelAbi.cpp replays a run whose
  // launches it has seen before): whether to use them; capture begins; its
  // end gives the instantiated graph (an error: the capture failed, and
  // nothing of it ran); a launch; its release.
  bool (*graphsEnabled)();
  rt::Status (*beginCapture)();
  rt::Status (*endCapture)(void** graph);
  rt::Status (*launchGraph)(void* graph);
  void (*releaseGraph)(void* graph);
};

// Device entries: words of device memory for run-time checks made by
// kernels (a gather's first id out of range), set to 0xffffffff before
// each run; the runtime reads them back after it (EntryDesc::checkWords).
constexpr int kDeviceCheckWords = 64;

using RunFn = rt::Status (*)(const Call&);
// Output shapes from input shapes (inputs validated).
using ShapeFn = void (*)(const int64_t* const* inputShapes, int64_t* const* outputShapes);
// Floating-point operations of one run for these input shapes.
using FlopsFn = double (*)(const int64_t* const* inputShapes);

struct EntryDesc {
  const char* name;
  const TensorDesc* inputs;
  int32_t numInputs;
  const TensorDesc* outputs;
  int32_t numOutputs;
  int64_t arenaBytes;
  int64_t kernelCalls;
  RunFn run;
  ShapeFn outputShapes;
  FlopsFn flops;
  bool usesState = false;  // run with tf_model_run_with_state (ABI 2)
  // Device entries (ModelDesc::device). `run` launches the entry's work on
  // the calling thread's stream and does its host statements; the runtime
  // then reads the numDeviceChecks check words back and `checkWords`
  // turns them into the entry's error. A run may be captured into a CUDA
  // graph and replayed: a replay runs `hostStatements` (the run's host
  // statements: the state's extents, row ids and length) after the graph.
  int32_t numDeviceChecks = 0;
  rt::Status (*checkWords)(const uint32_t* words) = nullptr;
  void (*hostStatements)(const Call& call) = nullptr;
};

struct ModelDesc {
  int32_t abiVersion;  // TF_ABI_VERSION of model.h when generated
  const char* fusion;
  const char* configJson;  // "" when the model has none
  const ParamDesc* params;
  int32_t numParams;
  // Weight-binding rules (runtime/WeightBinding.h): alias/canonical pairs,
  // ignored patterns, accepted prefixes.
  const char* const* aliases;  // 2·numAliases strings
  int32_t numAliases;
  const char* const* ignored;
  int32_t numIgnored;
  const char* const* prefixes;
  int32_t numPrefixes;
  // Null when nothing is hoisted. No inputs; its outputs are named like the
  // prepared params they fill (static shapes). It runs once at load, before
  // packing: its Call's `packed` entries are null and `params` shows the
  // prepared params still zero.
  const EntryDesc* prepare;
  const EntryDesc* entries;
  int32_t numEntries;
  const PackDesc* packs;
  int32_t numPacks;
  // Persistent state tensors (ABI 2; a KV cache), held per tf_state at their
  // maxShape (the capacity).
  const TensorDesc* states = nullptr;
  int32_t numStates = 0;
  // Per state tensor, the axis of its positions (Call::stateExtents), or
  // null when the entries do not track extents (whole rows are copied).
  const int32_t* statePositionAxis = nullptr;
  // The device the entries run on (a CUDA artifact's); null: the host.
  const DeviceOps* device = nullptr;
  // --dtype bf16 (a device model): the params are held on the device as
  // bf16 (rounded to nearest even from the host's F32 at each upload), and
  // the entries' F32 tensors are BF16.
  bool bf16 = false;
};

}  // namespace transfuse::exec

extern "C" const transfuse::exec::ModelDesc* transfuse_generated_model(void);

#endif  // TRANSFUSE_RUNTIME_EXEC_MODELDESC_H
