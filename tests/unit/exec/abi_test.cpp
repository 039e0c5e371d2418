// The C ABI of model.h (runtime/exec/ModelAbi.cpp) through the host loader
// (runtime/host/CompiledModel), on the hand-written model of fake_model.cpp
// built as a shared library: weights (random and from a file), the prepare
// step and packing, input validation, errors from a run, concurrent runs, and
// the refusal of unknown ABI versions and missing libraries.

#include "runtime/Safetensors.h"
#include "runtime/WeightBinding.h"
#include "runtime/host/CompiledModel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <unistd.h>

namespace transfuse::rt {
namespace {

const std::string kModel = TRANSFUSE_FAKE_MODEL;
const std::string kV999 = TRANSFUSE_FAKE_ABI_V999;
const std::string kV1 = TRANSFUSE_FAKE_ABI_V1;
const std::string kV3 = TRANSFUSE_FAKE_ABI_V3;
const std::string kCurrentOnly = TRANSFUSE_FAKE_ABI_CURRENT_ONLY;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The params of fake_model.cpp that are weights (prepared.0 is not).
std::vector<ParamSpec> fakeParamSpecs() {
  ParamSpec w{"w", {4, 3}, InitKind::XavierUniform, 3, 4, false};
  ParamSpec b{"b", {3}, InitKind::Zeros, 0, 0, true};
  return {w, b};
}

Tensor f32(std::vector<int64_t> shape, const std::vector<float>& values) {
  Tensor t = Tensor::zeros(DType::F32, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.numElements()), values.size());
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

Tensor i32(std::vector<int64_t> shape, const std::vector<int32_t>& values) {
  Tensor t = Tensor::zeros(DType::I32, std::move(shape));
  std::copy(values.begin(), values.end(), t.data<int32_t>());
  return t;
}

// x [batch, 4] with distinct values, ids 0..batch-1.
std::map<std::string, Tensor> goodInputs(int64_t batch) {
  std::vector<float> x(batch * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i) - 1.5f;
  std::vector<int32_t> ids(batch);
  for (int64_t i = 0; i < batch; ++i) ids[i] = static_cast<int32_t>(i);
  std::map<std::string, Tensor> in;
  in["x"] = f32({batch, 4}, x);
  in["ids"] = i32({batch}, ids);
  return in;
}

// y = x · w + b in double.
void expectForward(const std::map<std::string, Tensor>& in, const Tensor& w, const Tensor& b,
                   const Tensor& y) {
  const Tensor& x = in.at("x");
  int64_t batch = x.shape[0];
  ASSERT_EQ(y.dtype, DType::F32);
  ASSERT_EQ(y.shape, (std::vector<int64_t>{batch, 3}));
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t n = 0; n < 3; ++n) {
      double acc = b.data<float>()[n];
      for (int64_t k = 0; k < 4; ++k)
        acc += double(x.data<float>()[i * 4 + k]) * w.data<float>()[k * 3 + n];
      EXPECT_NEAR(y.data<float>()[i * 3 + n], acc, 1e-5 * (1 + std::fabs(acc)))
          << "y[" << i << ", " << n << "]";
    }
}

std::unique_ptr<CompiledModel> loadOrDie(const LoadOptions& opt) {
  auto m = CompiledModel::load(kModel, opt);
  EXPECT_TRUE(m.isOk()) << m.status().message();
  return m.isOk() ? std::move(*m) : nullptr;
}

TEST(ModelAbi, RandomWeightsMatchTheReference) {
  LoadOptions opt;
  opt.seed = 1234;
  opt.threads = 2;
  auto m = loadOrDie(opt);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->entryPoints(), (std::vector<std::string>{"forward", "step"}));
  EXPECT_EQ(m->fusion(), "all");
  EXPECT_EQ(m->threads(), 2);
  EXPECT_EQ(m->arenaBytes("forward"), 8 * 4 * 4);
  EXPECT_EQ(m->kernelCalls("forward"), 1);
  EXPECT_EQ(m->arenaBytes("nope"), -1);

  auto ins = m->inputs("forward");
  ASSERT_TRUE(ins.isOk()) << ins.status().message();
  ASSERT_EQ(ins->size(), 2u);
  EXPECT_EQ((*ins)[0].name, "x");
  EXPECT_EQ((*ins)[0].dtype, DType::F32);
  EXPECT_EQ((*ins)[0].shape, (std::vector<int64_t>{-1, 4}));
  EXPECT_EQ((*ins)[0].maxShape, (std::vector<int64_t>{8, 4}));
  EXPECT_EQ((*ins)[1].name, "ids");
  EXPECT_EQ((*ins)[1].dtype, DType::I32);
  auto outs = m->outputs("forward");
  ASSERT_TRUE(outs.isOk());
  ASSERT_EQ(outs->size(), 1u);
  EXPECT_EQ((*outs)[0].name, "y");
  EXPECT_EQ((*outs)[0].shape, (std::vector<int64_t>{-1, 3}));

