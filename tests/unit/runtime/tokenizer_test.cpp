// Tests for runtime/host/Tokenizer.h: BPE trained on a small corpus with the
// special ids reserved where they are asked, text round trips, unknown
// pieces and specials dropped on decode, save and load give the same ids.
#include "runtime/host/Tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>

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

}  // namespace
}  // namespace transfuse::rt
