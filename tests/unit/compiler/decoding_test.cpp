// The decoding entry points (models/Models.h, docs/decoding.md): on the
// reference backend, encode and then decode_step one position at a time
// (or several at once) give the logits forward gives for the whole target,
// the state's length advances by the positions appended, and going past
// the capacity is an error naming the state that leaves it untouched; the
// compiled artifact's cached steps give the logits of recomputing the whole
// prefix through the reference backend, for every fusion strategy.
#include "codegen/Interface.h"
#include "compiler/Compiler.h"
#include "ir/State.h"
#include "models/Models.h"
#include "passes/Passes.h"
#include "runtime/WeightBinding.h"
#include "runtime/host/CompiledModel.h"
#include "runtime/host/Search.h"

#include "llvm/Support/FileSystem.h"

#include "tests/unit/compiler/TestHelpers.h"

#include <gtest/gtest.h>

#include <cmath>

#ifndef TRANSFUSE_SOURCE_DIR
#error "TRANSFUSE_SOURCE_DIR must name the source tree"
#endif

namespace {

using namespace mlir;
using namespace mlir::transfuse;
using transfuse_test::contains;
using transfuse_test::i32Tensor;
using transfuse_test::TensorMap;
using transfuse_test::values;
namespace rt = ::transfuse::rt;

class ReferenceDecodingTest : public ::testing::Test {
protected:
  void SetUp() override {
    ctx.loadDialect<TransfuseDialect, func::FuncDialect>();
    BuildOptions options;
    options.maxBatch = 2;
    options.maxBeam = 1;
    auto m = loadModelDefinition(ctx, TRANSFUSE_SOURCE_DIR "/models/tiny-encoder-decoder.json",
                                 options);
    ASSERT_TRUE(!!m) << llvm::toString(m.takeError());
    module = std::move(*m);
    auto mi = extractInterface(*module);
    ASSERT_TRUE(!!mi) << llvm::toString(mi.takeError());
    auto random = rt::randomWeights(mi->params, /*seed=*/7);
    ASSERT_TRUE(random.isOk()) << random.status().message();
    weights = std::move(*random);
  }

  llvm::Expected<TensorMap> call(StringRef entry, const TensorMap &inputs,
                                 reference::State *state = nullptr) {
    return reference::run(module->lookupSymbol<func::FuncOp>(entry), weights, inputs, true,
                          state);
  }

  /// Columns [from, from + n) of tokens [B, T].
  static rt::Tensor columns(const rt::Tensor &t, int64_t from, int64_t n) {
    int64_t b = t.shape[0], width = t.shape[1];
    std::vector<int32_t> v;
    for (int64_t r = 0; r < b; ++r)
      for (int64_t c = from; c < from + n; ++c)
        v.push_back(t.data<int32_t>()[r * width + c]);
    return i32Tensor({b, n}, v);
  }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  TensorMap weights;
  // Two sources, the second padded (pad 1); a target prefix from BOS (2).
  rt::Tensor src = i32Tensor({2, 5}, {4, 5, 6, 7, 3, 8, 9, 3, 1, 1});
  rt::Tensor tgt = i32Tensor({2, 4}, {2, 10, 11, 12, 2, 13, 14, 15});
};

TEST_F(ReferenceDecodingTest, StateTensorsAndCapacities) {
  auto decls = collectStates(*module);
  ASSERT_TRUE(succeeded(decls));
  ASSERT_EQ(decls->size(), 8u); // 2 layers × cross K, V, self K, V
  EXPECT_EQ((*decls)[0].name, "kv.0.cross.k");
  EXPECT_TRUE((*decls)[0].keys);
  EXPECT_EQ((*decls)[1].name, "kv.0.cross.v");
  EXPECT_FALSE((*decls)[1].keys);
  // [rows = max_batch · max_beam, H, max_seq_len, D]
  EXPECT_EQ((*decls)[0].capacity.getShape(), (ArrayRef<int64_t>{2, 2, 16, 8}));
}

TEST_F(ReferenceDecodingTest, StepByStepEqualsForward) {
  auto full = call("forward", {{"src_tokens", src}, {"tgt_tokens", tgt}});
  ASSERT_TRUE(!!full) << llvm::toString(full.takeError());
  std::vector<double> expected = values(full->at("logits")); // [2, 4, V]
  int64_t v = full->at("logits").shape[2];

  auto state = reference::createState(*module);
  ASSERT_TRUE(!!state) << llvm::toString(state.takeError());
  auto encoded = call("encode", {{"src_tokens", src}}, &*state);
  ASSERT_TRUE(!!encoded) << llvm::toString(encoded.takeError());
  EXPECT_EQ(state->length, 0);
  for (int64_t t = 0; t < 4; ++t) {
    auto step = call("decode_step", {{"src_tokens", src}, {"tgt_tokens", columns(tgt, t, 1)}},
                     &*state);
    ASSERT_TRUE(!!step) << llvm::toString(step.takeError());
    EXPECT_EQ(state->length, t + 1);
    std::vector<double> got = values(step->at("logits")); // [2, 1, V]
    ASSERT_EQ(got.size(), (size_t)(2 * v));
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t j = 0; j < v; ++j)
        EXPECT_NEAR(got[b * v + j], expected[(b * 4 + t) * v + j], 1e-12)
            << "row " << b << " position " << t << " logit " << j;
  }
}

