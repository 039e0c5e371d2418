// The parameter and training calls of model.h (ABI 2): named weights and
// Adam's moments read and written under the model's reader-writer lock, and
// the compiled train step: a gradient entry point (`loss_grad`) run into
// gradient buffers the model holds, accumulated over micro-batches, then one
// fused Adam update per weight (kernels::adamUpdate), after which prepare
// and packing rerun (refreshPrepared).
//
// A device model (a CUDA artifact) trains in device memory: the gradients
// are the entry's outputs in place there, and the sums of micro-batches, the
// gradient norm and Adam (DeviceOps, with the CPU kernel's bits) run there
// on its moments. Its weights stay there: a read copies them back, a
// write uploads them at the next refresh.
//
// Determinism: the gradients come from kernels whose results do not depend
// on the thread count (or, on a device, on scheduling); the global norm sums
// the tensors in parameter order (each in element order in double, on a
// device in its fixed tree), so a step gives the same bits on any thread
// count.

#include "runtime/exec/AbiInternal.h"

#include "runtime/kernels/Optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

using transfuse::exec::DeviceOps;
using transfuse::exec::EntryDesc;
using transfuse::exec::ModelDesc;
namespace rt = transfuse::rt;
namespace kernels = transfuse::kernels;
using namespace transfuse::exec::abi;

