// CompiledModel: an artifact loaded with dlopen and driven through the C ABI
// of model.h (see CompiledModel.h). tf_abi_version is resolved and checked
// before any other symbol, so an artifact of another ABI version is refused
// with a clear message even when its other functions differ.

#include "runtime/host/CompiledModel.h"

#include "runtime/exec/model.h"

#include <dlfcn.h>

#include <utility>

namespace transfuse::rt {

struct CompiledModel::Api {
  uint32_t (*abiVersion)(void) = nullptr;
  int32_t (*create)(const char*, const tf_options*, tf_model**, tf_error*) = nullptr;
  void (*destroy)(tf_model*) = nullptr;
  const char* (*fusion)(const tf_model*) = nullptr;
  const char* (*configJson)(const tf_model*) = nullptr;
  int32_t (*numThreads)(const tf_model*) = nullptr;
  int32_t (*numEntryPoints)(const tf_model*) = nullptr;
  const char* (*entryPointName)(const tf_model*, int32_t) = nullptr;
  int32_t (*findEntryPoint)(const tf_model*, const char*) = nullptr;
  int32_t (*numInputs)(const tf_model*, int32_t) = nullptr;
  int32_t (*numOutputs)(const tf_model*, int32_t) = nullptr;
  int32_t (*inputSpec)(const tf_model*, int32_t, int32_t, tf_tensor_spec*, tf_error*) = nullptr;
  int32_t (*outputSpec)(const tf_model*, int32_t, int32_t, tf_tensor_spec*, tf_error*) = nullptr;
  int32_t (*outputShape)(const tf_model*, int32_t, const tf_tensor*, int32_t, int32_t, int64_t*,
                         tf_error*) = nullptr;
  int32_t (*run)(tf_model*, int32_t, const tf_tensor*, int32_t, const tf_tensor*, int32_t,
                 tf_error*) = nullptr;
  int64_t (*arenaBytes)(const tf_model*, int32_t) = nullptr;
  int64_t (*kernelCalls)(const tf_model*, int32_t) = nullptr;
  int32_t (*flops)(const tf_model*, int32_t, const tf_tensor*, int32_t, double*,
                   tf_error*) = nullptr;
  // ABI 2: state.
  int32_t (*numStates)(const tf_model*) = nullptr;
  int32_t (*stateSpec)(const tf_model*, int32_t, tf_tensor_spec*, tf_error*) = nullptr;
  int32_t (*stateCreate)(tf_model*, tf_state**, tf_error*) = nullptr;
  void (*stateDestroy)(tf_state*) = nullptr;
  int32_t (*stateReset)(tf_state*, tf_error*) = nullptr;
  int64_t (*stateLength)(const tf_state*) = nullptr;
  int32_t (*stateReorder)(tf_state*, const int32_t*, int32_t, tf_error*) = nullptr;
  int32_t (*stateCopy)(tf_state*, const tf_state*, tf_error*) = nullptr;
  int32_t (*runWithState)(tf_model*, int32_t, tf_state*, const tf_tensor*, int32_t,
                          const tf_tensor*, int32_t, tf_error*) = nullptr;
  int32_t (*entryUsesState)(const tf_model*, int32_t) = nullptr;
  // ABI 2: parameters and training.
  int32_t (*numParams)(const tf_model*) = nullptr;
  int32_t (*paramInfo)(const tf_model*, int32_t, tf_param_info*, tf_error*) = nullptr;
  int32_t (*paramRead)(tf_model*, const char*, int32_t, void*, int64_t, tf_error*) = nullptr;
  int32_t (*paramWrite)(tf_model*, const char*, int32_t, const void*, int64_t, tf_error*) = nullptr;
  int32_t (*accumulate)(tf_model*, int32_t, const tf_tensor*, int32_t, double, uint64_t, double*,
                        tf_error*) = nullptr;
  int32_t (*apply)(tf_model*, const tf_train_options*, double*, tf_error*) = nullptr;
  int64_t (*trainSteps)(const tf_model*) = nullptr;
  int32_t (*setTrainSteps)(tf_model*, int64_t, tf_error*) = nullptr;
  // ABI 5: gradient exchange.
  int64_t (*gradientCount)(const tf_model*) = nullptr;
  int32_t (*gradientsTake)(tf_model*, float*, int64_t, tf_error*) = nullptr;
  int32_t (*gradientsPut)(tf_model*, const float*, int64_t, tf_error*) = nullptr;
};

namespace {

tf_model* asModel(void* p) { return static_cast<tf_model*>(p); }

// Resolves `name` into `*fn` (a function pointer of the declared type).
template <class Fn>
Status resolve(void* handle, const std::string& library, const char* name, Fn* fn) {
  dlerror();
  void* sym = dlsym(handle, name);
  if (!sym)
    return Status::error("artifact '" + library + "' does not export symbol '" + name +
                         "' of the model.h ABI");
  *fn = reinterpret_cast<Fn>(sym);
  return Status::ok();
}

// The caller's tensors as tf_tensors (borrowing names, shapes and data).
std::vector<tf_tensor> toTf(const std::map<std::string, Tensor>& tensors) {
  std::vector<tf_tensor> out;
  out.reserve(tensors.size());
  for (const auto& [name, t] : tensors)
    out.push_back(tf_tensor{name.c_str(), static_cast<int32_t>(t.dtype),
                            static_cast<int32_t>(t.shape.size()), t.shape.data(),
                            const_cast<uint8_t*>(t.bytes.data()), TF_DEVICE_CPU});
  return out;
}

TensorSpec fromTf(const tf_tensor_spec& s) {
  TensorSpec spec;
  spec.name = s.name ? s.name : "";
  spec.dtype = static_cast<DType>(s.dtype);
  spec.shape.assign(s.shape, s.shape + s.rank);
  spec.maxShape.assign(s.max_shape, s.max_shape + s.rank);
  return spec;
}

}  // namespace

StatusOr<std::unique_ptr<CompiledModel>> CompiledModel::load(const std::string& library,
                                                             const LoadOptions& options) {
  std::unique_ptr<CompiledModel> m(new CompiledModel());
  m->library_ = library;
  m->api_ = std::make_unique<Api>();
  dlerror();
  m->handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!m->handle_) {
    const char* why = dlerror();
    return Status::error("cannot load artifact '" + library + "': " +
                         (why ? why : "dlopen failed"));
  }
  // The destructor dlcloses on every error path below.
  Api& api = *m->api_;
  if (Status s = resolve(m->handle_, library, "tf_abi_version", &api.abiVersion); !s) return s;
  uint32_t version = api.abiVersion();
  if (version != TF_ABI_VERSION)
    return Status::error("artifact '" + library + "' has ABI version " + std::to_string(version) +
                         "; this runtime reads version " + std::to_string(TF_ABI_VERSION));
#define TF_RESOLVE(field, symbol)                                                 \
  if (Status s = resolve(m->handle_, library, symbol, &api.field); !s) return s;
  TF_RESOLVE(create, "tf_model_create")
  TF_RESOLVE(destroy, "tf_model_destroy")
  TF_RESOLVE(fusion, "tf_model_fusion")
  TF_RESOLVE(configJson, "tf_model_config_json")
  TF_RESOLVE(numThreads, "tf_model_num_threads")
  TF_RESOLVE(numEntryPoints, "tf_model_num_entry_points")
  TF_RESOLVE(entryPointName, "tf_model_entry_point_name")
  TF_RESOLVE(findEntryPoint, "tf_model_find_entry_point")
  TF_RESOLVE(numInputs, "tf_model_num_inputs")
  TF_RESOLVE(numOutputs, "tf_model_num_outputs")
  TF_RESOLVE(inputSpec, "tf_model_input_spec")
  TF_RESOLVE(outputSpec, "tf_model_output_spec")
  TF_RESOLVE(outputShape, "tf_model_output_shape")
  TF_RESOLVE(run, "tf_model_run")
  TF_RESOLVE(arenaBytes, "tf_model_arena_bytes")
  TF_RESOLVE(kernelCalls, "tf_model_kernel_calls")
  TF_RESOLVE(flops, "tf_model_flops")
  TF_RESOLVE(numStates, "tf_model_num_states")
  TF_RESOLVE(stateSpec, "tf_model_state_spec")
  TF_RESOLVE(stateCreate, "tf_state_create")
  TF_RESOLVE(stateDestroy, "tf_state_destroy")
  TF_RESOLVE(stateReset, "tf_state_reset")
  TF_RESOLVE(stateLength, "tf_state_length")
  TF_RESOLVE(stateReorder, "tf_state_reorder")
  TF_RESOLVE(stateCopy, "tf_state_copy")
  TF_RESOLVE(runWithState, "tf_model_run_with_state")
  TF_RESOLVE(entryUsesState, "tf_model_entry_uses_state")
  TF_RESOLVE(numParams, "tf_model_num_params")
  TF_RESOLVE(paramInfo, "tf_model_param_info")
  TF_RESOLVE(paramRead, "tf_model_param_read")
  TF_RESOLVE(paramWrite, "tf_model_param_write")
  TF_RESOLVE(accumulate, "tf_model_accumulate_gradients")
  TF_RESOLVE(apply, "tf_model_apply_gradients")
  TF_RESOLVE(trainSteps, "tf_model_train_steps")
  TF_RESOLVE(setTrainSteps, "tf_model_set_train_steps")
  TF_RESOLVE(gradientCount, "tf_model_gradient_count")
  TF_RESOLVE(gradientsTake, "tf_model_gradients_take")
  TF_RESOLVE(gradientsPut, "tf_model_gradients_put")
#undef TF_RESOLVE

