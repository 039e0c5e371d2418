// Tests for models/ModelConfig.h: defaults per architecture, d_ff defaulting
// to 4 * d_model, every key's bad values (wrong JSON type, out of range, bad
// choice) reported with the file and the key, unknown keys and keys of the
// other architecture, cross-key rules, invalid JSON, and the toJson ->
// parseModelConfig round trip.
#include "models/ModelConfig.h"

#include "tests/unit/compiler/TestHelpers.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

namespace {

using namespace mlir::transfuse;
using transfuse_test::contains;
using transfuse_test::errorText;

constexpr const char *kSource = "configs/my-model.json";

/// `base` (a JSON object's text without braces) plus one `"key": value`.
std::string withKey(const std::string &base, const std::string &key, const std::string &value) {
  return "{" + base + ", \"" + key + "\": " + value + "}";
}

const std::string kEncDec =
    R"("architecture": "encoder_decoder", "src_vocab_size": 100, "tgt_vocab_size": 100)";
const std::string kDecOnly = R"("architecture": "decoder_only", "vocab_size": 60000)";

std::string parseError(const std::string &json) {
  auto c = parseModelConfig(json, kSource);
  if (c)
    return "";
  return llvm::toString(c.takeError());
}

TEST(ModelConfigTest, EncoderDecoderDefaults) {
  auto c = parseModelConfig("{" + kEncDec + "}", kSource);
  ASSERT_TRUE(!!c) << errorText(c);
  EXPECT_EQ(c->architecture, Architecture::EncoderDecoder);
  EXPECT_FALSE(c->isDecoderOnly());
  EXPECT_EQ(c->dModel, 512);
  EXPECT_EQ(c->numHeads, 8);
  EXPECT_EQ(c->dFF, 2048);
  EXPECT_EQ(c->numEncoderLayers, 6);
  EXPECT_EQ(c->numDecoderLayers, 6);
  EXPECT_EQ(c->srcVocabSize, 100);
  EXPECT_EQ(c->tgtVocabSize, 100);
  EXPECT_EQ(c->outputVocabSize(), 100);
  EXPECT_EQ(c->maxSeqLen, 512);
  EXPECT_DOUBLE_EQ(c->dropout, 0.1);
  EXPECT_EQ(c->activation, "relu");
  EXPECT_EQ(c->normPosition, "post");
  EXPECT_TRUE(c->finalNorm);
  EXPECT_DOUBLE_EQ(c->layerNormEps, 1e-5);
  EXPECT_FALSE(c->shareEmbeddings);
  EXPECT_FALSE(c->tieOutput);
  EXPECT_EQ(c->positional, "sinusoidal");
  ASSERT_TRUE(c->padId.has_value());
  EXPECT_EQ(*c->padId, 1);
  EXPECT_EQ(c->bosId, 2);
  EXPECT_EQ(c->eosId, 3);
}

TEST(ModelConfigTest, DecoderOnlyDefaultsAreGpt2Small) {
  auto c = parseModelConfig("{" + kDecOnly + "}", kSource);
  ASSERT_TRUE(!!c) << errorText(c);
  EXPECT_EQ(c->architecture, Architecture::DecoderOnly);
  EXPECT_TRUE(c->isDecoderOnly());
  EXPECT_EQ(c->dModel, 768);
  EXPECT_EQ(c->numHeads, 12);
  EXPECT_EQ(c->dFF, 3072);
  EXPECT_EQ(c->numEncoderLayers, 0);
  EXPECT_EQ(c->numDecoderLayers, 12);
  EXPECT_EQ(c->tgtVocabSize, 60000);
  EXPECT_EQ(c->srcVocabSize, 60000);
  EXPECT_EQ(c->maxSeqLen, 1024);
  EXPECT_DOUBLE_EQ(c->dropout, 0.1);
  EXPECT_EQ(c->activation, "gelu_tanh");
  EXPECT_EQ(c->normPosition, "pre");
  EXPECT_TRUE(c->finalNorm);
  EXPECT_TRUE(c->tieOutput);
  EXPECT_EQ(c->positional, "learned");
  EXPECT_FALSE(c->padId.has_value());
  // No special tokens unless the config names them.
  EXPECT_FALSE(c->bosId.has_value());
  EXPECT_FALSE(c->eosId.has_value());
  EXPECT_FALSE(c->unkId.has_value());
}

TEST(ModelConfigTest, DFFDefaultsToFourTimesDModel) {
  auto c = parseModelConfig(withKey(kEncDec, "d_model", "64"), kSource);
  ASSERT_TRUE(!!c) << errorText(c);
  EXPECT_EQ(c->dModel, 64);
  EXPECT_EQ(c->dFF, 256);
  auto d = parseModelConfig("{" + kDecOnly + R"(, "d_model": 96, "num_heads": 4})", kSource);
  ASSERT_TRUE(!!d) << errorText(d);
  EXPECT_EQ(d->dFF, 384);
  // An explicit d_ff wins.
  auto e = parseModelConfig("{" + kEncDec + R"(, "d_model": 64, "d_ff": 100})", kSource);
  ASSERT_TRUE(!!e) << errorText(e);
  EXPECT_EQ(e->dFF, 100);
}

TEST(ModelConfigTest, ExplicitValuesAreRead) {
  auto c = parseModelConfig(R"({"architecture": "encoder_decoder", "d_model": 16,
      "num_heads": 2, "d_ff": 32, "num_encoder_layers": 3, "num_decoder_layers": 1,
      "src_vocab_size": 23, "tgt_vocab_size": 19, "max_seq_len": 40, "dropout": 0.25,
      "activation": "gelu", "norm_position": "pre", "final_norm": false,
      "layer_norm_eps": 1e-6, "share_embeddings": false, "tie_output": true,
      "positional": "learned", "pad_id": 0, "bos_id": 5, "eos_id": 18})",
                            kSource);
  ASSERT_TRUE(!!c) << errorText(c);
  EXPECT_EQ(c->dModel, 16);
  EXPECT_EQ(c->numHeads, 2);
  EXPECT_EQ(c->dFF, 32);
  EXPECT_EQ(c->numEncoderLayers, 3);
  EXPECT_EQ(c->numDecoderLayers, 1);
  EXPECT_EQ(c->srcVocabSize, 23);
  EXPECT_EQ(c->tgtVocabSize, 19);
  EXPECT_EQ(c->maxSeqLen, 40);
  EXPECT_DOUBLE_EQ(c->dropout, 0.25);
  EXPECT_EQ(c->activation, "gelu");
  EXPECT_EQ(c->normPosition, "pre");
  EXPECT_FALSE(c->finalNorm);
  EXPECT_DOUBLE_EQ(c->layerNormEps, 1e-6);
  EXPECT_TRUE(c->tieOutput);
  EXPECT_EQ(c->positional, "learned");
  EXPECT_EQ(*c->padId, 0);
  EXPECT_EQ(c->bosId, 5);
  EXPECT_EQ(c->eosId, 18);
}

