// CompiledModel: the runtime's host side of an artifact. Loads DIR/libmodel.so
// through the C ABI of model.h (dlopen, never private symbols), refuses an
// artifact whose ABI version this runtime does not know, and runs entry
// points on named tensors. Errors name the artifact, the entry point or the
// tensor. Thread-safe like the ABI: run() may be called concurrently.
#ifndef TRANSFUSE_RUNTIME_HOST_COMPILEDMODEL_H
#define TRANSFUSE_RUNTIME_HOST_COMPILEDMODEL_H

#include "runtime/Status.h"
#include "runtime/Tensor.h"
#include "runtime/TensorSpec.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace transfuse::rt {

class CompiledModel;

// A tf_state of a CompiledModel (ABI 2): the model's state tensors (a KV
// cache) at their capacity and the positions filled so far. One call at a
// time uses it; it must be destroyed before its model.
class ModelState {
public:
  ~ModelState();
  ModelState(const ModelState&) = delete;
  ModelState& operator=(const ModelState&) = delete;

  int64_t length() const;
  Status reset();
  // Row i of every state tensor takes the old row rows[i] (beam search).
  Status reorder(const std::vector<int32_t>& rows);
  // This state becomes a copy of `other` (a state of the same model).
  Status copyFrom(const ModelState& other);

private:
  friend class CompiledModel;
  ModelState(const CompiledModel* model, void* state) : model_(model), state_(state) {}
  const CompiledModel* model_;
  void* state_;  // tf_state*
};

struct LoadOptions {
  std::string weightsPath;  // safetensors; empty: random weights from `seed`
  uint64_t seed = 0;
  int threads = 0;          // <= 0: one per hardware thread
  int deviceOrdinal = 0;    // a CUDA artifact: the GPU it runs on
};

class CompiledModel {
public:
  // Loads `library` (usually DIR/libmodel.so) and creates the model.
  static StatusOr<std::unique_ptr<CompiledModel>> load(const std::string& library,
                                                       const LoadOptions& options);
  ~CompiledModel();
  CompiledModel(const CompiledModel&) = delete;
  CompiledModel& operator=(const CompiledModel&) = delete;

  std::vector<std::string> entryPoints() const;
  std::string fusion() const;
  int threads() const;
  // Specs of an entry point's inputs and outputs (error: unknown entry point).
  StatusOr<std::vector<TensorSpec>> inputs(const std::string& entry) const {
    return specs(entry, /*outputs=*/false);
  }
  StatusOr<std::vector<TensorSpec>> outputs(const std::string& entry) const {
    return specs(entry, /*outputs=*/true);
  }

  // Runs `entry`: allocates outputs of the shapes the model reports for these
  // inputs and returns them by name. Entries that use state take one.
  StatusOr<std::map<std::string, Tensor>> run(const std::string& entry,
                                              const std::map<std::string, Tensor>& inputs,
                                              ModelState* state = nullptr);
  // The same, writing into `outputs`: tensors already there with the right
  // dtype and shape are reused (no allocation per call, for benchmarks and
  // serving loops), others are (re)allocated. On error the outputs' contents
  // are unspecified.
  Status runInto(const std::string& entry, const std::map<std::string, Tensor>& inputs,
                 std::map<std::string, Tensor>& outputs, ModelState* state = nullptr);

  // The same on tensors the caller holds in place (bindings: NumPy arrays and
  // PyTorch tensors read and written without a copy). outputShapes gives
  // every output's spec with its shape for these inputs (validated as run
  // validates them); runViews writes into `outputs`, one per output, of
  // those shapes.
  struct TensorView {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    void* data = nullptr;
  };
  StatusOr<std::vector<TensorSpec>> outputShapes(const std::string& entry,
                                                 const std::vector<TensorView>& inputs) const;
  Status runViews(const std::string& entry, const std::vector<TensorView>& inputs,
                  const std::vector<TensorView>& outputs, ModelState* state = nullptr);
  // Whether `entry` reads and writes state (and so needs a ModelState).
  bool usesState(const std::string& entry) const;

  // The model's state tensors (their max_shape is the capacity), and a new
  // state holding them.
  std::vector<TensorSpec> states() const;
  StatusOr<std::unique_ptr<ModelState>> createState();

  // Benchmark figures (model.h): arena bytes at the maxima, kernel calls per
  // run, FLOPs of a run on these inputs.
  int64_t arenaBytes(const std::string& entry) const;
  int64_t kernelCalls(const std::string& entry) const;
  StatusOr<double> flops(const std::string& entry,
                         const std::map<std::string, Tensor>& inputs) const;

  // Parameters and training (ABI 2; model.h says what each call does).
  enum class ParamRole { kWeight = 0, kAdamM = 1, kAdamV = 2 };
  struct ParamInfo {
    std::string name;
    ParamRole role;
    std::vector<int64_t> shape;
  };
  std::vector<ParamInfo> params() const;
  // F32 tensors of the parameter's shape.
  StatusOr<Tensor> readParam(const std::string& name, ParamRole role) const;
  Status writeParam(const std::string& name, ParamRole role, const Tensor& value);
  struct TrainOptions {
    double learningRate = 0.0;
    double beta1 = 0.9, beta2 = 0.98, epsilon = 1e-9;
    double weightDecay = 0.0, maxGradNorm = 0.0;
  };
  // A gradient entry on a micro-batch, added with `weight` to the held
  // gradients; returns its loss.
  StatusOr<double> accumulateGradients(const std::string& entry,
                                       const std::map<std::string, Tensor>& inputs, double weight,
                                       uint64_t seed);
  // One optimizer step with the held gradients; returns their global norm.
  StatusOr<double> applyGradients(const TrainOptions& options);
  int64_t trainSteps() const;
  Status setTrainSteps(int64_t steps);
  // The held gradients as one vector (every weight's, in params() order):
  // taken out (zeros when none are held; none are held after) or put back
  // in, held for applyGradients (data-parallel training's sum).
  int64_t gradientCount() const;
  Status takeGradients(std::vector<float>& out);
  Status putGradients(const std::vector<float>& gradients);

  struct Api;  // the resolved tf_* functions

private:
  friend class ModelState;
  CompiledModel() = default;
  StatusOr<std::vector<TensorSpec>> specs(const std::string& entry, bool outputs) const;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
  void* model_ = nullptr;  // tf_model*
  std::string library_;
};

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_HOST_COMPILEDMODEL_H
