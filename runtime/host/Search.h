// Search over a compiled encoder_decoder's decoding entries (docs/decoding.md):
// greedy, beam search and sampling, one batch of sources at a time, through
// CompiledModel and one ModelState (the KV cache) the Translator keeps.
//
// Per batch: the sources (ids without specials, wrapped per the token
// conventions: [BOS] ids EOS, padded) go through `encode` once; every step
// runs `decode_step` on one new token per live row (a row is one beam of
// one sentence) and reads log-probabilities from its logits. Beams that
// survive a step carry their cache with them by ModelState::reorder (rows
// may repeat, so beams are created by copying rows), and rows of finished
// sentences are dropped the same way, so a step runs only live rows.
//
// Lengths per sentence: at most maxLen output tokens, EOS not counted (the
// default: the source's length + 50, capped by the cache capacity; a larger
// explicit maxLen is an error naming the limit); no EOS before minLen. The
// padding id is never emitted (the decoder does not mask its own keys).
// Beam search scores a finished hypothesis by its log-probability over
// ((5 + len) / 6)^alpha, len counting the output tokens with EOS; a
// sentence ends when `beam` hypotheses have finished or the length limit
// is reached (CTranslate2's and fairseq's rule), and the n-best are the
// finished ones by that score, so beam 1 is greedy. Sampling (beam 1) draws
// from softmax(logits / temperature) restricted to the top-k and the top-p
// mass, with u = philoxUniform(seed, step, line, 0): the same seed gives
// the same tokens on any batching and thread count.
//
// Each row's computation in the kernels does not depend on the other rows,
// so a sentence's output does not depend on what it is batched with.
#ifndef TRANSFUSE_RUNTIME_HOST_SEARCH_H
#define TRANSFUSE_RUNTIME_HOST_SEARCH_H

#include "runtime/Status.h"
#include "runtime/host/CompiledModel.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace transfuse::rt {

// The ids of the token conventions (models/README.md; -1: none) and the
// vocabulary sizes of a model (a decoder_only model has srcVocab 0).
struct TokenIds {
  int32_t pad = -1, bos = -1, eos = -1;
  bool sourceBos = false;
  int64_t srcVocab = 0, tgtVocab = 0;
};

// The token ids of an artifact's config (DIR/manifest.json).
StatusOr<TokenIds> readTokenIds(const std::string& manifestPath);

struct SearchOptions {
  int beam = 1;
  double alpha = 0.0;           // length penalty exponent (the paper: 0.6)
  int maxLen = 0;               // 0: the source's length + 50, capped by the capacity
  int minLen = 0;
  int nBest = 1;
  int noRepeatNgram = 0;        // 0: off
  double repetitionPenalty = 1.0;  // CTRL's: logits of tokens already output / or · by it
  bool sample = false;
  double temperature = 1.0;
  int topK = 0;                 // 0: all
  double topP = 1.0;
  uint64_t seed = 0;
  bool ignoreEos = false;       // exactly maxLen tokens (benchmarks: equal work)
  // More ids that end a hypothesis as EOS does (Llama 3's <|eot_id|> beside
  // <|end_of_text|>); never emitted before minLen. At the length limit the
  // forced token is TokenIds::eos.
  std::vector<int32_t> stopIds;
  // Beam 1 (greedy or sampling): called with a sentence's line and each
  // token as the search appends it (EOS not), as it is produced.
  std::function<void(int64_t line, int32_t token)> onToken;
  // Asked before every step (a binding's Ctrl-C): true ends the search with
  // the error "interrupted"; the model and its state stay usable.
  std::function<bool()> stop;
};

struct Hypothesis {
  std::vector<int32_t> ids;           // without BOS and EOS
  std::vector<double> tokenLogProbs;  // one per output token, EOS included
  double logProb = 0;                 // their sum
  double score = 0;                   // logProb over the length penalty
};

// What the search needs from a decoder: a compiled model's decode_step on
// its state (Translator), or a test's table.
class StepModel {
public:
  virtual ~StepModel() = default;
  virtual int64_t vocab() const = 0;
  // The logits [rows, vocab] of each row's next token, given its last
  // token and the batch row of its sentence's source; `logits` stays valid
  // until the next call.
  virtual Status step(const std::vector<int32_t>& lastTokens, const std::vector<int64_t>& sourceRows,
                      const float*& logits) = 0;
  // Row i takes the old row parents[i]; rows from parents.size() on go.
  virtual Status reorder(const std::vector<int32_t>& parents) = 0;
};