struct BadValue {
  const char *key;
  const char *value;
  const char *expectedText; // part of the message after the key
};

void expectBad(const std::string &base, const BadValue &bad) {
  std::string msg = parseError(withKey(base, bad.key, bad.value));
  SCOPED_TRACE(std::string(bad.key) + " = " + bad.value);
  ASSERT_FALSE(msg.empty()) << "accepted";
  EXPECT_TRUE(contains(msg, kSource)) << msg;
  EXPECT_TRUE(contains(msg, std::string("key '") + bad.key + "'")) << msg;
  EXPECT_TRUE(contains(msg, bad.expectedText)) << msg;
}

TEST(ModelConfigTest, BadValuesOfCommonKeysNameFileAndKey) {
  const BadValue cases[] = {
      {"d_model", "\"512\"", "expected an integer"},
      {"d_model", "0", "must be in [1, 16777216], got 0"},
      {"d_model", "-8", "must be in [1, 16777216], got -8"},
      {"d_model", "99999999999", "must be in [1, 16777216], got 99999999999"},
      {"d_model", "1.5", "expected an integer"},
      {"num_heads", "true", "expected an integer"},
      {"num_heads", "0", "must be in [1, 16777216]"},
      {"d_ff", "null", "expected an integer"},
      {"d_ff", "0", "must be in [1, 16777216]"},
      {"max_seq_len", "[]", "expected an integer"},
      {"max_seq_len", "0", "must be in [1, 16777216]"},
      {"dropout", "\"0.1\"", "expected a number"},
      {"dropout", "1.0", "must be in [0, 1)"},
      {"dropout", "-0.5", "must be in [0, 1)"},
      {"activation", "\"swish\"", "expected one of relu, gelu, gelu_tanh"},
      {"activation", "1", "expected one of relu, gelu, gelu_tanh"},
      {"norm_position", "\"middle\"", "expected one of post, pre"},
      {"final_norm", "\"yes\"", "expected true or false"},
      {"final_norm", "1", "expected true or false"},
      {"layer_norm_eps", "0", "must be > 0"},
      {"layer_norm_eps", "-1e-5", "must be > 0"},
      {"layer_norm_eps", "\"tiny\"", "expected a number"},
      {"tie_output", "0", "expected true or false"},
      {"positional", "\"rotary\"", "expected one of sinusoidal, learned"},
      {"positional", "{}", "expected one of sinusoidal, learned"},
      {"pad_id", "-1", "must be in [0, 16777216]"},
      {"pad_id", "\"1\"", "expected an integer"},
      {"pad_id", "100", "outside the vocabulary [0, 100)"},
      {"bos_id", "-2", "must be in [0, 16777216]"},
      {"bos_id", "100", "outside the vocabulary [0, 100)"},
      {"bos_id", "2.5", "expected an integer"},
      {"eos_id", "false", "expected an integer"},
      {"eos_id", "1000", "outside the vocabulary [0, 100)"},
  };
  for (const BadValue &bad : cases)
    expectBad(kEncDec, bad);
}

