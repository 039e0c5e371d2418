// Tests for runtime/host/Tokenizer.h: BPE trained on a small corpus with the
// special ids reserved where they are asked, text round trips, unknown
// pieces and specials dropped on decode, save and load give the same ids.
// MarianTokenizer against transformers' MarianTokenizer: the golden data of
// tests/tokenizers/marian (made by tests/tokenizers/make_marian_golden.py)
// holds, for 1209 lines (Multi30k, the byte-level corpus's accents, CJK,
// emoji and code, language codes), the source ids and the decode of the
// target ids, with a joint and with separate vocabularies; then the errors.
// A Llama 2 / Mistral tokenizer.model against transformers' LlamaTokenizerFast
// (tests/tokenizers/llama-spm, made by make_llama_spm_golden.py): BOS and
// the SentencePiece ids of 1409 lines, and their decode.
#include "runtime/host/Tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "runtime/Json.h"
#include "runtime/host/Corpus.h"
#include "tests/unit/runtime/TestUtil.h"

namespace transfuse::rt {
namespace {

std::vector<std::string> corpus() {
  std::vector<std::string> lines;
  const char* words[] = {"two", "young", "men", "are", "outside", "near", "many", "bushes",
                         "a",   "girl",  "is",  "climbing", "into", "wooden", "playhouse"};
  for (int i = 0; i < 300; ++i) {
    std::string s;
    for (int k = 0; k < 6; ++k) s += std::string(k ? " " : "") + words[(i * 7 + k * 3) % 15];
    lines.push_back(s + ".");
  }
  return lines;
}

TEST(TokenizerTest, TrainsWithTheSpecialIdsReserved) {
  std::vector<std::string> en = corpus(), de = {"Zwei junge Männer sind im Freien."};
  Tokenizer::TrainOptions o;
  o.vocabSize = 120;
  o.specials = {0, 1, 2, 3};
  auto tok = Tokenizer::train({&en, &de}, o);
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  EXPECT_LE((*tok)->vocabSize(), 120);
  EXPECT_GT((*tok)->vocabSize(), 30);
  Tokenizer::Specials s = (*tok)->specials();
  EXPECT_EQ(s.pad, 0);
  EXPECT_EQ(s.bos, 1);
  EXPECT_EQ(s.eos, 2);
  EXPECT_EQ(s.unk, 3);
  std::vector<int32_t> ids = (*tok)->encode("two young men are outside.");
  ASSERT_FALSE(ids.empty());
  for (int32_t id : ids) EXPECT_GT(id, 3);
  EXPECT_EQ((*tok)->decode(ids), "two young men are outside.");
  EXPECT_EQ((*tok)->decode((*tok)->encode("Zwei junge Männer")), "Zwei junge Männer");
}

TEST(TokenizerTest, DecodeDropsSpecialsAndUnknownPieces) {
  std::vector<std::string> en = corpus();
  Tokenizer::TrainOptions o;
  o.vocabSize = 80;
  auto tok = Tokenizer::train({&en}, o);
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  std::vector<int32_t> ids = (*tok)->encode("girl \xe2\x98\x83 bushes");  // a snowman: unknown
  EXPECT_NE(std::find(ids.begin(), ids.end(), 3), ids.end());
  std::string text = (*tok)->decode(ids);
  EXPECT_EQ(text.find("\xe2\x81\x87"), std::string::npos) << text;  // " ⁇ "
  EXPECT_EQ(text.find("unk"), std::string::npos) << text;
  std::vector<int32_t> withSpecials = {1};
  withSpecials.insert(withSpecials.end(), ids.begin(), ids.end());
  withSpecials.push_back(2);
  withSpecials.push_back(0);
  EXPECT_EQ((*tok)->decode(withSpecials), text);
}

TEST(TokenizerTest, SaveAndLoadGiveTheSameIds) {
  testing::TempDir dir;
  std::vector<std::string> en = corpus();
  Tokenizer::TrainOptions o;
  o.vocabSize = 100;
  auto tok = Tokenizer::train({&en}, o);
  ASSERT_TRUE(tok.isOk());
  ASSERT_TRUE((*tok)->save(dir.file("tok.model")).isOk());
  auto loaded = Tokenizer::load(dir.file("tok.model"));
  ASSERT_TRUE(loaded.isOk()) << loaded.status().message();
  for (const std::string& line : en) EXPECT_EQ((*loaded)->encode(line), (*tok)->encode(line));
  testing::writeBytes(dir.file("bad.model"), "not a model");
  auto bad = Tokenizer::load(dir.file("bad.model"));
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("bad.model"), std::string::npos);
}

TEST(TokenizerTest, SpecialIdsMustDifferAndFit) {
  std::vector<std::string> en = corpus();
  Tokenizer::TrainOptions o;
  o.specials = {0, 1, 1, 3};
  EXPECT_FALSE(Tokenizer::train({&en}, o).isOk());
  o.specials = {0, 1, 2, 500};
  o.vocabSize = 100;
  EXPECT_FALSE(Tokenizer::train({&en}, o).isOk());
}

// ----------------------------------------------------------------- Marian

std::string marianDir() { return std::string(TRANSFUSE_SOURCE_DIR) + "/tests/tokenizers/marian"; }

// The records of a golden.jsonl.gz, one JSON object a line (a failure and
// none when it does not read).
std::vector<JsonValue> goldenRecords(const std::string& path) {
  std::vector<JsonValue> records;
  auto lines = readTextLines(path);
  if (!lines.isOk()) {
    ADD_FAILURE() << lines.status().message();
    return records;
  }
  for (size_t i = 0; i < lines->size(); ++i) {
    auto rec = JsonValue::parse((*lines)[i]);
    if (!rec.isOk()) {
      ADD_FAILURE() << path << ": golden line " << i + 1 << ": " << rec.status().message();
      return {};
    }
    records.push_back(std::move(*rec));
  }
  return records;
}

std::vector<int32_t> intsOf(const JsonValue& v) {
  std::vector<int32_t> out;
  for (const JsonValue& x : v.asArray()) out.push_back(static_cast<int32_t>(x.asInt64()));
  return out;
}

std::string showIds(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return "[" + s + "]";
}

class MarianTokenizerTest : public ::testing::Test {
 protected:
  // The separate-vocabulary variant: its JSON files beside the models.
  std::string separateDir() {
    namespace fs = std::filesystem;
    for (const char* f : {"source.spm", "target.spm"})
      fs::copy_file(marianDir() + "/" + f, dir_.file(f), fs::copy_options::overwrite_existing);
    for (const char* f : {"vocab.json", "target_vocab.json", "tokenizer_config.json"})
      fs::copy_file(marianDir() + "/separate/" + f, dir_.file(f),
                    fs::copy_options::overwrite_existing);
    return dir_.path();
  }
  testing::TempDir dir_;
};

TEST_F(MarianTokenizerTest, EveryLineMatchesTransformers) {
  auto joint = MarianTokenizer::load(marianDir());
  ASSERT_TRUE(joint.isOk()) << joint.status().message();
  auto separate = MarianTokenizer::load(separateDir());
  ASSERT_TRUE(separate.isOk()) << separate.status().message();
  const std::vector<JsonValue> records = goldenRecords(marianDir() + "/golden.jsonl.gz");
  int checked = 0, failed = 0;
  std::string report;
  for (size_t i = 0; i < records.size(); ++i) {
    const JsonValue* rec = &records[i];
    const std::string text = rec->find("t")->asString();
    for (auto [key, tok] : {std::pair{"j", joint->get()}, {"s", separate->get()}}) {
      const auto& want = rec->find(key)->asArray();
      ++checked;
      std::vector<int32_t> source = tok->encode(text);
      source.push_back(tok->eosId());  // the model's convention: ids EOS
      std::string why;
      if (source != intsOf(want[0]))
        why += "source ours " + showIds(source) + " hf " + showIds(intsOf(want[0])) + "; ";
      std::string decoded = tok->decode(intsOf(want[1]));
      if (decoded != want[2].asString())
        why += "decode ours \"" + decoded + "\" hf \"" + want[2].asString() + "\"";
      if (!why.empty() && failed++ < 8)
        report += "golden line " + std::to_string(i + 1) + " (" + key + ", \"" + text +
                  "\"): " + why + "\n";
    }
  }
  EXPECT_GT(checked, 2400);
  EXPECT_EQ(failed, 0) << failed << " of " << checked << " differ\n" << report;
}

TEST_F(MarianTokenizerTest, ErrorsNameTheFile) {
  auto missing = MarianTokenizer::load(dir_.path());
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().message(),
            dir_.path() + ": no readable source.spm (a Marian directory's SentencePiece models and "
                          "vocab.json)");
  std::string dir = separateDir();
  testing::writeBytes(dir_.file("target.spm"), "not a model");
  auto bad = MarianTokenizer::load(dir);
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message().rfind(dir_.file("target.spm") + ": not a SentencePiece model", 0),
            0u)
      << bad.status().message();
  separateDir();
  testing::writeBytes(dir_.file("vocab.json"), "{\"a\": 0}");
  auto noUnk = MarianTokenizer::load(dir);
  ASSERT_FALSE(noUnk.isOk());
  EXPECT_EQ(noUnk.status().message(), dir_.file("vocab.json") + ": no \"<unk>\" (the unknown token)");
  testing::writeBytes(dir_.file("vocab.json"), "{\"<unk>\": \"one\"}");
  auto badId = MarianTokenizer::load(dir);
  ASSERT_FALSE(badId.isOk());
  EXPECT_EQ(badId.status().message(), dir_.file("vocab.json") + ": the id of \"<unk>\" is not a valid id");
}

