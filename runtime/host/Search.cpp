// Search over a compiled encoder_decoder: see Search.h.
#include "runtime/host/Search.h"

#include "runtime/Json.h"
#include "runtime/Philox.h"
#include "runtime/kernels/Norm.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

namespace transfuse::rt {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

std::string lineName(int64_t line) { return "line " + std::to_string(line + 1); }

// lse[r] = log Σ_j exp(logits[r, j]) of `logits` [rows, v]: a token's
// log-probability is its logit minus its row's.
void rowLogSumExp(const float* logits, int64_t rows, int64_t v, std::vector<float>& lse) {
  lse.resize(rows);
  ::transfuse::kernels::logSumExp(logits, lse.data(), rows, v);
}

struct Beam {
  std::vector<int32_t> tokens;
  std::vector<double> logProbs;
  double logProb = 0;
};

struct Sentence {
  int64_t line = 0;
  int64_t sourceRow = 0;  // its row of the encoded batch
  int maxLen = 0, minLen = 0;
  std::vector<int32_t> prefix;
  std::vector<int32_t> feed;  // SearchSentence::feed
  size_t fed = 0;             // of feed, the tokens the model has been given
  std::vector<Beam> beams;    // live, one row each
  std::vector<Hypothesis> finished;
};

// The `count` largest finite values of x[0, v) but the `banned` tokens,
// with their tokens (a min-heap over one pass; ties keep the lower token).
std::vector<std::pair<float, int32_t>> bestTokens(const float* x, int64_t v, int count,
                                                  const std::vector<int32_t>& banned) {
  // A max-heap under `better` keeps the worst of the best at the front.
  auto better = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  std::vector<std::pair<float, int32_t>> heap;
  const float kNegInfF = -std::numeric_limits<float>::infinity();
  for (int32_t j = 0; j < (int32_t)v; ++j) {
    if (x[j] == kNegInfF) continue;
    std::pair<float, int32_t> c{x[j], j};
    bool full = (int)heap.size() == count;
    if (full && !better(c, heap.front())) continue;
    if (std::find(banned.begin(), banned.end(), j) != banned.end()) continue;
    if (full) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = c;
    } else {
      heap.push_back(c);
    }
    std::push_heap(heap.begin(), heap.end(), better);
  }
  return heap;
}

// One token from softmax(log p / T) over the top-k and the top-p mass,
// with u = philoxUniform(seed, step, line, 0).
int32_t draw(const std::vector<double>& logProbs, const SearchOptions& o, uint64_t step,
             uint64_t line) {
  std::vector<std::pair<double, int32_t>> dist;
  for (int32_t j = 0; j < (int32_t)logProbs.size(); ++j)
    if (logProbs[j] > kNegInf) dist.push_back({logProbs[j] / o.temperature, j});
  std::sort(dist.begin(), dist.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (o.topK > 0 && (int64_t)dist.size() > o.topK) dist.resize(o.topK);
  double m = dist.front().first, sum = 0;
  for (auto& entry : dist) sum += (entry.first = std::exp(entry.first - m));
  double mass = 0;
  size_t keep = 0;
  while (keep < dist.size() && (keep == 0 || mass < o.topP * sum)) mass += dist[keep++].first;
  double u = philoxUniform(o.seed, step, line, 0) * mass, acc = dist[0].first;
  size_t pick = 0;
  while (pick + 1 < keep && acc <= u) acc += dist[++pick].first;
  return dist[pick].second;
}

double lengthPenalty(size_t length, double alpha) {
  return alpha == 0 ? 1.0 : std::pow((5.0 + (double)length) / 6.0, alpha);
}

Hypothesis finish(const Beam& beam, double alpha) {
  Hypothesis h;
  h.ids = beam.tokens;
  h.tokenLogProbs = beam.logProbs;
  h.logProb = beam.logProb;
  h.score = beam.logProb / lengthPenalty(beam.logProbs.size(), alpha);
  return h;
}

StatusOr<int32_t> configId(const JsonValue& config, const char* key) {
  const JsonValue* v = config.find(key);
  if (!v || v->isNull()) return int32_t{-1};
  if (!v->isInteger()) return Status::error(std::string("config key '") + key + "' is not an integer");
  return static_cast<int32_t>(v->asInt64());
}

}  // namespace

