// See Trainer.h.
#include "runtime/host/Trainer.h"

#include "runtime/Safetensors.h"
#include "runtime/host/Checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>

namespace transfuse::rt {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

Status writeTensors(const std::string& path, const std::map<std::string, Tensor>& tensors) {
  std::vector<std::pair<std::string, const Tensor*>> list;
  for (const auto& [name, t] : tensors) list.emplace_back(name, &t);
  return writeSafetensors(path, list);
}

StatusOr<std::map<std::string, Tensor>> readTensors(const std::string& path) {
  StatusOr<SafetensorsFile> file = SafetensorsFile::open(path);
  if (!file.isOk()) return file.status();
  std::map<std::string, Tensor> tensors;
  for (const std::string& name : file->names()) {
    StatusOr<Tensor> t = file->read(name);
    if (!t.isOk()) return Status::error(path + ": " + t.status().message());
    tensors.emplace(name, std::move(*t));
  }
  return tensors;
}

StatusOr<int64_t> intField(const JsonValue& o, const char* key, const std::string& path) {
  const JsonValue* v = o.find(key);
  if (!v || !v->isInteger())
    return Status::error(path + ": key '" + key + "' is missing or not an integer");
  return v->asInt64();
}

// A step's batches (rows of the plan) cut into `shards` contiguous slices
// each, shard s taking rows [s·n/shards, (s+1)·n/shards) of every batch;
// a slice with no rows is an empty MicroBatch (no inputs, no tokens).
std::vector<std::vector<MicroBatch>> shardBatches(const Dataset& data,
                                                  const std::vector<std::vector<int32_t>>& rows,
                                                  int shards) {
  std::vector<std::vector<MicroBatch>> out(shards);
  for (const std::vector<int32_t>& batch : rows) {
    const size_t n = batch.size();
    for (int s = 0; s < shards; ++s) {
      const size_t begin = n * s / shards, end = n * (s + 1) / shards;
      out[s].push_back(begin == end ? MicroBatch{}
                                    : data.batch({batch.begin() + begin, batch.begin() + end}));
    }
  }
  return out;
}

// The C ABI's options of an Adam step at rate `lr`.
CompiledModel::TrainOptions updateOptions(const AdamOptions& adam, double lr) {
  CompiledModel::TrainOptions o;
  o.learningRate = lr;
  o.beta1 = adam.beta1;
  o.beta2 = adam.beta2;
  o.epsilon = adam.eps;
  o.weightDecay = adam.weightDecay;
  o.maxGradNorm = adam.clipNorm;
  return o;
}

// The Adam moments' names in a checkpoint.
std::string momentName(const CompiledModel::ParamInfo& p) {
  return (p.role == CompiledModel::ParamRole::kAdamM ? "adam_m." : "adam_v.") + p.name;
}

}  // namespace

Example makeExample(const TokenIds& ids, const std::vector<int32_t>& src,
                    const std::vector<int32_t>* tgt) {
  Example e;
  if (!tgt) {
    std::vector<int32_t> seq;
    if (ids.bos >= 0) seq.push_back(ids.bos);
    seq.insert(seq.end(), src.begin(), src.end());
    if (ids.eos >= 0) seq.push_back(ids.eos);
    if (seq.size() >= 2) {
      e.in.assign(seq.begin(), seq.end() - 1);
      e.labels.assign(seq.begin() + 1, seq.end());
    }
    return e;
  }
  if (ids.sourceBos) e.src.push_back(ids.bos);
  e.src.insert(e.src.end(), src.begin(), src.end());
  e.src.push_back(ids.eos);
  e.in.push_back(ids.bos);
  e.in.insert(e.in.end(), tgt->begin(), tgt->end());
  e.labels.assign(tgt->begin(), tgt->end());
  e.labels.push_back(ids.eos);
  return e;
}

double learningRate(const AdamOptions& o, int64_t step) {
  const double s = static_cast<double>(step);
  return o.lrFactor / std::sqrt(static_cast<double>(o.dModel)) *
         std::min(1.0 / std::sqrt(s), s * std::pow(static_cast<double>(o.warmup), -1.5));
}