// ----------------------------------------------------- Llama tokenizer.model

TEST(LlamaSentencePieceTest, EveryLineMatchesTransformers) {
  const std::string dir = std::string(TRANSFUSE_SOURCE_DIR) + "/tests/tokenizers/llama-spm";
  auto tok = LlamaSentencePiece::load(dir);
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  const std::vector<JsonValue> records = goldenRecords(dir + "/golden.jsonl.gz");
  int checked = 0, failed = 0;
  std::string report;
  for (size_t i = 0; i < records.size(); ++i) {
    const JsonValue* rec = &records[i];
    const std::string text = rec->find("t")->asString();
    const std::vector<int32_t> want = intsOf(*rec->find("ids"));
    std::vector<int32_t> ids = (*tok)->encodePrompt(text);
    std::string decoded = (*tok)->decode(want);
    ++checked;
    std::string why;
    if (ids != want) why += "ids ours " + showIds(ids) + " hf " + showIds(want) + "; ";
    if (decoded != rec->find("d")->asString())
      why += "decode ours \"" + decoded + "\" hf \"" + rec->find("d")->asString() + "\"";
    if (!why.empty() && failed++ < 8)
      report += "golden line " + std::to_string(i + 1) + " (\"" + text + "\"): " + why + "\n";
  }
  EXPECT_GT(checked, 1400);
  EXPECT_EQ(failed, 0) << failed << " of " << checked << " differ\n" << report;
}

}  // namespace
}  // namespace transfuse::rt
