// The state calls of model.h (ABI 2): persistent tensors a model declares
// (ModelDesc::states), held per tf_state at their capacity. Runs with state
// go through the same validation and arenas as tf_model_run (ModelAbi.cpp);
// a state is taken by one call at a time (an atomic flag, refused rather
// than waited for: two calls racing on one conversation is a caller bug).
// A model on a device keeps its state tensors in device memory: zeroing
// and row copies go through its DeviceOps (the row ids, extents and length
// stay on the host), and each call waits for them before it returns.

#include "runtime/exec/AbiInternal.h"

#include "runtime/MemoryLimit.h"

#include <algorithm>
#include <cstring>
#include <exception>

using namespace transfuse::exec::abi;
using transfuse::exec::TensorDesc;
namespace rt = transfuse::rt;

namespace {

// Bytes of one state tensor at its capacity.
size_t stateBytes(const TensorDesc& d) {
  return static_cast<size_t>(rt::tensorBytes(
      d.maxShape, static_cast<size_t>(std::max(d.rank, 0)), rt::dtypeSize(static_cast<rt::DType>(d.dtype))));
}

// Holds a state for one call; refuses a state another call holds.
class StateLease {
public:
  explicit StateLease(tf_state* s) : s_(s) {
    bool expected = false;
    held_ = s && s->busy.compare_exchange_strong(expected, true);
  }
  ~StateLease() {
    if (held_) s_->busy.store(false);
  }
  bool held() const { return held_; }

private:
  tf_state* s_;
  bool held_ = false;
};

using transfuse::exec::DeviceOps;

const DeviceOps* deviceOf(const tf_state& s) { return s.model->desc->device; }

// Zeroes `bytes` at p (host or the model's device memory).
rt::Status zero(const DeviceOps* device, std::byte* p, size_t bytes) {
  if (device) return device->fill(p, 0, bytes);
  std::memset(p, 0, bytes);
  return rt::Status::ok();
}

// `outer` blocks of `block` bytes, `stride` apart, from `from` to `to`.
rt::Status copyBlocks(const DeviceOps* device, std::byte* to, const std::byte* from, size_t block,
                      size_t stride, int64_t outer) {
  if (device) return device->copy2D(to, stride, from, stride, block, static_cast<size_t>(outer));
  for (int64_t o = 0; o < outer; ++o) std::memcpy(to + o * stride, from + o * stride, block);
  return rt::Status::ok();
}

// Selects the model's device on this thread before a state call touches it.
rt::Status begin(const tf_state& s) {
  const DeviceOps* device = deviceOf(s);
  return device ? device->select(s.model->deviceOrdinal) : rt::Status::ok();
}

// Waits for the device work of a state call (nothing on the host).
rt::Status finish(const tf_state& s, rt::Status status) {
  const DeviceOps* device = deviceOf(s);
  if (!device) return status;
  rt::Status done = device->synchronize();
  return status ? done : status;
}

}  // namespace

