// Tests for runtime/host/Trainer.h, with no model: a small deterministic
// fake TrainStep (one weight tensor "w" of four floats and its Adam moments,
// updated from every token of every micro-batch, its place, the step number
// and the rate, so that another order or a skipped or repeated batch changes
// the weights) that records what each step saw. Covered: batching and
// padding, the step and epoch limits and accumulation against epochPlan,
// callbacks, checkpoints (where, what state.json holds, pruning), resume bit
// for bit (also past a torn checkpoint), the schedule and the micro-batch
// weights, and the refusals (an unresumable seed, a finished run resumed
// again, a data position past the plan).
#include "runtime/host/Trainer.h"

#include "runtime/Safetensors.h"
#include "runtime/host/Checkpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <set>
#include <ostream>
#include <thread>

#include "tests/unit/runtime/TestUtil.h"

namespace transfuse::rt {
namespace {

using testing::TempDir;

// Each example's first label is kIdBase + its index: a row tells its example.
constexpr int32_t kIdBase = 1000;
constexpr uint64_t kSeed = 11;

//===----------------------------------------------------------------------===//
// The fake train step
//===----------------------------------------------------------------------===//

// One micro-batch as a step received it.
struct SeenBatch {
  std::vector<int32_t> examples;  // the rows' example indices, in row order
  // Each input: its shape, then its elements.
  std::map<std::string, std::vector<int32_t>> contents;
  int64_t tokens = 0;
  bool operator==(const SeenBatch& o) const {
    return examples == o.examples && contents == o.contents && tokens == o.tokens;
  }
};

struct SeenStep {
  int64_t step = 0;
  uint64_t seed = 0;
  bool wantGrads = false;
  std::vector<SeenBatch> batches;
  bool operator==(const SeenStep& o) const {
    return step == o.step && seed == o.seed && wantGrads == o.wantGrads && batches == o.batches;
  }
};

std::ostream& operator<<(std::ostream& os, const SeenStep& s) {
  os << "step " << s.step << ":";
  for (const SeenBatch& b : s.batches) {
    os << " [";
    for (int32_t e : b.examples) os << " " << e;
    os << " ]";
  }
  return os;
}

SeenBatch seenOf(const MicroBatch& mb) {
  SeenBatch sb;
  sb.tokens = mb.tokens;
  for (const auto& [name, t] : mb.inputs) {
    std::vector<int32_t> flat(t.shape.begin(), t.shape.end());
    flat.insert(flat.end(), t.data<int32_t>(), t.data<int32_t>() + t.numElements());
    sb.contents[name] = std::move(flat);
  }
  const Tensor& labels = mb.inputs.at("labels");
  for (int64_t r = 0; r < labels.shape[0]; ++r)
    sb.examples.push_back(labels.data<int32_t>()[r * labels.shape[1]] - kIdBase);
  return sb;
}

Tensor f32(const std::vector<float>& v) {
  Tensor t = Tensor::zeros(DType::F32, {static_cast<int64_t>(v.size())});
  std::memcpy(t.data<float>(), v.data(), v.size() * sizeof(float));
  return t;
}

class FakeStep : public TrainStep {
public:
  static constexpr size_t kN = 4;
  std::vector<float> w{0.5f, -0.25f, 1.0f, 2.0f}, m = std::vector<float>(kN, 0.0f),
                                                   v = std::vector<float>(kN, 0.0f);
  int64_t taken = 0;
  std::vector<SeenStep> seen;
  int restores = 0;
  std::chrono::milliseconds sleep{0};

