// Tests for the structure of the built-in models (models/Models.h): op counts
// of transformer-base and GPT-2 small, parameter names and shapes following
// PyTorch's and Hugging Face's state_dict, the weight-binding attributes on
// the module, the function maxima, dropout only in training graphs, and
// build options the config cannot honour.
#include "codegen/Interface.h"
#include "models/Models.h"

#include "tests/unit/compiler/TestHelpers.h"

#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#ifndef TRANSFUSE_SOURCE_DIR
#error "TRANSFUSE_SOURCE_DIR must name the source tree"
#endif

namespace {

using namespace mlir;
using namespace mlir::transfuse;
using transfuse_test::contains;

ModelConfig loadConfig(const std::string &name) {
  std::string path = std::string(TRANSFUSE_SOURCE_DIR) + "/models/" + name;
  auto buffer = llvm::MemoryBuffer::getFile(path);
  EXPECT_TRUE(!!buffer) << path;
  if (!buffer)
    return ModelConfig();
  auto config = parseModelConfig((*buffer)->getBuffer(), path);
  if (!config) {
    ADD_FAILURE() << llvm::toString(config.takeError());
    return ModelConfig();
  }
  return *config;
}

struct ParamInfo {
  std::vector<int64_t> shape;
  std::string init;
  bool optional = false;
};

struct Summary {
  std::map<std::string, int> opCounts;
  std::map<std::string, ParamInfo> params;
  std::set<int64_t> dropoutStreams;
  int dropoutCount = 0;
};

/// The ops of @forward (the decoding entries are tested on their own).
Summary summarize(ModuleOp module) {
  Summary s;
  module.lookupSymbol<func::FuncOp>("forward").walk([&](Operation *op) {
    s.opCounts[op->getName().getStringRef().str()]++;
    if (auto p = dyn_cast<ParamOp>(op)) {
      auto shape = p.getType().getShape();
      s.params[p.getName().str()] = {std::vector<int64_t>(shape.begin(), shape.end()),
                                     stringifyInitKind(p.getInit()).str(), p.getOptional()};
    }
    if (auto d = dyn_cast<DropoutOp>(op)) {
      s.dropoutStreams.insert(d.getStream());
      s.dropoutCount++;
    }
  });
  return s;
}

class ModelStructureTest : public ::testing::Test {
protected:
  ModelStructureTest() { ctx.loadDialect<TransfuseDialect, func::FuncDialect>(); }

  OwningOpRef<ModuleOp> build(const std::string &configName, BuildOptions options = {}) {
    auto m = buildModel(ctx, loadConfig(configName), options);
    if (!m) {
      ADD_FAILURE() << llvm::toString(m.takeError());
      return nullptr;
    }
    return std::move(*m);
  }