TEST(ModelConfigTest, BadValuesOfEncoderDecoderKeys) {
  const std::string arch = R"("architecture": "encoder_decoder")";
  const BadValue cases[] = {
      {"num_encoder_layers", "0", "must be in [1, 1024]"},
      {"num_encoder_layers", "1025", "must be in [1, 1024], got 1025"},
      {"num_encoder_layers", "\"6\"", "expected an integer"},
      {"num_decoder_layers", "-1", "must be in [1, 1024]"},
      {"num_decoder_layers", "6.5", "expected an integer"},
      {"share_embeddings", "\"true\"", "expected true or false"},
  };
  for (const BadValue &bad : cases)
    expectBad(kEncDec, bad);
  // Vocabulary sizes (each given once, with the other valid).
  expectBad(arch + R"(, "tgt_vocab_size": 10)", {"src_vocab_size", "0", "must be in [1, 16777216]"});
  expectBad(arch + R"(, "tgt_vocab_size": 10)", {"src_vocab_size", "\"10\"", "expected an integer"});
  expectBad(arch + R"(, "src_vocab_size": 10)", {"tgt_vocab_size", "-3", "must be in [1, 16777216]"});
  expectBad(arch + R"(, "src_vocab_size": 10)", {"tgt_vocab_size", "null", "expected an integer"});
}