StatusOr<TokenIds> readTokenIds(const std::string& manifestPath) {
  std::ifstream in(manifestPath, std::ios::binary);
  if (!in) return Status::error("cannot read '" + manifestPath + "'");
  std::stringstream text;
  text << in.rdbuf();
  auto json = JsonValue::parse(text.str());
  if (!json.isOk()) return Status::error("'" + manifestPath + "': " + json.status().message());
  const JsonValue* config = json->find("config");
  if (!config || !config->isObject())
    return Status::error("'" + manifestPath +
                         "' has no config (a model given as MLIR text names no token ids)");
  TokenIds ids;
  for (auto [key, field] : {std::pair{"pad_id", &ids.pad}, {"bos_id", &ids.bos}, {"eos_id", &ids.eos}}) {
    auto id = configId(*config, key);
    if (!id.isOk()) return Status::error("'" + manifestPath + "': " + id.status().message());
    *field = *id;
  }
  const JsonValue* sourceBos = config->find("source_bos");
  ids.sourceBos = sourceBos && sourceBos->asBool();
  for (auto [key, field] : {std::pair{"src_vocab_size", &ids.srcVocab}, {"tgt_vocab_size", &ids.tgtVocab},
                            {"vocab_size", &ids.tgtVocab}})  // decoder_only: one vocabulary
    if (const JsonValue* v = config->find(key)) *field = v->asInt64();
  return ids;
}

namespace {
// What the search needs to know of an artifact's decoding entries: their
// rows (max_batch · max_beam), the cache's positions, the longest source.
struct DecodingSpecs {
  int64_t rows = 0, positions = 0, maxSource = 0, vocab = 0;
};

// Checks that `model` has `entries` and a decode_step of `inputs` token
// inputs (the last one the new tokens) to logits [B, n, V].
StatusOr<DecodingSpecs> decodingSpecs(CompiledModel& model, std::initializer_list<const char*> entries,
                                      const char* needs, size_t inputs) {
  std::vector<std::string> names = model.entryPoints();
  for (const char* needed : entries)
    if (std::find(names.begin(), names.end(), needed) == names.end())
      return Status::error(std::string("the artifact has no '") + needed + "' entry point (" + needs +
                           " compiled by this version)");
  auto in = model.inputs("decode_step");
  auto out = model.outputs("decode_step");
  if (!in.isOk()) return in.status();
  if (!out.isOk()) return out.status();
  if (in->size() != inputs || out->size() != 1 || (*out)[0].shape.size() != 3)
    return Status::error("decode_step does not take token inputs to logits");
  DecodingSpecs d;
  d.rows = in->back().maxShape[0];
  d.positions = in->back().maxShape[1];
  d.maxSource = in->front().maxShape[1];
  d.vocab = (*out)[0].shape[2];
  return d;
}

// A batch of b inputs with beam k fits the state's rows.
Status checkRows(int64_t b, int k, int64_t rows) {
  if (b * k <= rows) return Status::ok();
  return Status::error("a batch of " + std::to_string(b) + " with beam " + std::to_string(k) +
                       " needs " + std::to_string(b * k) + " rows, over the compiled " +
                       std::to_string(rows) + " (--max-batch · --max-beam)");
}
}  // namespace

StatusOr<std::unique_ptr<Translator>> Translator::create(CompiledModel& model, TokenIds ids) {
  auto specs = decodingSpecs(model, {"encode", "decode_step"}, "translation needs an encoder_decoder model", 2);
  if (!specs.isOk()) return specs.status();
  if (ids.bos < 0 || ids.eos < 0)
    return Status::error("decoding needs the config's bos_id and eos_id");
  std::unique_ptr<Translator> t(new Translator(model, ids));
  t->rows_ = specs->rows;
  t->maxSource_ = specs->maxSource;
  t->positions_ = specs->positions;
  if (t->ids_.tgtVocab <= 0) t->ids_.tgtVocab = specs->vocab;
  auto state = model.createState();
  if (!state.isOk()) return state.status();
  t->state_ = std::move(*state);
  return t;
}

