// Hugging Face tokenizer.json pipelines, equal on ids and decoded text to
// Hugging Face's `tokenizers` (the "fast" tokenizers): the WordPiece model
// of the BERT family (tokenizer.json, or vocab.txt with
// tokenizer_config.json) and the byte-level BPE of GPT-2, Llama 3 and
// Qwen2.
//
// encode(text) runs, as `tokenizers` does:
//   1. added tokens: the special tokens ([CLS], [MASK], ...; `normalized`
//      false) are matched in the raw text, leftmost-longest, before anything
//      else; the pieces between them go on; added tokens with `normalized`
//      true are matched after step 2 in the normalized pieces;
//   2. the normalizer: BertNormalizer (clean_text: drop NUL, U+FFFD and
//      category C* except \t \n \r, turn White_Space into ' ';
//      handle_chinese_chars: ' ' around each CJK ideograph; strip_accents
//      (null: as lowercase): NFD, then drop category Mn; lowercase: the full
//      lowercase mapping), or a Sequence of NFD/NFKD/NFC/NFKC, Lowercase,
//      StripAccents (drop category M*) and BertNormalizer;
//   3. the pre-tokenizer: BertPreTokenizer (split on White_Space, removed;
//      then each punctuation character alone: ASCII punctuation or category
//      P*), WhitespaceSplit, Punctuation, Whitespace (\w+|[^\w\s]+),
//      Split (a regular expression, by Oniguruma as `tokenizers` does, or a
//      string; any split behavior, inverted or not), ByteLevel (GPT-2's
//      regular expression unless use_regex is false, then every UTF-8 byte
//      as one of 256 printable characters) and a Sequence of them;
//   4. the model, per word: WordPiece (greedy longest-match-first against
//      the vocabulary, continuation pieces with the prefix ("##"); a word
//      with more than max_input_chars_per_word characters, or one that
//      cannot be covered, is one [UNK]) or BPE (the word's characters, then
//      the adjacent pair of lowest merge rank merged, leftmost first, until
//      no pair has a merge; ignore_merges: a word in the vocabulary is that
//      token; byte_fallback: <0xXX> pieces for a character missing from
//      the vocabulary, else the unknown token when there is one);
//   5. truncation (longest_first for a pair, room kept for the specials),
//      the post-processor (TemplateProcessing or BertProcessing:
//      [CLS] A [SEP] and [CLS] A [SEP] B [SEP], type ids 0 then 1; ByteLevel
//      changes no id; a Sequence of them), padding.
// decode: the WordPiece decoder, or ByteLevel (the printable characters
// back to bytes, invalid UTF-8 as U+FFFD per maximal bad subsequence, as
// Rust's from_utf8_lossy; a token with a character outside the 256 as its
// own UTF-8).
// Unicode data (decomposition, case, general categories) is utf8proc's
// (Debian's libutf8proc 2.8: Unicode 15.0). `tokenizers` mixes versions:
// the crate unicode_categories (Unicode 8.0) for the C*, P* and Mn classes,
// Rust's std (Unicode 16) for White_Space and lowercase, the regex crate for
// \w. A sweep of every code point, one character at a time, against
// `tokenizers` 0.23 found them differing on 624 code points for the BERT
// pipeline: characters assigned or recategorized after Unicode 8.0 (a
// control, punctuation or Mn in one and not the other) and the case pairs
// new in Unicode 16; and, for NFKC and \w, on letters of Unicode 14-16.
//
// Thread safety: a loaded tokenizer is immutable; encode and decode may run
// concurrently on one object.
#ifndef TRANSFUSE_RUNTIME_HOST_HFTOKENIZER_H
#define TRANSFUSE_RUNTIME_HOST_HFTOKENIZER_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/Status.h"