  MLIRContext ctx;
};

TEST_F(ModelStructureTest, TransformerBaseOpCounts) {
  auto module = build("transformer-base.json");
  ASSERT_TRUE(module);
  Summary s = summarize(*module);
  // 6 encoder self-attentions, 6 decoder self-attentions, 6 cross-attentions.
  EXPECT_EQ(s.opCounts["transfuse.softmax"], 18);
  // Post-LN: 2 per encoder layer, 3 per decoder layer, no final norms.
  EXPECT_EQ(s.opCounts["transfuse.layer_norm"], 30);
  EXPECT_EQ(s.opCounts["transfuse.causal_mask"], 1);
  EXPECT_EQ(s.opCounts["transfuse.positional_encoding"], 2);
  EXPECT_EQ(s.opCounts["transfuse.gather"], 2);
  // Inference graph: no dropout.
  EXPECT_EQ(s.opCounts["transfuse.dropout"], 0);
  EXPECT_EQ(s.opCounts["func.func"], 1);
}

TEST_F(ModelStructureTest, TransformerBaseParamsFollowPyTorchStateDict) {
  auto module = build("transformer-base.json");
  ASSERT_TRUE(module);
  Summary s = summarize(*module);
  auto expectParam = [&](const std::string &name, std::vector<int64_t> shape) {
    auto it = s.params.find(name);
    ASSERT_NE(it, s.params.end()) << "no param " << name;
    EXPECT_EQ(it->second.shape, shape) << name;
  };
  expectParam("src_tok_emb.embedding.weight", {37000, 512});
  for (int i : {0, 5}) {
    std::string e = "transformer.encoder.layers." + std::to_string(i) + ".";
    expectParam(e + "self_attn.in_proj_weight", {1536, 512});
    expectParam(e + "self_attn.in_proj_bias", {1536});
    expectParam(e + "self_attn.out_proj.weight", {512, 512});
    expectParam(e + "self_attn.out_proj.bias", {512});
    expectParam(e + "linear1.weight", {2048, 512});
    expectParam(e + "linear1.bias", {2048});
    expectParam(e + "linear2.weight", {512, 2048});
    expectParam(e + "linear2.bias", {512});
    expectParam(e + "norm1.weight", {512});
    expectParam(e + "norm2.bias", {512});
    std::string d = "transformer.decoder.layers." + std::to_string(i) + ".";
    expectParam(d + "self_attn.in_proj_weight", {1536, 512});
    expectParam(d + "multihead_attn.in_proj_weight", {1536, 512});
    expectParam(d + "multihead_attn.out_proj.bias", {512});
    expectParam(d + "norm3.weight", {512});
    expectParam(d + "linear2.weight", {512, 2048});
  }
  // Shared embeddings and a tied generator: no second table, no generator weight.
  EXPECT_EQ(s.params.count("tgt_tok_emb.embedding.weight"), 0u);
  EXPECT_EQ(s.params.count("generator.weight"), 0u);
  // No final norms, no learned positions.
  EXPECT_EQ(s.params.count("transformer.encoder.norm.weight"), 0u);
  EXPECT_EQ(s.params.count("transformer.decoder.norm.weight"), 0u);
  EXPECT_EQ(s.params.count("src_pos_emb.embedding.weight"), 0u);
  EXPECT_EQ(s.params.count("transformer.encoder.layers.6.norm1.weight"), 0u);
  // The generator bias is optional.
  ASSERT_EQ(s.params.count("generator.bias"), 1u);
  EXPECT_TRUE(s.params["generator.bias"].optional);
  EXPECT_EQ(s.params["generator.bias"].shape, (std::vector<int64_t>{37000}));
  EXPECT_FALSE(s.params["src_tok_emb.embedding.weight"].optional);
  // 12 per encoder layer, 18 per decoder layer, the table and the bias.
  EXPECT_EQ(s.params.size(), 6u * 12u + 6u * 18u + 2u);
  // One param op per name.
  EXPECT_EQ(s.opCounts["transfuse.param"], (int)s.params.size());

  auto aliases = (*module)->getAttrOfType<DictionaryAttr>(kWeightAliasesAttr);
  ASSERT_TRUE(aliases);
  EXPECT_EQ(aliases.size(), 2u);
  auto tgt = aliases.getAs<StringAttr>("tgt_tok_emb.embedding.weight");
  ASSERT_TRUE(tgt);
  EXPECT_EQ(tgt.str(), "src_tok_emb.embedding.weight");
  auto gen = aliases.getAs<StringAttr>("generator.weight");
  ASSERT_TRUE(gen);
  EXPECT_EQ(gen.str(), "src_tok_emb.embedding.weight");
}

TEST_F(ModelStructureTest, TransformerBaseInterface) {
  auto module = build("transformer-base.json");
  ASSERT_TRUE(module);
  auto func = module->lookupSymbol<func::FuncOp>("forward");
  ASSERT_TRUE(func);
  auto maxBatch = func->getAttrOfType<IntegerAttr>(kMaxBatchAttr);
  auto maxSeq = func->getAttrOfType<IntegerAttr>(kMaxSeqLenAttr);
  ASSERT_TRUE(maxBatch && maxSeq);
  EXPECT_EQ(maxBatch.getInt(), 8);
  EXPECT_EQ(maxSeq.getInt(), 512);
  auto mi = extractInterface(*module);
  ASSERT_TRUE(!!mi) << llvm::toString(mi.takeError());
  ASSERT_EQ(mi->entryPoints.size(), 3u);
  const auto &ep = mi->entryPoints[0];
  EXPECT_EQ(ep.name, "forward");
  ASSERT_EQ(ep.inputs.size(), 2u);
  EXPECT_EQ(ep.inputs[0].name, "src_tokens");
  EXPECT_EQ(ep.inputs[1].name, "tgt_tokens");
  EXPECT_EQ(ep.inputs[1].maxShape, (std::vector<int64_t>{8, 512}));
  ASSERT_EQ(ep.outputs.size(), 1u);
  EXPECT_EQ(ep.outputs[0].name, "logits");
  EXPECT_EQ(ep.outputs[0].shape, (std::vector<int64_t>{-1, -1, 37000}));
  // The decoding entries: rows for max_batch · max_beam (default 4).
  const auto &encode = mi->entryPoints[1], &step = mi->entryPoints[2];
  EXPECT_EQ(encode.name, "encode");
  ASSERT_EQ(encode.inputs.size(), 1u);
  EXPECT_EQ(encode.inputs[0].maxShape, (std::vector<int64_t>{32, 512}));
  EXPECT_TRUE(encode.outputs.empty());
  EXPECT_EQ(step.name, "decode_step");
  ASSERT_EQ(step.inputs.size(), 2u);
  EXPECT_EQ(step.inputs[1].maxShape, (std::vector<int64_t>{32, 512}));
  ASSERT_EQ(step.outputs.size(), 1u);
  EXPECT_EQ(step.outputs[0].shape, (std::vector<int64_t>{-1, -1, 37000}));
  EXPECT_EQ(mi->params.size(), 182u);
  EXPECT_EQ(mi->rules.aliases.size(), 2u);
  EXPECT_TRUE(mi->rules.ignored.empty());
  EXPECT_TRUE(mi->rules.prefixes.empty());
  // The config attribute reads back as the same config.
  auto config = parseModelConfig(mi->configJson, "transfuse.config");
  ASSERT_TRUE(!!config) << llvm::toString(config.takeError());
  EXPECT_EQ(config->dModel, 512);
  EXPECT_FALSE(config->finalNorm);
  EXPECT_TRUE(config->shareEmbeddings);
}

TEST_F(ModelStructureTest, Gpt2SmallStructure) {
  auto module = build("gpt2-small.json");
  ASSERT_TRUE(module);
  Summary s = summarize(*module);
  EXPECT_EQ(s.opCounts["transfuse.softmax"], 12);
  // ln_1 and ln_2 per layer, then ln_f.
  EXPECT_EQ(s.opCounts["transfuse.layer_norm"], 25);
  EXPECT_EQ(s.opCounts["transfuse.dropout"], 0);
  EXPECT_EQ(s.opCounts["transfuse.key_padding_mask"], 0); // pad_id is null
  EXPECT_EQ(s.opCounts["transfuse.positional_encoding"], 0);
  EXPECT_EQ(s.opCounts["transfuse.slice"], 1); // wpe[:T]
  EXPECT_EQ(s.opCounts["transfuse.gelu"], 12);

  auto expectParam = [&](const std::string &name, std::vector<int64_t> shape) {
    auto it = s.params.find(name);
    ASSERT_NE(it, s.params.end()) << "no param " << name;
    EXPECT_EQ(it->second.shape, shape) << name;
  };
  expectParam("wte.weight", {50257, 768});
  expectParam("wpe.weight", {1024, 768});
  for (int i : {0, 11}) {
    std::string h = "h." + std::to_string(i) + ".";
    expectParam(h + "ln_1.weight", {768});
    expectParam(h + "ln_1.bias", {768});
    expectParam(h + "attn.c_attn.weight", {768, 2304});
    expectParam(h + "attn.c_attn.bias", {2304});
    expectParam(h + "attn.c_proj.weight", {768, 768});
    expectParam(h + "attn.c_proj.bias", {768});
    expectParam(h + "ln_2.weight", {768});
    expectParam(h + "mlp.c_fc.weight", {768, 3072});
    expectParam(h + "mlp.c_fc.bias", {3072});
    expectParam(h + "mlp.c_proj.weight", {3072, 768});
    expectParam(h + "mlp.c_proj.bias", {768});
  }
  expectParam("ln_f.weight", {768});
  expectParam("ln_f.bias", {768});
  EXPECT_EQ(s.params.count("lm_head.weight"), 0u); // tied to wte
  EXPECT_EQ(s.params.count("h.12.ln_1.weight"), 0u);
  EXPECT_EQ(s.params.size(), 12u * 12u + 4u);

  auto prefixes = (*module)->getAttrOfType<ArrayAttr>(kWeightPrefixesAttr);
  ASSERT_TRUE(prefixes);
  ASSERT_EQ(prefixes.size(), 1u);
  EXPECT_EQ(cast<StringAttr>(prefixes[0]).str(), "transformer.");
  auto ignored = (*module)->getAttrOfType<ArrayAttr>(kIgnoredWeightsAttr);
  ASSERT_TRUE(ignored);
  std::vector<std::string> patterns;
  for (auto p : ignored.getAsValueRange<StringAttr>())
    patterns.push_back(p.str());
  EXPECT_EQ(patterns, (std::vector<std::string>{"h.*.attn.bias", "h.*.attn.masked_bias"}));
  auto aliases = (*module)->getAttrOfType<DictionaryAttr>(kWeightAliasesAttr);
  ASSERT_TRUE(aliases);
  auto lmHead = aliases.getAs<StringAttr>("lm_head.weight");
  ASSERT_TRUE(lmHead);
  EXPECT_EQ(lmHead.str(), "wte.weight");

  auto mi = extractInterface(*module);
  ASSERT_TRUE(!!mi) << llvm::toString(mi.takeError());
  EXPECT_EQ(mi->rules.prefixes, (std::vector<std::string>{"transformer."}));
  EXPECT_EQ(mi->rules.ignored.size(), 2u);
  ASSERT_EQ(mi->entryPoints.size(), 3u);
  ASSERT_EQ(mi->entryPoints[0].inputs.size(), 1u);
  EXPECT_EQ(mi->entryPoints[0].inputs[0].name, "tokens");
  EXPECT_EQ(mi->entryPoints[0].inputs[0].maxShape, (std::vector<int64_t>{8, 1024}));
  // Generation: prefill gives the last position's logits, decode_step every
  // new position's; rows for max_batch · max_beam.
  EXPECT_EQ(mi->entryPoints[1].name, "prefill");
  EXPECT_EQ(mi->entryPoints[1].inputs[0].maxShape, (std::vector<int64_t>{32, 1024}));
  EXPECT_EQ(mi->entryPoints[1].outputs[0].shape, (std::vector<int64_t>{-1, 1, 50257}));
  EXPECT_EQ(mi->entryPoints[2].name, "decode_step");
  EXPECT_EQ(mi->entryPoints[2].outputs[0].shape, (std::vector<int64_t>{-1, -1, 50257}));
}

TEST_F(ModelStructureTest, TrainingGraphsHaveDropoutWithDistinctStreams) {
  BuildOptions training;
  training.training = true;
  training.maxSeqLen = 64;
  auto module = build("transformer-base.json", training);
  ASSERT_TRUE(module);
  Summary s = summarize(*module);
  EXPECT_GT(s.dropoutCount, 0);
  EXPECT_EQ((size_t)s.dropoutCount, s.dropoutStreams.size());
  // Softmax and norm counts do not change with training.
  EXPECT_EQ(s.opCounts["transfuse.softmax"], 18);
  EXPECT_EQ(s.opCounts["transfuse.layer_norm"], 30);
  auto func = module->lookupSymbol<func::FuncOp>("forward");
  ASSERT_TRUE(func);
  EXPECT_EQ(func->getAttrOfType<IntegerAttr>(kMaxSeqLenAttr).getInt(), 64);
  module->walk([&](DropoutOp d) { EXPECT_DOUBLE_EQ(d.getRate().convertToDouble(), 0.1); });
}

TEST_F(ModelStructureTest, BuildOptionsTheConfigCannotHonour) {
  BuildOptions options;
  options.maxBatch = -1;
  auto m = buildModel(ctx, loadConfig("gpt2-small.json"), options);
  ASSERT_FALSE(!!m);
  EXPECT_TRUE(contains(llvm::toString(m.takeError()), "--max-batch must be >= 1, got -1"));
  options = BuildOptions();
  options.maxSeqLen = -2;
  m = buildModel(ctx, loadConfig("transformer-base.json"), options);
  ASSERT_FALSE(!!m);
  EXPECT_TRUE(contains(llvm::toString(m.takeError()), "--max-seq-len must be >= 1, got -2"));
  // 0 means "not given": max_batch 8 and the config's max_seq_len.
  options = BuildOptions();
  m = buildModel(ctx, loadConfig("gpt2-small.json"), options);
  ASSERT_TRUE(!!m) << llvm::toString(m.takeError());
  auto func = (*m)->lookupSymbol<func::FuncOp>("forward");
  ASSERT_TRUE(func);
  EXPECT_EQ(func->getAttrOfType<IntegerAttr>(kMaxBatchAttr).getInt(), 8);
  EXPECT_EQ(func->getAttrOfType<IntegerAttr>(kMaxSeqLenAttr).getInt(), 1024);
  // Learned positions have max_seq_len rows.
  options = BuildOptions();
  options.maxSeqLen = 2048;
  m = buildModel(ctx, loadConfig("gpt2-small.json"), options);
  ASSERT_FALSE(!!m);
  std::string msg = llvm::toString(m.takeError());
  EXPECT_TRUE(contains(msg, "--max-seq-len 2048 exceeds the config's max_seq_len 1024")) << msg;
  // Sinusoidal positions have no such limit.
  m = buildModel(ctx, loadConfig("transformer-base.json"), options);
  ASSERT_TRUE(!!m) << llvm::toString(m.takeError());
}

TEST_F(ModelStructureTest, PreLnAndFinalNormCounts) {
  // tiny-encoder-decoder-pre: pre-LN, 2 encoder and 1 decoder layers, no final norms.
  auto pre = build("tiny-encoder-decoder-pre.json");
  ASSERT_TRUE(pre);
  Summary s = summarize(*pre);
  EXPECT_EQ(s.opCounts["transfuse.softmax"], 2 + 1 + 1);
  EXPECT_EQ(s.opCounts["transfuse.layer_norm"], 2 * 2 + 3 * 1);
  EXPECT_EQ(s.params.count("src_pos_emb.embedding.weight"), 1u); // learned positions
  EXPECT_EQ(s.params.count("tgt_pos_emb.embedding.weight"), 1u);
  // tiny-encoder-decoder: final norms on by default.
  auto post = build("tiny-encoder-decoder.json");
  ASSERT_TRUE(post);
  Summary t = summarize(*post);
  EXPECT_EQ(t.opCounts["transfuse.layer_norm"], 2 * 2 + 3 * 2 + 2);
  EXPECT_EQ(t.params.count("transformer.encoder.norm.weight"), 1u);
  EXPECT_EQ(t.params.count("transformer.decoder.norm.bias"), 1u);
  EXPECT_EQ(t.params.count("tgt_tok_emb.embedding.weight"), 1u); // not shared
  EXPECT_EQ(t.params.count("generator.weight"), 1u);              // not tied
  // tiny-decoder-only-padded: a pad_id adds a key padding mask.
  auto padded = build("tiny-decoder-only-padded.json");
  ASSERT_TRUE(padded);
  EXPECT_EQ(summarize(*padded).opCounts["transfuse.key_padding_mask"], 1);
  EXPECT_EQ(summarize(*padded).params.count("lm_head.weight"), 1u);
}

} // namespace