extern "C" {

int32_t tf_model_num_states(const tf_model* model) { return model ? model->desc->numStates : 0; }

int32_t tf_model_state_spec(const tf_model* model, int32_t index, tf_tensor_spec* spec,
                            tf_error* error) {
  clearError(error);
  try {
    if (!model) return setError(error, "the model is NULL");
    if (index < 0 || index >= model->desc->numStates)
      return setError(error, "the model has no state tensor with index " + std::to_string(index) +
                                 " (it has " + std::to_string(model->desc->numStates) + ")");
    if (!spec) return setError(error, "the spec pointer is NULL");
    const TensorDesc& d = model->desc->states[index];
    *spec = tf_tensor_spec{d.name, d.dtype, d.rank, d.shape, d.maxShape};
    return 0;
  } catch (...) {
    return setError(error, "tf_model_state_spec: unknown exception");
  }
}

int32_t tf_model_entry_uses_state(const tf_model* model, int32_t entry) {
  const transfuse::exec::EntryDesc* e = entryOf(model, entry);
  return e ? (e->usesState ? 1 : 0) : -1;
}

namespace {
// The parts of a state tensor's rows that hold data: per row, `outer`
// blocks of `block` bytes, `stride` apart (the positions [0, extent) of
// each run along the positions axis), or one block of the whole row when
// the model does not track extents.
struct RowLayout {
  int64_t rows = 1, outer = 1;
  size_t rowBytes = 0, block = 0, stride = 0;
};
RowLayout rowLayout(const transfuse::exec::ModelDesc& desc, const tf_state& s, int32_t t) {
  const TensorDesc& d = desc.states[t];
  RowLayout l;
  l.rows = d.rank > 0 ? std::max<int64_t>(d.maxShape[0], 1) : 1;
  l.rowBytes = s.bytes[t] / static_cast<size_t>(l.rows);
  l.block = l.stride = l.rowBytes;
  const int32_t axis = desc.statePositionAxis ? desc.statePositionAxis[t] : -1;
  if (axis < 1 || axis >= d.rank) return l;
  int64_t inner = 1;
  for (int32_t k = axis + 1; k < d.rank; ++k) inner *= d.maxShape[k];
  l.outer = 1;
  for (int32_t k = 1; k < axis; ++k) l.outer *= d.maxShape[k];
  const size_t elem = l.rowBytes / static_cast<size_t>(l.outer * d.maxShape[axis] * inner);
  const int64_t extent = std::min(s.extents[t], d.maxShape[axis]);
  l.stride = static_cast<size_t>(d.maxShape[axis] * inner) * elem;
  l.block = static_cast<size_t>(extent * inner) * elem;
  return l;
}
}  // namespace

int32_t tf_state_create(tf_model* model, tf_state** state, tf_error* error) {
  clearError(error);
  try {
    if (!model) return setError(error, "the model is NULL");
    if (!state) return setError(error, "the state pointer is NULL");
    auto s = std::make_unique<tf_state>();
    s->model = model;
    const DeviceOps* device = model->desc->device;
    if (rt::Status st = begin(*s); !st) return setError(error, "tf_state_create: " + st.message());
    for (int32_t i = 0; i < model->desc->numStates; ++i) {
      const size_t bytes = stateBytes(model->desc->states[i]);
      s->tensors.push_back(device ? allocateDeviceBlock(*device, static_cast<int64_t>(bytes))
                                  : allocateArena(static_cast<int64_t>(bytes)));
      if (rt::Status st = zero(device, s->tensors.back().get(), bytes); !st)
        return setError(error, "tf_state_create: " + st.message());
      s->bytes.push_back(bytes);
      s->ptrs.push_back(s->tensors.back().get());
      s->extents.push_back(0);
      s->rowIds.emplace_back(static_cast<size_t>(rowLayout(*model->desc, *s, i).rows), 0);
    }
    for (auto& ids : s->rowIds) s->rowIdPtrs.push_back(ids.data());
    if (rt::Status st = finish(*s, rt::Status::ok()); !st)
      return setError(error, "tf_state_create: " + st.message());
    *state = s.release();
    return 0;
  } catch (const std::bad_alloc&) {
    return setError(error, "tf_state_create: out of memory for the model's state at its capacity");
  } catch (const std::exception& ex) {
    return setError(error, std::string("tf_state_create: ") + ex.what());
  } catch (...) {
    return setError(error, "tf_state_create: unknown exception");
  }
}

void tf_state_destroy(tf_state* state) {
  if (state) (void)begin(*state);
  delete state;
}

int32_t tf_state_reset(tf_state* state, tf_error* error) {
  clearError(error);
  StateLease lease(state);
  if (!state) return setError(error, "the state is NULL");
  if (!lease.held()) return setError(error, "tf_state_reset: the state is in use by another call");
  const transfuse::exec::ModelDesc& desc = *state->model->desc;
  const DeviceOps* device = deviceOf(*state);
  rt::Status st = begin(*state);
  for (size_t i = 0; st && i < state->tensors.size(); ++i) {
    RowLayout l = rowLayout(desc, *state, static_cast<int32_t>(i));
    std::byte* base = state->tensors[i].get();
    if (device) {  // one fill of the tensor rather than a call per block
      st = zero(device, base, state->bytes[i]);
    } else {
      for (int64_t r = 0; r < l.rows; ++r)  // only what was written (all when untracked)
        for (int64_t o = 0; o < l.outer; ++o)
          std::memset(base + r * l.rowBytes + o * l.stride, 0, l.block);
    }
    state->extents[i] = 0;
    std::fill(state->rowIds[i].begin(), state->rowIds[i].end(), 0);
  }
  state->length = 0;
  if (rt::Status done = finish(*state, st); !done)
    return setError(error, "tf_state_reset: " + done.message());
  return 0;
}

int64_t tf_state_length(const tf_state* state) { return state ? state->length : -1; }

int32_t tf_state_reorder(tf_state* state, const int32_t* rows, int32_t num_rows, tf_error* error) {
  clearError(error);
  try {
    StateLease lease(state);
    if (!state) return setError(error, "the state is NULL");
    if (!lease.held()) return setError(error, "tf_state_reorder: the state is in use by another call");
    const transfuse::exec::ModelDesc& desc = *state->model->desc;
    if (num_rows == 0 || desc.numStates == 0) return 0;
    if (!rows) return setError(error, "tf_state_reorder: the rows pointer is NULL");
    const DeviceOps* device = deviceOf(*state);
    if (rt::Status st = begin(*state); !st) return setError(error, "tf_state_reorder: " + st.message());
    std::vector<std::byte> hostScratch;
    for (int32_t t = 0; t < desc.numStates; ++t) {
      const TensorDesc& d = desc.states[t];
      const int64_t capacity = d.rank > 0 ? d.maxShape[0] : 1;
      if (num_rows < 0 || num_rows > capacity)
        return setError(error, "tf_state_reorder: " + std::to_string(num_rows) +
                                   " rows, but state '" + str(d.name) + "' holds " +
                                   std::to_string(capacity));
      for (int32_t i = 0; i < num_rows; ++i)
        if (rows[i] < 0 || rows[i] >= capacity)
          return setError(error, "tf_state_reorder: rows[" + std::to_string(i) + "] = " +
                                     std::to_string(rows[i]) + " is outside the " +
                                     std::to_string(capacity) + " rows of state '" + str(d.name) +
                                     "'");
    }
    // A row whose source holds its data already (its own row, or one of
    // the same id: beams over one source's cross-attention cache) is not
    // touched; a row that changes is copied once, from a saved copy when its
    // source is itself overwritten before it is read.
    std::vector<uint64_t> ids;
    std::vector<int32_t> saved;  // source row -> scratch slot
    rt::Status st;  // device copies are ordered on the stream: one wait at the end
    for (int32_t t = 0; st && t < desc.numStates; ++t) {
      const std::vector<uint64_t>& old = state->rowIds[t];
      auto changes = [&](int32_t i) { return old[rows[i]] != old[i]; };
      saved.assign(static_cast<size_t>(num_rows), -1);
      int32_t slots = 0;
      for (int32_t i = 0; i < num_rows; ++i) {
        const int32_t src = rows[i];
        if (changes(i) && src < num_rows && changes(src) && saved[src] < 0) saved[src] = slots++;
      }
      // Only the positions written so far move (a row's layout in scratch
      // is the state's).
      const RowLayout l = rowLayout(desc, *state, t);
      const size_t rowBytes = l.rowBytes;
      auto copyRow = [&](std::byte* to, const std::byte* from) {
        if (st) st = copyBlocks(device, to, from, l.block, l.stride, l.outer);
      };
      std::byte* base = state->tensors[t].get();
      // The saved rows: host memory, or a device block the state keeps.
      const size_t need = rowBytes * static_cast<size_t>(slots);
      std::byte* scratch = nullptr;
      if (device) {
        if (state->scratchBytes < need) {  // (freeing the old block waits for its copies)
          state->scratch = allocateDeviceBlock(*device, static_cast<int64_t>(need));
          state->scratchBytes = need;
        }
        scratch = state->scratch.get();
      } else {
        hostScratch.resize(need);
        scratch = hostScratch.data();
      }
      for (int32_t r = 0; r < num_rows; ++r)
        if (saved[r] >= 0) copyRow(scratch + rowBytes * saved[r], base + rowBytes * r);
      ids.assign(old.begin(), old.end());
      for (int32_t i = 0; i < num_rows; ++i) {
        const int32_t src = rows[i];
        ids[i] = old[src];
        if (!changes(i)) continue;
        const std::byte* from = src < num_rows && saved[src] >= 0 ? scratch + rowBytes * saved[src]
                                                                  : base + rowBytes * src;
        copyRow(base + rowBytes * i, from);
      }
      std::copy(ids.begin(), ids.end(), state->rowIds[t].begin());  // in place, as Call points
    }
    if (rt::Status done = finish(*state, st); !done)
      return setError(error, "tf_state_reorder: " + done.message());
    return 0;
  } catch (const std::exception& ex) {
    return setError(error, std::string("tf_state_reorder: ") + ex.what());
  } catch (...) {
    return setError(error, "tf_state_reorder: unknown exception");
  }
}

int32_t tf_state_copy(tf_state* to, const tf_state* from, tf_error* error) {
  clearError(error);
  if (!to || !from) return setError(error, "tf_state_copy: a state is NULL");
  if (to == from) return 0;
  if (to->model != from->model)
    return setError(error, "tf_state_copy: the states belong to different models");
  StateLease lease(to);
  if (!lease.held()) return setError(error, "tf_state_copy: the target state is in use by another call");
  if (from->busy.load()) return setError(error, "tf_state_copy: the source state is in use by a call");
  const DeviceOps* device = deviceOf(*to);
  rt::Status st = begin(*to);
  for (size_t i = 0; st && i < to->tensors.size(); ++i)
    st = copyBlocks(device, to->tensors[i].get(), from->tensors[i].get(), to->bytes[i], to->bytes[i], 1);
  if (rt::Status done = finish(*to, st); !done)
    return setError(error, "tf_state_copy: " + done.message());
  to->extents = from->extents;
  for (size_t i = 0; i < to->rowIds.size(); ++i)  // in place: Call::stateRowIds points at them
    std::copy(from->rowIds[i].begin(), from->rowIds[i].end(), to->rowIds[i].begin());
  to->serial = from->serial;
  to->length = from->length;
  return 0;
}

int32_t tf_model_run_with_state(tf_model* model, int32_t entry, tf_state* state,
                                const tf_tensor* inputs, int32_t num_inputs,
                                const tf_tensor* outputs, int32_t num_outputs, tf_error* error) {
  clearError(error);
  if (!state) return setError(error, "tf_model_run_with_state: the state is NULL");
  if (state->model != model)
    return setError(error, "tf_model_run_with_state: the state belongs to another model");
  StateLease lease(state);
  if (!lease.held())
    return setError(error, "tf_model_run_with_state: the state is in use by another call");
  return run(model, entry, state, inputs, num_inputs, outputs, num_outputs, error,
             "tf_model_run_with_state");
}

}  // extern "C"