TEST(ModelConfigTest, BadValuesOfDecoderOnlyKeys) {
  const BadValue cases[] = {
      {"num_layers", "0", "must be in [1, 1024]"},
      {"num_layers", "100000", "must be in [1, 1024], got 100000"},
      {"num_layers", "\"12\"", "expected an integer"},
      {"pad_id", "60000", "outside the vocabulary [0, 60000)"},
      {"bos_id", "60000", "outside the vocabulary [0, 60000)"},
  };
  for (const BadValue &bad : cases)
    expectBad(kDecOnly, bad);
  expectBad(R"("architecture": "decoder_only")", {"vocab_size", "0", "must be in [1, 16777216]"});
  expectBad(R"("architecture": "decoder_only")", {"vocab_size", "[1]", "expected an integer"});
}

TEST(ModelConfigTest, DecoderOnlyDefaultsFitAnyVocabulary) {
  // A decoder_only model has no special tokens by default, so no default can
  // fall outside a small vocabulary (67 tokens, as a character-level model).
  auto c = parseModelConfig(R"({"architecture": "decoder_only", "vocab_size": 67})", kSource);
  ASSERT_TRUE(!!c) << errorText(c);
  EXPECT_FALSE(c->bosId || c->eosId || c->unkId || c->padId);
  std::string msg = parseError(R"({"architecture": "decoder_only", "vocab_size": 100,
                                   "bos_id": 50256})");
  EXPECT_TRUE(contains(msg, "key 'bos_id'")) << msg;
  EXPECT_TRUE(contains(msg, "50256 is outside the vocabulary [0, 100)")) << msg;
}

TEST(ModelConfigTest, TokenConventionsOfBothArchitectures) {
  // encoder_decoder: the PyTorch translation tutorial's (pad 1, BOS 2, EOS 3,
  // unk 0; a source is BOS ids EOS).
  auto ed = parseModelConfig("{" + kEncDec + "}", kSource);
  ASSERT_TRUE(!!ed) << errorText(ed);
  EXPECT_EQ(ed->padId, 1);
  EXPECT_EQ(ed->bosId, 2);
  EXPECT_EQ(ed->eosId, 3);
  EXPECT_EQ(ed->unkId, 0);
  EXPECT_TRUE(ed->sourceBos);
  auto plain = parseModelConfig("{" + kEncDec + R"(, "source_bos": false, "unk_id": null})", kSource);
  ASSERT_TRUE(!!plain) << errorText(plain);
  EXPECT_FALSE(plain->sourceBos);
  EXPECT_FALSE(plain->unkId.has_value());
  // The resolved config states every convention.
  std::string json;
  llvm::raw_string_ostream os(json);
  os << llvm::json::Value(toJson(*ed));
  EXPECT_TRUE(contains(json, R"("source_bos":true)")) << json;
  EXPECT_TRUE(contains(json, R"("unk_id":0)")) << json;
  // A source wrapped in BOS needs a BOS; source_bos is not a decoder_only key.
  EXPECT_TRUE(contains(parseError("{" + kEncDec + R"(, "bos_id": null})"), "key 'source_bos': needs a bos_id"));
  EXPECT_TRUE(contains(parseError("{" + kDecOnly + R"(, "source_bos": true})"), "source_bos"));
  EXPECT_TRUE(contains(parseError("{" + kEncDec + R"(, "unk_id": 100000})"), "key 'unk_id'"));
}

TEST(ModelConfigTest, PadIdNull) {
  // decoder_only accepts no pad token; encoder_decoder needs one.
  auto c = parseModelConfig("{" + kDecOnly + R"(, "pad_id": null})", kSource);
  ASSERT_TRUE(!!c) << errorText(c);
  EXPECT_FALSE(c->padId.has_value());
  std::string msg = parseError(withKey(kEncDec, "pad_id", "null"));
  EXPECT_TRUE(contains(msg, kSource)) << msg;
  EXPECT_TRUE(contains(msg, "key 'pad_id'")) << msg;
  EXPECT_TRUE(contains(msg, "encoder_decoder needs a pad_id")) << msg;
}