  tf_options opt{};
  opt.num_threads = options.threads;
  opt.seed = options.seed;
  opt.device_ordinal = options.deviceOrdinal;
  tf_error err{};
  tf_model* model = nullptr;
  const char* weights = options.weightsPath.empty() ? nullptr : options.weightsPath.c_str();
  if (api.create(weights, &opt, &model, &err) != 0)
    return Status::error("artifact '" + library + "': " + err.message);
  m->model_ = model;
  return m;
}

CompiledModel::~CompiledModel() {
  if (model_ && api_ && api_->destroy) api_->destroy(asModel(model_));
  if (handle_) dlclose(handle_);
}

std::vector<std::string> CompiledModel::entryPoints() const {
  std::vector<std::string> names;
  int32_t n = api_->numEntryPoints(asModel(model_));
  for (int32_t i = 0; i < n; ++i) {
    const char* name = api_->entryPointName(asModel(model_), i);
    names.push_back(name ? name : "");
  }
  return names;
}

std::string CompiledModel::fusion() const {
  const char* f = api_->fusion(asModel(model_));
  return f ? f : "";
}

int CompiledModel::threads() const { return api_->numThreads(asModel(model_)); }

namespace {

Status unknownEntry(const std::string& library, const std::string& entry,
                    const std::vector<std::string>& known) {
  std::string list;
  for (const std::string& k : known) list += (list.empty() ? "'" : ", '") + k + "'";
  return Status::error("artifact '" + library + "' has no entry point '" + entry +
                       "' (entry points: " + list + ")");
}

}  // namespace