namespace {

constexpr const char* kRoleNames[] = {"weight", "Adam first moment", "Adam second moment"};

// The trainable params (not prepared), in the ParamDesc order.
std::vector<int32_t> weightIndices(const tf_model* m) {
  std::vector<int32_t> w;
  for (int32_t i = 0; i < m->desc->numParams; ++i)
    if (!m->desc->params[i].prepared) w.push_back(i);
  return w;
}

int32_t findWeight(const tf_model* m, const std::string& name) {
  for (int32_t i = 0; i < m->desc->numParams; ++i)
    if (!m->desc->params[i].prepared && str(m->desc->params[i].name) == name) return i;
  return -1;
}

// The training buffers of every weight: in host memory, or for a device
// model in the device's.
enum class Buffer { kGrad, kGradScratch, kAdamM, kAdamV };

std::vector<rt::Tensor>& hostList(tf_model* m, Buffer b) {
  switch (b) {
    case Buffer::kGrad: return m->grads;
    case Buffer::kGradScratch: return m->gradScratch;
    case Buffer::kAdamM: return m->adamM;
    case Buffer::kAdamV: break;
  }
  return m->adamV;
}

std::vector<Arena>& deviceList(tf_model* m, Buffer b) {
  switch (b) {
    case Buffer::kGrad: return m->deviceGrads;
    case Buffer::kGradScratch: return m->deviceGradScratch;
    case Buffer::kAdamM: return m->deviceAdamM;
    case Buffer::kAdamV: break;
  }
  return m->deviceAdamV;
}

size_t bytesOf(const tf_model* m, int32_t i) {
  return static_cast<size_t>(m->params[i].numElements()) * sizeof(float);
}

bool held(tf_model* m, Buffer b) {
  return m->desc->device ? !deviceList(m, b).empty() : !hostList(m, b).empty();
}

// Zero buffers of each weight's shape (per ParamDesc index), once.
rt::Status ensure(tf_model* m, Buffer b) {
  if (held(m, b)) return rt::Status::ok();
  if (const DeviceOps* device = m->desc->device) {
    std::vector<Arena> list(m->desc->numParams);
    for (int32_t i : weightIndices(m)) {
      list[i] = allocateDeviceBlock(*device, static_cast<int64_t>(bytesOf(m, i)));
      if (rt::Status s = device->fill(list[i].get(), 0, bytesOf(m, i)); !s) return s;
    }
    if (rt::Status s = device->synchronize(); !s) return s;
    deviceList(m, b) = std::move(list);
    return rt::Status::ok();
  }
  std::vector<rt::Tensor>& list = hostList(m, b);
  list.resize(m->desc->numParams);
  for (int32_t i : weightIndices(m)) list[i] = rt::Tensor::zeros(rt::DType::F32, m->params[i].shape);
  return rt::Status::ok();
}

// Weight i's data in a held buffer (device memory on a device model).
float* dataOf(tf_model* m, Buffer b, int32_t i) {
  if (m->desc->device) return reinterpret_cast<float*>(deviceList(m, b)[i].get());
  return hostList(m, b)[i].data<float>();
}

Buffer momentOf(int32_t role) { return role == TF_PARAM_ADAM_M ? Buffer::kAdamM : Buffer::kAdamV; }

// The weight named `name` with a valid role: its index and size, or an
// error naming a bad name or role.
rt::Status lookup(const tf_model* m, const char* name, int32_t role, int32_t* index,
                  int64_t* numel) {
  if (!name) return rt::Status::error("the parameter name is NULL");
  if (role < TF_PARAM_WEIGHT || role > TF_PARAM_ADAM_V)
    return rt::Status::error("parameter role " + std::to_string(role) +
                             " is not a tf_param_role (0 weight, 1 and 2 Adam's moments)");
  *index = findWeight(m, name);
  if (*index < 0) return rt::Status::error("the model has no parameter '" + std::string(name) + "'");
  *numel = m->params[*index].numElements();
  return rt::Status::ok();
}

rt::Status checkBytes(const char* name, int32_t role, int64_t numel, int64_t bytes, const void* p) {
  const int64_t want = numel * static_cast<int64_t>(sizeof(float));
  if (bytes != want)
    return rt::Status::error(std::string(kRoleNames[role]) + " '" + name + "' has " +
                             std::to_string(want) + " bytes (F32), the buffer " +
                             std::to_string(bytes));
  if (want > 0 && !p) return rt::Status::error("the buffer of '" + std::string(name) + "' is NULL");
  return rt::Status::ok();
}

bool hostStale(const tf_model* m, int32_t i) {
  return i < static_cast<int32_t>(m->hostStale.size()) && m->hostStale[i];
}

rt::Status readParam(tf_model* m, int32_t i, int32_t role, void* data, size_t bytes) {
  const DeviceOps* device = m->desc->device;
  const void* from = nullptr;  // device memory when `device`
  if (role == TF_PARAM_WEIGHT) {
    if (!hostStale(m, i)) {
      std::memcpy(data, m->params[i].data<float>(), bytes);
      return rt::Status::ok();
    }
    from = m->deviceParams[i].get();  // trained on the device
  } else if (!held(m, momentOf(role))) {
    std::memset(data, 0, bytes);  // moments before training
    return rt::Status::ok();
  } else {
    from = dataOf(m, momentOf(role), i);
  }
  if (!device) {
    std::memcpy(data, from, bytes);
    return rt::Status::ok();
  }
  if (rt::Status s = device->select(m->deviceOrdinal); !s) return s;
  if (rt::Status s = device->toHost(data, from, bytes); !s) return s;
  return device->synchronize();
}

rt::Status writeParam(tf_model* m, int32_t i, int32_t role, const void* data, size_t bytes) {
  if (role == TF_PARAM_WEIGHT) {  // uploaded by the next refresh on a device
    std::memcpy(m->params[i].data<float>(), data, bytes);
    if (hostStale(m, i)) m->hostStale[i] = 0;
    markChanged(m, i);
    return rt::Status::ok();
  }
  const DeviceOps* device = m->desc->device;
  if (device)
    if (rt::Status s = device->select(m->deviceOrdinal); !s) return s;
  if (rt::Status s = ensure(m, momentOf(role)); !s) return s;
  float* to = dataOf(m, momentOf(role), i);
  if (!device) {
    std::memcpy(to, data, bytes);
    return rt::Status::ok();
  }
  if (rt::Status s = device->toDevice(to, data, bytes); !s) return s;
  return device->synchronize();
}

// Runs a gradient entry on one micro-batch into the model's gradients (the
// first into `grads`, later ones into the scratch, added with their weight).
rt::Status accumulate(tf_model* m, int32_t entry, const tf_tensor* inputs, int32_t numInputs,
                      double weight, uint64_t seed, double* loss) {
  const EntryDesc* e = entryOf(m, entry);
  if (!e) return badEntry(m, entry);
  if (!std::isfinite(weight)) return rt::Status::error("the micro-batch weight is not finite");
  const DeviceOps* device = m->desc->device;
  if (device)
    if (rt::Status s = device->select(m->deviceOrdinal); !s) return s;
  const bool first = !m->gradsHeld;
  const Buffer into = first ? Buffer::kGrad : Buffer::kGradScratch;
  if (rt::Status s = ensure(m, Buffer::kGrad); !s) return s;
  if (rt::Status s = ensure(m, into); !s) return s;
  // The entry's outputs: `loss` and one gradient per weight (in place in
  // device memory on a device).
  float lossValue = 0.0f;
  std::vector<tf_tensor> outputs;
  std::vector<int32_t> gradOf;  // per output: the weight, or -1 for the loss
  std::vector<bool> covered(m->desc->numParams, false);
  for (int32_t o = 0; o < e->numOutputs; ++o) {
    const std::string name = str(e->outputs[o].name);
    if (name == "loss") {
      outputs.push_back({e->outputs[o].name, TF_F32, 0, nullptr, &lossValue, TF_DEVICE_CPU});
      gradOf.push_back(-1);
      continue;
    }
    const int32_t w = name.rfind("grad.", 0) == 0 ? findWeight(m, name.substr(5)) : -1;
    if (w < 0)
      return rt::Status::error("entry point '" + str(e->name) + "' has output '" + name +
                               "', neither the loss nor the gradient of a parameter: "
                               "train with a training build's loss_grad");
    const std::vector<int64_t>& shape = m->params[w].shape;
    outputs.push_back({e->outputs[o].name, TF_F32, static_cast<int32_t>(shape.size()),
                       shape.data(), dataOf(m, into, w), device ? device->kind : TF_DEVICE_CPU});
    gradOf.push_back(w);
    covered[w] = true;
  }
  if (std::find(gradOf.begin(), gradOf.end(), -1) == gradOf.end())
    return rt::Status::error("entry point '" + str(e->name) + "' has no 'loss' output");
  for (int32_t i : weightIndices(m))
    if (!covered[i])
      return rt::Status::error("entry point '" + str(e->name) + "' returns no gradient of '" +
                               str(m->desc->params[i].name) + "'");
  rt::Status s = runLocked(m, entry, nullptr, inputs, numInputs, outputs.data(),
                           static_cast<int32_t>(outputs.size()), seed,
                           static_cast<uint64_t>(m->trainSteps + 1));
  if (!s) return s;
  const float w = static_cast<float>(weight);
  for (int32_t i : weightIndices(m)) {
    if (first && weight == 1.0) continue;
    float* g = dataOf(m, Buffer::kGrad, i);
    const float* x = first ? nullptr : dataOf(m, Buffer::kGradScratch, i);
    const int64_t n = m->params[i].numElements();
    if (device) {
      if (rt::Status d = device->scaleAdd(g, x, w, static_cast<size_t>(n)); !d) return d;
    } else if (!x) {
      for (int64_t k = 0; k < n; ++k) g[k] *= w;
    } else {
      for (int64_t k = 0; k < n; ++k) g[k] += w * x[k];
    }
  }
  if (device)
    if (rt::Status d = device->synchronize(); !d) return d;
  m->gradsHeld = true;
  if (loss) *loss = lossValue;
  return rt::Status::ok();
}

// The elements of every weight's gradient, in parameter order.
int64_t gradientCount(const tf_model* m) {
  int64_t n = 0;
  for (int32_t i : weightIndices(m)) n += m->params[i].numElements();
  return n;
}

rt::Status checkGradientCount(const tf_model* m, const float* data, int64_t count) {
  const int64_t want = gradientCount(m);
  if (count != want)
    return rt::Status::error("the gradients are " + std::to_string(want) + " floats, the buffer " +
                             std::to_string(count));
  if (want > 0 && !data) return rt::Status::error("the gradient buffer is NULL");
  return rt::Status::ok();
}

// The held gradients as one vector (weights in parameter order), for a
// data-parallel sum: taken out (zeros when none are held; none are held
// after) or put in (held after, as if accumulated).
rt::Status exchangeGradients(tf_model* m, float* data, bool take) {
  const DeviceOps* device = m->desc->device;
  if (device)
    if (rt::Status s = device->select(m->deviceOrdinal); !s) return s;
  if (!take)
    if (rt::Status s = ensure(m, Buffer::kGrad); !s) return s;
  float* at = data;
  for (int32_t i : weightIndices(m)) {
    const size_t bytes = bytesOf(m, i);
    float* g = take && !m->gradsHeld ? nullptr : dataOf(m, Buffer::kGrad, i);
    if (!g) std::memset(at, 0, bytes);  // none held (none ever, perhaps)
    else if (device) {
      if (rt::Status s = take ? device->toHost(at, g, bytes) : device->toDevice(g, at, bytes); !s)
        return s;
    } else {
      std::memcpy(take ? at : g, take ? g : at, bytes);
    }
    at += m->params[i].numElements();
  }
  if (device)
    if (rt::Status s = device->synchronize(); !s) return s;
  m->gradsHeld = !take;
  return rt::Status::ok();
}

// The global gradient norm: each tensor's Σg² in double (in element order on
// the host, in the device's fixed order there), summed in parameter order.
rt::Status gradientNorm(tf_model* m, double* norm) {
  double sq = 0.0;
  const DeviceOps* device = m->desc->device;
  if (!device) {
    for (int32_t i : weightIndices(m)) {
      const float* g = m->grads[i].data<float>();
      for (int64_t k = 0, n = m->grads[i].numElements(); k < n; ++k) sq += double(g[k]) * g[k];
    }
    *norm = std::sqrt(sq);
    return rt::Status::ok();
  }
  const size_t count = static_cast<size_t>(m->desc->numParams);
  if (!m->deviceNorms)
    m->deviceNorms = allocateDeviceBlock(*device, static_cast<int64_t>(count * sizeof(double)));
  double* sums = reinterpret_cast<double*>(m->deviceNorms.get());
  for (int32_t i : weightIndices(m))
    if (rt::Status s = device->sumOfSquares(dataOf(m, Buffer::kGrad, i),
                                            static_cast<size_t>(m->params[i].numElements()),
                                            sums + i);
        !s)
      return s;
  std::vector<double> host(count, 0.0);
  if (rt::Status s = device->toHost(host.data(), sums, count * sizeof(double)); !s) return s;
  if (rt::Status s = device->synchronize(); !s) return s;
  for (int32_t i : weightIndices(m)) sq += host[i];
  *norm = std::sqrt(sq);
  return rt::Status::ok();
}

rt::Status apply(tf_model* m, const tf_train_options* options, double* gradNorm) {
  if (!options) return rt::Status::error("the train options are NULL");
  if (!m->gradsHeld)
    return rt::Status::error("no gradients to apply: accumulate a micro-batch first");
  const tf_train_options& o = *options;
  if (!(std::isfinite(o.learning_rate) && o.learning_rate >= 0))
    return rt::Status::error("learning_rate must be a finite number >= 0");
  if (o.max_grad_norm < 0 || o.weight_decay < 0)
    return rt::Status::error("max_grad_norm and weight_decay must be >= 0");
  const DeviceOps* device = m->desc->device;
  if (device)
    if (rt::Status s = device->select(m->deviceOrdinal); !s) return s;
  double norm = 0.0;  // the same bits on any thread count
  if (rt::Status s = gradientNorm(m, &norm); !s) return s;
  if (gradNorm) *gradNorm = norm;
  // torch.nn.utils.clip_grad_norm_: scale by max / (norm + 1e-6) when over it.
  const double clip =
      o.max_grad_norm > 0 && norm > o.max_grad_norm ? o.max_grad_norm / (norm + 1e-6) : 1.0;
  if (rt::Status s = ensure(m, Buffer::kAdamM); !s) return s;
  if (rt::Status s = ensure(m, Buffer::kAdamV); !s) return s;
  kernels::AdamStep step;
  step.lr = static_cast<float>(o.learning_rate);
  step.beta1 = static_cast<float>(o.beta1 > 0 ? o.beta1 : 0.9);
  step.beta2 = static_cast<float>(o.beta2 > 0 ? o.beta2 : 0.98);
  step.eps = static_cast<float>(o.epsilon > 0 ? o.epsilon : 1e-9);
  step.weightDecay = static_cast<float>(o.weight_decay);
  step.gradScale = static_cast<float>(clip);
  step.step = m->trainSteps + 1;
  for (int32_t i : weightIndices(m)) {
    const size_t n = static_cast<size_t>(m->params[i].numElements());
    float* grad = dataOf(m, Buffer::kGrad, i);
    float* first = dataOf(m, Buffer::kAdamM, i);
    float* second = dataOf(m, Buffer::kAdamV, i);
    if (!device) {
      kernels::adamUpdate(m->params[i].data<float>(), grad, first, second, n, step, m->pool.get());
      continue;
    }
    // The device's weights are the ones trained; prepare reruns there.
    if (rt::Status s = device->adamUpdate(reinterpret_cast<float*>(m->deviceParams[i].get()), grad,
                                          first, second, n, step);
        !s)
      return s;
  }
  if (device) {
    if (rt::Status s = device->synchronize(); !s) return s;
    m->hostStale.resize(m->desc->numParams, 0);
    for (int32_t i : weightIndices(m)) m->hostStale[i] = 1;
  }
  ++m->trainSteps;
  m->gradsHeld = false;
  for (int32_t i : weightIndices(m)) markChanged(m, i);
  return refreshPrepared(m);
}

template <class F>
int32_t guarded(tf_error* error, const char* function, F&& f) {
  clearError(error);
  try {
    rt::Status s = f();
    if (!s) return setError(error, s.message());
    return 0;
  } catch (const std::exception& ex) {
    return setError(error, std::string(function) + ": " + ex.what());
  } catch (...) {
    return setError(error, std::string(function) + ": unknown exception");
  }
}

// Refreshes what written weights made stale; the caller holds paramMutex alone.
rt::Status fresh(tf_model* m) { return m->stale.load() ? refreshPrepared(m) : rt::Status::ok(); }

}  // namespace