  auto weights = *randomWeights(fakeParamSpecs(), 1234);
  for (int64_t batch : {1, 3, 8}) {
    auto in = goodInputs(batch);
    auto flops = m->flops("forward", in);
    ASSERT_TRUE(flops.isOk()) << flops.status().message();
    EXPECT_EQ(*flops, 2.0 * batch * 4 * 3);
    auto out = m->run("forward", in);
    ASSERT_TRUE(out.isOk()) << out.status().message();
    ASSERT_EQ(out->size(), 1u);
    expectForward(in, weights.at("w"), weights.at("b"), out->at("y"));
  }

  // Another seed gives other weights.
  opt.seed = 99;
  auto other = loadOrDie(opt);
  ASSERT_TRUE(other);
  auto in = goodInputs(2);
  auto a = m->run("forward", in), b = other->run("forward", in);
  ASSERT_TRUE(a.isOk() && b.isOk());
  EXPECT_NE(a->at("y").bytes, b->at("y").bytes);
}

class TempDir {
public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "transfuse_abi_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

TEST(ModelAbi, WeightsFromAFileWithPrefixAliasAndIgnoredBuffer) {
  TempDir dir;
  Tensor w = f32({4, 3}, {0.5f, -1, 2, 0.25f, 3, -0.5f, 1, 1, 1, -2, 0.75f, 0});
  Tensor b = f32({3}, {0.5f, -0.25f, 4});
  Tensor mask = i32({2}, {1, 0});
  std::string path = dir.file("weights.safetensors");
  ASSERT_TRUE(writeSafetensors(path, {{"model.w", &w}, {"bias", &b}, {"layer.mask", &mask}}));
  LoadOptions opt;
  opt.weightsPath = path;
  opt.threads = 1;
  auto m = loadOrDie(opt);
  ASSERT_TRUE(m);
  auto in = goodInputs(5);
  auto out = m->run("forward", in);
  ASSERT_TRUE(out.isOk()) << out.status().message();
  expectForward(in, w, b, out->at("y"));

  // b is optional: zeros when absent.
  std::string onlyW = dir.file("only_w.safetensors");
  ASSERT_TRUE(writeSafetensors(onlyW, {{"w", &w}}));
  opt.weightsPath = onlyW;
  m = loadOrDie(opt);
  ASSERT_TRUE(m);
  out = m->run("forward", in);
  ASSERT_TRUE(out.isOk()) << out.status().message();
  expectForward(in, w, Tensor::zeros(DType::F32, {3}), out->at("y"));

  // w is not: an error naming the file and the tensor.
  std::string onlyB = dir.file("only_b.safetensors");
  ASSERT_TRUE(writeSafetensors(onlyB, {{"b", &b}}));
  opt.weightsPath = onlyB;
  auto bad = CompiledModel::load(kModel, opt);
  ASSERT_FALSE(bad.isOk());
  EXPECT_TRUE(contains(bad.status().message(), "missing tensor 'w'")) << bad.status().message();
  EXPECT_TRUE(contains(bad.status().message(), onlyB)) << bad.status().message();

  opt.weightsPath = dir.file("absent.safetensors");
  bad = CompiledModel::load(kModel, opt);
  ASSERT_FALSE(bad.isOk());
  EXPECT_TRUE(contains(bad.status().message(), "absent.safetensors")) << bad.status().message();
}

TEST(ModelAbi, BadInputsAreRefusedByNameAndTheModelStaysUsable) {
  LoadOptions opt;
  opt.seed = 5;
  opt.threads = 2;
  auto m = loadOrDie(opt);
  ASSERT_TRUE(m);
  auto weights = *randomWeights(fakeParamSpecs(), 5);

  struct Case {
    const char* what;
    std::map<std::string, Tensor> inputs;
    std::string expected;
  };
  std::vector<Case> cases;
  {
    auto in = goodInputs(3);
    in["z"] = f32({1}, {0});
    cases.push_back({"unknown name", in, "input 'z' is not an input of the model"});
  }
  {
    auto in = goodInputs(3);
    in.erase("ids");
    cases.push_back({"missing name", in, "missing input 'ids'"});
  }
  {
    auto in = goodInputs(3);
    in["x"] = Tensor::zeros(DType::F64, {3, 4});
    cases.push_back({"wrong dtype", in, "input 'x' has dtype F64, expected F32"});
  }
  {
    auto in = goodInputs(3);
    in["x"] = Tensor::zeros(DType::F32, {3, 4, 1});
    cases.push_back({"wrong rank", in, "input 'x' has rank 3"});
  }
  {
    auto in = goodInputs(3);
    in["x"] = Tensor::zeros(DType::F32, {3, 5});
    cases.push_back({"wrong static dim", in, "input 'x' has size 5 in dimension 1, expected 4"});
  }
  {
    auto in = goodInputs(8);
    in["x"] = Tensor::zeros(DType::F32, {9, 4});
    cases.push_back(
        {"over the maximum", in, "input 'x' has size 9 in dimension 0, outside [1, 8]"});
  }
  {
    auto in = goodInputs(3);
    in["ids"] = i32({2}, {0, 1});
    cases.push_back({"batch mismatch", in, "inputs 'x' and 'ids' have different batch sizes"});
  }
  {
    auto in = goodInputs(3);
    in["ids"] = i32({3}, {0, -1, 2});
    cases.push_back({"negative id (from run)", in, "input 'ids': token id -1 at position 1"});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto out = m->run("forward", c.inputs);
    ASSERT_FALSE(out.isOk());
    EXPECT_TRUE(contains(out.status().message(), c.expected)) << out.status().message();
    if (std::string(c.what) != "negative id (from run)") {
      auto flops = m->flops("forward", c.inputs);
      ASSERT_FALSE(flops.isOk());
      EXPECT_TRUE(contains(flops.status().message(), c.expected)) << flops.status().message();
    }
    // Still usable.
    auto in = goodInputs(4);
    auto good = m->run("forward", in);
    ASSERT_TRUE(good.isOk()) << good.status().message();
    expectForward(in, weights.at("w"), weights.at("b"), good->at("y"));
  }

  auto out = m->run("backward", goodInputs(1));
  ASSERT_FALSE(out.isOk());
  EXPECT_TRUE(contains(out.status().message(), "no entry point 'backward'"))
      << out.status().message();
  EXPECT_FALSE(m->inputs("backward").isOk());
}

TEST(ModelAbi, ConcurrentRunsGiveIdenticalOutputs) {
  LoadOptions opt;
  opt.seed = 77;
  opt.threads = 2;
  auto m = loadOrDie(opt);
  ASSERT_TRUE(m);
  // Each thread its own batch size, against a single-threaded baseline.
  std::vector<std::map<std::string, Tensor>> inputs;
  std::vector<Tensor> expected;
  for (int t = 0; t < 4; ++t) {
    inputs.push_back(goodInputs(t + 5));
    auto out = m->run("forward", inputs.back());
    ASSERT_TRUE(out.isOk()) << out.status().message();
    expected.push_back(out->at("y"));
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        auto out = m->run("forward", inputs[t]);
        if (!out.isOk() || out->at("y").bytes != expected[t].bytes) ++mismatches[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

// ABI 2 state through the loader: steps accumulate per state, reorder and
// copy act inside the states, and misuse is an error naming the entry.
TEST(ModelAbi, StatesThroughTheLoader) {
  auto m = CompiledModel::load(kModel, {});
  ASSERT_TRUE(m.isOk()) << m.status().message();
  std::vector<TensorSpec> states = (*m)->states();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].name, "acc");
  EXPECT_EQ(states[0].maxShape, (std::vector<int64_t>{8, 4, 3}));
  auto a = (*m)->createState(), b = (*m)->createState();
  ASSERT_TRUE(a.isOk() && b.isOk());
  Tensor x = Tensor::zeros(DType::F32, {2, 3});
  for (int i = 0; i < 6; ++i) x.data<float>()[i] = float(i + 1);
  std::map<std::string, Tensor> in{{"x", x}};
  auto y1 = (*m)->run("step", in, a->get());
  ASSERT_TRUE(y1.isOk()) << y1.status().message();
  auto y2 = (*m)->run("step", in, a->get());
  ASSERT_TRUE(y2.isOk());
  EXPECT_EQ((*a)->length(), 2);
  EXPECT_EQ(y2->at("y").data<float>()[5], 12.0f);  // 6 + 6
  ASSERT_TRUE((*b)->copyFrom(**a).isOk());
  EXPECT_EQ((*b)->length(), 2);
  ASSERT_TRUE((*a)->reorder({1, 0}).isOk());
  auto y3 = (*m)->run("step", in, a->get());
  ASSERT_TRUE(y3.isOk());
  EXPECT_EQ(y3->at("y").data<float>()[0], 4.0f * 2 + 1);  // row 0 now holds row 1's history
  EXPECT_FALSE((*a)->reorder({9}).isOk());
  ASSERT_TRUE((*a)->reset().isOk());
  EXPECT_EQ((*a)->length(), 0);
  auto noState = (*m)->run("step", in);
  ASSERT_FALSE(noState.isOk());
  EXPECT_NE(noState.status().message().find("entry point 'step' reads and writes state"),
            std::string::npos)
      << noState.status().message();
}

// Reordering is a gather of rows: row i takes the old row rows[i] (repeats,
// cycles, chains, fewer rows than the state holds), whatever order the
// copies happen in; rows from num_rows on are untouched.
TEST(ModelAbi, ReorderIsAGatherOfRows) {
  auto m = CompiledModel::load(kModel, {});
  ASSERT_TRUE(m.isOk()) << m.status().message();
  auto state = (*m)->createState();
  ASSERT_TRUE(state.isOk());
  const std::vector<std::vector<int32_t>> cases = {
      {1, 2, 3, 4, 5, 6, 7, 0}, {0, 0, 0, 0, 0, 0, 0, 0}, {7, 6, 5, 4, 3, 2, 1, 0},
      {1, 0, 2, 3, 5, 4, 7, 6}, {2, 2, 1}, {5, 7}, {0, 1, 2, 3}, {3, 3, 0, 0, 6, 1, 1, 2}};
  for (const auto &rows : cases) {
    ASSERT_TRUE((*state)->reset().isOk());
    Tensor x = Tensor::zeros(DType::F32, {8, 3});
    for (int r = 0; r < 8; ++r)
      for (int k = 0; k < 3; ++k) x.data<float>()[r * 3 + k] = float(10 * r + k);
    ASSERT_TRUE((*m)->run("step", {{"x", x}}, state->get()).isOk());
    ASSERT_TRUE((*state)->reorder(rows).isOk());
    // A step of zeros reads each row's history back: y[r] = its old row.
    auto y = (*m)->run("step", {{"x", Tensor::zeros(DType::F32, {8, 3})}}, state->get());
    ASSERT_TRUE(y.isOk());
    for (int r = 0; r < 8; ++r) {
      int from = r < (int)rows.size() ? rows[r] : r;
      for (int k = 0; k < 3; ++k)
        EXPECT_EQ(y->at("y").data<float>()[r * 3 + k], float(10 * from + k))
            << "row " << r << " of case " << ::testing::PrintToString(rows);
    }
  }
}

// Reorder skips rows whose source holds the same data (equal row ids), but
// a row written since has a fresh id: copies made before a write are not
// mistaken for it, nor the row written for its old copies.
TEST(ModelAbi, ReorderAfterPartialWritesCopiesWhatChanged) {
  auto m = CompiledModel::load(kModel, {});
  ASSERT_TRUE(m.isOk()) << m.status().message();
  auto state = (*m)->createState();
  ASSERT_TRUE(state.isOk());
  auto step = [&](int rows, float base) {
    Tensor x = Tensor::zeros(DType::F32, {rows, 3});
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < 3; ++k) x.data<float>()[r * 3 + k] = base + float(10 * r + k);
    return (*m)->run("step", {{"x", x}}, state->get());
  };
  ASSERT_TRUE(step(2, 0).isOk());                   // rows 0, 1: 0.., 10..
  ASSERT_TRUE((*state)->reorder({0, 0}).isOk());    // both hold row 0
  ASSERT_TRUE((*state)->reorder({1, 0}).isOk());    // equal rows: nothing moves
  ASSERT_TRUE(step(1, 100).isOk());                 // row 0 alone: += 100..
  ASSERT_TRUE((*state)->reorder({1, 0, 0}).isOk()); // row 0 <- 1, rows 1, 2 <- 0
  auto y = step(3, 0);  // the history of each row plus 10·r + k, at position 2
  ASSERT_TRUE(y.isOk()) << y.status().message();
  const float* out = y->at("y").data<float>();
  for (int k = 0; k < 3; ++k) {
    // row 0: old row 1 (a copy of row 0: k, and 0 at position 1 as it was
    // not written) + 0 + k; rows 1, 2: old row 0 (k, 100 + k) + 10·r + k.
    EXPECT_EQ(out[0 * 3 + k], float(k) + 0 + float(k)) << k;
    EXPECT_EQ(out[1 * 3 + k], float(k) + float(100 + k) + float(10 + k)) << k;
    EXPECT_EQ(out[2 * 3 + k], float(k) + float(100 + k) + float(20 + k)) << k;
  }
}

TEST(ModelAbi, UnknownAbiVersionIsRefused) {
  auto m = CompiledModel::load(kV999, {});
  ASSERT_FALSE(m.isOk());
  EXPECT_EQ(m.status().message(),
            "artifact '" + kV999 + "' has ABI version 999; this runtime reads version 5");
}

// An artifact compiled before state existed (ABI 1) is refused, named.
TEST(ModelAbi, AbiOneArtifactIsRefused) {
  auto m = CompiledModel::load(kV1, {});
  ASSERT_FALSE(m.isOk());
  EXPECT_EQ(m.status().message(),
            "artifact '" + kV1 + "' has ABI version 1; this runtime reads version 5");
}

// An artifact compiled before sharded weights (ABI 3) is refused, named.
TEST(ModelAbi, AbiThreeArtifactIsRefused) {
  auto m = CompiledModel::load(kV3, {});
  ASSERT_FALSE(m.isOk());
  EXPECT_EQ(m.status().message(),
            "artifact '" + kV3 + "' has ABI version 3; this runtime reads version 5");
}

TEST(ModelAbi, MissingSymbolIsNamed) {
  auto m = CompiledModel::load(kCurrentOnly, {});
  ASSERT_FALSE(m.isOk());
  EXPECT_EQ(m.status().message(), "artifact '" + kCurrentOnly +
                                      "' does not export symbol 'tf_model_create' of the "
                                      "model.h ABI");
}

TEST(ModelAbi, MissingLibraryIsNamed) {
  const std::string path = "/nonexistent/dir/libmodel.so";
  auto m = CompiledModel::load(path, {});
  ASSERT_FALSE(m.isOk());
  EXPECT_TRUE(contains(m.status().message(), "'" + path + "'")) << m.status().message();
}

}  // namespace
}  // namespace transfuse::rt