StatusOr<std::vector<TensorSpec>> CompiledModel::specs(const std::string& entry,
                                                       bool outputs) const {
  int32_t e = api_->findEntryPoint(asModel(model_), entry.c_str());
  if (e < 0) return unknownEntry(library_, entry, entryPoints());
  std::vector<TensorSpec> specs;
  int32_t n = outputs ? api_->numOutputs(asModel(model_), e) : api_->numInputs(asModel(model_), e);
  for (int32_t i = 0; i < n; ++i) {
    tf_tensor_spec s{};
    tf_error err{};
    auto query = outputs ? api_->outputSpec : api_->inputSpec;
    if (query(asModel(model_), e, i, &s, &err) != 0)
      return Status::error("entry point '" + entry + "': " + err.message);
    specs.push_back(fromTf(s));
  }
  return specs;
}

StatusOr<std::map<std::string, Tensor>> CompiledModel::run(
    const std::string& entry, const std::map<std::string, Tensor>& inputs, ModelState* state) {
  std::map<std::string, Tensor> outputs;
  if (Status s = runInto(entry, inputs, outputs, state); !s.isOk()) return s;
  return outputs;
}

Status CompiledModel::runInto(const std::string& entry,
                              const std::map<std::string, Tensor>& inputs,
                              std::map<std::string, Tensor>& outputs, ModelState* state) {
  std::vector<TensorView> in;
  in.reserve(inputs.size());
  for (const auto& [name, t] : inputs)
    in.push_back({name, t.dtype, t.shape, const_cast<uint8_t*>(t.bytes.data())});
  StatusOr<std::vector<TensorSpec>> shapes = outputShapes(entry, in);
  if (!shapes.isOk()) return shapes.status();
  std::vector<TensorView> out;
  for (TensorSpec& spec : *shapes) {
    auto it = outputs.find(spec.name);
    if (it == outputs.end() || it->second.dtype != spec.dtype || it->second.shape != spec.shape)
      it = outputs.insert_or_assign(spec.name, Tensor::zeros(spec.dtype, spec.shape)).first;
    out.push_back({spec.name, spec.dtype, spec.shape, it->second.bytes.data()});
  }
  return runViews(entry, in, out, state);
}