extern "C" {

int32_t tf_model_num_params(const tf_model* model) {
  return model ? 3 * static_cast<int32_t>(weightIndices(model).size()) : -1;
}

int32_t tf_model_param_info(const tf_model* model, int32_t index, tf_param_info* info,
                            tf_error* error) {
  clearError(error);
  if (!model) return setError(error, "the model is NULL");
  if (!info) return setError(error, "the info pointer is NULL");
  try {
    const std::vector<int32_t> w = weightIndices(model);
    const int32_t n = static_cast<int32_t>(w.size());
    if (index < 0 || index >= 3 * n)
      return setError(error, "no parameter with index " + std::to_string(index) + " (the model has " +
                                 std::to_string(3 * n) + ")");
    const transfuse::exec::ParamDesc& p = model->desc->params[w[index % n]];
    *info = tf_param_info{p.name, index / n, TF_F32, p.rank, p.shape};
    return 0;
  } catch (...) {
    return setError(error, "tf_model_param_info: out of memory");
  }
}

int32_t tf_model_param_read(tf_model* model, const char* name, int32_t role, void* data,
                            int64_t bytes, tf_error* error) {
  return guarded(error, "tf_model_param_read", [&] {
    if (!model) return rt::Status::error("the model is NULL");
    std::shared_lock<std::shared_mutex> lock(model->paramMutex);
    int32_t i = -1;
    int64_t n = 0;
    if (rt::Status s = lookup(model, name, role, &i, &n); !s) return s;
    if (rt::Status s = checkBytes(name, role, n, bytes, data); !s) return s;
    if (n == 0) return rt::Status::ok();
    return readParam(model, i, role, data, static_cast<size_t>(bytes));
  });
}

int32_t tf_model_param_write(tf_model* model, const char* name, int32_t role, const void* data,
                             int64_t bytes, tf_error* error) {
  return guarded(error, "tf_model_param_write", [&] {
    if (!model) return rt::Status::error("the model is NULL");
    std::unique_lock<std::shared_mutex> lock(model->paramMutex);
    int32_t i = -1;
    int64_t n = 0;
    if (rt::Status s = lookup(model, name, role, &i, &n); !s) return s;
    if (rt::Status s = checkBytes(name, role, n, bytes, data); !s) return s;
    if (n == 0) return rt::Status::ok();
    return writeParam(model, i, role, data, static_cast<size_t>(bytes));
  });
}

int32_t tf_model_accumulate_gradients(tf_model* model, int32_t entry, const tf_tensor* inputs,
                                      int32_t num_inputs, double weight, uint64_t seed,
                                      double* loss, tf_error* error) {
  return guarded(error, "tf_model_accumulate_gradients", [&] {
    if (!model) return rt::Status::error("the model is NULL");
    std::unique_lock<std::shared_mutex> lock(model->paramMutex);
    if (rt::Status s = fresh(model); !s) return s;
    return accumulate(model, entry, inputs, num_inputs, weight, seed, loss);
  });
}

int32_t tf_model_apply_gradients(tf_model* model, const tf_train_options* options,
                                 double* grad_norm, tf_error* error) {
  return guarded(error, "tf_model_apply_gradients", [&] {
    if (!model) return rt::Status::error("the model is NULL");
    std::unique_lock<std::shared_mutex> lock(model->paramMutex);
    // A weight written since the gradients (on a device: still to upload).
    if (rt::Status s = fresh(model); !s) return s;
    return apply(model, options, grad_norm);
  });
}

int32_t tf_model_train_step(tf_model* model, int32_t entry, const tf_tensor* inputs,
                            int32_t num_inputs, const tf_train_options* options, uint64_t seed,
                            double* loss, double* grad_norm, tf_error* error) {
  return guarded(error, "tf_model_train_step", [&] {
    if (!model) return rt::Status::error("the model is NULL");
    if (!options) return rt::Status::error("the train options are NULL");
    std::unique_lock<std::shared_mutex> lock(model->paramMutex);
    if (model->gradsHeld)
      return rt::Status::error("gradients of earlier micro-batches are pending: apply them first");
    if (rt::Status s = fresh(model); !s) return s;
    if (rt::Status s = accumulate(model, entry, inputs, num_inputs, 1.0, seed, loss); !s) return s;
    return apply(model, options, grad_norm);
  });
}

int64_t tf_model_gradient_count(const tf_model* model) {
  return model ? gradientCount(model) : -1;
}

int32_t tf_model_gradients_take(tf_model* model, float* data, int64_t count, tf_error* error) {
  return guarded(error, "tf_model_gradients_take", [&] {
    if (!model) return rt::Status::error("the model is NULL");
    std::unique_lock<std::shared_mutex> lock(model->paramMutex);
    if (rt::Status s = checkGradientCount(model, data, count); !s) return s;
    return exchangeGradients(model, data, /*take=*/true);
  });
}

int32_t tf_model_gradients_put(tf_model* model, const float* data, int64_t count,
                               tf_error* error) {
  return guarded(error, "tf_model_gradients_put", [&] {
    if (!model) return rt::Status::error("the model is NULL");
    std::unique_lock<std::shared_mutex> lock(model->paramMutex);
    if (rt::Status s = checkGradientCount(model, data, count); !s) return s;
    return exchangeGradients(model, const_cast<float*>(data), /*take=*/false);
  });
}

int64_t tf_model_train_steps(const tf_model* model) { return model ? model->trainSteps : -1; }

int32_t tf_model_set_train_steps(tf_model* model, int64_t steps, tf_error* error) {
  return guarded(error, "tf_model_set_train_steps", [&] {
    if (!model) return rt::Status::error("the model is NULL");
    if (steps < 0) return rt::Status::error("train steps must be >= 0");
    std::unique_lock<std::shared_mutex> lock(model->paramMutex);
    model->trainSteps = steps;
    return rt::Status::ok();
  });
}

}  // extern "C"