TEST(ModelConfigTest, ArchitectureMissingOrBad) {
  std::string msg = parseError(R"({"src_vocab_size": 10, "tgt_vocab_size": 10})");
  EXPECT_TRUE(contains(msg, kSource)) << msg;
  EXPECT_TRUE(contains(msg, "key 'architecture'")) << msg;
  EXPECT_TRUE(contains(msg, "missing")) << msg;
  msg = parseError(R"({"architecture": "bert", "src_vocab_size": 10})");
  EXPECT_TRUE(contains(msg, "key 'architecture'")) << msg;
  EXPECT_TRUE(contains(msg, "expected one of encoder_decoder, decoder_only")) << msg;
  msg = parseError(R"({"architecture": 1})");
  EXPECT_TRUE(contains(msg, "key 'architecture'")) << msg;
}

TEST(ModelConfigTest, UnknownKeyAndKeyOfTheOtherArchitecture) {
  std::string msg = parseError(withKey(kEncDec, "num_hidden_layers", "4"));
  EXPECT_TRUE(contains(msg, kSource)) << msg;
  EXPECT_TRUE(contains(msg, "key 'num_hidden_layers'")) << msg;
  EXPECT_TRUE(contains(msg, "unknown key for architecture encoder_decoder")) << msg;

  msg = parseError(withKey(kEncDec, "num_layers", "4"));
  EXPECT_TRUE(contains(msg, "key 'num_layers'")) << msg;
  EXPECT_TRUE(contains(msg, "unknown key for architecture encoder_decoder")) << msg;
  msg = parseError(withKey(kEncDec, "vocab_size", "100"));
  EXPECT_TRUE(contains(msg, "key 'vocab_size'")) << msg;

  for (const char *key : {"num_encoder_layers", "num_decoder_layers", "src_vocab_size",
                          "tgt_vocab_size", "share_embeddings"}) {
    msg = parseError(withKey(kDecOnly, key, key == std::string("share_embeddings") ? "true" : "2"));
    EXPECT_TRUE(contains(msg, kSource)) << msg;
    EXPECT_TRUE(contains(msg, std::string("key '") + key + "'")) << msg;
    EXPECT_TRUE(contains(msg, "unknown key for architecture decoder_only")) << msg;
  }
}

TEST(ModelConfigTest, MissingVocabularySizes) {
  std::string msg = parseError(R"({"architecture": "encoder_decoder", "tgt_vocab_size": 10})");
  EXPECT_TRUE(contains(msg, kSource)) << msg;
  EXPECT_TRUE(contains(msg, "key 'src_vocab_size': missing")) << msg;
  msg = parseError(R"({"architecture": "encoder_decoder", "src_vocab_size": 10})");
  EXPECT_TRUE(contains(msg, "key 'tgt_vocab_size': missing")) << msg;
  msg = parseError(R"({"architecture": "decoder_only"})");
  EXPECT_TRUE(contains(msg, kSource)) << msg;
  EXPECT_TRUE(contains(msg, "key 'vocab_size': missing")) << msg;
}

TEST(ModelConfigTest, DModelNotDivisibleByNumHeads) {
  std::string msg = parseError("{" + kEncDec + R"(, "d_model": 100, "num_heads": 8})");
  EXPECT_TRUE(contains(msg, kSource)) << msg;
  EXPECT_TRUE(contains(msg, "key 'num_heads'")) << msg;
  EXPECT_TRUE(contains(msg, "d_model 100 is not divisible by num_heads 8")) << msg;
  // The default num_heads (12) of decoder_only against d_model 100.
  msg = parseError("{" + kDecOnly + R"(, "d_model": 100})");
  EXPECT_TRUE(contains(msg, "d_model 100 is not divisible by num_heads 12")) << msg;
}