// One sentence of a search: its input line (the sampling stream), length
// limits (output tokens, EOS not counted), a forced prefix, and `feed`:
// tokens given to the model one per step before the output begins, their
// logits unscored (the rest of a prompt longer than the batch's prefill).
// Sampling draws by the output's step, so feeding changes no draw.
struct SearchSentence {
  int64_t line = 0;
  int maxLen = 0, minLen = 0;
  std::vector<int32_t> prefix;
  std::vector<int32_t> feed;
};

// The search of Search.h's comment over `model`, whose rows start as one
// per sentence (each at BOS). Up to nBest hypotheses per sentence, best
// first.
StatusOr<std::vector<std::vector<Hypothesis>>> search(StepModel& model,
                                                      const std::vector<SearchSentence>& sentences,
                                                      const SearchOptions& options, const TokenIds& ids);

class Translator {
public:
  // Fails unless `model` has encode and decode_step (compiled from an
  // encoder_decoder config) and `ids` has EOS and, for the decoder, BOS.
  static StatusOr<std::unique_ptr<Translator>> create(CompiledModel& model, TokenIds ids);

  // Up to nBest hypotheses per source, best first. `prefixes` (optional, one
  // per source, maybe empty) forces the first output tokens; `firstLine` is
  // the index of sources[0] in the input (the sampling stream). Errors name
  // the line: an id outside the vocabulary, an empty source, a source or a
  // beam over the compiled maxima.
  StatusOr<std::vector<std::vector<Hypothesis>>> translate(
      const std::vector<std::vector<int32_t>>& sources, const SearchOptions& options,
      const std::vector<std::vector<int32_t>>* prefixes = nullptr, int64_t firstLine = 0);

  // Forced decoding: the log-probability of each target (ids without
  // specials) and its EOS given its source, token by token.
  StatusOr<std::vector<Hypothesis>> score(const std::vector<std::vector<int32_t>>& sources,
                                          const std::vector<std::vector<int32_t>>& targets,
                                          int64_t firstLine = 0);

  // The compiled limits: rows of the state (max_batch · max_beam), the
  // longest source, the cache's positions, the vocabularies.
  int64_t rows() const { return rows_; }
  int64_t maxSource() const { return maxSource_; }
  int64_t positions() const { return positions_; }

private:
  Translator(CompiledModel& model, TokenIds ids) : model_(model), ids_(ids) {}
  // Encodes `sources` (checked, wrapped, padded) into the state; the [B, S]
  // source tensor.
  StatusOr<Tensor> encode(const std::vector<std::vector<int32_t>>& sources, int64_t firstLine);

  CompiledModel& model_;
  TokenIds ids_;
  std::unique_ptr<ModelState> state_;
  int64_t rows_ = 0, maxSource_ = 0, positions_ = 0;
};

// Continues prompts with a compiled decoder_only model: `prefill` runs the
// batch's first m ids of every prompt (m: the shortest prompt's length) and
// gives the next token's logits, then `decode_step` one token per live row:
// the rest of a longer prompt, one id per step while shorter ones already
// generate, then its output. No padding enters the cache: every row holds
// its prompt's keys at its prompt's positions, as if it ran alone. The
// search is the Translator's (greedy, sampling, beams); EOS is `ids.eos`
// (none: exactly maxLen new tokens).
class Generator {
public:
  static StatusOr<std::unique_ptr<Generator>> create(CompiledModel& model, TokenIds ids);

  // Up to nBest continuations (new tokens, without EOS) per prompt, best
  // first; options.maxLen new tokens at most (required). `lines` are the
  // prompts' input lines (empty: 0, 1, ...): errors name them and sampling
  // keys each prompt's draws by its own. Prompts may differ in length; each
  // gets the tokens it would get alone. Errors: an id outside the
  // vocabulary, an empty prompt, a prompt and continuation over the cache.
  StatusOr<std::vector<std::vector<Hypothesis>>> generate(
      const std::vector<std::vector<int32_t>>& prompts, const SearchOptions& options,
      const std::vector<int64_t>& lines = {});

  int64_t rows() const { return rows_; }
  int64_t positions() const { return positions_; }

private:
  Generator(CompiledModel& model, TokenIds ids) : model_(model), ids_(ids) {}
  CompiledModel& model_;
  TokenIds ids_;
  std::unique_ptr<ModelState> state_;
  int64_t rows_ = 0, positions_ = 0;
};

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_HOST_SEARCH_H