namespace {
std::vector<tf_tensor> toTf(const std::vector<CompiledModel::TensorView>& views) {
  std::vector<tf_tensor> out;
  out.reserve(views.size());
  for (const CompiledModel::TensorView& v : views)
    out.push_back(tf_tensor{v.name.c_str(), static_cast<int32_t>(v.dtype),
                            static_cast<int32_t>(v.shape.size()), v.shape.data(), v.data,
                            TF_DEVICE_CPU});
  return out;
}
}  // namespace

StatusOr<std::vector<TensorSpec>> CompiledModel::outputShapes(
    const std::string& entry, const std::vector<TensorView>& inputs) const {
  int32_t e = api_->findEntryPoint(asModel(model_), entry.c_str());
  if (e < 0) return unknownEntry(library_, entry, entryPoints());
  std::vector<tf_tensor> in = toTf(inputs);
  const int32_t numOut = api_->numOutputs(asModel(model_), e);
  std::vector<TensorSpec> specs;
  specs.reserve(numOut);
  for (int32_t i = 0; i < numOut; ++i) {
    tf_tensor_spec spec{};
    tf_error err{};
    if (api_->outputSpec(asModel(model_), e, i, &spec, &err) != 0)
      return Status::error("entry point '" + entry + "': " + err.message);
    specs.push_back(fromTf(spec));
    if (api_->outputShape(asModel(model_), e, in.data(), static_cast<int32_t>(in.size()), i,
                          specs.back().shape.data(), &err) != 0)
      return Status::error("entry point '" + entry + "': " + err.message);
  }
  return specs;
}