StatusOr<Tensor> Translator::encode(const std::vector<std::vector<int32_t>>& sources,
                                    int64_t firstLine) {
  int64_t b = (int64_t)sources.size();
  if (b > rows_)
    return Status::error("a batch of " + std::to_string(b) + " sources is over the compiled " +
                         std::to_string(rows_) + " rows (--max-batch · --max-beam)");
  int64_t specials = 1 + (ids_.sourceBos ? 1 : 0), width = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const auto& s = sources[i];
    std::string line = lineName(firstLine + (int64_t)i);
    if (s.empty()) return Status::error(line + ": an empty source");
    for (int32_t id : s)
      if (id < 0 || (ids_.srcVocab > 0 && id >= ids_.srcVocab))
        return Status::error(line + ": id " + std::to_string(id) +
                             " is outside the source vocabulary [0, " +
                             std::to_string(ids_.srcVocab) + ")");
    int64_t n = (int64_t)s.size() + specials;
    if (n > maxSource_)
      return Status::error(line + ": a source of " + std::to_string(s.size()) + " ids (" +
                           std::to_string(n) + " with BOS/EOS) is over the compiled maximum " +
                           std::to_string(maxSource_) + " (--max-seq-len)");
    width = std::max(width, n);
  }
  bool ragged = std::any_of(sources.begin(), sources.end(), [&](const auto& s) {
    return (int64_t)s.size() + specials != width;
  });
  if (ragged && ids_.pad < 0)
    return Status::error("sources of different lengths need the config's pad_id");
  Tensor src = Tensor::zeros(DType::I32, {b, width});
  int32_t* p = src.data<int32_t>();
  for (int64_t r = 0; r < b; ++r) {
    std::vector<int32_t> row;
    if (ids_.sourceBos) row.push_back(ids_.bos);
    row.insert(row.end(), sources[r].begin(), sources[r].end());
    row.push_back(ids_.eos);
    row.resize(width, ids_.pad);
    std::copy(row.begin(), row.end(), p + r * width);
  }
  if (Status s = state_->reset(); !s.isOk()) return s;
  auto done = model_.run("encode", {{"src_tokens", src}}, state_.get());
  if (!done.isOk()) return done.status();
  return src;
}