uint64_t shardSeed(uint64_t seed, int shard) {
  if (shard == 0) return seed;
  // splitmix64's finalizer over (seed, shard).
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(shard);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

StatusOr<StepResult> TrainStep::shardedStep(const std::vector<std::vector<MicroBatch>>&,
                                            const std::vector<int>&, int64_t, const AdamOptions&,
                                            uint64_t, ProcessGroup*) {
  return Status::error("this train step does not take data-parallel (sharded) steps");
}

double microBatchWeight(const std::vector<MicroBatch>& batches, size_t i) {
  if (batches.size() == 1) return 1.0;
  int64_t total = 0;
  for (const MicroBatch& mb : batches) total += mb.tokens;
  return static_cast<double>(batches[i].tokens) / static_cast<double>(std::max<int64_t>(total, 1));
}

//===----------------------------------------------------------------------===//
// The compiled train step
//===----------------------------------------------------------------------===//

StatusOr<StepResult> CompiledTrainStep::step(const std::vector<MicroBatch>& batches, int64_t step,
                                             const AdamOptions& adam, uint64_t seed,
                                             bool wantGrads) {
  StepResult r;
  if (wantGrads) {
    // The gradients from the same entry the step runs, weighted as the
    // step weighs them (F32).
    for (size_t b = 0; b < batches.size(); ++b) {
      const double w = microBatchWeight(batches, b);
      StatusOr<std::map<std::string, Tensor>> out = model_.run("loss_grad", batches[b].inputs);
      if (!out.isOk()) return out.status();
      for (auto& [name, g] : *out) {
        if (name == "loss") continue;
        auto [it, fresh] = r.grads.try_emplace(name, Tensor::zeros(DType::F32, g.shape));
        for (int64_t i = 0; i < g.numElements(); ++i)
          it->second.data<float>()[i] += static_cast<float>(w) * g.data<float>()[i];
      }
    }
  }
  for (size_t b = 0; b < batches.size(); ++b) {
    const double w = microBatchWeight(batches, b);
    StatusOr<double> loss = model_.accumulateGradients("loss_grad", batches[b].inputs, w, seed);
    if (!loss.isOk()) return loss.status();
    r.loss += w * *loss;
  }
  r.lr = learningRate(adam, step);
  StatusOr<double> norm = model_.applyGradients(updateOptions(adam, r.lr));
  if (!norm.isOk()) return norm.status();
  r.gradNorm = *norm;
  return r;
}

StatusOr<StepResult> CompiledTrainStep::shardedStep(
    const std::vector<std::vector<MicroBatch>>& shards, const std::vector<int>& mine,
    int64_t step, const AdamOptions& adam, uint64_t seed, ProcessGroup* group) {
  int64_t total = 0;
  for (const auto& shard : shards)
    for (const MicroBatch& mb : shard) total += mb.tokens;
  const double denominator = static_cast<double>(std::max<int64_t>(total, 1));
  // Each shard's gradients (the sum of its micro-batches', weighted) added
  // to `sum` in shard order; each shard's loss in its slot.
  std::vector<float> sum, part;
  std::vector<double> losses(shards.size(), 0.0);
  bool first = true;
  for (int s : mine) {
    for (const MicroBatch& mb : shards[s]) {
      if (mb.inputs.empty()) continue;
      const double w = static_cast<double>(mb.tokens) / denominator;
      StatusOr<double> loss =
          model_.accumulateGradients("loss_grad", mb.inputs, w, shardSeed(seed, s));
      if (!loss.isOk()) return loss.status();
      losses[s] += w * *loss;
    }
    if (Status t = model_.takeGradients(first ? sum : part); !t.isOk()) return t;
    if (!first)
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
    first = false;
  }
  StepResult r;
  if (group) {
    const Clock::time_point t0 = Clock::now();
    if (Status g = group->sumInRankOrder(sum.data(), sum.size()); !g.isOk()) return g;
    if (Status g = group->sumInRankOrder(losses.data(), losses.size()); !g.isOk()) return g;
    r.reduceSeconds = secondsSince(t0);
  }
  for (double l : losses) r.loss += l;
  if (Status p = model_.putGradients(sum); !p.isOk()) return p;
  r.lr = learningRate(adam, step);
  StatusOr<double> norm = model_.applyGradients(updateOptions(adam, r.lr));
  if (!norm.isOk()) return norm.status();
  r.gradNorm = *norm;
  return r;
}

StatusOr<std::map<std::string, Tensor>> CompiledTrainStep::weights() const {
  std::map<std::string, Tensor> out;
  for (const auto& p : model_.params()) {
    if (p.role != CompiledModel::ParamRole::kWeight) continue;
    StatusOr<Tensor> t = model_.readParam(p.name, p.role);
    if (!t.isOk()) return t.status();
    out.emplace(p.name, std::move(*t));
  }
  return out;
}

StatusOr<std::map<std::string, Tensor>> CompiledTrainStep::optimizerState() const {
  std::map<std::string, Tensor> out;
  for (const auto& p : model_.params()) {
    if (p.role == CompiledModel::ParamRole::kWeight) continue;
    StatusOr<Tensor> t = model_.readParam(p.name, p.role);
    if (!t.isOk()) return t.status();
    out.emplace(momentName(p), std::move(*t));
  }
  return out;
}

Status CompiledTrainStep::restore(const std::map<std::string, Tensor>& weights,
                                  const std::map<std::string, Tensor>& optimizer,
                                  int64_t stepsTaken) {
  for (const auto& p : model_.params()) {
    const bool weight = p.role == CompiledModel::ParamRole::kWeight;
    const std::string name = weight ? p.name : momentName(p);
    const auto& from = weight ? weights : optimizer;
    auto it = from.find(name);
    if (it == from.end())
      return Status::error(std::string(weight ? kWeightsFile : kOptimizerFile) + ": no tensor '" +
                           name + "'");
    if (Status s = model_.writeParam(p.name, p.role, it->second); !s.isOk()) return s;
  }
  return model_.setTrainSteps(stepsTaken);
}

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

std::vector<ExampleLength> TrainingData::lengths() const {
  std::vector<ExampleLength> out;
  out.reserve(examples.size());
  for (const Example& e : examples)
    out.push_back({static_cast<int32_t>(e.src.size()), static_cast<int32_t>(e.in.size())});
  return out;
}

namespace {

// Rows `rows` of field `field`, padded with `pad` to the longest.
Tensor padded(const std::vector<Example>& ex, const std::vector<int32_t>& rows,
              std::vector<int32_t> Example::*field, int32_t pad) {
  size_t width = 0;
  for (int32_t i : rows) width = std::max(width, (ex[i].*field).size());
  Tensor t = Tensor::zeros(DType::I32, {static_cast<int64_t>(rows.size()),
                                        static_cast<int64_t>(width)});
  int32_t* p = t.data<int32_t>();
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto& row = ex[rows[r]].*field;
    std::fill_n(p + r * width, width, pad);
    std::copy(row.begin(), row.end(), p + r * width);
  }
  return t;
}

}  // namespace