namespace transfuse::rt {

class JsonValue;

// What a vocab.txt alone does not say: the keys of a Hugging Face
// tokenizer_config.json (BertTokenizer's arguments), with their defaults.
struct WordPieceOptions {
  bool lowercase = true;             // do_lower_case
  std::optional<bool> stripAccents;  // strip_accents; unset: as lowercase
  bool handleChineseChars = true;    // tokenize_chinese_chars
  int64_t modelMaxLength = 0;        // model_max_length; 0: none given
  std::string unkToken = "[UNK]", sepToken = "[SEP]", padToken = "[PAD]", clsToken = "[CLS]",
              maskToken = "[MASK]";
  std::string continuingSubwordPrefix = "##";
  int64_t maxInputCharsPerWord = 100;
};

// The options of a tokenizer_config.json: do_lower_case, strip_accents,
// tokenize_chinese_chars, model_max_length (a value of 1e18 or more, which
// transformers writes for "no limit", reads as 0) and the special tokens'
// names (a string or an {"content": ...} object). Missing keys keep their
// defaults; errors name the file and the key.
StatusOr<WordPieceOptions> readTokenizerConfig(const std::string& path);

// One encoded sequence (or pair). attentionMask is 1 for every token and 0
// for the padding that a tokenizer.json's "padding" adds.
struct HfEncoding {
  std::vector<int32_t> ids, typeIds, attentionMask;
  bool truncated = false;  // tokens were dropped to fit the maximum length
};

// The special tokens' ids; -1 where the vocabulary has no such token.
struct WordPieceSpecials {
  int32_t cls = -1, sep = -1, pad = -1, unk = -1, mask = -1;
};

class HfTokenizer {
 public:
  // A Hugging Face tokenizer.json whose model is WordPiece. Unsupported
  // components (another model type, an unknown normalizer, pre-tokenizer,
  // post-processor or decoder) are errors naming the file and the key.
  static StatusOr<HfTokenizer> fromTokenizerJson(const std::string& path);
  // A vocab.txt (one token per line, id = line number, trailing whitespace
  // dropped) with BertTokenizerFast's pipeline built from `options`:
  // BertNormalizer, BertPreTokenizer, [CLS] A [SEP] / [CLS] A [SEP] B [SEP],
  // the five special tokens (those the vocabulary has) as added tokens.
  static StatusOr<HfTokenizer> fromVocabTxt(const std::string& vocabPath,
                                                   const WordPieceOptions& options = {});

  // Encodes `text` (and `pair`, when given) to ids with the specials of the
  // post-processor (addSpecialTokens) and type ids. maxLength > 0 limits the
  // total length, specials included (with the tokenizer.json's truncation
  // strategy and direction, else longest_first from the right); maxLength 0
  // uses the tokenizer.json's "truncation" if it has one, else no limit.
  // Over the limit with `truncate` false: an error saying how many tokens
  // and the maximum. Text must be UTF-8: an error names the byte offset.
  StatusOr<HfEncoding> encode(std::string_view text, const std::string_view* pair = nullptr,
                                     int64_t maxLength = 0, bool truncate = true,
                                     bool addSpecialTokens = true) const;
  // The text of `ids` as `tokenizers` decodes it: the WordPiece decoder
  // (continuation pieces joined, a space before every other piece, the
  // " ." " ," " ?" " !" cleanup), or the tokens joined by spaces when the
  // tokenizer.json has no decoder. Ids outside the vocabulary are skipped;
  // with skipSpecial the special added tokens are too.
  std::string decode(const std::vector<int32_t>& ids, bool skipSpecial = true) const;

  // The normalizer's output (HF's normalizer.normalize_str), and the words
  // of the pre-tokenizer over it (pre_tokenizer.pre_tokenize_str of the
  // normalized text), without added-token matching.
  StatusOr<std::string> normalize(std::string_view text) const;
  StatusOr<std::vector<std::string>> preTokenize(std::string_view text) const;

  // One more than the largest id (vocabulary and added tokens): the rows an
  // embedding table needs.
  int32_t vocabSize() const { return vocabSize_; }
  // The id of a token (added tokens first, then the vocabulary), -1 if none.
  int32_t idOf(std::string_view token) const;
  // The token of an id, empty if none.
  std::string tokenOf(int32_t id) const;
  const WordPieceSpecials& specials() const { return specials_; }
  // model_max_length of the tokenizer_config.json (fromVocabTxt), or the
  // tokenizer.json's truncation max_length; 0 if neither.
  int64_t modelMaxLength() const { return modelMaxLength_; }