StatusOr<std::vector<std::vector<Hypothesis>>> search(StepModel& model,
                                                      const std::vector<SearchSentence>& input,
                                                      const SearchOptions& o, const TokenIds& ids) {
  const int k = o.beam;
  const int64_t b = (int64_t)input.size(), v = model.vocab();
  const bool endless = o.ignoreEos || ids.eos < 0;  // no EOS: exactly maxLen tokens
  std::vector<Sentence> sentences(b);
  for (int64_t i = 0; i < b; ++i) {
    Sentence& s = sentences[i];
    s.line = input[i].line;
    s.sourceRow = i;
    s.maxLen = input[i].maxLen;
    s.minLen = std::min(input[i].minLen, s.maxLen);
    s.prefix = input[i].prefix;
    s.feed = input[i].feed;
    s.beams.push_back(Beam());
  }
  // rows[r] = (sentence, beam): the model's row r holds that beam's cache.
  std::vector<std::pair<int, int>> rows;
  for (int i = 0; i < (int)b; ++i) rows.push_back({i, 0});
  std::vector<double> logProbs;
  std::vector<float> lse, penalized;
  std::vector<int32_t> last, banned;
  std::vector<int64_t> sourceRows;
  for (int64_t step = 0; !rows.empty(); ++step) {
    if (o.stop && o.stop()) return Status::error("interrupted");
    const int64_t r = (int64_t)rows.size();
    last.clear();
    sourceRows.clear();
    for (auto [si, bi] : rows) {
      const Sentence& s = sentences[si];
      const Beam& beam = s.beams[bi];
      last.push_back(!beam.tokens.empty() ? beam.tokens.back() : s.fed > 0 ? s.feed[s.fed - 1] : ids.bos);
      sourceRows.push_back(s.sourceRow);
    }
    const float* out = nullptr;
    if (Status st = model.step(last, sourceRows, out); !st.isOk()) return st;
    if (o.repetitionPenalty != 1.0) {  // CTRL's: on the logits of tokens already output
      penalized.assign(out, out + r * v);
      for (int64_t i = 0; i < r; ++i) {
        const Beam& beam = sentences[rows[i].first].beams[rows[i].second];
        for (int32_t t : std::set<int32_t>(beam.tokens.begin(), beam.tokens.end())) {
          float& x = penalized[i * v + t];
          x = x > 0 ? (float)(x / o.repetitionPenalty) : (float)(x * o.repetitionPenalty);
        }
      }
      out = penalized.data();
    }
    rowLogSumExp(out, r, v, lse);

    // Candidates of each sentence: (total log-probability, row, token).
    // A sentence still being fed has one row and no candidates.
    std::vector<std::vector<std::tuple<double, int64_t, int32_t>>> candidates(b);
    std::vector<int64_t> feedingRow(b, -1);
    for (int64_t i = 0; i < r; ++i) {
      Sentence& s = sentences[rows[i].first];
      if (s.fed < s.feed.size()) {
        feedingRow[rows[i].first] = i;
        continue;
      }
      const Beam& beam = s.beams[rows[i].second];
      const size_t len = beam.tokens.size();
      const float* x = out + i * v;
      auto& c = candidates[rows[i].first];
      auto lp = [&](int32_t t) { return (double)x[t] - lse[i]; };
      // What may follow: a forced prefix token, EOS at the length limit; no
      // padding, no EOS before the minimum, no repeated n-gram.
      int32_t only = len < s.prefix.size() ? s.prefix[len] : (int)len >= s.maxLen ? ids.eos : -1;
      if (only >= 0) {
        c.push_back({beam.logProb + lp(only), i, only});
        continue;
      }
      banned.clear();
      if (ids.pad >= 0) banned.push_back(ids.pad);
      if (ids.eos >= 0 && ((int)len < s.minLen || endless)) {
        banned.push_back(ids.eos);
        banned.insert(banned.end(), o.stopIds.begin(), o.stopIds.end());
      }
      const size_t n = (size_t)o.noRepeatNgram;
      if (n > 0 && len + 1 >= n)
        for (size_t start = 0; start + n <= len; ++start)
          if (std::equal(beam.tokens.begin() + start, beam.tokens.begin() + start + n - 1,
                         beam.tokens.end() - (n - 1)))
            banned.push_back(beam.tokens[start + n - 1]);
      if (o.sample) {
        logProbs.resize(v);
        for (int32_t j = 0; j < v; ++j) logProbs[j] = lp(j);
        for (int32_t t : banned)
          if (t >= 0 && t < v) logProbs[t] = kNegInf;  // a stop id may lie outside
        // Keyed by the output's own step: the same draws however it was fed.
        int32_t t = draw(logProbs, o, (uint64_t)(step - (int64_t)s.feed.size()), (uint64_t)s.line);
        c.push_back({beam.logProb + logProbs[t], i, t});
        continue;
      }
      // Only a row's best 2k tokens can be among its sentence's best 2k.
      for (auto [value, j] : bestTokens(x, v, 2 * k, banned))
        c.push_back({beam.logProb + lp(j), i, j});
    }

    // Each sentence's next beams from its best 2k candidates: EOS among the
    // first k finishes a hypothesis, the others continue, k at most.
    std::vector<std::pair<int, int>> next;
    std::vector<int32_t> parents;
    for (int64_t si = 0; si < b; ++si) {
      Sentence& s = sentences[si];
      if (s.beams.empty()) continue;
      if (feedingRow[si] >= 0) {  // its next input is the next token fed
        ++s.fed;
        parents.push_back((int32_t)feedingRow[si]);
        next.push_back({(int)si, 0});
        continue;
      }
      auto& c = candidates[si];
      size_t top = std::min(c.size(), (size_t)(2 * k));
      std::partial_sort(c.begin(), c.begin() + top, c.end(), [](const auto& x, const auto& y) {
        if (std::get<0>(x) != std::get<0>(y)) return std::get<0>(x) > std::get<0>(y);
        if (std::get<1>(x) != std::get<1>(y)) return std::get<1>(x) < std::get<1>(y);
        return std::get<2>(x) < std::get<2>(y);
      });
      std::vector<Beam> beams;
      for (size_t rank = 0; rank < top && (int)s.finished.size() < k; ++rank) {
        auto [total, row, token] = c[rank];
        const bool eos = (token == ids.eos || std::find(o.stopIds.begin(), o.stopIds.end(),
                                                        token) != o.stopIds.end()) &&
                         !endless;
        if (eos ? (int)rank >= k : (int)beams.size() == k) continue;
        const Beam& parent = s.beams[rows[row].second];
        Beam child = parent;
        child.logProbs.push_back(total - parent.logProb);
        child.logProb = total;
        if (eos) {
          s.finished.push_back(finish(child, o.alpha));
          continue;
        }
        child.tokens.push_back(token);
        if (o.onToken && k == 1) o.onToken(s.line, token);
        if (endless && (int)child.tokens.size() >= s.maxLen) {
          s.finished.push_back(finish(child, o.alpha));
          continue;
        }
        beams.push_back(std::move(child));
        parents.push_back((int32_t)row);
      }
      if ((int)s.finished.size() >= k) {
        parents.resize(parents.size() - beams.size());
        beams.clear();
      }
      s.beams = std::move(beams);
      for (int bi = 0; bi < (int)s.beams.size(); ++bi) next.push_back({(int)si, bi});
    }
    // The model's rows follow: survivors carry (and share) their cache,
    // finished sentences' rows go.
    bool identity = (int64_t)parents.size() == r;
    for (size_t i = 0; identity && i < parents.size(); ++i) identity = parents[i] == (int32_t)i;
    if (!identity && !parents.empty())
      if (Status st = model.reorder(parents); !st.isOk()) return st;
    rows = std::move(next);
  }

  std::vector<std::vector<Hypothesis>> result(b);
  for (int64_t i = 0; i < b; ++i) {
    auto& f = sentences[i].finished;
    std::stable_sort(f.begin(), f.end(), [](const Hypothesis& x, const Hypothesis& y) {
      return x.score > y.score;
    });
    if ((int)f.size() > o.nBest) f.resize(o.nBest);
    result[i] = std::move(f);
  }
  return result;
}