MicroBatch TrainingData::batch(const std::vector<int32_t>& rows) const {
  MicroBatch mb;
  if (decoderOnly) {
    mb.inputs["tokens"] = padded(examples, rows, &Example::in, pad < 0 ? 0 : pad);
  } else {
    mb.inputs["src_tokens"] = padded(examples, rows, &Example::src, pad < 0 ? 0 : pad);
    mb.inputs["tgt_tokens"] = padded(examples, rows, &Example::in, pad < 0 ? 0 : pad);
  }
  mb.inputs["labels"] = padded(examples, rows, &Example::labels, pad);
  for (int32_t i : rows) mb.tokens += static_cast<int64_t>(examples[i].labels.size());
  return mb;
}

std::vector<std::vector<int32_t>> epochPlan(const Dataset& data, const BatchingOptions& o,
                                            int64_t epoch) {
  return epochBatches(data.lengths(), o.batchTokens, o.maxRows, o.seed, epoch, o.bucket);
}

int64_t maxBatchRows(const Dataset& data, const BatchingOptions& o) {
  if (o.bucket) return maxBatchRows(data.lengths(), o.batchTokens, o.maxRows);
  int64_t rows = 1;
  for (const auto& b : epochPlan(data, o, 0)) rows = std::max<int64_t>(rows, b.size());
  return rows;
}

