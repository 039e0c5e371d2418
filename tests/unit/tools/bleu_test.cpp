// Tests for tools/Bleu.h against sacreBLEU 2.6.0 (values printed by
// sacrebleu.corpus_bleu and its Tokenizer13a on these strings).
#include "tools/Bleu.h"

#include <gtest/gtest.h>

namespace mlir::transfuse::tools {
namespace {

std::string joined(const std::vector<std::string> &tokens) {
  std::string s;
  for (const std::string &t : tokens)
    s += (s.empty() ? "" : " ") + t;
  return s;
}

TEST(BleuTest, Tokenizes13aAsSacreBleu) {
  EXPECT_EQ(joined(tokenize13a("Ein Mann, der 1,000.50 Euro (und 3-4 Hunde) hat.")),
            "Ein Mann , der 1,000.50 Euro ( und 3 - 4 Hunde ) hat .");
  EXPECT_EQ(joined(tokenize13a("Er sagt: &quot;Hallo!&quot; -- ok?")),
            "Er sagt : \" Hallo ! \" -- ok ?");
  EXPECT_EQ(joined(tokenize13a("a-b 7-8 x.y 1.5,2")), "a-b 7 - 8 x . y 1.5,2");
  EXPECT_EQ(joined(tokenize13a("Zwei junge Männer sind im Freien.")),
            "Zwei junge Männer sind im Freien .");
}

TEST(BleuTest, CorpusScoreMatchesSacreBleu) {
  std::vector<std::string> hyps = {"Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.",
                                   "Eine Frau, die 3-4 Äpfel hat.", "Kinder."};
  std::vector<std::string> refs = {"Ein Mann fährt ein Fahrrad.", "Zwei Hunde spielen im Schnee.",
                                   "Eine Frau hat 3-4 Äpfel.", "Drei Kinder spielen draußen."};
  EXPECT_NEAR(corpusBleu(hyps, refs), 50.16911268507227, 1e-9);
  EXPECT_NEAR(corpusBleu(refs, refs), 100.0, 1e-9);
  EXPECT_EQ(corpusBleu({"the cat", "a dog"}, {"the cat sat on the mat", "a dog ran"}), 0.0);
  EXPECT_EQ(corpusBleu({""}, {"something"}), 0.0);
}

} // namespace
} // namespace mlir::transfuse::tools