namespace {
// A StepModel over a compiled model's decoding entries on one state.
class StateStep : public StepModel {
public:
  StateStep(CompiledModel& model, ModelState& state, int64_t vocab)
      : model_(model), state_(state), vocab_(vocab) {}
  int64_t vocab() const override { return vocab_; }
  Status reorder(const std::vector<int32_t>& parents) override { return state_.reorder(parents); }

protected:
  // Runs `entry` on the state and points `logits` at its output.
  Status run(const char* entry, const std::map<std::string, Tensor>& inputs, const float*& logits) {
    if (Status s = model_.runInto(entry, inputs, outputs_, &state_); !s.isOk()) return s;
    logits = floatData(outputs_.at("logits"), logitScratch_);  // bf16 models: converted
    return Status::ok();
  }

private:
  CompiledModel& model_;
  ModelState& state_;
  std::vector<float> logitScratch_;
  int64_t vocab_;
  std::map<std::string, Tensor> outputs_;
};

// decode_step on a Translator's state: one new token per row, with its
// sentence's source.
class CompiledStep : public StateStep {
public:
  CompiledStep(CompiledModel& model, ModelState& state, const Tensor& src, int64_t vocab)
      : StateStep(model, state, vocab), src_(src) {}
  Status step(const std::vector<int32_t>& last, const std::vector<int64_t>& sourceRows,
              const float*& logits) override {
    const int64_t r = (int64_t)last.size(), width = src_.shape[1];
    Tensor tgt = Tensor::zeros(DType::I32, {r, 1});
    Tensor src = Tensor::zeros(DType::I32, {r, width});
    for (int64_t i = 0; i < r; ++i) {
      tgt.data<int32_t>()[i] = last[i];
      std::copy_n(src_.data<int32_t>() + sourceRows[i] * width, width, src.data<int32_t>() + i * width);
    }
    return run("decode_step", {{"src_tokens", src}, {"tgt_tokens", tgt}}, logits);
  }

private:
  const Tensor& src_;
};
}  // namespace