//===----------------------------------------------------------------------===//
// The loop
//===----------------------------------------------------------------------===//

Trainer::Trainer(TrainStep& step, const Dataset& data, TrainerOptions options,
                 TrainerCallbacks callbacks)
    : trainStep_(step), data_(data), options_(std::move(options)),
      callbacks_(std::move(callbacks)), bestLoss_(INFINITY) {
  if (!options_.maxSteps && !options_.maxEpochs && options_.timeLimitMinutes <= 0)
    options_.maxEpochs = 1;
  options_.accumulate = std::max<int64_t>(1, options_.accumulate);
}

StatusOr<ResumePoint> Trainer::resume() {
  ResumePoint point;
  const std::string& dir = options_.checkpointDir;
  std::vector<int64_t> whole = wholeCheckpoints(dir, &point.skipped);
  if (whole.empty()) return point;
  point.checkpoint = joinPath(dir, checkpointName(whole.front()));
  const std::string statePath = joinPath(point.checkpoint, kStateFile);
  StatusOr<JsonValue> state = readState(point.checkpoint);
  if (!state.isOk()) return state.status();
  StatusOr<int64_t> step = intField(*state, "step", statePath),
                    epoch = intField(*state, "epoch", statePath),
                    position = intField(*state, "batch", statePath),
                    seed = intField(*state, "seed", statePath),
                    taken = intField(*state, "train_steps", statePath);
  for (const auto* field : {&step, &epoch, &position, &seed, &taken})
    if (!field->isOk()) return field->status();
  if (static_cast<uint64_t>(*seed) != options_.seed)
    return Status::error("--seed " + std::to_string(options_.seed) +
                         " differs from the run's seed in " + statePath);
  // (Checkpoints from before dtypes were recorded are f32.)
  const JsonValue* dtype = state->find("dtype");
  const std::string runDtype = dtype && dtype->isString() ? dtype->asString() : "f32";
  if (runDtype != options_.dtype)
    return Status::error("--dtype " + options_.dtype + " differs from the run's dtype " +
                         runDtype + " in " + statePath);
  StatusOr<std::map<std::string, Tensor>> weights =
      readTensors(joinPath(point.checkpoint, kWeightsFile));
  if (!weights.isOk()) return weights.status();
  StatusOr<std::map<std::string, Tensor>> moments =
      readTensors(joinPath(point.checkpoint, kOptimizerFile));
  if (!moments.isOk()) return moments.status();
  if (Status s = trainStep_.restore(*weights, *moments, *taken); !s.isOk())
    return Status::error(point.checkpoint + "/" + s.message());
  if (const JsonValue* best = state->find("best_valid_loss"); best && best->isNumber())
    bestLoss_ = best->asNumber();
  step_ = point.step = *step;
  epoch_ = point.epoch = *epoch;
  position_ = *position;
  return point;
}

