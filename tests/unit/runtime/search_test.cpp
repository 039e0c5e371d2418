// The search of runtime/host/Search.h over a scripted decoder: a table of
// next-token probabilities given the last token, so every expected result
// follows by hand. Ids: pad 1, BOS 2, EOS 3, words 4 and 5.
#include "runtime/host/Search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

namespace {

using namespace transfuse::rt;

constexpr int32_t kPad = 1, kBos = 2, kEos = 3, kA = 4, kB = 5;
constexpr int64_t kVocab = 6;

// Logits log p(next | last) from a table; each row keeps the tokens it was
// fed, moved by reorder() as a compiled model's cache rows are, so a test
// can check what a row's cache held.
class TableModel : public StepModel {
public:
  std::map<int32_t, std::map<int32_t, double>> next; // last -> {token: p}
  std::vector<std::vector<int32_t>> history;           // per row
  int steps = 0, reorders = 0;

  int64_t vocab() const override { return kVocab; }
  std::vector<float> logits;
  Status step(const std::vector<int32_t>& last, const std::vector<int64_t>&,
              const float*& out) override {
    if (history.empty()) history.resize(last.size());
    EXPECT_EQ(history.size(), last.size());
    logits.assign(last.size() * kVocab, -INFINITY);
    out = logits.data();
    for (size_t r = 0; r < last.size(); ++r) {
      history[r].push_back(last[r]);
      for (auto [t, p] : next[last[r]]) logits[r * kVocab + t] = (float)std::log(p);
    }
    ++steps;
    return Status::ok();
  }
  Status reorder(const std::vector<int32_t>& parents) override {
    std::vector<std::vector<int32_t>> h;
    for (int32_t p : parents) h.push_back(history.at(p));
    history = std::move(h);
    ++reorders;
    return Status::ok();
  }
};

TokenIds ids() {
  TokenIds t;
  t.pad = kPad, t.bos = kBos, t.eos = kEos;
  return t;
}

std::vector<std::vector<Hypothesis>> run(TableModel& m, const SearchOptions& o, int maxLen = 6,
                                         std::vector<int32_t> prefix = {}, int sentences = 1) {
  m.history.clear(); // a new search: rows start at BOS
  std::vector<SearchSentence> s(sentences);
  for (int i = 0; i < sentences; ++i)
    s[i] = {i, maxLen, o.minLen, prefix};
  auto r = search(m, s, o, ids());
  EXPECT_TRUE(r.isOk()) << r.status().message();
  return r.isOk() ? *r : std::vector<std::vector<Hypothesis>>{};
}

// Greedy takes A (0.6) and then A's best continuations; the best sentence is
// B EOS (0.4 · 0.9 = 0.36), which beam 2 finds.
TableModel greedyTrap() {
  TableModel m;
  m.next[kBos] = {{kA, 0.6}, {kB, 0.4}};
  m.next[kA] = {{kEos, 0.3}, {kA, 0.35}, {kB, 0.35}};
  m.next[kB] = {{kEos, 0.9}, {kA, 0.1}};
  return m;
}

TEST(Search, BeamTwoFindsTheHypothesisGreedyMisses) {
  TableModel g = greedyTrap(), b = greedyTrap();
  SearchOptions greedy;
  auto gr = run(g, greedy);
  ASSERT_EQ(gr.size(), 1u);
  ASSERT_EQ(gr[0].size(), 1u);
  // A, then A (0.35 ties B; the lower id wins), ... until the length limit.
  EXPECT_EQ(gr[0][0].ids.front(), kA);
  SearchOptions beam;
  beam.beam = 2;
  beam.nBest = 2;
  auto br = run(b, beam);
  ASSERT_EQ(br[0].size(), 2u);
  EXPECT_EQ(br[0][0].ids, (std::vector<int32_t>{kB}));
  EXPECT_NEAR(br[0][0].logProb, std::log(0.4 * 0.9), 1e-6);
  EXPECT_EQ(br[0][0].tokenLogProbs.size(), 2u); // B and EOS
  EXPECT_GT(br[0][0].logProb, gr[0][0].logProb);
  // A EOS (0.18) ranks third at the second step (B EOS, then A A and A B
  // at 0.21), outside the beam; A B EOS (0.189) finishes next.
  EXPECT_EQ(br[0][1].ids, (std::vector<int32_t>{kA, kB}));
  EXPECT_NEAR(br[0][1].logProb, std::log(0.6 * 0.35 * 0.9), 1e-6);
  EXPECT_GE(b.reorders, 1); // beams were made by copying rows
  // The rows' caches held what their beams were fed: at the last step the
  // surviving rows were A A and A B, both from BOS A.
  ASSERT_EQ(b.history.size(), 2u);
  EXPECT_EQ(b.history[0], (std::vector<int32_t>{kBos, kA, kA}));
  EXPECT_EQ(b.history[1], (std::vector<int32_t>{kBos, kA, kB}));
}

TEST(Search, BeamOneIsGreedy) {
  TableModel g = greedyTrap(), b = greedyTrap();
  SearchOptions one;
  one.beam = 1;
  one.alpha = 0.6; // normalizing one finished hypothesis changes nothing
  auto x = run(g, SearchOptions()), y = run(b, one);
  EXPECT_EQ(x[0][0].ids, y[0][0].ids);
  EXPECT_EQ(x[0][0].logProb, y[0][0].logProb);
}

TEST(Search, LengthLimitsAndTheLengthPenalty) {
  TableModel m;
  m.next[kBos] = {{kA, 0.5}, {kEos, 0.5}};
  m.next[kA] = {{kA, 0.5}, {kEos, 0.5}};
  // EOS first without a minimum.
  EXPECT_TRUE(run(m, SearchOptions())[0][0].ids.empty());
  // --min-len 3: three tokens before EOS may end it.
  SearchOptions o;
  o.minLen = 3;
  EXPECT_EQ(run(m, o)[0][0].ids, (std::vector<int32_t>(3, kA)));
  // A limit of 2 with EOS banned until then: two tokens, EOS forced.
  TableModel never;
  never.next[kBos] = {{kA, 1.0}};
  never.next[kA] = {{kA, 0.99}, {kEos, 0.01}};
  auto h = run(never, SearchOptions(), /*maxLen=*/2)[0][0];
  EXPECT_EQ(h.ids, (std::vector<int32_t>{kA, kA}));
  EXPECT_EQ(h.tokenLogProbs.size(), 3u);
  EXPECT_NEAR(h.tokenLogProbs.back(), std::log(0.01), 1e-6);
  // The paper's penalty: score = log p / ((5 + len) / 6)^alpha, len with EOS.
  SearchOptions lp;
  lp.alpha = 0.6;
  auto p = run(never, lp, 2)[0][0];
  EXPECT_NEAR(p.score, p.logProb / std::pow(8.0 / 6.0, 0.6), 1e-12);
  // ignoreEos: exactly maxLen tokens, no EOS.
  SearchOptions exact;
  exact.ignoreEos = true;
  auto e = run(m, exact, 4)[0][0];
  EXPECT_EQ(e.ids, (std::vector<int32_t>(4, kA)));
  EXPECT_EQ(e.tokenLogProbs.size(), 4u);
}

TEST(Search, PaddingIsNeverEmittedAndPrefixesAreForced) {
  TableModel m;
  m.next[kBos] = {{kPad, 0.9}, {kA, 0.1}};
  m.next[kA] = {{kPad, 0.9}, {kEos, 0.1}};
  m.next[kB] = {{kEos, 1.0}};
  auto h = run(m, SearchOptions())[0][0];
  EXPECT_EQ(h.ids, (std::vector<int32_t>{kA}));
  // A forced B (probability 0 after BOS is still forced; its log-prob counts).
  m.next[kBos][kB] = 0.0001;
  auto f = run(m, SearchOptions(), 6, {kB})[0][0];
  EXPECT_EQ(f.ids, (std::vector<int32_t>{kB}));
  EXPECT_NEAR(f.tokenLogProbs[0], std::log(0.0001), 1e-3);
}

TEST(Search, NoRepeatNgramAndRepetitionPenalty) {
  TableModel m;
  m.next[kBos] = {{kA, 0.9}, {kB, 0.1}};
  m.next[kA] = {{kA, 0.6}, {kB, 0.3}, {kEos, 0.1}};
  m.next[kB] = {{kA, 0.6}, {kB, 0.3}, {kEos, 0.1}};
  SearchOptions o;
  o.noRepeatNgram = 2;
  auto h = run(m, o, 6)[0][0];
  // A A is banned after the first A, then A B, B A, B B in some order: no
  // bigram twice.
  std::set<std::pair<int32_t, int32_t>> seen;
  for (size_t i = 0; i + 1 < h.ids.size(); ++i)
    EXPECT_TRUE(seen.insert({h.ids[i], h.ids[i + 1]}).second) << i;
  EXPECT_EQ(h.ids, (std::vector<int32_t>{kA, kA, kB, kA}));
  // A penalty on A (logit log 0.6 < 0, times 3: 0.22 < 0.3) makes B the
  // choice after A.
  SearchOptions p;
  p.repetitionPenalty = 3.0;
  auto r = run(m, p, 2)[0][0];
  EXPECT_EQ(r.ids, (std::vector<int32_t>{kA, kB}));
}

TEST(Search, SamplingIsKeyedBySeedAndLineNotByBatching) {
  TableModel m;
  m.next[kBos] = {{kA, 0.5}, {kB, 0.5}};
  m.next[kA] = {{kA, 0.4}, {kB, 0.4}, {kEos, 0.2}};
  m.next[kB] = {{kA, 0.4}, {kB, 0.4}, {kEos, 0.2}};
  SearchOptions o;
  o.sample = true;
  o.seed = 42;
  auto batch = run(m, o, 8, {}, 4);
  for (int line = 0; line < 4; ++line) {
    TableModel alone = m;
    alone.history.clear();
    std::vector<SearchSentence> s{{line, 8, 0, {}}};
    auto one = search(alone, s, o, ids());
    ASSERT_TRUE(one.isOk());
    EXPECT_EQ((*one)[0][0].ids, batch[line][0].ids) << "line " << line;
  }
  // Top-k 1 is greedy.
  o.topK = 1;
  EXPECT_EQ(run(m, o)[0][0].ids, run(m, SearchOptions())[0][0].ids);
  // Another seed draws other sentences somewhere in 4 lines.
  o.topK = 0;
  o.seed = 7;
  auto other = run(m, o, 8, {}, 4);
  bool differs = false;
  for (int line = 0; line < 4; ++line) differs |= other[line][0].ids != batch[line][0].ids;
  EXPECT_TRUE(differs);
}

}  // namespace