namespace transfuse::rt {
namespace {

// Parameters (ABI 2): listed weights then Adam's moments, read and written
// by name; a written weight reaches the next run through prepare and the
// GEMM packing (prepared.0 = wᵀ is packed); bad names, roles and sizes are
// errors naming them, and write nothing.
TEST(ModelAbi, ParametersAreReadAndWrittenByName) {
  LoadOptions opt;
  opt.seed = 7;
  auto m = loadOrDie(opt);
  ASSERT_TRUE(m);
  using Role = CompiledModel::ParamRole;
  auto params = m->params();
  ASSERT_EQ(params.size(), 6u);  // w, b (prepared.0 is not a parameter) x 3 roles
  EXPECT_EQ(params[0].name, "w");
  EXPECT_EQ(params[0].role, Role::kWeight);
  EXPECT_EQ(params[0].shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(params[3].name, "b");
  EXPECT_EQ(params[3].role, Role::kAdamM);
  EXPECT_EQ(params[5].role, Role::kAdamV);

  auto v = m->readParam("v", Role::kAdamV);  // no such parameter
  EXPECT_FALSE(v.isOk());
  auto moment = m->readParam("w", Role::kAdamM);
  ASSERT_TRUE(moment.isOk()) << moment.status().message();
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(moment->data<float>()[i], 0.0f);  // before training

  std::vector<float> wv(12), bv = {0.5f, -1.0f, 2.0f};
  for (int i = 0; i < 12; ++i) wv[i] = 0.1f * static_cast<float>(i) - 0.4f;
  Tensor w = f32({4, 3}, wv), b = f32({3}, bv);
  ASSERT_TRUE(m->writeParam("w", Role::kWeight, w).isOk());
  ASSERT_TRUE(m->writeParam("b", Role::kWeight, b).isOk());
  auto back = m->readParam("w", Role::kWeight);
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back->bytes, w.bytes);
  auto y = m->run("forward", goodInputs(3));
  ASSERT_TRUE(y.isOk()) << y.status().message();
  expectForward(goodInputs(3), w, b, y->at("y"));  // the new weights, prepared and packed

  Tensor m1 = f32({4, 3}, wv);
  ASSERT_TRUE(m->writeParam("w", Role::kAdamM, m1).isOk());
  auto m1back = m->readParam("w", Role::kAdamM);
  ASSERT_TRUE(m1back.isOk());
  EXPECT_EQ(m1back->bytes, m1.bytes);

  Status wrong = m->writeParam("w", Role::kWeight, f32({3}, bv));
  ASSERT_FALSE(wrong.isOk());
  EXPECT_TRUE(contains(wrong.message(), "weight 'w' has 48 bytes (F32), the buffer 12"))
      << wrong.message();
  Status unknown = m->writeParam("nope", Role::kWeight, b);
  EXPECT_TRUE(contains(unknown.message(), "no parameter 'nope'")) << unknown.message();
  back = m->readParam("w", Role::kWeight);
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back->bytes, w.bytes);  // nothing written by the failed calls

