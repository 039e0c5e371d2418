// A hand-written stand-in for generated model code (runtime/exec/ModelDesc.h),
// built as a shared library with the C ABI of model.h (ModelAbi.cpp) for
// abi_test.cpp and capi_test.c:
//
//   params   w [4, 3] (xavier_uniform), b [3] (zeros, optional; also read as
//            "bias"), prepared.0 [3, 4] = wᵀ (computed by prepare)
//   packs    prepared.0 as B of a GEMM with K = 4, N = 3, transB
//   forward  x F32 [?, 4] (max [8, 4]), ids I32 [?] (max [8])
//            -> y F32 [?, 3] = x · w + b; an error naming input 'ids' when an
//            id is negative (the "token id out of range" path).
//   states   acc F32 [8, 4, 3]: 8 rows, 4 positions of 3 values (ABI 2)
//   step     (uses state) x F32 [?, 3] -> y F32 [?, 3]: acc[r][L] = x[r] at
//            the state's length L, y[r] = Σ_{p <= L} acc[r][p], L += 1; at
//            L = 4 an error naming the state and its capacity, nothing
//            written (a decode step's cache, in miniature).
// Weight files may prefix names with "model.".

#include "runtime/ThreadPool.h"
#include "runtime/exec/ModelDesc.h"
#include "runtime/exec/Ops.h"
#include "runtime/exec/model.h"
#include "runtime/kernels/Gemm.h"

#include <cstring>
#include <string>

namespace {

using namespace transfuse;
using exec::Call;
using exec::EntryDesc;
using exec::ModelDesc;
using exec::PackDesc;
using exec::ParamDesc;
using exec::TensorDesc;

constexpr int32_t kF32 = 0;  // tf_dtype values (model.h)
constexpr int32_t kI32 = 4;
constexpr int64_t kMaxBatch = 8;

const ParamDesc kParams[] = {
    {"w", 2, {4, 3}, "xavier_uniform", 3, 4, false, false},
    {"b", 1, {3}, "zeros", 0, 0, true, false},
    {"prepared.0", 2, {3, 4}, "zeros", 0, 0, false, true},
};
const char* const kAliases[] = {"bias", "b"};
const char* const kIgnored[] = {"*.mask"};
const char* const kPrefixes[] = {"model."};
const PackDesc kPacks[] = {{2, 4, 3, true}};

// prepare: prepared.0 = wᵀ.
rt::Status prepare(const Call& c) {
  const float* w = c.params[0];
  float* wt = static_cast<float*>(c.outputs[0]);
  for (int k = 0; k < 4; ++k)
    for (int n = 0; n < 3; ++n) wt[n * 4 + k] = w[k * 3 + n];
  return rt::Status::ok();
}

const TensorDesc kPrepareOutputs[] = {{"prepared.0", kF32, 2, {3, 4}, {3, 4}}};
const EntryDesc kPrepare = {"prepare", nullptr, 0, kPrepareOutputs, 1, 0, 0, &prepare,
                            nullptr,   nullptr};

// forward: y = x · w + b, x copied through the arena first (so concurrent
// calls sharing an arena would show up as wrong results).
rt::Status forward(const Call& c) {
  const int64_t batch = c.inputShapes[0][0];
  const int32_t* ids = static_cast<const int32_t*>(c.inputs[1]);
  for (int64_t i = 0; i < c.inputShapes[1][0]; ++i)
    if (ids[i] < 0)
      return rt::Status::error("input 'ids': token id " + std::to_string(ids[i]) +
                               " at position " + std::to_string(i) + " is negative");
  float* a = reinterpret_cast<float*>(c.arena);
  std::memcpy(a, c.inputs[0], static_cast<size_t>(batch) * 4 * sizeof(float));
  kernels::GemmEpilogue ep;
  ep.bias = c.params[1];
  kernels::gemm(static_cast<size_t>(batch), 3, 4, a, 4, false, *c.packed[0],
                static_cast<float*>(c.outputs[0]), 3, ep, c.pool);
  return rt::Status::ok();
}

void forwardShapes(const int64_t* const* in, int64_t* const* out) {
  out[0][0] = in[0][0];
  out[0][1] = 3;
}

double forwardFlops(const int64_t* const* in) { return 2.0 * static_cast<double>(in[0][0]) * 4 * 3; }

constexpr int64_t kPositions = 4;

rt::Status step(const Call& c) {
  const int64_t rows = c.inputShapes[0][0], L = *c.stateLength;
  if (L >= kPositions)
    return rt::Status::error("state 'acc' is full: its capacity is " + std::to_string(kPositions) +
                             " positions");
  float* acc = static_cast<float*>(c.state[0]);
  const float* x = static_cast<const float*>(c.inputs[0]);
  float* y = static_cast<float*>(c.outputs[0]);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < 3; ++k) {
      acc[(r * kPositions + L) * 3 + k] = x[r * 3 + k];
      float sum = 0;
      for (int64_t p = 0; p <= L; ++p) sum += acc[(r * kPositions + p) * 3 + k];
      y[r * 3 + k] = sum;
    }
  exec::freshRowIds(c.stateRowIds[0], rows, c.stateSerial);  // rows it wrote
  *c.stateLength = L + 1;
  return rt::Status::ok();
}

void stepShapes(const int64_t* const* in, int64_t* const* out) {
  out[0][0] = in[0][0];
  out[0][1] = 3;
}

const TensorDesc kStepInputs[] = {{"x", kF32, 2, {-1, 3}, {kMaxBatch, 3}}};
const TensorDesc kStepOutputs[] = {{"y", kF32, 2, {-1, 3}, {kMaxBatch, 3}}};
const TensorDesc kStates[] = {
    {"acc", kF32, 3, {kMaxBatch, kPositions, 3}, {kMaxBatch, kPositions, 3}}};

const TensorDesc kForwardInputs[] = {
    {"x", kF32, 2, {-1, 4}, {kMaxBatch, 4}},
    {"ids", kI32, 1, {-1}, {kMaxBatch}},
};
const TensorDesc kForwardOutputs[] = {{"y", kF32, 2, {-1, 3}, {kMaxBatch, 3}}};
const EntryDesc kEntries[] = {
    {"forward", kForwardInputs, 2, kForwardOutputs, 1,
     kMaxBatch * 4 * static_cast<int64_t>(sizeof(float)), 1, &forward, &forwardShapes,
     &forwardFlops},
    {"step", kStepInputs, 1, kStepOutputs, 1, 0, 1, &step, &stepShapes, nullptr,
     /*usesState=*/true},
};

const ModelDesc kModel = {
    /*abiVersion=*/TF_ABI_VERSION,
    /*fusion=*/"all",
    /*configJson=*/"{\"name\": \"fake\"}",
    kParams,
    3,
    kAliases,
    1,
    kIgnored,
    1,
    kPrefixes,
    1,
    &kPrepare,
    kEntries,
    2,
    kPacks,
    1,
    kStates,
    1,
};

}  // namespace

extern "C" const transfuse::exec::ModelDesc* transfuse_generated_model(void) { return &kModel; }