TEST_F(ReferenceDecodingTest, SeveralPositionsInOneStep) {
  auto full = call("forward", {{"src_tokens", src}, {"tgt_tokens", tgt}});
  ASSERT_TRUE(!!full);
  std::vector<double> expected = values(full->at("logits"));
  int64_t v = full->at("logits").shape[2];
  auto state = reference::createState(*module);
  ASSERT_TRUE(!!state);
  ASSERT_TRUE(!!call("encode", {{"src_tokens", src}}, &*state));
  // A forced prefix of 3 positions, then one more.
  auto first = call("decode_step", {{"src_tokens", src}, {"tgt_tokens", columns(tgt, 0, 3)}},
                    &*state);
  ASSERT_TRUE(!!first) << llvm::toString(first.takeError());
  EXPECT_EQ(state->length, 3);
  auto last = call("decode_step", {{"src_tokens", src}, {"tgt_tokens", columns(tgt, 3, 1)}},
                   &*state);
  ASSERT_TRUE(!!last);
  std::vector<double> a = values(first->at("logits")), b = values(last->at("logits"));
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t j = 0; j < v; ++j) {
      for (int64_t t = 0; t < 3; ++t)
        EXPECT_NEAR(a[(r * 3 + t) * v + j], expected[(r * 4 + t) * v + j], 1e-12);
      EXPECT_NEAR(b[r * v + j], expected[(r * 4 + 3) * v + j], 1e-12);
    }
}

TEST_F(ReferenceDecodingTest, PastTheCapacityIsAnErrorThatWritesNothing) {
  auto state = reference::createState(*module);
  ASSERT_TRUE(!!state);
  ASSERT_TRUE(!!call("encode", {{"src_tokens", src}}, &*state));
  rt::Tensor many = i32Tensor({2, 10}, std::vector<int32_t>(20, 5));
  ASSERT_TRUE(!!call("decode_step", {{"src_tokens", src}, {"tgt_tokens", many}}, &*state));
  EXPECT_EQ(state->length, 10);
  reference::State before = *state;
  auto over = call("decode_step", {{"src_tokens", src}, {"tgt_tokens", many}}, &*state);
  ASSERT_FALSE(!!over);
  std::string message = llvm::toString(over.takeError());
  EXPECT_TRUE(contains(message, "positions 20 exceed the capacity 16 of state 'kv.0.self.k'"))
      << message;
  EXPECT_EQ(state->length, 10);
  EXPECT_EQ(state->tensors.at("kv.0.self.k").data, before.tensors.at("kv.0.self.k").data);
  // Without a state, a stateful entry is refused by name.
  auto none = call("decode_step", {{"src_tokens", src}, {"tgt_tokens", many}});
  ASSERT_FALSE(!!none);
  EXPECT_TRUE(contains(llvm::toString(none.takeError()), "'decode_step' uses the decoding state"));
}