StatusOr<std::vector<std::vector<Hypothesis>>> Translator::translate(
    const std::vector<std::vector<int32_t>>& sources, const SearchOptions& o,
    const std::vector<std::vector<int32_t>>* prefixes, int64_t firstLine) {
  const int k = o.beam;
  if (k < 1) return Status::error("--beam must be >= 1, got " + std::to_string(k));
  if (o.sample && k != 1) return Status::error("--sample draws one hypothesis: use --beam 1");
  if (o.nBest < 1 || o.nBest > k)
    return Status::error("--n-best must be 1 to the beam size " + std::to_string(k));
  if (o.temperature <= 0) return Status::error("--temperature must be > 0");
  if (o.topP <= 0 || o.topP > 1) return Status::error("--top-p must be in (0, 1]");
  if (o.repetitionPenalty <= 0) return Status::error("--repetition-penalty must be > 0");
  const int64_t b = (int64_t)sources.size(), v = ids_.tgtVocab;
  if (b == 0) return std::vector<std::vector<Hypothesis>>{};
  if (Status rows = checkRows(b, k, rows_); !rows.isOk()) return rows;
  // A step writes one position: BOS and N tokens need N + 1 of them.
  const int64_t capacity = positions_ - 1;
  if (o.maxLen > capacity)
    return Status::error("--max-len " + std::to_string(o.maxLen) + " is over the cache's capacity: " +
                         std::to_string(positions_) + " positions (--max-seq-len) hold at most " +
                         std::to_string(capacity) + " output tokens");
  std::vector<SearchSentence> sentences(b);
  for (int64_t i = 0; i < b; ++i) {
    SearchSentence& s = sentences[i];
    s.line = firstLine + i;
    s.maxLen = (int)(o.maxLen > 0 ? o.maxLen
                                  : std::min<int64_t>((int64_t)sources[i].size() + 50, capacity));
    s.minLen = o.minLen;
    if (prefixes && i < (int64_t)prefixes->size()) s.prefix = (*prefixes)[i];
    for (int32_t id : s.prefix)
      if (id < 0 || id >= v)
        return Status::error(lineName(s.line) + ": prefix id " + std::to_string(id) +
                             " is outside the target vocabulary [0, " + std::to_string(v) + ")");
    if ((int64_t)s.prefix.size() > s.maxLen)
      return Status::error(lineName(s.line) + ": a prefix of " + std::to_string(s.prefix.size()) +
                           " ids is longer than the length limit " + std::to_string(s.maxLen));
  }
  auto src = encode(sources, firstLine);
  if (!src.isOk()) return src.status();
  CompiledStep step(model_, *state_, *src, v);
  return search(step, sentences, o, ids_);
}

StatusOr<std::vector<Hypothesis>> Translator::score(
    const std::vector<std::vector<int32_t>>& sources,
    const std::vector<std::vector<int32_t>>& targets, int64_t firstLine) {
  if (sources.size() != targets.size())
    return Status::error(std::to_string(sources.size()) + " sources but " +
                         std::to_string(targets.size()) + " targets");
  if (sources.empty()) return std::vector<Hypothesis>{};
  const int64_t b = (int64_t)sources.size(), v = ids_.tgtVocab;
  int64_t n = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    for (int32_t id : targets[i])
      if (id < 0 || id >= v)
        return Status::error(lineName(firstLine + (int64_t)i) + ": target id " +
                             std::to_string(id) + " is outside the target vocabulary [0, " +
                             std::to_string(v) + ")");
    if ((int64_t)targets[i].size() + 1 > positions_)
      return Status::error(lineName(firstLine + (int64_t)i) + ": a target of " +
                           std::to_string(targets[i].size()) + " ids is over the cache's " +
                           std::to_string(positions_) + " positions (--max-seq-len) with BOS");
    n = std::max(n, (int64_t)targets[i].size() + 1);
  }
  auto src = encode(sources, firstLine);
  if (!src.isOk()) return src.status();
  // All positions in one step: BOS + target, padded past each row's end
  // (causal attention keeps the padding out of the positions scored).
  Tensor tgt = Tensor::zeros(DType::I32, {b, n});
  for (int64_t i = 0; i < b; ++i) {
    int32_t* row = tgt.data<int32_t>() + i * n;
    std::fill(row, row + n, ids_.pad >= 0 ? ids_.pad : ids_.eos);
    row[0] = ids_.bos;
    std::copy(targets[i].begin(), targets[i].end(), row + 1);
  }
  auto out = model_.run("decode_step", {{"src_tokens", *src}, {"tgt_tokens", tgt}}, state_.get());
  if (!out.isOk()) return out.status();
  std::vector<float> scratch;
  const float* logits = floatData(out->at("logits"), scratch);
  std::vector<Hypothesis> result(b);
  std::vector<float> lse;
  rowLogSumExp(logits, b * n, v, lse);
  for (int64_t i = 0; i < b; ++i) {
    Hypothesis& h = result[i];
    h.ids = targets[i];
    for (size_t t = 0; t <= targets[i].size(); ++t) {
      int32_t label = t < targets[i].size() ? targets[i][t] : ids_.eos;
      int64_t row = i * n + (int64_t)t;
      double lp = (double)logits[row * v + label] - lse[row];
      h.tokenLogProbs.push_back(lp);
      h.logProb += lp;
    }
    h.score = h.logProb;
  }
  return result;
}