  // The fake model has no gradient entry: a train step names what is wrong.
  auto loss = m->accumulateGradients("forward", goodInputs(2), 1.0, 0);
  ASSERT_FALSE(loss.isOk());
  EXPECT_TRUE(contains(loss.status().message(), "neither the loss nor the gradient"))
      << loss.status().message();
  auto norm = m->applyGradients({});
  ASSERT_FALSE(norm.isOk());
  EXPECT_TRUE(contains(norm.status().message(), "no gradients to apply")) << norm.status().message();
  EXPECT_EQ(m->trainSteps(), 0);
  ASSERT_TRUE(m->setTrainSteps(12).isOk());
  EXPECT_EQ(m->trainSteps(), 12);
  EXPECT_FALSE(m->setTrainSteps(-1).isOk());
}

// Gradient exchange (ABI 5): the held gradients as one vector in parameter
// order, taken out (zeros when none are held; none held after) and put back
// (held for the next Adam step, which then moves every weight by it).
TEST(ModelAbi, GradientsAreTakenAndPutAsOneVector) {
  LoadOptions opt;
  opt.seed = 7;
  auto m = loadOrDie(opt);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->gradientCount(), 15);  // w [4, 3], then b [3]
  std::vector<float> taken = {1.0f};
  ASSERT_TRUE(m->takeGradients(taken).isOk());
  EXPECT_EQ(taken, std::vector<float>(15, 0.0f));