/// The artifact directories this test program made, removed when it exits.
std::vector<std::string> &artifactDirs() {
  static struct Dirs {
    std::vector<std::string> dirs;
    ~Dirs() {
      for (const std::string &d : dirs)
        llvm::sys::fs::remove_directories(d);
    }
  } all;
  return all.dirs;
}

/// Compiles `config` with `strategy` into a fresh directory (removed at
/// exit); its library.
std::string compileArtifact(MLIRContext &ctx, const std::string &config, const char *strategy,
                            const BuildOptions &options, OwningOpRef<ModuleOp> &graph) {
  auto m = loadModelDefinition(ctx, config, options);
  EXPECT_TRUE(!!m) << llvm::toString(m.takeError());
  if (!m)
    return "";
  graph = std::move(*m);
  OwningOpRef<ModuleOp> compiled = graph->clone();
  llvm::SmallString<128> dir;
  EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("decoding-test", dir));
  artifactDirs().push_back(std::string(dir));
  compiler::CompileOptions o;
  o.strategy = *FusionStrategy::parse(strategy);
  auto artifact = compiler::compile(*compiled, dir, o);
  EXPECT_TRUE(!!artifact) << llvm::toString(artifact.takeError());
  if (!artifact)
    return "";
  return std::string(dir) + "/libmodel.so";
}

/// The argmax of each row of [rows, v] values but the padding id: the
/// decoder's own keys are never masked as padding, so a search never emits
/// it (forward would mask it).
std::vector<int32_t> argmax(const std::vector<double> &x, int64_t rows, int64_t v, int64_t pad) {
  std::vector<int32_t> out;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t best = -1;
    for (int64_t j = 0; j < v; ++j)
      if (j != pad && (best < 0 || x[r * v + j] > x[r * v + best]))
        best = j;
    out.push_back((int32_t)best);
  }
  return out;
}

struct DecodingCase {
  const char *config, *strategy;
  int32_t pad;
};
class CompiledDecodingTest : public ::testing::TestWithParam<DecodingCase> {};

// Greedy decoding with the cache (the artifact's encode and decode_step)
// against recomputing the whole prefix every step (the reference backend's
// forward): the same tokens, and at every step the logits within 1e-5 of
// their scale. Row 1 of the batch is padded. Configs: post-LN with
// sinusoidal positions, and pre-LN with learned positions, shared and tied
// embeddings and pad 0.
TEST_P(CompiledDecodingTest, CachedStepsEqualRecomputation) {
  const DecodingCase c = GetParam();
  MLIRContext ctx;
  ctx.loadDialect<TransfuseDialect, func::FuncDialect>();
  BuildOptions options;
  options.maxBatch = 2;
  options.maxBeam = 2;
  OwningOpRef<ModuleOp> graph;
  std::string library = compileArtifact(
      ctx, std::string(TRANSFUSE_SOURCE_DIR "/models/") + c.config, c.strategy, options, graph);
  ASSERT_FALSE(library.empty());
  auto model = rt::CompiledModel::load(library, {.weightsPath = "", .seed = 11, .threads = 2});
  ASSERT_TRUE(model.isOk()) << model.status().message();
  auto mi = extractInterface(*graph);
  ASSERT_TRUE(!!mi);
  auto weights = rt::randomWeights(mi->params, 11);
  ASSERT_TRUE(weights.isOk());
  auto forward = graph->lookupSymbol<func::FuncOp>("forward");

  rt::Tensor src = i32Tensor({2, 5}, {4, 5, 6, 7, 3, 8, 9, 3, c.pad, c.pad});
  auto state = (*model)->createState();
  ASSERT_TRUE(state.isOk()) << state.status().message();
  auto encoded = (*model)->run("encode", {{"src_tokens", src}}, state->get());
  ASSERT_TRUE(encoded.isOk()) << encoded.status().message();
  std::vector<std::vector<int32_t>> prefix(2, std::vector<int32_t>{2}); // BOS
  for (int step = 0; step < 10; ++step) {
    rt::Tensor last = i32Tensor({2, 1}, {prefix[0].back(), prefix[1].back()});
    auto out = (*model)->run("decode_step", {{"src_tokens", src}, {"tgt_tokens", last}},
                             state->get());
    ASSERT_TRUE(out.isOk()) << out.status().message();
    EXPECT_EQ((*state)->length(), step + 1);
    std::vector<double> cached = values(out->at("logits"));
    int64_t v = out->at("logits").shape[2];
    int64_t t = step + 1;
    std::vector<int32_t> flat;
    for (auto &p : prefix)
      flat.insert(flat.end(), p.begin(), p.end());
    auto full = reference::run(forward, *weights,
                               {{"src_tokens", src}, {"tgt_tokens", i32Tensor({2, t}, flat)}}, true);
    ASSERT_TRUE(!!full) << llvm::toString(full.takeError());
    std::vector<double> all = values(full->at("logits")), recomputed;
    double scale = 0;
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t j = 0; j < v; ++j) {
        recomputed.push_back(all[(r * t + t - 1) * v + j]);
        scale = std::max(scale, std::fabs(recomputed.back()));
      }
    for (size_t i = 0; i < cached.size(); ++i)
      ASSERT_NEAR(cached[i], recomputed[i], 1e-5 * std::max(1.0, scale))
          << c.config << " " << c.strategy << " step " << step << " logit " << i;
    std::vector<int32_t> next = argmax(cached, 2, v, c.pad),
                         expected = argmax(recomputed, 2, v, c.pad);
    EXPECT_EQ(next, expected) << "step " << step;
    for (int r = 0; r < 2; ++r)
      prefix[r].push_back(next[r]);
  }
  // Past the capacity (max_seq_len 16): an error naming the state and the
  // limit, the length unchanged.
  rt::Tensor many = i32Tensor({2, 7}, std::vector<int32_t>(14, 5));
  auto over = (*model)->run("decode_step", {{"src_tokens", src}, {"tgt_tokens", many}},
                            state->get());
  ASSERT_FALSE(over.isOk());
  // (with learned positions the table's rows are the limit checked first)
  EXPECT_TRUE(contains(over.status().message(), "more positions than"))
      << over.status().message();
  EXPECT_TRUE(contains(over.status().message(), "max_seq_len 16")) << over.status().message();
  EXPECT_EQ((*state)->length(), 10);
}