Status CompiledModel::runViews(const std::string& entry, const std::vector<TensorView>& inputs,
                               const std::vector<TensorView>& outputs, ModelState* state) {
  int32_t e = api_->findEntryPoint(asModel(model_), entry.c_str());
  if (e < 0) return unknownEntry(library_, entry, entryPoints());
  if (state && state->model_ != this)
    return Status::error("entry point '" + entry + "': the state belongs to another model");
  std::vector<tf_tensor> in = toTf(inputs), out = toTf(outputs);
  tf_error err{};
  const int32_t rc =
      state ? api_->runWithState(asModel(model_), e, static_cast<tf_state*>(state->state_),
                                 in.data(), static_cast<int32_t>(in.size()), out.data(),
                                 static_cast<int32_t>(out.size()), &err)
            : api_->run(asModel(model_), e, in.data(), static_cast<int32_t>(in.size()),
                        out.data(), static_cast<int32_t>(out.size()), &err);
  if (rc != 0) return Status::error("entry point '" + entry + "': " + err.message);
  return Status::ok();
}

bool CompiledModel::usesState(const std::string& entry) const {
  int32_t e = api_->findEntryPoint(asModel(model_), entry.c_str());
  return e >= 0 && api_->entryUsesState(asModel(model_), e) == 1;
}

std::vector<TensorSpec> CompiledModel::states() const {
  std::vector<TensorSpec> specs;
  for (int32_t i = 0; i < api_->numStates(asModel(model_)); ++i) {
    tf_tensor_spec s{};
    tf_error err{};
    if (api_->stateSpec(asModel(model_), i, &s, &err) == 0) specs.push_back(fromTf(s));
  }
  return specs;
}

StatusOr<std::unique_ptr<ModelState>> CompiledModel::createState() {
  tf_state* s = nullptr;
  tf_error err{};
  if (api_->stateCreate(asModel(model_), &s, &err) != 0)
    return Status::error("artifact '" + library_ + "': " + err.message);
  return std::unique_ptr<ModelState>(new ModelState(this, s));
}

ModelState::~ModelState() { model_->api_->stateDestroy(static_cast<tf_state*>(state_)); }

int64_t ModelState::length() const {
  return model_->api_->stateLength(static_cast<const tf_state*>(state_));
}

Status ModelState::reset() {
  tf_error err{};
  if (model_->api_->stateReset(static_cast<tf_state*>(state_), &err) != 0)
    return Status::error(err.message);
  return Status::ok();
}

Status ModelState::reorder(const std::vector<int32_t>& rows) {
  tf_error err{};
  if (model_->api_->stateReorder(static_cast<tf_state*>(state_), rows.data(),
                                 static_cast<int32_t>(rows.size()), &err) != 0)
    return Status::error(err.message);
  return Status::ok();
}

Status ModelState::copyFrom(const ModelState& other) {
  tf_error err{};
  if (model_->api_->stateCopy(static_cast<tf_state*>(state_),
                              static_cast<const tf_state*>(other.state_), &err) != 0)
    return Status::error(err.message);
  return Status::ok();
}

int64_t CompiledModel::arenaBytes(const std::string& entry) const {
  int32_t e = api_->findEntryPoint(asModel(model_), entry.c_str());
  return e < 0 ? -1 : api_->arenaBytes(asModel(model_), e);
}

int64_t CompiledModel::kernelCalls(const std::string& entry) const {
  int32_t e = api_->findEntryPoint(asModel(model_), entry.c_str());
  return e < 0 ? -1 : api_->kernelCalls(asModel(model_), e);
}

StatusOr<double> CompiledModel::flops(const std::string& entry,
                                      const std::map<std::string, Tensor>& inputs) const {
  int32_t e = api_->findEntryPoint(asModel(model_), entry.c_str());
  if (e < 0) return unknownEntry(library_, entry, entryPoints());
  std::vector<tf_tensor> in = toTf(inputs);
  double f = 0;
  tf_error err{};
  if (api_->flops(asModel(model_), e, in.data(), static_cast<int32_t>(in.size()), &f, &err) != 0)
    return Status::error("entry point '" + entry + "': " + err.message);
  return f;
}