TEST(ModelConfigTest, ShareEmbeddingsNeedsEqualVocabularies) {
  std::string msg = parseError(R"({"architecture": "encoder_decoder", "src_vocab_size": 23,
                                   "tgt_vocab_size": 19, "share_embeddings": true})");
  EXPECT_TRUE(contains(msg, kSource)) << msg;
  EXPECT_TRUE(contains(msg, "key 'share_embeddings'")) << msg;
  EXPECT_TRUE(contains(msg, "needs src_vocab_size == tgt_vocab_size, got 23 and 19")) << msg;
  EXPECT_TRUE(parseError(R"({"architecture": "encoder_decoder", "src_vocab_size": 23,
                             "tgt_vocab_size": 23, "share_embeddings": true})")
                  .empty());
}

TEST(ModelConfigTest, PadIdMustFitTheSmallerVocabulary) {
  // pad_id is used on both sides: it must be in the smaller vocabulary.
  std::string msg = parseError(R"({"architecture": "encoder_decoder", "src_vocab_size": 23,
                                   "tgt_vocab_size": 19, "pad_id": 20})");
  EXPECT_TRUE(contains(msg, kSource)) << msg;
  EXPECT_TRUE(contains(msg, "key 'pad_id'")) << msg;
  EXPECT_TRUE(contains(msg, "20 is outside the vocabulary [0, 19)")) << msg;
}

TEST(ModelConfigTest, InvalidJsonAndNonObject) {
  std::string msg = parseError(R"({"architecture": "encoder_decoder",)");
  EXPECT_TRUE(contains(msg, kSource)) << msg;
  EXPECT_TRUE(contains(msg, "invalid JSON")) << msg;
  msg = parseError("");
  EXPECT_TRUE(contains(msg, "invalid JSON")) << msg;
  msg = parseError(R"(["architecture"])");
  EXPECT_TRUE(contains(msg, kSource)) << msg;
  EXPECT_TRUE(contains(msg, "must be a JSON object")) << msg;
}

std::string render(const llvm::json::Object &o) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::json::Value(llvm::json::Object(o));
  return s;
}

void expectRoundTrip(const std::string &json) {
  SCOPED_TRACE(json);
  auto c = parseModelConfig(json, kSource);
  ASSERT_TRUE(!!c) << errorText(c);
  llvm::json::Object first = toJson(*c);
  std::string text = render(first);
  auto again = parseModelConfig(text, "manifest.json");
  ASSERT_TRUE(!!again) << errorText(again);
  llvm::json::Object second = toJson(*again);
  EXPECT_EQ(text, render(second));
  EXPECT_TRUE(llvm::json::Value(std::move(first)) == llvm::json::Value(std::move(second)));
}

TEST(ModelConfigTest, ToJsonRoundTrip) {
  expectRoundTrip("{" + kEncDec + "}");
  expectRoundTrip("{" + kDecOnly + "}");
  expectRoundTrip(R"({"architecture": "encoder_decoder", "d_model": 12, "num_heads": 3,
      "d_ff": 20, "num_encoder_layers": 2, "num_decoder_layers": 1, "src_vocab_size": 21,
      "tgt_vocab_size": 21, "max_seq_len": 16, "activation": "gelu", "norm_position": "pre",
      "final_norm": false, "share_embeddings": true, "tie_output": true,
      "positional": "learned", "layer_norm_eps": 1e-6, "pad_id": 0, "dropout": 0.3})");
  expectRoundTrip(R"({"architecture": "decoder_only", "d_model": 8, "num_heads": 2,
      "num_layers": 2, "vocab_size": 17, "pad_id": 0, "bos_id": 1, "eos_id": 2,
      "activation": "relu", "positional": "sinusoidal", "tie_output": false})");
}