INSTANTIATE_TEST_SUITE_P(Configs, CompiledDecodingTest,
                         ::testing::Values(DecodingCase{"tiny-encoder-decoder.json", "none", 1},
                                           DecodingCase{"tiny-encoder-decoder.json", "all", 1},
                                           DecodingCase{"tiny-encoder-decoder-pre.json", "all", 0}));

// The Translator (runtime/host/Search.h) on the compiled tiny model,
// compiled once for the suite.
class TranslatorTest : public ::testing::Test {
protected:
  struct Shared {
    MLIRContext ctx;
    OwningOpRef<ModuleOp> graph;
    std::unique_ptr<rt::CompiledModel> model;
    TensorMap weights;
    rt::TokenIds tokens;
    std::unique_ptr<rt::Translator> translator;
  };
  static inline Shared *shared = nullptr;

  static void SetUpTestSuite() {
    shared = new Shared;
    Shared &s = *shared;
    s.ctx.loadDialect<TransfuseDialect, func::FuncDialect>();
    BuildOptions options;
    options.maxBatch = 4;
    options.maxBeam = 2;
    std::string library = compileArtifact(
        s.ctx, TRANSFUSE_SOURCE_DIR "/models/tiny-encoder-decoder.json", "all", options, s.graph);
    if (library.empty())
      return;
    auto m = rt::CompiledModel::load(library, {.weightsPath = "", .seed = 5, .threads = 2});
    ASSERT_TRUE(m.isOk()) << m.status().message();
    s.model = std::move(*m);
    auto mi = extractInterface(*s.graph);
    ASSERT_TRUE(!!mi);
    auto w = rt::randomWeights(mi->params, 5);
    ASSERT_TRUE(w.isOk());
    s.weights = std::move(*w);
    // The test's artifact has no manifest: the tiny config's conventions.
    s.tokens.pad = 1, s.tokens.bos = 2, s.tokens.eos = 3, s.tokens.sourceBos = true;
    s.tokens.srcVocab = 23, s.tokens.tgtVocab = 19;
    auto t = rt::Translator::create(*s.model, s.tokens);
    ASSERT_TRUE(t.isOk()) << t.status().message();
    s.translator = std::move(*t);
  }
  static void TearDownTestSuite() {
    delete shared;
    shared = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(shared && shared->translator) << "the suite's artifact did not build";
    translator = shared->translator.get();
  }

