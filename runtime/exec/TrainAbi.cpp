// The parameter and training calls of model.h (ABI 2): named weights and
// Adam's moments read and written under the model's reader-writer lock, and
// the compiled train step: a gradient entry point (`loss_grad`) run into
// gradient buffers the model holds, accumulated over micro-batches, then one
// fused Adam update per weight (kernels::adamUpdate), after which prepare
// and packing rerun (refreshPrepared).
//
// Determinism: the gradients come from kernels whose results do not depend
// on the thread count; the global norm sums the tensors in parameter order
// (each in element order, in double), so a step gives the same bits on any
// thread count.

#include "runtime/exec/AbiInternal.h"

#include "runtime/kernels/Optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

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

// Zero tensors of each weight's shape in `list` (per ParamDesc index), once.
void ensure(tf_model* m, std::vector<rt::Tensor>& list) {
  if (!list.empty()) return;
  list.resize(m->desc->numParams);
  for (int32_t i : weightIndices(m)) list[i] = rt::Tensor::zeros(rt::DType::F32, m->params[i].shape);
}

std::vector<rt::Tensor>* momentsOf(tf_model* m, int32_t role) {
  return role == TF_PARAM_ADAM_M ? &m->adamM : &m->adamV;
}

// The data and size of (name, role): an error naming a bad name or role.
// A moment never written nor trained has no data (null: all zero) unless
// `allocate`.
rt::Status lookup(tf_model* m, const char* name, int32_t role, bool allocate, float** data,
                  int64_t* numel) {
  if (!name) return rt::Status::error("the parameter name is NULL");
  if (role < TF_PARAM_WEIGHT || role > TF_PARAM_ADAM_V)
    return rt::Status::error("parameter role " + std::to_string(role) +
                             " is not a tf_param_role (0 weight, 1 and 2 Adam's moments)");
  const int32_t i = findWeight(m, name);
  if (i < 0) return rt::Status::error("the model has no parameter '" + std::string(name) + "'");
  *numel = m->params[i].numElements();
  if (role == TF_PARAM_WEIGHT) {
    *data = m->params[i].data<float>();
    return rt::Status::ok();
  }
  std::vector<rt::Tensor>* list = momentsOf(m, role);
  if (list->empty() && allocate) ensure(m, *list);
  *data = list->empty() ? nullptr : (*list)[i].data<float>();  // null: all zero
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

// Runs a gradient entry on one micro-batch into the model's gradients (the
// first into `grads`, later ones into the scratch, added with their weight).
rt::Status accumulate(tf_model* m, int32_t entry, const tf_tensor* inputs, int32_t numInputs,
                      double weight, uint64_t seed, double* loss) {
  const EntryDesc* e = entryOf(m, entry);
  if (!e) return badEntry(m, entry);
  // Gradients and Adam's update run on the host's copies of the weights.
  if (m->desc->device)
    return rt::Status::error(std::string("training runs on the cpu target; this model runs on ") +
                             m->desc->device->name);
  if (!std::isfinite(weight)) return rt::Status::error("the micro-batch weight is not finite");
  ensure(m, m->grads);
  const bool first = !m->gradsHeld;
  if (!first) ensure(m, m->gradScratch);
  std::vector<rt::Tensor>& into = first ? m->grads : m->gradScratch;
  // The entry's outputs: `loss` and one gradient per weight.
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
    const rt::Tensor& t = into[w];
    outputs.push_back({e->outputs[o].name, TF_F32, static_cast<int32_t>(t.shape.size()),
                       t.shape.data(), into[w].data<float>(), TF_DEVICE_CPU});
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
    float* g = m->grads[i].data<float>();
    const int64_t n = m->grads[i].numElements();
    if (first) {
      if (weight != 1.0)
        for (int64_t k = 0; k < n; ++k) g[k] *= w;
    } else {
      const float* x = m->gradScratch[i].data<float>();
      for (int64_t k = 0; k < n; ++k) g[k] += w * x[k];
    }
  }
  m->gradsHeld = true;
  if (loss) *loss = lossValue;
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
  double sq = 0.0;  // parameter order, element order: the same bits on any threads
  for (int32_t i : weightIndices(m)) {
    const float* g = m->grads[i].data<float>();
    for (int64_t k = 0, n = m->grads[i].numElements(); k < n; ++k) sq += double(g[k]) * g[k];
  }
  const double norm = std::sqrt(sq);
  if (gradNorm) *gradNorm = norm;
  // torch.nn.utils.clip_grad_norm_: scale by max / (norm + 1e-6) when over it.
  const double clip =
      o.max_grad_norm > 0 && norm > o.max_grad_norm ? o.max_grad_norm / (norm + 1e-6) : 1.0;
  ensure(m, m->adamM);
  ensure(m, m->adamV);
  kernels::AdamStep step;
  step.lr = static_cast<float>(o.learning_rate);
  step.beta1 = static_cast<float>(o.beta1 > 0 ? o.beta1 : 0.9);
  step.beta2 = static_cast<float>(o.beta2 > 0 ? o.beta2 : 0.98);
  step.eps = static_cast<float>(o.epsilon > 0 ? o.epsilon : 1e-9);
  step.weightDecay = static_cast<float>(o.weight_decay);
  step.gradScale = static_cast<float>(clip);
  step.step = m->trainSteps + 1;
  for (int32_t i : weightIndices(m))
    kernels::adamUpdate(m->params[i].data<float>(), m->grads[i].data<float>(),
                        m->adamM[i].data<float>(), m->adamV[i].data<float>(),
                        static_cast<size_t>(m->params[i].numElements()), step, m->pool.get());
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
    float* p = nullptr;
    int64_t n = 0;
    if (rt::Status s = lookup(model, name, role, /*allocate=*/false, &p, &n); !s) return s;
    if (rt::Status s = checkBytes(name, role, n, bytes, data); !s) return s;
    if (n == 0) return rt::Status::ok();
    if (p)
      std::memcpy(data, p, static_cast<size_t>(bytes));
    else
      std::memset(data, 0, static_cast<size_t>(bytes));  // moments before training
    return rt::Status::ok();
  });
}

int32_t tf_model_param_write(tf_model* model, const char* name, int32_t role, const void* data,
                             int64_t bytes, tf_error* error) {
  return guarded(error, "tf_model_param_write", [&] {
    if (!model) return rt::Status::error("the model is NULL");
    std::unique_lock<std::shared_mutex> lock(model->paramMutex);
    float* p = nullptr;
    int64_t n = 0;
    if (rt::Status s = lookup(model, name, role, /*allocate=*/true, &p, &n); !s) return s;
    if (rt::Status s = checkBytes(name, role, n, bytes, data); !s) return s;
    if (n > 0) std::memcpy(p, data, static_cast<size_t>(bytes));
    if (role == TF_PARAM_WEIGHT) markChanged(model, findWeight(model, name));
    return rt::Status::ok();
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