  StatusOr<StepResult> step(const std::vector<MicroBatch>& batches, int64_t step,
                            const AdamOptions& adam, uint64_t seed, bool wantGrads) override {
    SeenStep s;
    s.step = step;
    s.seed = seed;
    s.wantGrads = wantGrads;
    std::vector<double> g(kN, 0.0);
    double loss = 0;
    for (size_t b = 0; b < batches.size(); ++b) {
      s.batches.push_back(seenOf(batches[b]));
      // A hash of every input element and its place, in order.
      double h = 0;
      for (const auto& [name, t] : batches[b].inputs)
        for (int64_t k = 0; k < t.numElements(); ++k)
          h = h * 0.75 + t.data<int32_t>()[k] * 1e-3 * static_cast<double>(k % 5 + 1);
      const double weight = microBatchWeight(batches, b);
      for (size_t i = 0; i < kN; ++i)
        g[i] += weight * (std::sin(h * static_cast<double>(i + 1) + w[i]) *
                              (1.0 + 0.01 * static_cast<double>(step)) +
                          static_cast<double>(seed) * 1e-4);
      loss += weight * std::fabs(h);
    }
    const double lr = learningRate(adam, step);
    ++taken;
    double norm = 0;
    for (size_t i = 0; i < kN; ++i) {
      norm += g[i] * g[i];
      m[i] = static_cast<float>(adam.beta1 * m[i] + (1 - adam.beta1) * g[i]);
      v[i] = static_cast<float>(adam.beta2 * v[i] + (1 - adam.beta2) * g[i] * g[i]);
      const double mHat = m[i] / (1 - std::pow(adam.beta1, static_cast<double>(taken)));
      const double vHat = v[i] / (1 - std::pow(adam.beta2, static_cast<double>(taken)));
      w[i] = static_cast<float>(w[i] - lr * mHat / (std::sqrt(vHat) + adam.eps));
    }
    seen.push_back(std::move(s));
    if (sleep.count() > 0) std::this_thread::sleep_for(sleep);
    StepResult r;
    r.loss = loss;
    r.lr = lr;
    r.gradNorm = std::sqrt(norm);
    if (wantGrads) {
      std::vector<float> gf(g.begin(), g.end());
      r.grads.emplace("w", f32(gf));
    }
    return r;
  }
  StatusOr<std::map<std::string, Tensor>> weights() const override {
    std::map<std::string, Tensor> out;
    out.emplace("w", f32(w));
    return out;
  }
  StatusOr<std::map<std::string, Tensor>> optimizerState() const override {
    std::map<std::string, Tensor> out;
    out.emplace("adam_m.w", f32(m));
    out.emplace("adam_v.w", f32(v));
    return out;
  }
  int64_t stepsTaken() const override { return taken; }
  Status restore(const std::map<std::string, Tensor>& weights,
                 const std::map<std::string, Tensor>& optimizer, int64_t stepsTaken) override {
    ++restores;
    auto get = [](const std::map<std::string, Tensor>& from, const std::string& name,
                  std::vector<float>* to) {
      auto it = from.find(name);
      if (it == from.end() || it->second.dtype != DType::F32 ||
          it->second.numElements() != static_cast<int64_t>(kN))
        return Status::error("no tensor '" + name + "' of " + std::to_string(kN) + " floats");
      std::memcpy(to->data(), it->second.data<float>(), kN * sizeof(float));
      return Status::ok();
    };
    if (Status s = get(weights, "w", &w); !s.isOk()) return s;
    if (Status s = get(optimizer, "adam_m.w", &m); !s.isOk()) return s;
    if (Status s = get(optimizer, "adam_v.w", &v); !s.isOk()) return s;
    taken = stepsTaken;
    return Status::ok();
  }
};

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The fake's whole state is equal, bit for bit.
void expectSameState(const FakeStep& a, const FakeStep& b) {
  EXPECT_TRUE(sameBits(a.w, b.w));
  EXPECT_TRUE(sameBits(a.m, b.m));
  EXPECT_TRUE(sameBits(a.v, b.v));
  EXPECT_EQ(a.taken, b.taken);
}

//===----------------------------------------------------------------------===//
// Data and expectations
//===----------------------------------------------------------------------===//

// `n` examples of varied lengths (source 2..8, target 2..6); ids avoid `pad`.
TrainingData makeData(int n = 23, bool decoderOnly = false, int32_t pad = 1) {
  TrainingData data;
  data.decoderOnly = decoderOnly;
  data.pad = pad;
  for (int i = 0; i < n; ++i) {
    Example e;
    e.line = i + 1;
    if (!decoderOnly) {
      const int srcLen = 2 + (i * 5) % 7;
      for (int k = 0; k < srcLen; ++k) e.src.push_back(10 + (i * 7 + k * 3) % 50);
    }
    const int tgtLen = 2 + (i * 3) % 5;
    e.in.push_back(2);  // BOS
    for (int k = 1; k < tgtLen; ++k) e.in.push_back(60 + (i * 11 + k) % 40);
    e.labels.push_back(kIdBase + i);
    for (int k = 1; k < tgtLen; ++k) e.labels.push_back(60 + (i * 13 + k) % 40);
    data.examples.push_back(std::move(e));
  }
  return data;
}

TrainerOptions baseOptions() {
  TrainerOptions o;
  o.seed = kSeed;
  o.batching.seed = kSeed;
  o.batching.batchTokens = 16;
  // Rates of 0.1 .. 0.5: every step moves the float weights.
  o.adam.lrFactor = 1.0;
  o.adam.dModel = 4;
  o.adam.warmup = 4;
  return o;
}

// The steps a run from scratch takes, each as its micro-batches' example
// indices, derived from epochPlan: `accumulate` consecutive batches of an
// epoch per step, the epoch's last step what is left.
struct PlannedStep {
  int64_t epoch = 0;      // the step's
  bool epochEnd = false;  // the step ends its epoch
  int64_t position = 0;   // batches of its epoch done after it
  std::vector<std::vector<int32_t>> batches;
};

std::vector<PlannedStep> plannedSteps(const TrainingData& data, const TrainerOptions& o) {
  int64_t maxEpochs = o.maxEpochs;
  if (!o.maxSteps && !o.maxEpochs) maxEpochs = 1;
  std::vector<PlannedStep> steps;
  for (int64_t e = 0;; ++e) {
    if (maxEpochs && e >= maxEpochs) return steps;
    std::vector<std::vector<int32_t>> plan = epochPlan(data, o.batching, e);
    for (size_t p = 0; p < plan.size();) {
      if (o.maxSteps && static_cast<int64_t>(steps.size()) >= o.maxSteps) return steps;
      PlannedStep s;
      s.epoch = e;
      for (int64_t k = 0; k < std::max<int64_t>(1, o.accumulate) && p < plan.size(); ++k)
        s.batches.push_back(plan[p++]);
      s.epochEnd = p == plan.size();
      s.position = static_cast<int64_t>(p);
      steps.push_back(std::move(s));
    }
  }
}

std::vector<std::vector<int32_t>> seenExamples(const SeenStep& s) {
  std::vector<std::vector<int32_t>> out;
  for (const SeenBatch& b : s.batches) out.push_back(b.examples);
  return out;
}

// The fake saw exactly the planned steps, numbered from `firstStep`, each
// micro-batch as TrainingData::batch makes it.
void expectSaw(const FakeStep& fake, const TrainingData& data,
               const std::vector<PlannedStep>& planned, int64_t firstStep = 1) {
  ASSERT_EQ(fake.seen.size(), planned.size());
  for (size_t i = 0; i < planned.size(); ++i) {
    EXPECT_EQ(fake.seen[i].step, firstStep + static_cast<int64_t>(i));
    EXPECT_EQ(seenExamples(fake.seen[i]), planned[i].batches) << "step " << fake.seen[i].step;
    ASSERT_EQ(fake.seen[i].batches.size(), planned[i].batches.size());
    for (size_t b = 0; b < planned[i].batches.size(); ++b)
      EXPECT_TRUE(fake.seen[i].batches[b] == seenOf(data.batch(planned[i].batches[b])))
          << "step " << fake.seen[i].step << " micro-batch " << b;
  }
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

JsonValue readState(const std::string& checkpoint) {
  StatusOr<JsonValue> v = JsonValue::parse(readFile(joinPath(checkpoint, kStateFile)));
  EXPECT_TRUE(v.isOk()) << checkpoint;
  return v.isOk() ? *v : JsonValue();
}

std::vector<float> readFloats(const std::string& path, const std::string& name) {
  StatusOr<SafetensorsFile> file = SafetensorsFile::open(path);
  EXPECT_TRUE(file.isOk()) << path;
  if (!file.isOk()) return {};
  StatusOr<Tensor> t = file->read(name);
  EXPECT_TRUE(t.isOk()) << path << ": " << name;
  if (!t.isOk() || t->dtype != DType::F32) return {};
  return std::vector<float>(t->data<float>(), t->data<float>() + t->numElements());
}

int64_t intAt(const JsonValue& o, const char* key) {
  const JsonValue* v = o.find(key);
  EXPECT_TRUE(v && v->isInteger()) << "state.json: " << key;
  return v ? v->asInt64() : -1;
}

//===----------------------------------------------------------------------===//
// TrainingData
//===----------------------------------------------------------------------===//

std::vector<int32_t> inputOf(const MicroBatch& mb, const std::string& name,
                             std::vector<int64_t>* shape) {
  auto it = mb.inputs.find(name);
  EXPECT_NE(it, mb.inputs.end()) << name;
  if (it == mb.inputs.end()) return {};
  EXPECT_EQ(it->second.dtype, DType::I32) << name;
  *shape = it->second.shape;
  return std::vector<int32_t>(it->second.data<int32_t>(),
                              it->second.data<int32_t>() + it->second.numElements());
}

TrainingData twoByHand(bool decoderOnly, int32_t pad) {
  TrainingData d;
  d.decoderOnly = decoderOnly;
  d.pad = pad;
  d.examples.push_back({{5, 6, 7, 3}, {2, 8, 9}, {8, 9, 3}, 1});
  d.examples.push_back({{5, 3}, {2, 4, 4, 4, 4}, {4, 4, 4, 4, 3}, 2});
  d.examples.push_back({{7, 7, 7, 7, 7, 3}, {2}, {3}, 3});
  if (decoderOnly)
    for (Example& e : d.examples) e.src.clear();
  return d;
}

TEST(TrainerDataTest, BatchPadsEncoderDecoderWithItsPadId) {
  const TrainingData d = twoByHand(false, 1);
  // Rows in the order asked for, not the examples'.
  MicroBatch mb = d.batch({2, 0});
  EXPECT_EQ(mb.inputs.size(), 3u);
  std::vector<int64_t> shape;
  EXPECT_EQ(inputOf(mb, "src_tokens", &shape),
            (std::vector<int32_t>{7, 7, 7, 7, 7, 3, 5, 6, 7, 3, 1, 1}));
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(inputOf(mb, "tgt_tokens", &shape), (std::vector<int32_t>{2, 1, 1, 2, 8, 9}));
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(inputOf(mb, "labels", &shape), (std::vector<int32_t>{3, 1, 1, 8, 9, 3}));
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(mb.tokens, 1 + 3);

  mb = d.batch({0, 1, 2});
  EXPECT_EQ(inputOf(mb, "tgt_tokens", &shape),
            (std::vector<int32_t>{2, 8, 9, 1, 1, 2, 4, 4, 4, 4, 2, 1, 1, 1, 1}));
  EXPECT_EQ(shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(inputOf(mb, "labels", &shape),
            (std::vector<int32_t>{8, 9, 3, 1, 1, 4, 4, 4, 4, 3, 3, 1, 1, 1, 1}));
  EXPECT_EQ(mb.tokens, 3 + 5 + 1);

  std::vector<ExampleLength> lengths = d.lengths();
  ASSERT_EQ(lengths.size(), 3u);
  EXPECT_EQ(lengths[0].src, 4);
  EXPECT_EQ(lengths[0].tgt, 3);
  EXPECT_EQ(lengths[2].src, 6);
  EXPECT_EQ(lengths[2].tgt, 1);
}

TEST(TrainerDataTest, BatchPadsDecoderOnlyWithoutPadIdWithZeroAndLabelsWithIt) {
  const TrainingData d = twoByHand(true, -100);
  MicroBatch mb = d.batch({1, 0, 2});
  EXPECT_EQ(mb.inputs.size(), 2u);
  EXPECT_EQ(mb.inputs.count("src_tokens"), 0u);
  std::vector<int64_t> shape;
  EXPECT_EQ(inputOf(mb, "tokens", &shape),
            (std::vector<int32_t>{2, 4, 4, 4, 4, 2, 8, 9, 0, 0, 2, 0, 0, 0, 0}));
  EXPECT_EQ(shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(inputOf(mb, "labels", &shape),
            (std::vector<int32_t>{4, 4, 4, 4, 3, 8, 9, 3, -100, -100, 3, -100, -100, -100, -100}));
  EXPECT_EQ(shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(mb.tokens, 5 + 3 + 1);
  EXPECT_EQ(d.lengths()[0].src, 0);

  // With a padding id, the inputs pad with it too.
  TrainingData withPad = twoByHand(true, 1);
  mb = withPad.batch({0, 2});
  EXPECT_EQ(inputOf(mb, "tokens", &shape), (std::vector<int32_t>{2, 8, 9, 2, 1, 1}));
  EXPECT_EQ(inputOf(mb, "labels", &shape), (std::vector<int32_t>{8, 9, 3, 3, 1, 1}));
}

// Trainer.h: with pad < 0 the model has no padding id; labels pad with it,
// every input (src_tokens and tgt_tokens too) with 0.
TEST(TrainerDataTest, BatchPadsEncoderDecoderInputsWithZeroWithoutPadId) {
  const TrainingData d = twoByHand(false, -100);
  MicroBatch mb = d.batch({2, 0});
  std::vector<int64_t> shape;
  EXPECT_EQ(inputOf(mb, "src_tokens", &shape),
            (std::vector<int32_t>{7, 7, 7, 7, 7, 3, 5, 6, 7, 3, 0, 0}));
  EXPECT_EQ(inputOf(mb, "tgt_tokens", &shape), (std::vector<int32_t>{2, 0, 0, 2, 8, 9}));
  EXPECT_EQ(inputOf(mb, "labels", &shape), (std::vector<int32_t>{3, -100, -100, 8, 9, 3}));
}

//===----------------------------------------------------------------------===//
// The schedule and the micro-batch weights
//===----------------------------------------------------------------------===//

TEST(TrainerScheduleTest, LearningRateIsThePapersSchedule) {
  AdamOptions paper;  // factor 1, warmup 4000, d_model 512
  // 512^-0.5 · 1 · 4000^-1.5, 512^-0.5 · 4000^-0.5, 512^-0.5 · 16000^-0.5.
  EXPECT_NEAR(learningRate(paper, 1), 1.7469281074217108e-07, 1e-21);
  EXPECT_NEAR(learningRate(paper, 4000), 6.987712429686843e-04, 1e-17);
  EXPECT_NEAR(learningRate(paper, 16000), 3.4938562148434216e-04, 1e-17);
  // Rising linearly in warmup, falling as s^-0.5 after.
  EXPECT_NEAR(learningRate(paper, 2000), learningRate(paper, 4000) / 2, 1e-17);

  AdamOptions small;
  small.lrFactor = 2.0;
  small.dModel = 4;
  small.warmup = 4;
  // 2 · 4^-0.5 = 1, times min(s^-0.5, s / 8).
  EXPECT_DOUBLE_EQ(learningRate(small, 1), 0.125);
  EXPECT_DOUBLE_EQ(learningRate(small, 2), 0.25);
  EXPECT_DOUBLE_EQ(learningRate(small, 4), 0.5);
  EXPECT_DOUBLE_EQ(learningRate(small, 16), 0.25);
  EXPECT_DOUBLE_EQ(learningRate(small, 100), 0.1);
}

TEST(TrainerScheduleTest, MicroBatchWeightIsTheTokenShare) {
  auto batches = [](std::vector<int64_t> tokens) {
    std::vector<MicroBatch> out(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) out[i].tokens = tokens[i];
    return out;
  };
  EXPECT_EQ(microBatchWeight(batches({7}), 0), 1.0);
  EXPECT_EQ(microBatchWeight(batches({0}), 0), 1.0);  // the only one, without tokens
  const auto three = batches({2, 0, 6});
  EXPECT_EQ(microBatchWeight(three, 0), 0.25);
  EXPECT_EQ(microBatchWeight(three, 1), 0.0);
  EXPECT_EQ(microBatchWeight(three, 2), 0.75);
  const auto two = batches({3, 1});
  EXPECT_EQ(microBatchWeight(two, 0) + microBatchWeight(two, 1), 1.0);
  EXPECT_EQ(microBatchWeight(two, 1), 0.25);
}

//===----------------------------------------------------------------------===//
// Steps and epochs
//===----------------------------------------------------------------------===//

// The fake is a fair witness: another order, a skipped or a repeated batch
// ends in other weights.
TEST(TrainerTest, FakeStepWeightsDependOnBatchOrderAndContent) {
  const TrainingData data = makeData();
  const AdamOptions adam = baseOptions().adam;
  auto train = [&](const std::vector<std::vector<int32_t>>& plan) {
    FakeStep f;
    int64_t step = 0;
    for (const auto& rows : plan) EXPECT_TRUE(f.step({data.batch(rows)}, ++step, adam, kSeed, false).isOk());
    return f.w;
  };
  std::vector<std::vector<int32_t>> plan = epochPlan(data, baseOptions().batching, 0);
  ASSERT_GE(plan.size(), 3u);
  const std::vector<float> base = train(plan);
  auto swapped = plan;
  std::swap(swapped[0], swapped[1]);
  auto skipped = plan;
  skipped.erase(skipped.begin() + 1);
  auto repeated = plan;
  repeated[2] = repeated[1];
  // The rows of a batch of several in another order.
  auto rowsSwapped = plan;
  auto several = std::find_if(rowsSwapped.begin(), rowsSwapped.end(),
                              [](const std::vector<int32_t>& b) { return b.size() >= 2; });
  ASSERT_NE(several, rowsSwapped.end());
  std::reverse(several->begin(), several->end());
  for (const auto* other : {&swapped, &skipped, &repeated, &rowsSwapped})
    EXPECT_FALSE(sameBits(base, train(*other)));
  EXPECT_TRUE(sameBits(base, train(plan)));
}

// The data makes epochs of 5 to 10 batches; the tests below rely on it.
TEST(TrainerTest, TheTestDataHasSeveralBatchesPerEpoch) {
  const TrainingData data = makeData();
  for (int64_t e = 0; e < 4; ++e) {
    const size_t n = epochPlan(data, baseOptions().batching, e).size();
    EXPECT_GE(n, 5u) << "epoch " << e;
    EXPECT_LE(n, 10u) << "epoch " << e;
  }
}

TEST(TrainerTest, NoLimitTrainsOneEpoch) {
  const TrainingData data = makeData();
  FakeStep fake;
  TrainerOptions o = baseOptions();
  Trainer trainer(fake, data, o);
  ASSERT_TRUE(trainer.run().isOk());
  const auto plan = epochPlan(data, o.batching, 0);
  EXPECT_EQ(fake.seen.size(), plan.size());
  expectSaw(fake, data, plannedSteps(data, o));
  EXPECT_EQ(trainer.step(), static_cast<int64_t>(plan.size()));
  EXPECT_EQ(trainer.epoch(), 1);
  for (const SeenStep& s : fake.seen) {
    EXPECT_EQ(s.seed, kSeed);
    EXPECT_FALSE(s.wantGrads);
  }
}

TEST(TrainerTest, MaxStepsStopsMidEpochOrInALaterOne) {
  const TrainingData data = makeData();
  const int64_t p0 = static_cast<int64_t>(epochPlan(data, baseOptions().batching, 0).size());
  for (int64_t maxSteps : {int64_t{3}, p0, p0 + 3}) {
    SCOPED_TRACE("maxSteps " + std::to_string(maxSteps));
    FakeStep fake;
    TrainerOptions o = baseOptions();
    o.maxSteps = maxSteps;
    Trainer trainer(fake, data, o);
    ASSERT_TRUE(trainer.run().isOk());
    ASSERT_EQ(fake.seen.size(), static_cast<size_t>(maxSteps));
    expectSaw(fake, data, plannedSteps(data, o));
    EXPECT_EQ(trainer.step(), maxSteps);
    EXPECT_EQ(trainer.epoch(), maxSteps >= p0 ? 1 : 0);
  }
  // Steps of epoch 1 come from epoch 1's plan, which differs from epoch 0's.
  EXPECT_NE(epochPlan(data, baseOptions().batching, 0), epochPlan(data, baseOptions().batching, 1));
}

TEST(TrainerTest, MaxEpochsSeesEveryExampleOncePerEpoch) {
  const TrainingData data = makeData();
  FakeStep fake;
  TrainerOptions o = baseOptions();
  o.maxEpochs = 3;
  std::vector<int64_t> epochOfStep;
  TrainerCallbacks cb;
  cb.onStep = [&](const StepReport& r) { epochOfStep.push_back(r.epoch); };
  Trainer trainer(fake, data, o, cb);
  ASSERT_TRUE(trainer.run().isOk());
  int64_t total = 0;
  for (int64_t e = 0; e < 3; ++e) total += epochPlan(data, o.batching, e).size();
  ASSERT_EQ(static_cast<int64_t>(fake.seen.size()), total);
  expectSaw(fake, data, plannedSteps(data, o));
  ASSERT_EQ(epochOfStep.size(), fake.seen.size());
  for (int64_t e = 0; e < 3; ++e) {
    std::vector<int32_t> examples;
    for (size_t i = 0; i < fake.seen.size(); ++i)
      if (epochOfStep[i] == e)
        for (const SeenBatch& b : fake.seen[i].batches)
          examples.insert(examples.end(), b.examples.begin(), b.examples.end());
    std::sort(examples.begin(), examples.end());
    std::vector<int32_t> all(data.examples.size());
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(examples, all) << "epoch " << e;
  }
  EXPECT_EQ(trainer.epoch(), 3);
}

TEST(TrainerTest, AccumulateGroupsBatchesAndAnEpochsLastStepTakesTheRest) {
  const TrainingData data = makeData();
  TrainerOptions o = baseOptions();
  const int64_t p0 = static_cast<int64_t>(epochPlan(data, o.batching, 0).size()),
                p1 = static_cast<int64_t>(epochPlan(data, o.batching, 1).size());
  // An accumulation that does not divide epoch 0.
  int64_t k = 3;
  while (p0 % k == 0) ++k;
  o.accumulate = k;
  o.maxEpochs = 2;
  FakeStep fake;
  std::vector<StepReport> reports;
  TrainerCallbacks cb;
  cb.onStep = [&](const StepReport& r) { reports.push_back(r); };
  Trainer trainer(fake, data, o, cb);
  ASSERT_TRUE(trainer.run().isOk());
  const int64_t steps0 = (p0 + k - 1) / k, steps1 = (p1 + k - 1) / k;
  ASSERT_EQ(static_cast<int64_t>(fake.seen.size()), steps0 + steps1);
  expectSaw(fake, data, plannedSteps(data, o));
  // Full steps, then what is left of epoch 0; epoch 1 starts a new group.
  for (int64_t i = 0; i < steps0; ++i)
    EXPECT_EQ(static_cast<int64_t>(fake.seen[i].batches.size()), i + 1 < steps0 ? k : p0 % k);
  EXPECT_EQ(seenExamples(fake.seen[steps0])[0], epochPlan(data, o.batching, 1)[0]);
  // The step's tokens are its micro-batches' sum.
  ASSERT_EQ(reports.size(), fake.seen.size());
  for (size_t i = 0; i < reports.size(); ++i) {
    int64_t tokens = 0;
    for (const SeenBatch& b : fake.seen[i].batches) tokens += b.tokens;
    EXPECT_EQ(reports[i].tokens, tokens);
    EXPECT_EQ(reports[i].epoch, static_cast<int64_t>(i) < steps0 ? 0 : 1);
  }
  // Non-positive accumulation is 1.
  FakeStep one;
  o.accumulate = 0;
  o.maxEpochs = 1;
  Trainer t1(one, data, o);
  ASSERT_TRUE(t1.run().isOk());
  EXPECT_EQ(static_cast<int64_t>(one.seen.size()), p0);
}

TEST(TrainerTest, TimeLimitStops) {
  const TrainingData data = makeData();
  FakeStep fake;
  fake.sleep = std::chrono::milliseconds(5);
  TrainerOptions o = baseOptions();
  o.timeLimitMinutes = 0.2 / 60;  // 200 ms: some 40 steps of 5 ms, several epochs
  const auto t0 = std::chrono::steady_clock::now();
  o.started = std::chrono::steady_clock::now();
  Trainer trainer(fake, data, o);
  ASSERT_TRUE(trainer.run().isOk());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(fake.seen.size(), 1u);
  EXPECT_GE(seconds, 0.2);
  EXPECT_LT(seconds, 30.0);
  expectSaw(fake, data, std::vector<PlannedStep>(
                            [&] {
                              TrainerOptions bySteps = o;
                              bySteps.maxSteps = static_cast<int64_t>(fake.seen.size());
                              return plannedSteps(data, bySteps);
                            }()));
}

// With a time limit, the ETA is the time left, never negative: the step
// that crosses the limit reports 0 (-1 means no limit is set).
TEST(TrainerTest, TheEtaIsNeverNegativeUnderATimeLimit) {
  const TrainingData data = makeData();
  FakeStep fake;
  fake.sleep = std::chrono::milliseconds(300);  // one step outlasts the limit
  TrainerOptions o = baseOptions();
  o.timeLimitMinutes = 0.1 / 60;  // 100 ms
  o.started = std::chrono::steady_clock::now();
  std::vector<double> etas;
  TrainerCallbacks cb;
  cb.onStep = [&](const StepReport& r) { etas.push_back(r.etaSeconds); };
  Trainer trainer(fake, data, o, cb);
  ASSERT_TRUE(trainer.run().isOk());
  ASSERT_EQ(etas.size(), 1u);
  EXPECT_GE(etas[0], 0.0);
}

//===----------------------------------------------------------------------===//
// Callbacks
//===----------------------------------------------------------------------===//

TEST(TrainerTest, CallbacksOncePerStepAndPerEpoch) {
  const TrainingData data = makeData();
  for (bool bySteps : {true, false}) {
    SCOPED_TRACE(bySteps ? "maxSteps" : "maxEpochs");
    FakeStep fake;
    TrainerOptions o = baseOptions();
    const int64_t p0 = static_cast<int64_t>(epochPlan(data, o.batching, 0).size()),
                  p1 = static_cast<int64_t>(epochPlan(data, o.batching, 1).size());
    if (bySteps)
      o.maxSteps = p0 + p1 + 2;  // two epochs and two steps of the third
    else
      o.maxEpochs = 2;
    const int64_t total = bySteps ? p0 + p1 + 2 : p0 + p1;
    std::vector<StepReport> reports;
    std::vector<StepResult> results;
    int validations = 0;
    std::vector<std::pair<int64_t, int64_t>> validated;  // (epoch, step)
    std::vector<double> losses;
    TrainerCallbacks cb;
    cb.onStep = [&](const StepReport& r) {
      reports.push_back(r);
      ASSERT_NE(r.result, nullptr);
      results.push_back(*r.result);
    };
    cb.validate = [&]() -> StatusOr<Validation> {
      ++validations;
      Validation v;
      v.loss = 10.0 - validations;
      return v;
    };
    cb.onValidation = [&](int64_t epoch, int64_t step, const Validation& v) {
      validated.emplace_back(epoch, step);
      losses.push_back(v.loss);
    };
    Trainer trainer(fake, data, o, cb);
    ASSERT_TRUE(trainer.run().isOk());
    ASSERT_EQ(static_cast<int64_t>(reports.size()), total);
    ASSERT_EQ(fake.seen.size(), reports.size());
    for (int64_t i = 0; i < total; ++i) {
      const StepReport& r = reports[i];
      EXPECT_EQ(r.step, i + 1);
      EXPECT_EQ(r.epoch, i < p0 ? 0 : i < p0 + p1 ? 1 : 2);
      int64_t tokens = 0;
      for (const SeenBatch& b : fake.seen[i].batches) tokens += b.tokens;
      EXPECT_EQ(r.tokens, tokens);
      EXPECT_GT(r.tokens, 0);
      EXPECT_DOUBLE_EQ(results[i].lr, learningRate(o.adam, i + 1));
      EXPECT_GE(r.seconds, 0.0);
      EXPECT_GT(r.tokensPerSecond, 0.0);
      EXPECT_GE(r.etaSeconds, 0.0) << "step " << r.step;
    }
    if (bySteps) {
      EXPECT_EQ(reports.back().etaSeconds, 0.0);
    }
    // Validation once at each epoch's end, after its last step; the epoch
    // passed is the count of epochs done.
    EXPECT_EQ(validations, 2);
    EXPECT_EQ(validated, (std::vector<std::pair<int64_t, int64_t>>{{1, p0}, {2, p0 + p1}}));
    EXPECT_EQ(losses, (std::vector<double>{9.0, 8.0}));
  }
}

TEST(TrainerTest, FirstStepGradsAreAskedForOnStepOneOnly) {
  const TrainingData data = makeData();
  FakeStep fake;
  TrainerOptions o = baseOptions();
  o.maxSteps = 3;
  o.firstStepGrads = true;
  std::vector<size_t> grads;
  TrainerCallbacks cb;
  cb.onStep = [&](const StepReport& r) { grads.push_back(r.result->grads.size()); };
  Trainer trainer(fake, data, o, cb);
  ASSERT_TRUE(trainer.run().isOk());
  ASSERT_EQ(fake.seen.size(), 3u);
  EXPECT_TRUE(fake.seen[0].wantGrads);
  EXPECT_FALSE(fake.seen[1].wantGrads);
  EXPECT_FALSE(fake.seen[2].wantGrads);
  EXPECT_EQ(grads, (std::vector<size_t>{1, 0, 0}));
}

TEST(TrainerTest, AFailingValidationOrStepStopsTheRun) {
  const TrainingData data = makeData();
  FakeStep fake;
  TrainerOptions o = baseOptions();
  o.maxEpochs = 2;
  TrainerCallbacks cb;
  cb.validate = []() -> StatusOr<Validation> { return Status::error("validation broke"); };
  Trainer trainer(fake, data, o, cb);
  Status s = trainer.run();
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "validation broke");
  EXPECT_EQ(fake.seen.size(), epochPlan(data, o.batching, 0).size());

  struct FailingStep : FakeStep {
    StatusOr<StepResult> step(const std::vector<MicroBatch>& batches, int64_t step,
                              const AdamOptions& adam, uint64_t seed, bool wantGrads) override {
      if (step == 3) return Status::error("step 3 broke");
      return FakeStep::step(batches, step, adam, seed, wantGrads);
    }
  } failing;
  TempDir dir;
  o.checkpointDir = dir.path();
  int checkpoints = 0;
  TrainerCallbacks counting;
  counting.onCheckpoint = [&](const std::string&, int64_t) { ++checkpoints; };
  Trainer t2(failing, data, o, counting);
  s = t2.run();
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "step 3 broke");
  EXPECT_EQ(failing.seen.size(), 2u);
  EXPECT_EQ(checkpoints, 0);  // nothing saved after a failed step
}

TEST(TrainerTest, AStopHookEndsTheRunWithTheLastStepCheckpointed) {
  const TrainingData data = makeData();
  FakeStep fake;
  TrainerOptions o = baseOptions();
  o.maxEpochs = 3;
  TempDir dir;
  o.checkpointDir = dir.path();
  TrainerCallbacks cb;
  int64_t asked = 0;
  cb.stop = [&] { return ++asked == 3; };  // asked before steps 1, 2, 3
  Trainer trainer(fake, data, o, cb);
  Status s = trainer.run();
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "interrupted");
  EXPECT_EQ(fake.seen.size(), 2u);
  EXPECT_EQ(trainer.step(), 2);
  EXPECT_EQ(listCheckpoints(o.checkpointDir), std::vector<int64_t>{2});

  // Stopped before any step: nothing is written.
  TempDir empty;
  o.checkpointDir = empty.path();
  cb.stop = [] { return true; };
  FakeStep untouched;
  Trainer t2(untouched, data, o, cb);
  EXPECT_EQ(t2.run().message(), "interrupted");
  EXPECT_TRUE(untouched.seen.empty());
  EXPECT_TRUE(listCheckpoints(o.checkpointDir).empty());
}

//===----------------------------------------------------------------------===//
// Data parallelism
//===----------------------------------------------------------------------===//

// Records what a sharded step received; the weights move as FakeStep's do.
struct ShardedFake : FakeStep {
  struct Seen {
    std::vector<std::vector<SeenBatch>> shards;
    std::vector<int> mine;
  };
  std::vector<Seen> sharded;
  StatusOr<StepResult> shardedStep(const std::vector<std::vector<MicroBatch>>& shards,
                                   const std::vector<int>& mine, int64_t step,
                                   const AdamOptions& adam, uint64_t seed,
                                   ProcessGroup*) override {
    Seen s;
    s.mine = mine;
    std::vector<MicroBatch> all;
    for (const auto& shard : shards) {
      s.shards.emplace_back();
      for (const MicroBatch& mb : shard) {
        s.shards.back().push_back(mb.inputs.empty() ? SeenBatch{} : seenOf(mb));
        if (!mb.inputs.empty()) all.push_back(mb);
      }
    }
    sharded.push_back(std::move(s));
    return FakeStep::step(all, step, adam, seed, false);
  }
};

// A group of `size` ranks seen from `rank`, in one process: sums are the
// caller's values (no other rank adds any); `stopAt` makes any() true from
// that call on, as if another rank's clock ran out.
struct FakeGroup : ProcessGroup {
  int rank_ = 0, size_ = 2, calls = 0, stopAt = 0;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status sumInRankOrder(float*, size_t) override { return Status::ok(); }
  Status sumInRankOrder(double*, size_t) override { return Status::ok(); }
  StatusOr<bool> any(bool flag) override { return flag || (stopAt && ++calls >= stopAt); }
  Status barrier() override { return Status::ok(); }
};

TEST(TrainerShardsTest, EachBatchIsCutIntoContiguousShardsSomeEmpty) {
  const TrainingData data = makeData();
  TrainerOptions o = baseOptions();
  o.maxEpochs = 1;
  o.accumulate = 2;
  o.shards = 3;
  o.batching.maxRows = 4;  // batches of 1..4 rows: uneven thirds, empty ones
  ShardedFake fake;
  Trainer trainer(fake, data, o);
  ASSERT_TRUE(trainer.run().isOk());
  const std::vector<PlannedStep> planned = plannedSteps(data, o);
  ASSERT_EQ(fake.sharded.size(), planned.size());
  bool sawEmpty = false;
  for (size_t i = 0; i < planned.size(); ++i) {
    const auto& seen = fake.sharded[i];
    EXPECT_EQ(seen.mine, (std::vector<int>{0, 1, 2}));
    ASSERT_EQ(seen.shards.size(), 3u);
    for (size_t b = 0; b < planned[i].batches.size(); ++b) {
      // The shards of batch b, concatenated in shard order, are the batch.
      const std::vector<int32_t>& rows = planned[i].batches[b];
      std::vector<int32_t> joined;
      for (int s = 0; s < 3; ++s) {
        const SeenBatch& part = seen.shards[s][b];
        const size_t n = rows.size();
        EXPECT_EQ(part.examples.size(), n * (s + 1) / 3 - n * s / 3);
        sawEmpty |= part.examples.empty();
        joined.insert(joined.end(), part.examples.begin(), part.examples.end());
      }
      EXPECT_EQ(joined, rows) << "step " << i + 1 << " batch " << b;
    }
  }
  EXPECT_TRUE(sawEmpty);
  // A train step without shardedStep refuses a sharded run.
  FakeStep plain;
  Trainer refused(plain, data, o);
  Status s = refused.run();
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("sharded"), std::string::npos) << s.message();
}

TEST(TrainerShardsTest, ARankComputesItsShardAndOnlyRankZeroCheckpoints) {
  const TrainingData data = makeData();
  TrainerOptions o = baseOptions();
  o.maxEpochs = 2;
  o.shards = 2;
  for (int rank : {0, 1}) {
    TempDir dir;
    o.checkpointDir = dir.path();
    FakeGroup group;
    group.rank_ = rank;
    o.group = &group;
    ShardedFake fake;
    int validations = 0;
    TrainerCallbacks cb;
    cb.validate = [&]() -> StatusOr<Validation> {
      ++validations;
      return Validation{};
    };
    Trainer trainer(fake, data, o, cb);
    ASSERT_TRUE(trainer.run().isOk());
    for (const auto& seen : fake.sharded) EXPECT_EQ(seen.mine, std::vector<int>{rank});
    EXPECT_EQ(validations, rank == 0 ? 2 : 0);
    EXPECT_EQ(listCheckpoints(o.checkpointDir).empty(), rank != 0);
  }
  // Another rank's stop (its time limit) stops this one at the same step.
  FakeGroup group;
  group.stopAt = 4;  // asked before steps 1..4: stop before step 4
  o.group = &group;
  o.checkpointDir.clear();
  ShardedFake fake;
  Trainer trainer(fake, data, o);
  ASSERT_TRUE(trainer.run().isOk());
  EXPECT_EQ(trainer.step(), 3);
  // shards must be the group's size.
  o.shards = 3;
  Trainer wrong(fake, data, o);
  EXPECT_FALSE(wrong.run().isOk());
}

TEST(TrainerShardsTest, ShardSeedsDifferPerShardAndKeepShardZerosSeed) {
  EXPECT_EQ(shardSeed(kSeed, 0), kSeed);
  std::set<uint64_t> seeds;
  for (int s = 0; s < 64; ++s) seeds.insert(shardSeed(kSeed, s));
  EXPECT_EQ(seeds.size(), 64u);
  EXPECT_NE(shardSeed(kSeed, 1), shardSeed(kSeed + 1, 1));
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

// What the fake held when a checkpoint was reported.
struct Saved {
  std::vector<float> w, m, v;
  int64_t taken = 0;
};

TEST(TrainerTest, CheckpointsAtEpochEndsEverySaveEveryAndTheLastStep) {
  const TrainingData data = makeData();
  TrainerOptions o = baseOptions();
  const int64_t p0 = static_cast<int64_t>(epochPlan(data, o.batching, 0).size()),
                p1 = static_cast<int64_t>(epochPlan(data, o.batching, 1).size());
  o.saveEvery = 3;
  // Two epochs, and a last step that is neither an epoch's end nor a multiple of 3.
  o.maxSteps = p0 + p1 + 1;
  if (o.maxSteps % 3 == 0) ++o.maxSteps;
  TempDir dir;
  o.checkpointDir = dir.path();
  o.runInfo = JsonValue::object();
  o.runInfo.set("config", JsonValue::object({{"d_model", JsonValue(4)}}));
  o.runInfo.set("tokenizer", "spm.model");
  FakeStep fake;
  std::map<int64_t, Saved> saved;
  std::vector<double> validLosses;
  TrainerCallbacks cb;
  cb.validate = [&]() -> StatusOr<Validation> {
    Validation v;
    v.loss = validLosses.empty() ? 5.0 : 6.0;  // the first is the best
    validLosses.push_back(v.loss);
    return v;
  };
  cb.onCheckpoint = [&](const std::string& path, int64_t step) {
    EXPECT_EQ(path, joinPath(o.checkpointDir, checkpointName(step)));
    EXPECT_EQ(saved.count(step), 0u) << "saved twice: " << step;
    saved[step] = {fake.w, fake.m, fake.v, fake.taken};
  };
  Trainer trainer(fake, data, o, cb);
  ASSERT_TRUE(trainer.run().isOk());
  const std::vector<PlannedStep> planned = plannedSteps(data, o);
  ASSERT_EQ(static_cast<int64_t>(planned.size()), o.maxSteps);

  std::vector<int64_t> expected;
  for (int64_t s = 1; s <= o.maxSteps; ++s)
    if (planned[s - 1].epochEnd || s % o.saveEvery == 0 || s == o.maxSteps) expected.push_back(s);
  EXPECT_EQ(listCheckpoints(o.checkpointDir), expected);
  std::vector<int64_t> reported;
  for (const auto& [step, state] : saved) reported.push_back(step);
  EXPECT_EQ(reported, expected);
  // Nothing but the checkpoints in the run's directory.
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(o.checkpointDir)) (void)e, ++entries;
  EXPECT_EQ(entries, expected.size());

  for (int64_t s : expected) {
    SCOPED_TRACE("checkpoint " + std::to_string(s));
    const PlannedStep& at = planned[s - 1];
    const std::string path = joinPath(o.checkpointDir, checkpointName(s));
    Status ok = verifyDirectory(path);
    EXPECT_TRUE(ok.isOk()) << ok.message();
    EXPECT_TRUE(sameBits(readFloats(joinPath(path, kWeightsFile), "w"), saved[s].w));
    EXPECT_TRUE(sameBits(readFloats(joinPath(path, kOptimizerFile), "adam_m.w"), saved[s].m));
    EXPECT_TRUE(sameBits(readFloats(joinPath(path, kOptimizerFile), "adam_v.w"), saved[s].v));
    const JsonValue state = readState(path);
    EXPECT_EQ(intAt(state, "step"), s);
    // At an epoch's end the stream has moved to the next epoch's start.
    EXPECT_EQ(intAt(state, "epoch"), at.epochEnd ? at.epoch + 1 : at.epoch);
    EXPECT_EQ(intAt(state, "batch"), at.epochEnd ? 0 : at.position);
    EXPECT_EQ(intAt(state, "seed"), static_cast<int64_t>(kSeed));
    EXPECT_EQ(intAt(state, "train_steps"), saved[s].taken);
    EXPECT_EQ(saved[s].taken, s);
    ASSERT_NE(state.find("config"), nullptr);
    EXPECT_EQ(*state.find("config"), *o.runInfo.find("config"));
    ASSERT_NE(state.find("tokenizer"), nullptr);
    EXPECT_EQ(state.find("tokenizer")->asString(), "spm.model");
    // valid_loss at epoch ends only; best_valid_loss once there is one.
    const JsonValue* valid = state.find("valid_loss");
    if (s == p0) {
      ASSERT_NE(valid, nullptr);
      EXPECT_EQ(valid->asNumber(), 5.0);
    } else if (s == p0 + p1) {
      ASSERT_NE(valid, nullptr);
      EXPECT_EQ(valid->asNumber(), 6.0);
    } else {
      EXPECT_EQ(valid, nullptr);
    }
    const JsonValue* best = state.find("best_valid_loss");
    if (s < p0) {
      EXPECT_EQ(best, nullptr);
    } else {
      ASSERT_NE(best, nullptr);
      EXPECT_EQ(best->asNumber(), 5.0);
    }
  }
  EXPECT_EQ(validLosses.size(), 2u);
}

TEST(TrainerTest, NoCheckpointDirWritesNothing) {
  const TrainingData data = makeData();
  TempDir dir;
  FakeStep fake;
  TrainerOptions o = baseOptions();
  o.maxEpochs = 2;
  o.saveEvery = 1;
  int checkpoints = 0;
  TrainerCallbacks cb;
  cb.onCheckpoint = [&](const std::string&, int64_t) { ++checkpoints; };
  Trainer trainer(fake, data, o, cb);
  ASSERT_TRUE(trainer.run().isOk());
  EXPECT_EQ(checkpoints, 0);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(TrainerTest, KeepPrunesToTheLastNAndTheBestByValidationLoss) {
  const TrainingData data = makeData();
  TrainerOptions o = baseOptions();
  o.maxEpochs = 5;
  o.saveEvery = 2;
  o.keep = 2;
  TempDir dir;
  o.checkpointDir = dir.path();
  const std::vector<double> losses = {3.0, 1.0, 2.0, 2.5, 4.0};  // the best: epoch 2
  size_t calls = 0;
  std::vector<int64_t> all;
  TrainerCallbacks cb;
  cb.validate = [&]() -> StatusOr<Validation> {
    Validation v;
    v.loss = losses.at(calls++);
    return v;
  };
  cb.onCheckpoint = [&](const std::string&, int64_t step) {
    all.push_back(step);
    // Pruning follows each commit: at most keep + 1 before this one's.
    EXPECT_LE(listCheckpoints(o.checkpointDir).size(), static_cast<size_t>(o.keep) + 2);
  };
  FakeStep fake;
  Trainer trainer(fake, data, o, cb);
  ASSERT_TRUE(trainer.run().isOk());
  const std::vector<PlannedStep> planned = plannedSteps(data, o);
  int64_t bestStep = 0, epochsEnded = 0;
  for (size_t i = 0; i < planned.size(); ++i)
    if (planned[i].epochEnd && ++epochsEnded == 2) bestStep = static_cast<int64_t>(i) + 1;
  ASSERT_GT(bestStep, 0);
  ASSERT_GE(all.size(), 5u);
  const std::vector<int64_t> lastTwo(all.end() - 2, all.end());
  ASSERT_LT(bestStep, lastTwo[0]);  // an old one
  EXPECT_EQ(listCheckpoints(o.checkpointDir),
            (std::vector<int64_t>{bestStep, lastTwo[0], lastTwo[1]}));
  const JsonValue bestState = readState(joinPath(o.checkpointDir, checkpointName(bestStep)));
  ASSERT_NE(bestState.find("valid_loss"), nullptr);
  EXPECT_EQ(bestState.find("valid_loss")->asNumber(), 1.0);
  for (int64_t s : listCheckpoints(o.checkpointDir))
    EXPECT_TRUE(verifyDirectory(joinPath(o.checkpointDir, checkpointName(s))).isOk());
}

//===----------------------------------------------------------------------===//
// Resume
//===----------------------------------------------------------------------===//

// Run `straight` in one go in a directory, and `firstLeg` then `straight`
// resumed by a new Trainer and a fresh fake in another: the same weights,
// moments, steps seen and final checkpoint, bit for bit.
void expectResumeIsBitExact(const TrainerOptions& straight, const TrainerOptions& firstLeg,
                            bool validate) {
  const TrainingData data = makeData();
  // A validation loss that is a function of the weights: the same in both runs.
  auto callbacks = [&](FakeStep& f) {
    TrainerCallbacks cb;
    if (validate)
      cb.validate = [&f]() -> StatusOr<Validation> {
        Validation v;
        v.loss = std::fabs(f.w[0]) + std::fabs(f.w[1]);
        return v;
      };
    return cb;
  };
  TempDir a, b;
  FakeStep fakeA;
  TrainerOptions oa = straight;
  oa.checkpointDir = a.path();
  Trainer ta(fakeA, data, oa, callbacks(fakeA));
  ASSERT_TRUE(ta.run().isOk());

  FakeStep fakeB1;
  TrainerOptions ob1 = firstLeg;
  ob1.checkpointDir = b.path();
  {
    Trainer tb1(fakeB1, data, ob1, callbacks(fakeB1));
    ASSERT_TRUE(tb1.run().isOk());
  }
  const int64_t firstSteps = static_cast<int64_t>(fakeB1.seen.size());
  ASSERT_GT(firstSteps, 0);
  ASSERT_LT(firstSteps, static_cast<int64_t>(fakeA.seen.size()));
  // The first leg is the start of the straight run.
  for (int64_t i = 0; i < firstSteps; ++i) EXPECT_EQ(fakeB1.seen[i], fakeA.seen[i]);

  FakeStep fakeB2;  // fresh: its state comes from the checkpoint only
  TrainerOptions ob2 = straight;
  ob2.checkpointDir = b.path();
  Trainer tb2(fakeB2, data, ob2, callbacks(fakeB2));
  StatusOr<ResumePoint> point = tb2.resume();
  ASSERT_TRUE(point.isOk()) << point.status().message();
  EXPECT_EQ(point->checkpoint, joinPath(b.path(), checkpointName(firstSteps)));
  EXPECT_EQ(point->step, firstSteps);
  EXPECT_EQ(point->epoch, tb2.epoch());
  EXPECT_TRUE(point->skipped.empty());
  EXPECT_EQ(tb2.step(), firstSteps);
  EXPECT_EQ(fakeB2.restores, 1);
  expectSameState(fakeB2, fakeB1);
  ASSERT_TRUE(tb2.run().isOk());

  expectSameState(fakeB2, fakeA);
  ASSERT_EQ(fakeB2.seen.size(), fakeA.seen.size() - firstSteps);
  for (size_t i = 0; i < fakeB2.seen.size(); ++i)
    EXPECT_EQ(fakeB2.seen[i], fakeA.seen[firstSteps + i]);
  EXPECT_EQ(tb2.step(), ta.step());
  EXPECT_EQ(tb2.epoch(), ta.epoch());
  const std::string last = checkpointName(ta.step());
  for (const char* file : {kWeightsFile, kOptimizerFile, kStateFile})
    EXPECT_EQ(readFile(joinPath(joinPath(a.path(), last), file)),
              readFile(joinPath(joinPath(b.path(), last), file)))
        << file;
}

TEST(TrainerTest, ResumeMidEpochIsBitExact) {
  const TrainingData data = makeData();
  TrainerOptions straight = baseOptions();
  straight.maxSteps = 13;
  // 4 is mid epoch 0; 13 is in epoch 1.
  ASSERT_GT(epochPlan(data, straight.batching, 0).size(), 4u);
  ASSERT_LT(epochPlan(data, straight.batching, 0).size(), 13u);
  TrainerOptions firstLeg = straight;
  firstLeg.maxSteps = 4;
  expectResumeIsBitExact(straight, firstLeg, /*validate=*/false);
}

TEST(TrainerTest, ResumeAtAnEpochEndWithAccumulationAndValidationIsBitExact) {
  TrainerOptions straight = baseOptions();
  straight.accumulate = 2;
  straight.maxEpochs = 3;
  straight.saveEvery = 2;
  TrainerOptions firstLeg = straight;
  firstLeg.maxEpochs = 1;
  expectResumeIsBitExact(straight, firstLeg, /*validate=*/true);
}

TEST(TrainerTest, ResumeRejectsAnotherSeed) {
  const TrainingData data = makeData();
  TempDir dir;
  TrainerOptions o = baseOptions();
  o.maxSteps = 2;
  o.checkpointDir = dir.path();
  FakeStep first;
  {
    Trainer t(first, data, o);
    ASSERT_TRUE(t.run().isOk());
  }
  o.seed = 12;
  FakeStep fake;
  Trainer t(fake, data, o);
  StatusOr<ResumePoint> point = t.resume();
  ASSERT_FALSE(point.isOk());
  const std::string& message = point.status().message();
  EXPECT_NE(message.find("--seed 12"), std::string::npos) << message;
  EXPECT_NE(message.find("seed in " + joinPath(joinPath(dir.path(), checkpointName(2)), kStateFile)),
            std::string::npos)
      << message;
  EXPECT_EQ(fake.restores, 0);
  EXPECT_EQ(t.step(), 0);
}

// state.json holds the seed as a JSON integer (up to 2^63 - 1): a larger
// seed is refused before the first step, naming it, so that every run that
// checkpoints can be resumed.
TEST(TrainerTest, ASeedAboveInt64MaxIsRefusedOrResumes) {
  const TrainingData data = makeData();
  TempDir dir;
  TrainerOptions o = baseOptions();
  o.seed = o.batching.seed = (uint64_t{1} << 63) + 5;
  o.maxSteps = 2;
  o.checkpointDir = dir.path();
  FakeStep first;
  {
    Trainer t(first, data, o);
    Status s = t.run();
    if (!s.isOk()) {
      EXPECT_NE(s.message().find("seed"), std::string::npos) << s.message();
      EXPECT_TRUE(first.seen.empty()) << "refused after training";
      return;
    }
  }
  FakeStep fake;
  Trainer t(fake, data, o);
  StatusOr<ResumePoint> point = t.resume();
  ASSERT_TRUE(point.isOk()) << point.status().message();
  EXPECT_EQ(point->step, 2);
  expectSameState(fake, first);
}

TEST(TrainerTest, ResumeFromAnEmptyOrMissingDirectoryStartsAfresh) {
  const TrainingData data = makeData();
  TempDir dir;
  for (const std::string& path : {dir.path(), dir.file("missing")}) {
    SCOPED_TRACE(path);
    TrainerOptions o = baseOptions();
    o.maxSteps = 3;
    o.checkpointDir = path;
    FakeStep fake;
    Trainer t(fake, data, o);
    StatusOr<ResumePoint> point = t.resume();
    ASSERT_TRUE(point.isOk()) << point.status().message();
    EXPECT_TRUE(point->checkpoint.empty());
    EXPECT_EQ(point->step, 0);
    EXPECT_EQ(point->epoch, 0);
    EXPECT_TRUE(point->skipped.empty());
    EXPECT_EQ(fake.restores, 0);
    EXPECT_EQ(t.step(), 0);
  }
  // Then the run starts from step 1.
  TrainerOptions o = baseOptions();
  o.maxSteps = 3;
  o.checkpointDir = dir.path();
  FakeStep fake;
  Trainer t(fake, data, o);
  ASSERT_TRUE(t.resume().isOk());
  ASSERT_TRUE(t.run().isOk());
  expectSaw(fake, data, plannedSteps(data, o));
  EXPECT_EQ(listCheckpoints(dir.path()), std::vector<int64_t>{3});
}

TEST(TrainerTest, ResumeSkipsATornNewestCheckpoint) {
  const TrainingData data = makeData();
  TrainerOptions straight = baseOptions();
  straight.maxSteps = 10;
  FakeStep reference;
  {
    Trainer t(reference, data, straight);
    ASSERT_TRUE(t.run().isOk());
  }

  TempDir dir;
  TrainerOptions o = baseOptions();
  o.maxSteps = 6;
  o.saveEvery = 3;
  o.checkpointDir = dir.path();
  FakeStep first;
  {
    Trainer t(first, data, o);
    ASSERT_TRUE(t.run().isOk());
  }
  std::vector<int64_t> steps = listCheckpoints(dir.path());
  ASSERT_GE(steps.size(), 2u);
  ASSERT_EQ(steps.back(), 6);
  const int64_t previous = steps[steps.size() - 2];
  const std::string weights = joinPath(dir.file(checkpointName(6)), kWeightsFile);
  std::filesystem::resize_file(weights, std::filesystem::file_size(weights) / 2);

  straight.checkpointDir = dir.path();
  straight.saveEvery = 3;
  FakeStep fake;
  Trainer t(fake, data, straight);
  StatusOr<ResumePoint> point = t.resume();
  ASSERT_TRUE(point.isOk()) << point.status().message();
  EXPECT_EQ(point->step, previous);
  EXPECT_EQ(point->checkpoint, dir.file(checkpointName(previous)));
  ASSERT_EQ(point->skipped.size(), 1u);
  EXPECT_NE(point->skipped[0].find(checkpointName(6)), std::string::npos) << point->skipped[0];
  EXPECT_NE(point->skipped[0].find(kWeightsFile), std::string::npos) << point->skipped[0];
  ASSERT_TRUE(t.run().isOk());
  expectSameState(fake, reference);
  ASSERT_EQ(fake.seen.size(), static_cast<size_t>(10 - previous));
  for (size_t i = 0; i < fake.seen.size(); ++i)
    EXPECT_EQ(fake.seen[i], reference.seen[previous + i]);
  // The torn one was written again, whole.
  EXPECT_TRUE(verifyDirectory(dir.file(checkpointName(6))).isOk());
}

// A run resumed after it reached its limit takes no step and leaves its
// checkpoints as they are: the newest keeps its valid_loss, so `keep` still
// knows the best.
TEST(TrainerTest, ResumingAFinishedRunKeepsItsBestCheckpoint) {
  const TrainingData data = makeData();
  TempDir dir;
  TrainerOptions o = baseOptions();
  o.maxEpochs = 2;
  o.keep = 1;
  o.checkpointDir = dir.path();
  const std::vector<double> losses = {2.0, 1.0, 3.0, 4.0};  // the best: epoch 2
  size_t calls = 0;
  int checkpoints = 0;
  auto callbacks = [&] {
    TrainerCallbacks cb;
    cb.validate = [&]() -> StatusOr<Validation> {
      Validation v;
      v.loss = losses.at(calls++);
      return v;
    };
    cb.onCheckpoint = [&](const std::string&, int64_t) { ++checkpoints; };
    return cb;
  };
  FakeStep f1;
  Trainer t1(f1, data, o, callbacks());
  ASSERT_TRUE(t1.run().isOk());
  const int64_t best = t1.step();
  ASSERT_EQ(listCheckpoints(dir.path()), std::vector<int64_t>{best});

  // The same run again: nothing to do.
  FakeStep f2;
  Trainer t2(f2, data, o, callbacks());
  ASSERT_TRUE(t2.resume().isOk());
  checkpoints = 0;
  ASSERT_TRUE(t2.run().isOk());
  EXPECT_TRUE(f2.seen.empty());
  EXPECT_EQ(checkpoints, 0) << "a run without a step wrote a checkpoint";
  const JsonValue bestState = readState(dir.file(checkpointName(best)));
  const JsonValue* valid = bestState.find("valid_loss");
  ASSERT_NE(valid, nullptr) << "the best checkpoint lost its valid_loss";
  EXPECT_EQ(valid->asNumber(), 1.0);

  // Two more epochs (losses 3 and 4): the best one stays.
  o.maxEpochs = 4;
  FakeStep f3;
  Trainer t3(f3, data, o, callbacks());
  ASSERT_TRUE(t3.resume().isOk());
  ASSERT_TRUE(t3.run().isOk());
  EXPECT_EQ(listCheckpoints(dir.path()), (std::vector<int64_t>{best, t3.step()}));
}

}  // namespace
}  // namespace transfuse::rt
