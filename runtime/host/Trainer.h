// The training loop as a library (docs/training.md): examples batched by
// token count with length bucketing, shuffled per epoch by the seed; steps of
// one or more micro-batches through a TrainStep (the compiled train step of
// an artifact, or any other implementation, such as the compiler library's
// fp64 reference step); the paper's learning-rate schedule with Adam;
// stopping by steps, epochs or wall time; validation at each epoch's end;
// checkpoints committed atomically (Checkpoint.h), resumed bit for bit and
// pruned. It prints nothing: progress, logs, validation and checkpoints reach
// the caller through callbacks. `transfuse train` is a driver over it; a
// data-parallel or Python caller plugs into the same Trainer.
#ifndef TRANSFUSE_RUNTIME_HOST_TRAINER_H
#define TRANSFUSE_RUNTIME_HOST_TRAINER_H

#include "runtime/Json.h"
#include "runtime/Status.h"
#include "runtime/Tensor.h"
#include "runtime/host/CompiledModel.h"
#include "runtime/host/Corpus.h"
#include "runtime/host/ProcessGroup.h"
#include "runtime/host/Search.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace transfuse::rt {

struct AdamOptions {
  double beta1 = 0.9, beta2 = 0.98, eps = 1e-9;
  // The rate at step s (from 1): factor · d_model^-0.5 · min(s^-0.5, s · warmup^-1.5).
  double lrFactor = 1.0;
  int64_t warmup = 4000;
  int64_t dModel = 512;
  // > 0: gradients scaled so that their global L2 norm is at most this
  // (torch.nn.utils.clip_grad_norm_, with its 1e-6).
  double clipNorm = 0.0;
  // AdamW: p ← p · (1 - lr · weightDecay) before the Adam update.
  double weightDecay = 0.0;
};

// The learning rate applied at step `step` (counting from 1).
double learningRate(const AdamOptions& options, int64_t step);

// The dropout seed of shard `shard` of a data-parallel step: the seed
// itself for shard 0, a mix of both for the others, so that a shard's masks
// depend on its index and not on the rank that computes it.
uint64_t shardSeed(uint64_t seed, int shard);

// One micro-batch of a step: its inputs and the tokens its loss averages
// over (the non-ignored labels).
struct MicroBatch {
  std::map<std::string, Tensor> inputs;
  int64_t tokens = 0;
};

// The weight of micro-batch `i` of a step: its share of the step's tokens
// (1 when it is the only one, also when it has no token). A step's loss and
// gradients are its micro-batches' weighted sum: the mean over its tokens.
double microBatchWeight(const std::vector<MicroBatch>& batches, size_t i);

struct StepResult {
  double loss = 0.0;      // before the update
  double lr = 0.0;        // the rate applied
  double gradNorm = 0.0;  // before clipping
  // A data-parallel step's seconds in summing gradients across the ranks
  // (0 in one process).
  double reduceSeconds = 0.0;
  // grad.<name>, before clipping, when asked for.
  std::map<std::string, Tensor> grads;
};

// What the Trainer drives: one optimizer step, and the state a checkpoint
// holds.
class TrainStep {
public:
  virtual ~TrainStep() = default;
  // Optimizer step number `step` (from 1) over `batches`; dropout draws are
  // keyed by (seed, step). With `wantGrads`, the result holds the step's
  // gradients.
  virtual StatusOr<StepResult> step(const std::vector<MicroBatch>& batches, int64_t step,
                                    const AdamOptions& adam, uint64_t seed, bool wantGrads) = 0;
  // A data-parallel step: shards[s] holds shard s's micro-batches (one per
  // batch of the step; a shard with no rows has no inputs), each weighted by
  // its share of the tokens of every shard. This process computes the
  // shards in `mine` (dropout keyed by (shardSeed(seed, s), step)), sums
  // their gradients in shard order, and with `group` sums those over the
  // ranks in rank order; every rank then takes the same Adam step.
  virtual StatusOr<StepResult> shardedStep(const std::vector<std::vector<MicroBatch>>& shards,
                                           const std::vector<int>& mine, int64_t step,
                                           const AdamOptions& adam, uint64_t seed,
                                           ProcessGroup* group);
  // The weights by name, as F32 tensors (what model.safetensors holds).
  virtual StatusOr<std::map<std::string, Tensor>> weights() const = 0;
  // Adam's moments as "adam_m.<name>" and "adam_v.<name>", and the steps
  // the optimizer has taken (its bias correction).
  virtual StatusOr<std::map<std::string, Tensor>> optimizerState() const = 0;
  virtual int64_t stepsTaken() const = 0;
  // Sets what weights(), optimizerState() and stepsTaken() returned.
  virtual Status restore(const std::map<std::string, Tensor>& weights,
                         const std::map<std::string, Tensor>& optimizer, int64_t stepsTaken) = 0;
};