std::vector<CompiledModel::ParamInfo> CompiledModel::params() const {
  std::vector<ParamInfo> list;
  for (int32_t i = 0; i < api_->numParams(asModel(model_)); ++i) {
    tf_param_info p{};
    tf_error err{};
    if (api_->paramInfo(asModel(model_), i, &p, &err) == 0)
      list.push_back({p.name ? p.name : "", static_cast<ParamRole>(p.role),
                      std::vector<int64_t>(p.shape, p.shape + p.rank)});
  }
  return list;
}

StatusOr<Tensor> CompiledModel::readParam(const std::string& name, ParamRole role) const {
  for (const ParamInfo& p : params())
    if (p.name == name && p.role == role) {
      Tensor t = Tensor::zeros(DType::F32, p.shape);
      tf_error err{};
      if (api_->paramRead(asModel(model_), name.c_str(), static_cast<int32_t>(role), t.bytes.data(),
                          static_cast<int64_t>(t.bytes.size()), &err) != 0)
        return Status::error("artifact '" + library_ + "': " + err.message);
      return t;
    }
  return Status::error("artifact '" + library_ + "' has no parameter '" + name + "'");
}

Status CompiledModel::writeParam(const std::string& name, ParamRole role, const Tensor& value) {
  if (value.dtype != DType::F32)
    return Status::error("parameter '" + name + "': F32 values expected, got " +
                         dtypeName(value.dtype));
  tf_error err{};
  if (api_->paramWrite(asModel(model_), name.c_str(), static_cast<int32_t>(role),
                       value.bytes.data(), static_cast<int64_t>(value.bytes.size()), &err) != 0)
    return Status::error("artifact '" + library_ + "': " + err.message);
  return Status::ok();
}

StatusOr<double> CompiledModel::accumulateGradients(const std::string& entry,
                                                    const std::map<std::string, Tensor>& inputs,
                                                    double weight, uint64_t seed) {
  int32_t e = api_->findEntryPoint(asModel(model_), entry.c_str());
  if (e < 0) return unknownEntry(library_, entry, entryPoints());
  std::vector<tf_tensor> in = toTf(inputs);
  double loss = 0;
  tf_error err{};
  if (api_->accumulate(asModel(model_), e, in.data(), static_cast<int32_t>(in.size()), weight,
                       seed, &loss, &err) != 0)
    return Status::error("entry point '" + entry + "': " + err.message);
  return loss;
}

StatusOr<double> CompiledModel::applyGradients(const TrainOptions& o) {
  tf_train_options options{o.learningRate, o.beta1, o.beta2, o.epsilon, o.weightDecay,
                           o.maxGradNorm};
  double norm = 0;
  tf_error err{};
  if (api_->apply(asModel(model_), &options, &norm, &err) != 0)
    return Status::error("artifact '" + library_ + "': " + err.message);
  return norm;
}

int64_t CompiledModel::trainSteps() const { return api_->trainSteps(asModel(model_)); }

int64_t CompiledModel::gradientCount() const { return api_->gradientCount(asModel(model_)); }

Status CompiledModel::takeGradients(std::vector<float>& out) {
  out.resize(static_cast<size_t>(gradientCount()));
  tf_error err{};
  if (api_->gradientsTake(asModel(model_), out.data(), static_cast<int64_t>(out.size()), &err) != 0)
    return Status::error("artifact '" + library_ + "': " + err.message);
  return Status::ok();
}

Status CompiledModel::putGradients(const std::vector<float>& gradients) {
  tf_error err{};
  if (api_->gradientsPut(asModel(model_), gradients.data(),
                         static_cast<int64_t>(gradients.size()), &err) != 0)
    return Status::error("artifact '" + library_ + "': " + err.message);
  return Status::ok();
}

Status CompiledModel::setTrainSteps(int64_t steps) {
  tf_error err{};
  if (api_->setTrainSteps(asModel(model_), steps, &err) != 0)
    return Status::error("artifact '" + library_ + "': " + err.message);
  return Status::ok();
}

}  // namespace transfuse::rt