  /// Greedy by recomputing forward on the whole prefix each step (the
  /// reference backend), never emitting padding, at most `maxLen` tokens.
  std::vector<int32_t> recomputedGreedy(const std::vector<int32_t> &source, int maxLen) {
    const rt::TokenIds &tokens = shared->tokens;
    std::vector<int32_t> src{tokens.bos};
    src.insert(src.end(), source.begin(), source.end());
    src.push_back(tokens.eos);
    std::vector<int32_t> tgt{tokens.bos};
    auto forward = shared->graph->lookupSymbol<func::FuncOp>("forward");
    for (int step = 0; step <= maxLen; ++step) {
      auto out = reference::run(
          forward, shared->weights,
          {{"src_tokens", i32Tensor({1, (int64_t)src.size()}, src)},
           {"tgt_tokens", i32Tensor({1, (int64_t)tgt.size()}, tgt)}},
          true);
      EXPECT_TRUE(!!out);
      if (!out)
        return {};
      std::vector<double> all = values(out->at("logits"));
      int64_t v = out->at("logits").shape[2];
      std::vector<double> last(all.end() - v, all.end());
      int32_t next = step == maxLen ? tokens.eos : argmax(last, 1, v, tokens.pad)[0];
      if (next == tokens.eos)
        break;
      tgt.push_back(next);
    }
    return std::vector<int32_t>(tgt.begin() + 1, tgt.end());
  }

  rt::Translator *translator = nullptr;
  std::vector<std::vector<int32_t>> sources = {
      {4, 5, 6, 7, 8, 9}, {10, 11}, {12, 13, 14, 15, 16, 17, 18, 19, 20, 21}, {22}};
};

TEST_F(TranslatorTest, GreedyEqualsRecomputationAndBeamOneIsGreedy) {
  rt::SearchOptions greedy;
  greedy.maxLen = 12;
  auto got = translator->translate(sources, greedy);
  ASSERT_TRUE(got.isOk()) << got.status().message();
  for (size_t i = 0; i < sources.size(); ++i) {
    ASSERT_EQ((*got)[i].size(), 1u);
    EXPECT_EQ((*got)[i][0].ids, recomputedGreedy(sources[i], 12)) << "source " << i;
  }
  rt::SearchOptions one = greedy;
  one.beam = 1;
  one.alpha = 0.6;
  auto again = translator->translate(sources, one);
  ASSERT_TRUE(again.isOk());
  for (size_t i = 0; i < sources.size(); ++i)
    EXPECT_EQ((*again)[i][0].ids, (*got)[i][0].ids);
  // Forced decoding of the output scores what the search summed.
  std::vector<std::vector<int32_t>> outputs;
  for (auto &h : *got)
    outputs.push_back(h[0].ids);
  auto scored = translator->score(sources, outputs);
  ASSERT_TRUE(scored.isOk()) << scored.status().message();
  for (size_t i = 0; i < sources.size(); ++i) {
    ASSERT_EQ((*scored)[i].tokenLogProbs.size(), (*got)[i][0].tokenLogProbs.size());
    EXPECT_NEAR((*scored)[i].logProb, (*got)[i][0].logProb, 1e-4) << "source " << i;
  }
}