// The train step of a training build (`transfuse compile --train`): its
// @loss_grad accumulated per micro-batch and the fused Adam update, through
// the C ABI; the model holds weights and moments.
class CompiledTrainStep : public TrainStep {
public:
  explicit CompiledTrainStep(CompiledModel& model) : model_(model) {}
  StatusOr<StepResult> step(const std::vector<MicroBatch>& batches, int64_t step,
                            const AdamOptions& adam, uint64_t seed, bool wantGrads) override;
  StatusOr<StepResult> shardedStep(const std::vector<std::vector<MicroBatch>>& shards,
                                   const std::vector<int>& mine, int64_t step,
                                   const AdamOptions& adam, uint64_t seed,
                                   ProcessGroup* group) override;
  StatusOr<std::map<std::string, Tensor>> weights() const override;
  StatusOr<std::map<std::string, Tensor>> optimizerState() const override;
  int64_t stepsTaken() const override { return model_.trainSteps(); }
  Status restore(const std::map<std::string, Tensor>& weights,
                 const std::map<std::string, Tensor>& optimizer, int64_t stepsTaken) override;

private:
  CompiledModel& model_;
};

// One example as the model reads it (the token conventions of
// models/README.md): encoder_decoder: src = [BOS] source EOS, in = BOS
// target, labels = target EOS; decoder_only: in = [BOS] line, labels = the
// same shifted by one (+ EOS).
struct Example {
  std::vector<int32_t> src, in, labels;
  int64_t line = 0;  // in the files, from 1
};

// The example of a sentence pair (tgt null: a decoder_only model's line),
// by those conventions and `ids` (ids.sourceBos: the source starts with
// BOS). A decoder_only line of fewer than 2 tokens with its specials gives
// empty `in` and `labels`.
Example makeExample(const TokenIds& ids, const std::vector<int32_t>& src,
                    const std::vector<int32_t>* tgt);

// What the Trainer trains on: examples, the sizes each takes in a batch
// (what batching by tokens counts), and the inputs of a batch of them.
// TrainingData holds token sequences; a caller may hold anything else (the
// driver's labelled images).
class Dataset {
public:
  virtual ~Dataset() = default;
  virtual size_t size() const = 0;
  virtual std::vector<ExampleLength> lengths() const = 0;
  // The inputs of examples `rows`, and the labels the loss averages over.
  virtual MicroBatch batch(const std::vector<int32_t>& rows) const = 0;
};

struct TrainingData : Dataset {
  std::vector<Example> examples;
  bool decoderOnly = false;
  // The padding id; < 0: the model has none (labels pad with it, inputs with 0).
  int32_t pad = -100;

  size_t size() const override { return examples.size(); }
  std::vector<ExampleLength> lengths() const override;
  // The inputs of examples `rows`, padded to the longest: src_tokens and
  // tgt_tokens (or tokens), and labels.
  MicroBatch batch(const std::vector<int32_t>& rows) const override;
};

struct BatchingOptions {
  int64_t batchTokens = 4096;  // padded tokens per batch, source or target side
  int64_t maxRows = 0;         // sentences per batch (0: no limit)
  bool bucket = true;          // false: file order, every epoch alike
  uint64_t seed = 0;
};

// The batches of epoch `epoch` (Corpus.h's epochBatches), and the most rows
// any of them can have (the compiled model's maximum batch).
std::vector<std::vector<int32_t>> epochPlan(const Dataset& data, const BatchingOptions& o,
                                            int64_t epoch);
int64_t maxBatchRows(const Dataset& data, const BatchingOptions& o);