TEST(ModelConfigTest, ToJsonHasEveryKeyOfItsArchitectureOnly) {
  auto c = parseModelConfig("{" + kDecOnly + "}", kSource);
  ASSERT_TRUE(!!c) << errorText(c);
  llvm::json::Object o = toJson(*c);
  for (const char *key : {"architecture", "d_model", "num_heads", "d_ff", "num_layers",
                          "vocab_size", "max_seq_len", "dropout", "activation",
                          "norm_position", "final_norm", "layer_norm_eps", "tie_output",
                          "positional", "pad_id", "bos_id", "eos_id", "unk_id"})
    EXPECT_NE(o.get(key), nullptr) << key;
  EXPECT_EQ(o.size(), 18u);
  EXPECT_EQ(o.get("src_vocab_size"), nullptr);
  EXPECT_EQ(o.get("share_embeddings"), nullptr);
  EXPECT_EQ(o.get("source_bos"), nullptr);
  ASSERT_NE(o.get("pad_id"), nullptr);
  EXPECT_TRUE(o.get("pad_id")->getAsNull().has_value());
  EXPECT_EQ(o.getString("activation"), std::optional<llvm::StringRef>("gelu_tanh"));
  EXPECT_EQ(o.getInteger("d_ff"), std::optional<int64_t>(3072));

  auto e = parseModelConfig("{" + kEncDec + "}", kSource);
  ASSERT_TRUE(!!e) << errorText(e);
  llvm::json::Object eo = toJson(*e);
  EXPECT_EQ(eo.size(), 24u); // + share_embeddings, source_bos, layout, scale_embedding and the four vocabulary keys
  EXPECT_EQ(eo.get("num_layers"), nullptr);
  EXPECT_EQ(eo.get("vocab_size"), nullptr);
  EXPECT_EQ(eo.getInteger("num_encoder_layers"), std::optional<int64_t>(6));
  EXPECT_EQ(eo.getBoolean("share_embeddings"), std::optional<bool>(false));
}

} // namespace

// The nesting limit of model definitions (checked before LLVM's JSON parser
// and MLIR's parser, which recurse per level): outside strings and inside
// each string, "->" closing nothing, MLIR comments skipped.
TEST(ModelConfigTest, DeepNestingIsRefusedBeforeParsing) {
  auto nested = [](int n) { return std::string(n, '[') + std::string(n, ']'); };
  auto refused = [](const std::string &text) {
    llvm::Error err = checkDefinitionText(text, "m.json");
    if (!err)
      return std::string();
    return llvm::toString(std::move(err));
  };
  EXPECT_EQ(refused(nested(kMaxDefinitionNesting)), "");
  EXPECT_EQ(refused(nested(kMaxDefinitionNesting + 1)),
            "m.json:1: brackets nest deeper than 64 levels");
  EXPECT_EQ(refused("{\n\"a\":\n" + nested(100) + "}"),
            "m.json:3: brackets nest deeper than 64 levels");
  // Inside a string, counted on its own; an escaped quote does not end it.
  EXPECT_NE(refused("x = \"" + std::string(65, '[') + "\""), "");
  EXPECT_EQ(refused("x = \"\\\"" + std::string(64, '[') + "\""), "");
  EXPECT_EQ(refused(std::string(40, '(') + "\"" + std::string(40, '[') + "\"" +
                    std::string(40, ')')),
            "");
  // Unbalanced brackets in many strings do not add up.
  std::string names;
  for (int i = 0; i < 100; ++i)
    names += "\"a(\" ";
  EXPECT_EQ(refused(names), "");
  // "->" is not a closing bracket, and comments are skipped.
  std::string arrows;
  for (int i = 0; i < 100; ++i)
    arrows += "(tensor<f32>) -> tensor<f32>\n";
  EXPECT_EQ(refused(arrows), "");
  EXPECT_EQ(refused("// " + std::string(100, '{') + "\nx"), "");
  // parseModelConfig applies it.
  auto config = parseModelConfig(nested(100000), "deep.json");
  ASSERT_FALSE(!!config);
  EXPECT_NE(llvm::toString(config.takeError()).find("deep.json:1: brackets nest deeper"),
            std::string::npos);
}