Status Trainer::run() {
  const TrainerOptions& o = options_;
  // What a checkpoint could not hold, or where it could not go, is refused
  // before the first step.
  if (data_.size() == 0) return Status::error("no examples to train on");
  if (o.seed > static_cast<uint64_t>(INT64_MAX))
    return Status::error("the seed " + std::to_string(o.seed) + " is over 2^63 - 1");
  if (o.shards < 1 || (o.group && o.shards != o.group->size()))
    return Status::error("shards " + std::to_string(o.shards) + ": " +
                         (o.group ? "a data-parallel run has one per rank (" +
                                        std::to_string(o.group->size()) + ")"
                                  : std::string("must be >= 1")));
  if (o.shards > 1 && o.firstStepGrads)
    return Status::error("step 1's gradients are not kept in a data-parallel (sharded) run");
  if (!o.checkpointDir.empty() && leader()) {
    struct stat st;
    if (::stat(o.checkpointDir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return Status::error("the checkpoint directory '" + o.checkpointDir + "' does not exist");
  }
  std::vector<std::vector<int32_t>> plan = epochPlan(data_, o.batching, epoch_);
  if (position_ >= static_cast<int64_t>(plan.size()))
    return Status::error("the run stands at batch " + std::to_string(position_) + " of epoch " +
                         std::to_string(epoch_ + 1) + ", which has " +
                         std::to_string(plan.size()) +
                         " batches: the data or the batching differ from the run's");
  int64_t stepsThisRun = 0, tokensThisRun = 0;
  const Clock::time_point trainStart = Clock::now();
  auto minutesLeft = [&] { return o.timeLimitMinutes - secondsSince(o.started) / 60; };
  bool savedLast = false;
  for (;;) {
    const bool limit = (o.maxSteps && step_ >= o.maxSteps) ||
                       (o.maxEpochs && epoch_ >= o.maxEpochs) ||
                       (o.timeLimitMinutes > 0 && minutesLeft() <= 0);
    const bool interrupted = !limit && callbacks_.stop && callbacks_.stop();
    bool stop = limit || interrupted;
    if (o.group) {  // every rank stops at the same step (the clocks differ)
      StatusOr<bool> any = o.group->any(stop);
      if (!any.isOk()) return any.status();
      stop = *any;
    }
    if (interrupted) {
      // The steps taken are kept: the last one is checkpointed.
      if (!savedLast && stepsThisRun > 0)
        if (Status s = save(false); !s.isOk()) return s;
      return Status::error("interrupted");
    }
    if (stop) break;
    // A step's micro-batches are the next `accumulate` batches of the
    // epoch; an epoch's last step takes what is left of it.
    std::vector<std::vector<int32_t>> rows;
    StepReport report;
    bool epochEnds = false;
    for (int64_t k = 0; k < o.accumulate && !epochEnds; ++k) {
      rows.push_back(plan[position_++]);
      epochEnds = position_ == static_cast<int64_t>(plan.size());
    }
    ++step_;
    const Clock::time_point t0 = Clock::now();
    StatusOr<StepResult> result = [&]() -> StatusOr<StepResult> {
      if (o.shards == 1) {
        std::vector<MicroBatch> micro;
        for (const auto& r : rows) {
          micro.push_back(data_.batch(r));
          report.tokens += micro.back().tokens;
        }
        return trainStep_.step(micro, step_, o.adam, o.seed, o.firstStepGrads && step_ == 1);
      }
      std::vector<std::vector<MicroBatch>> shards = shardBatches(data_, rows, o.shards);
      for (const auto& shard : shards)
        for (const MicroBatch& mb : shard) report.tokens += mb.tokens;
      std::vector<int> mine;
      for (int s = 0; s < o.shards; ++s)
        if (!o.group || s == o.group->rank()) mine.push_back(s);
      return trainStep_.shardedStep(shards, mine, step_, o.adam, o.seed, o.group);
    }();
    if (!result.isOk()) return result.status();
    report.seconds = secondsSince(t0);
    ++stepsThisRun;
    tokensThisRun += report.tokens;
    report.step = step_;
    report.epoch = epoch_;
    report.result = &*result;
    const double elapsed = secondsSince(trainStart);
    report.tokensPerSecond = tokensThisRun / std::max(1e-9, elapsed);
    // The ETA of whichever limit is set: steps, epochs or time.
    const double perStep = elapsed / stepsThisRun;
    if (o.maxSteps)
      report.etaSeconds = perStep * (o.maxSteps - step_);
    else if (o.maxEpochs)
      report.etaSeconds = perStep *
                          (static_cast<double>(o.maxEpochs - epoch_) * plan.size() - position_) /
                          o.accumulate;
    if (o.timeLimitMinutes > 0) {
      const double left = std::max(0.0, minutesLeft() * 60);
      report.etaSeconds = report.etaSeconds < 0 ? left : std::min(report.etaSeconds, left);
    }
    if (callbacks_.onStep) callbacks_.onStep(report);
    savedLast = false;
    if (epochEnds) {
      // The stream moves to the next epoch here, so that a checkpoint
      // resumes at its start.
      ++epoch_;
      position_ = 0;
      plan = epochPlan(data_, o.batching, epoch_);
      lastValid_.reset();
      if (callbacks_.validate && leader()) {
        StatusOr<Validation> v = callbacks_.validate();
        if (!v.isOk()) return v.status();
        lastValid_ = v->loss;
        bestLoss_ = std::min(bestLoss_, v->loss);
        if (callbacks_.onValidation) callbacks_.onValidation(epoch_, step_, *v);
      }
      if (Status s = save(true); !s.isOk()) return s;
      savedLast = true;
    }
    if (o.saveEvery && step_ % o.saveEvery == 0 && !savedLast) {
      if (Status s = save(false); !s.isOk()) return s;
      savedLast = true;
    }
  }
  // A run that was already at its limit (resumed again) leaves its last
  // checkpoint as it is.
  return savedLast || stepsThisRun == 0 ? Status::ok() : save(false);
}

Status Trainer::save(bool epochEnd) {
  const TrainerOptions& o = options_;
  if (o.checkpointDir.empty() || !leader()) return Status::ok();
  JsonValue state = JsonValue::object();
  state.set("step", step_);
  state.set("epoch", epoch_);
  state.set("batch", position_);
  state.set("seed", o.seed);
  state.set("dtype", o.dtype);
  state.set("train_steps", trainStep_.stepsTaken());
  state.set("rng",
            "counter-based: batches keyed by (seed, epoch), dropout by (seed, step); the seed is "
            "the whole state");
  if (o.runInfo.isObject())
    for (const auto& [key, value] : o.runInfo.members()) state.set(key, value);
  if (epochEnd && lastValid_) state.set("valid_loss", *lastValid_);
  if (std::isfinite(bestLoss_)) state.set("best_valid_loss", bestLoss_);
  std::sort(state.members().begin(), state.members().end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  StatusOr<std::map<std::string, Tensor>> weights = trainStep_.weights();
  if (!weights.isOk()) return weights.status();
  StatusOr<std::map<std::string, Tensor>> moments = trainStep_.optimizerState();
  if (!moments.isOk()) return moments.status();
  const std::string path = joinPath(o.checkpointDir, checkpointName(step_));
  Status s = commitDirectory(path, [&](const std::string& tmp) {
    if (Status w = writeTensors(joinPath(tmp, kWeightsFile), *weights); !w.isOk()) return w;
    if (Status w = writeTensors(joinPath(tmp, kOptimizerFile), *moments); !w.isOk()) return w;
    std::ofstream out(joinPath(tmp, kStateFile), std::ios::binary);
    out << state.dump(2) << "\n";
    out.close();
    return out ? Status::ok() : Status::error("cannot write " + joinPath(tmp, kStateFile));
  });
  if (!s.isOk()) return s;
  if (callbacks_.onCheckpoint) callbacks_.onCheckpoint(path, step_);
  return prune();
}

// With `keep`: the last `keep` checkpoints and the best by validation loss.
Status Trainer::prune() {
  if (options_.keep <= 0) return Status::ok();
  const std::string& dir = options_.checkpointDir;
  std::vector<int64_t> all = listCheckpoints(dir);
  StatusOr<int64_t> best = bestCheckpoint(dir, wholeCheckpoints(dir));
  if (!best.isOk()) return best.status();
  for (size_t i = 0; i + options_.keep < all.size(); ++i)
    if (all[i] != *best)
      if (Status s = removeDirectory(joinPath(dir, checkpointName(all[i]))); !s.isOk()) return s;
  return Status::ok();
}

}  // namespace transfuse::rt