struct TrainerOptions {
  BatchingOptions batching;
  AdamOptions adam;
  // The dropout key's seed (also the batches', in `batching`); at most
  // 2^63 - 1, as a checkpoint's state.json holds it.
  uint64_t seed = 0;
  // The products' precision (f32 or bf16: --dtype, docs/bf16.md), recorded
  // in each checkpoint; a run resumes only in its own.
  std::string dtype = "f32";
  // Batches per step (micro-batches; an epoch's last step takes what is left).
  int64_t accumulate = 1;
  // Stop at step maxSteps (the run's total, resumed runs included), after
  // maxEpochs epochs, or timeLimitMinutes after `started`; 0: no limit of
  // that kind (with none set, one epoch).
  int64_t maxSteps = 0, maxEpochs = 0;
  double timeLimitMinutes = 0;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  // The run's directory, which must exist (empty: no checkpoints). A checkpoint at each
  // epoch's end, every `saveEvery` steps (0: not), and at the last step;
  // with `keep` > 0 only the last `keep` and the best by validation loss.
  std::string checkpointDir;
  int64_t saveEvery = 0, keep = 0;
  // Also written into each checkpoint's state.json (its members are added:
  // the config, the tokenizer).
  JsonValue runInfo;
  // Step 1's result holds its gradients (StepResult::grads).
  bool firstStepGrads = false;
  // Data parallelism (docs/distributed.md): each batch of the plan is cut
  // into `shards` contiguous slices of its rows, whose gradients are summed
  // in shard order before the step's one Adam update (TrainStep::
  // shardedStep). With `group` (MPI ranks; shards = its size) rank r
  // computes shard r, rank 0 alone validates and checkpoints, and every
  // rank stops together; without, this process computes every shard: the
  // run N ranks equal bit for bit.
  int shards = 1;
  ProcessGroup* group = nullptr;
};

struct StepReport {
  int64_t step = 0, epoch = 0;  // epoch from 0, the step's
  const StepResult* result = nullptr;
  int64_t tokens = 0;         // label tokens of the step
  double seconds = 0;         // the step's wall time
  double tokensPerSecond = 0; // of this run so far
  // Seconds to the nearest limit at this run's pace (-1: none is set).
  double etaSeconds = -1;
};

struct Validation {
  double loss = 0;  // mean negative log-likelihood per token (or per example)
  std::optional<double> bleu;
  std::optional<double> accuracy;  // a classifier's: the fraction labelled right
};

struct TrainerCallbacks {
  std::function<void(const StepReport&)> onStep;
  // At each epoch's end, when set; its loss ranks checkpoints.
  std::function<StatusOr<Validation>()> validate;
  std::function<void(int64_t epoch, int64_t step, const Validation&)> onValidation;
  std::function<void(const std::string& checkpoint, int64_t step)> onCheckpoint;
  // Asked before every step (a binding's Ctrl-C): true ends run() with the
  // error "interrupted", the last step taken and checkpointed as usual.
  std::function<bool()> stop;
};

struct ResumePoint {
  std::string checkpoint;  // empty: nothing to resume from
  int64_t step = 0, epoch = 0;
  // Why each newer checkpoint was skipped (not whole: torn or damaged).
  std::vector<std::string> skipped;
};

class Trainer {
public:
  Trainer(TrainStep& step, const Dataset& data, TrainerOptions options,
          TrainerCallbacks callbacks = {});
  // Continues from the newest whole checkpoint of the run's directory (torn
  // ones skipped): the step's state, the data stream's place, the best
  // validation loss. The seed must be the run's.
  StatusOr<ResumePoint> resume();
  // Trains until a limit; the last step is checkpointed.
  Status run();

  int64_t step() const { return step_; }
  int64_t epoch() const { return epoch_; }

private:
  // Rank 0 of a data-parallel run, or the one process: who checkpoints and validates.
  bool leader() const { return !options_.group || options_.group->rank() == 0; }
  Status save(bool epochEnd);
  Status prune();

  TrainStep& trainStep_;
  const Dataset& data_;
  TrainerOptions options_;
  TrainerCallbacks callbacks_;
  int64_t step_ = 0, epoch_ = 0, position_ = 0;
  std::optional<double> lastValid_;
  double bestLoss_;
};

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_HOST_TRAINER_H