  std::vector<float> g(15);
  for (int i = 0; i < 15; ++i) g[i] = (i % 2 ? -0.5f : 0.25f) * static_cast<float>(i + 1);
  ASSERT_TRUE(m->putGradients(g).isOk());
  ASSERT_TRUE(m->takeGradients(taken).isOk());
  EXPECT_EQ(taken, g);
  auto none = m->applyGradients({});
  ASSERT_FALSE(none.isOk());  // taken: none held
  EXPECT_TRUE(contains(none.status().message(), "no gradients to apply"));

  auto w0 = m->readParam("w", CompiledModel::ParamRole::kWeight);
  auto b0 = m->readParam("b", CompiledModel::ParamRole::kWeight);
  ASSERT_TRUE(w0.isOk() && b0.isOk());
  ASSERT_TRUE(m->putGradients(g).isOk());
  CompiledModel::TrainOptions adam;
  adam.learningRate = 0.01;
  auto norm = m->applyGradients(adam);
  ASSERT_TRUE(norm.isOk()) << norm.status().message();
  double sq = 0;
  for (float x : g) sq += double(x) * x;
  EXPECT_NEAR(*norm, std::sqrt(sq), 1e-9 * std::sqrt(sq));
  // Adam's first step moves each weight by the rate against its gradient's sign.
  auto w1 = m->readParam("w", CompiledModel::ParamRole::kWeight);
  auto b1 = m->readParam("b", CompiledModel::ParamRole::kWeight);
  ASSERT_TRUE(w1.isOk() && b1.isOk());
  for (int i = 0; i < 15; ++i) {
    const float before = i < 12 ? w0->data<float>()[i] : b0->data<float>()[i - 12];
    const float after = i < 12 ? w1->data<float>()[i] : b1->data<float>()[i - 12];
    EXPECT_NEAR(after - before, g[i] > 0 ? -0.01 : 0.01, 1e-5) << i;
  }
  EXPECT_EQ(m->trainSteps(), 1);

  Status wrong = m->putGradients(std::vector<float>(14, 0.0f));
  ASSERT_FALSE(wrong.isOk());
  EXPECT_TRUE(contains(wrong.message(), "the gradients are 15 floats, the buffer 14"))
      << wrong.message();
}

}  // namespace
}  // namespace transfuse::rt