// A sentence's output is the same alone or in any batch, for greedy and beam
// search: the same ids, and the same scores up to rounding. (Not bit for
// bit: the fused attention kernel takes its few-queries path by the padded
// source length, so a source padded in a batch rounds differently in the
// encoder; docs/decoding.md.)
TEST_F(TranslatorTest, OutputsDoNotDependOnBatching) {
  for (int beam : {1, 2}) {
    rt::SearchOptions o;
    o.beam = beam;
    o.nBest = beam;
    o.alpha = 0.6;
    auto all = translator->translate(sources, o);
    ASSERT_TRUE(all.isOk()) << all.status().message();
    for (size_t i = 0; i < sources.size(); ++i) {
      auto alone = translator->translate({sources[i]}, o, nullptr, (int64_t)i);
      ASSERT_TRUE(alone.isOk());
      ASSERT_EQ((*alone)[0].size(), (*all)[i].size());
      for (size_t h = 0; h < (*alone)[0].size(); ++h) {
        EXPECT_EQ((*alone)[0][h].ids, (*all)[i][h].ids) << "beam " << beam << " source " << i;
        EXPECT_NEAR((*alone)[0][h].logProb, (*all)[i][h].logProb,
                    1e-5 * std::fabs((*all)[i][h].logProb))
            << "beam " << beam << " source " << i;
      }
    }
  }
}

// Beam search reorders the cache's rows every step; a hypothesis it finds
// must score, by forced decoding on a fresh cache (no reordering), what the
// search summed for it: every n-best entry of every sentence.
TEST_F(TranslatorTest, BeamHypothesesScoreWhatTheSearchSummed) {
  rt::SearchOptions o;
  o.beam = 2;
  o.nBest = 2;
  o.maxLen = 10;
  auto found = translator->translate(sources, o);
  ASSERT_TRUE(found.isOk()) << found.status().message();
  for (size_t i = 0; i < sources.size(); ++i)
    for (const rt::Hypothesis &h : (*found)[i]) {
      // A hypothesis cut at the length limit ends with a forced EOS too.
      auto scored = translator->score({sources[i]}, {h.ids});
      ASSERT_TRUE(scored.isOk()) << scored.status().message();
      EXPECT_NEAR((*scored)[0].logProb, h.logProb, 1e-4 * std::max(1.0, std::fabs(h.logProb)))
          << "source " << i;
    }
}

TEST_F(TranslatorTest, BadInputNamesTheLineOrTheLimit) {
  rt::SearchOptions o;
  auto bad = translator->translate({{4, 5}, {4, 99}}, o, nullptr, 10);
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(), "line 12: id 99 is outside the source vocabulary [0, 23)");
  auto empty = translator->translate({{}}, o);
  ASSERT_FALSE(empty.isOk());
  EXPECT_EQ(empty.status().message(), "line 1: an empty source");
  auto longer = translator->translate({std::vector<int32_t>(15, 4)}, o);
  ASSERT_FALSE(longer.isOk());
  EXPECT_TRUE(contains(longer.status().message(), "line 1: a source of 15 ids (17 with BOS/EOS) is over the compiled maximum 16"))
      << longer.status().message();
  o.beam = 3;
  auto wide = translator->translate(sources, o);
  ASSERT_FALSE(wide.isOk());
  EXPECT_TRUE(contains(wide.status().message(), "needs 12 rows, over the compiled 8 (--max-batch · --max-beam)"))
      << wide.status().message();
  o.beam = 1;
  o.maxLen = 16;
  auto far = translator->translate(sources, o);
  ASSERT_FALSE(far.isOk());
  EXPECT_TRUE(contains(far.status().message(), "--max-len 16 is over the cache's capacity: 16 positions"))
      << far.status().message();
}

} // namespace