  // The pipeline's parts (HfTokenizer.cpp); public so that the loaders'
  // helpers can build them.
  struct NormStep {
    enum Kind { CleanText, ChineseChars, NfdStripMn, Lowercase, Nfd, Nfkd, Nfc, Nfkc, StripMarks };
    Kind kind;
  };
  enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
  class Regex;  // an Oniguruma pattern (HfTokenizer.cpp)
  struct PreStep {
    enum Kind { Bert, WhitespaceSplit, Punctuation, Whitespace, Split, ByteLevel };
    Kind kind;
    SplitBehavior behavior = SplitBehavior::Isolated;  // Punctuation's, Split's
    // Split: a regular expression or a literal string; invert: the pieces
    // between matches are the delimiters.
    std::shared_ptr<const Regex> regex = nullptr;
    std::u32string literal = {};
    bool invert = false;
    // ByteLevel: ' ' before a piece that does not start with one; split by
    // GPT-2's regular expression first.
    bool addPrefixSpace = false, useRegex = true;
  };
  enum class ModelKind { WordPiece, Bpe };
  enum class DecoderKind { None, WordPiece, ByteLevel };
  struct AddedToken {
    std::u32string content;
    int32_t id = 0;
    bool singleWord = false, lstrip = false, rstrip = false, normalized = false, special = false;
  };
  struct TemplatePiece {
    bool isSequence = true;
    int sequence = 0;          // 0: A, 1: B
    std::vector<int32_t> ids;  // a special token's ids
    int32_t typeId = 0;
  };
  struct Truncation {
    bool present = false;
    int64_t maxLength = 0;
    enum Strategy { LongestFirst, OnlyFirst, OnlySecond } strategy = LongestFirst;
    bool left = false;  // direction Left: drop from the start
  };
  struct Padding {
    bool present = false;
    int64_t fixed = 0;  // Fixed(n); 0: BatchLongest (a single encoding's length)
    int64_t multipleOf = 0;
    bool left = false;
    int32_t padId = 0, padTypeId = 0;
  };

 private:
  HfTokenizer() = default;
  Status finish(const std::string& name);
  std::u32string normalizeCodepoints(std::u32string text) const;
  void preTokenizeInto(const std::u32string& text, std::vector<std::u32string>& words) const;
  void wordPiece(const std::u32string& word, std::vector<int32_t>& ids) const;
  void bpe(const std::u32string& word, std::vector<int32_t>& ids) const;
  Status readBpe(const JsonValue& model, const std::string& path);
  void encodeSequence(std::u32string text, std::vector<int32_t>& ids) const;
  void splitNormalizedAdded(const std::u32string& normalized, std::vector<int32_t>& ids) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> idToToken_;  // by id
  std::vector<bool> hasToken_;          // by id: the vocabulary maps a token to it
  std::string unkToken_ = "[UNK]", prefix_ = "##";
  int64_t maxInputCharsPerWord_ = 100;
  size_t maxTokenBytes_ = 0;  // the longest vocabulary entry, in bytes
  int32_t unkId_ = -1;

  std::vector<NormStep> normalizer_;
  std::vector<PreStep> preTokenizer_;
  std::vector<AddedToken> added_;  // in the tokenizer.json's order
  std::unordered_map<int32_t, size_t> addedById_;
  // What each added token is matched by: its content, or (normalized) the
  // normalizer's output of it; empty when the other kind matches it.
  std::vector<std::u32string> rawPatterns_, normalizedPatterns_;
  std::unordered_set<std::string> specialTexts_;  // the special added tokens' text
  bool anyRaw_ = false, anyNormalized_ = false;
  std::vector<TemplatePiece> single_, pair_;
  size_t addedSingle_ = 0, addedPair_ = 0;
  Truncation truncation_;
  Padding padding_;
  DecoderKind decoder_ = DecoderKind::WordPiece;
  bool cleanup_ = true;
  std::string decoderPrefix_ = "##";

  // BPE: (left id << 32 | right id) -> (rank, merged id).
  ModelKind model_ = ModelKind::WordPiece;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  bool ignoreMerges_ = false, byteFallback_ = false, fuseUnk_ = false;
  std::string bpeSuffix_;  // end_of_word_suffix (prefix_: continuing_subword_prefix)
  std::vector<int32_t> byteIds_;  // byte_fallback: the id of <0xXX> for each byte, -1 if none

  WordPieceSpecials specials_;
  int32_t vocabSize_ = 0;
  int64_t modelMaxLength_ = 0;
};

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_HOST_HFTOKENIZER_H