namespace {
// prefill on the prompts first (rows: one per prompt), then decode_step.
class GeneratorStep : public StateStep {
public:
  GeneratorStep(CompiledModel& model, ModelState& state, const Tensor& prompts, int64_t vocab)
      : StateStep(model, state, vocab), prompts_(prompts) {}
  Status step(const std::vector<int32_t>& last, const std::vector<int64_t>&,
              const float*& logits) override {
    if (!prefilled_) {
      prefilled_ = true;
      return run("prefill", {{"tokens", prompts_}}, logits);
    }
    Tensor tokens = Tensor::zeros(DType::I32, {(int64_t)last.size(), 1});
    std::copy(last.begin(), last.end(), tokens.data<int32_t>());
    return run("decode_step", {{"tokens", tokens}}, logits);
  }

private:
  const Tensor& prompts_;
  bool prefilled_ = false;
};
}  // namespace

StatusOr<std::unique_ptr<Generator>> Generator::create(CompiledModel& model, TokenIds ids) {
  auto specs = decodingSpecs(model, {"prefill", "decode_step"}, "generation needs a decoder_only model", 1);
  if (!specs.isOk()) return specs.status();
  std::unique_ptr<Generator> g(new Generator(model, ids));
  g->rows_ = specs->rows;
  g->positions_ = specs->positions;
  if (g->ids_.tgtVocab <= 0) g->ids_.tgtVocab = specs->vocab;
  auto state = model.createState();
  if (!state.isOk()) return state.status();
  g->state_ = std::move(*state);
  return g;
}

StatusOr<std::vector<std::vector<Hypothesis>>> Generator::generate(
    const std::vector<std::vector<int32_t>>& prompts, const SearchOptions& o,
    const std::vector<int64_t>& lines) {
  const int k = o.beam;
  if (k < 1) return Status::error("--beam must be >= 1, got " + std::to_string(k));
  if (o.sample && k != 1) return Status::error("--sample draws one continuation: use --beam 1");
  if (o.maxLen < 1) return Status::error("--max-new must be >= 1");
  const int64_t b = (int64_t)prompts.size(), v = ids_.tgtVocab;
  if (b == 0) return std::vector<std::vector<Hypothesis>>{};
  if (Status rows = checkRows(b, k, rows_); !rows.isOk()) return rows;
  if (!lines.empty() && (int64_t)lines.size() != b)
    return Status::error(std::to_string(lines.size()) + " line numbers for " + std::to_string(b) +
                         " prompts");
  auto lineOf = [&](int64_t i) { return lines.empty() ? i : lines[i]; };
  for (int64_t i = 0; i < b; ++i) {
    std::string line = lineName(lineOf(i));
    const int64_t n = (int64_t)prompts[i].size();
    if (n == 0) return Status::error(line + ": an empty prompt");
    for (int32_t id : prompts[i])
      if (id < 0 || id >= v)
        return Status::error(line + ": id " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(v) + ")");
    // The last new token is never fed back: n + maxLen - 1 positions.
    if (n + o.maxLen - 1 > positions_)
      return Status::error(line + ": a prompt of " + std::to_string(n) + " ids and " +
                           std::to_string(o.maxLen) + " new tokens are over the cache's " +
                           std::to_string(positions_) + " positions (--max-seq-len)");
  }
  // Every prompt's first m ids prefill together; the rest is fed.
  int64_t m = (int64_t)prompts[0].size();
  for (const auto& p : prompts) m = std::min(m, (int64_t)p.size());
  Tensor tokens = Tensor::zeros(DType::I32, {b, m});
  for (int64_t i = 0; i < b; ++i) std::copy_n(prompts[i].begin(), m, tokens.data<int32_t>() + i * m);
  if (Status s = state_->reset(); !s.isOk()) return s;
  std::vector<SearchSentence> sentences(b);
  for (int64_t i = 0; i < b; ++i)
    sentences[i] = {lineOf(i), o.maxLen, o.minLen, {}, {prompts[i].begin() + m, prompts[i].end()}};
  GeneratorStep step(model_, *state_, tokens, v);
  return search(step, sentences, o, ids_);
}

}  // namespace transfuse::rt