namespace {

// The Generator on the compiled tiny decoder_only model (learned positions:
// a decode step's rows of wpe start at the cache's length): greedy with the
// cache equals greedy by recomputing forward on the whole sequence, for
// prompts of one length and of several in one batch (the longer ones fed
// step by step), and prompts batched or alone give the same tokens under
// greedy, beam and sampling search.
TEST(GeneratorTest, CachedGreedyEqualsRecomputationForEveryBatching) {
  MLIRContext ctx;
  ctx.loadDialect<TransfuseDialect, func::FuncDialect>();
  BuildOptions options;
  options.maxBatch = 3;
  options.maxBeam = 2;
  OwningOpRef<ModuleOp> graph;
  std::string library = compileArtifact(ctx, TRANSFUSE_SOURCE_DIR "/models/tiny-decoder-only.json",
                                        "all", options, graph);
  ASSERT_FALSE(library.empty());
  auto model = rt::CompiledModel::load(library, {.weightsPath = "", .seed = 9, .threads = 2});
  ASSERT_TRUE(model.isOk()) << model.status().message();
  auto mi = extractInterface(*graph);
  ASSERT_TRUE(!!mi);
  auto weights = rt::randomWeights(mi->params, 9);
  ASSERT_TRUE(weights.isOk());
  rt::TokenIds ids; // the tiny config: EOS 28, no padding
  ids.bos = ids.eos = 28;
  ids.tgtVocab = 29;
  auto generator = rt::Generator::create(**model, ids);
  ASSERT_TRUE(generator.isOk()) << generator.status().message();
  rt::SearchOptions greedy;
  greedy.maxLen = 8;
  auto forward = graph->lookupSymbol<func::FuncOp>("forward");
  // Recomputes each prompt's continuation (the whole sequence through
  // forward, the last position's argmax, until EOS or 8 tokens) and checks
  // the batch's tokens and log-probabilities against it.
  auto checkAgainstRecomputation = [&](const std::vector<std::vector<int32_t>> &prompts) {
    auto all = (*generator)->generate(prompts, greedy);
    ASSERT_TRUE(all.isOk()) << all.status().message();
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::vector<int32_t> seq = prompts[i], expected;
      while (expected.size() < 8) {
        auto out = reference::run(forward, *weights,
                                  {{"tokens", i32Tensor({1, (int64_t)seq.size()}, seq)}}, true);
        ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
        std::vector<double> v = values(out->at("logits"));
        std::vector<double> last(v.end() - 29, v.end());
        int32_t next = (int32_t)(std::max_element(last.begin(), last.end()) - last.begin());
        // The cached search's log-probability of that token, within 1e-5
        // of its scale.
        double lse = 0, mx = *std::max_element(last.begin(), last.end());
        for (double x : last)
          lse += std::exp(x - mx);
        double lp = last[next] - mx - std::log(lse);
        const auto &got = (*all)[i][0].tokenLogProbs;
        if (expected.size() < got.size())
          EXPECT_NEAR(got[expected.size()], lp, 1e-5 * std::max(1.0, std::fabs(lp)))
              << "prompt " << i << " token " << expected.size();
        if (next == 28)
          break;
        expected.push_back(next);
        seq.push_back(next);
      }
      EXPECT_EQ((*all)[i][0].ids, expected) << "prompt " << i;
    }
  };
  checkAgainstRecomputation({{5, 6, 7}, {8, 9, 10}, {11, 3, 20}});
  std::vector<std::vector<int32_t>> ragged = {{5, 6, 7, 8, 9}, {7}, {11, 3, 20}};
  checkAgainstRecomputation(ragged);
  // Batched or alone: the same tokens, for every search.
  rt::SearchOptions beam = greedy, sampled = greedy;
  beam.beam = 2;
  beam.nBest = 2;
  sampled.sample = true;
  sampled.seed = 5;
  for (const rt::SearchOptions &o : {greedy, beam, sampled}) {
    auto all = (*generator)->generate(ragged, o);
    ASSERT_TRUE(all.isOk()) << all.status().message();
    for (size_t i = 0; i < ragged.size(); ++i) {
      auto alone = (*generator)->generate({ragged[i]}, o, {(int64_t)i});
      ASSERT_TRUE(alone.isOk()) << alone.status().message();
      ASSERT_EQ((*alone)[0].size(), (*all)[i].size()) << "prompt " << i << " beam " << o.beam;
      for (size_t h = 0; h < (*all)[i].size(); ++h) {
        EXPECT_EQ((*alone)[0][h].ids, (*all)[i][h].ids) << "prompt " << i << " beam " << o.beam;
        EXPECT_NEAR((*alone)[0][h].logProb, (*all)[i][h].logProb, 1e-5) << "prompt " << i;
      }
    }
  }
  // A prompt over the cache (16 positions) names its line.
  greedy.maxLen = 15;
  auto over = (*generator)->generate({{5}, {5, 6, 7}}, greedy, {3, 4});
  ASSERT_FALSE(over.isOk());
  EXPECT_TRUE(contains(over.status().message(), "line 5: a prompt of 3 ids and 15 new tokens are over the cache's 16 positions"))
      << over.status().message();
}

} // namespace
