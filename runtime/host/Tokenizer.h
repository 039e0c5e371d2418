// SentencePiece tokenizers (Debian's libsentencepiece): the subword
// tokenizer of training and translation (docs/training.md, "Text"), a joint
// BPE vocabulary trained with SentencePiece, the config's special ids
// reserved in it; and a Marian directory's (MarianTokenizer).
#ifndef TRANSFUSE_RUNTIME_HOST_TOKENIZER_H
#define TRANSFUSE_RUNTIME_HOST_TOKENIZER_H

#include "runtime/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace transfuse::rt {

// Text to ids and back: what `translate` takes text through.
class TextTokenizer {
public:
  virtual ~TextTokenizer() = default;
  // Ids of a sentence, without BOS or EOS (the model's conventions add them).
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  // Text of ids, the special ones dropped.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
};

class Tokenizer : public TextTokenizer {
public:
  // The special ids, distinct, each below the vocabulary size.
  struct Specials {
    int32_t pad = 0, bos = 1, eos = 2, unk = 3;
  };
  struct TrainOptions {
    int32_t vocabSize = 8000;  // at most: a small corpus may give fewer pieces
    Specials specials;
    int threads = 1;
  };
  // Trains BPE on the sentences of `corpora` (all of them, joint: source
  // and target share one vocabulary). Deterministic for the same input.
  static StatusOr<std::unique_ptr<Tokenizer>> train(
      const std::vector<const std::vector<std::string>*>& corpora, const TrainOptions& options);
  // The model `save` wrote; the error names the file.
  static StatusOr<std::unique_ptr<Tokenizer>> load(const std::string& path);
  ~Tokenizer();

  // The serialized model (SentencePiece's ModelProto), written as it is.
  Status save(const std::string& path) const;
  // The id of a piece, -1 if the model has none; the piece of an id ("" if
  // none).
  int32_t pieceId(const std::string& piece) const;
  std::string piece(int32_t id) const;
  int32_t vocabSize() const;
  Specials specials() const;
  std::vector<int32_t> encode(const std::string& text) const override;
  // Text of ids: specials are dropped, unknown pieces too (no "<unk>" or
  // " ⁇ " in the output).
  std::string decode(const std::vector<int32_t>& ids) const override;

  struct Impl;  // SentencePiece's processor (Tokenizer.cpp)

private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A Hugging Face directory's tokenizer.model (Llama 2, Mistral), as
// transformers runs it (LlamaTokenizer loaded by AutoTokenizer: the fast
// tokenizer it converts the model to, legacy false): the model's pieces,
// except that a text starting with a space gets no dummy-prefix "▁" of its
// own (transformers' Metaspace prepends "▁" only to a text that does not
// start with one; SentencePiece always does when the model says so); and
// the family's conventions from tokenizer_config.json: <s> first unless
// add_bos_token is false, </s> last when add_eos_token is true.
// Special tokens' text ("<s>") in the input is read as text.
class LlamaSentencePiece : public TextTokenizer {
public:
  // DIR's tokenizer.model and tokenizer_config.json (when present).
  static StatusOr<std::unique_ptr<LlamaSentencePiece>> load(const std::string& dir);
  ~LlamaSentencePiece() override;

  std::vector<int32_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  // encode with the conventions' <s> and </s>: a prompt as the model takes it.
  std::vector<int32_t> encodePrompt(const std::string& text) const;
  // The id of a piece ("</s>"), -1 if none.
  int32_t pieceId(const std::string& piece) const;

private:
  LlamaSentencePiece(std::unique_ptr<Tokenizer> spm, bool bos, bool eos);
  std::unique_ptr<Tokenizer> spm_;
  bool addBos_, addEos_, dummyPrefix_ = false;
  int32_t spaceId_ = -1;  // the "▁" piece
};

// A Marian directory's tokenizer, as transformers' MarianTokenizer (the
// slow one: Marian has no fast tokenizer) run without sacremoses (with it,
// transformers first applies Moses punctuation normalization, which this
// does not): encode gives source.spm's pieces of the text, a leading
// ">>xx<<" language code kept whole, each mapped through vocab.json (a
// piece it lacks is <unk>); EOS is the model's to add. decode maps ids
// through the target vocabulary (target_vocab.json with separate_vocabs,
// else vocab.json; an id it lacks through the SentencePiece model), drops
// <unk>, </s> and <pad>, joins the pieces with SentencePiece (the source
// model when the vocabularies are shared, as transformers does), "▁" as
// spaces, and strips the ends.
class MarianTokenizer : public TextTokenizer {
public:
  // DIR's source.spm, target.spm, vocab.json, and tokenizer_config.json
  // when present (separate_vocabs, unk_token, eos_token, pad_token;
  // target_vocab.json with separate_vocabs). Errors name the file.
  static StatusOr<std::unique_ptr<MarianTokenizer>> load(const std::string& dir);
  ~MarianTokenizer() override;

  std::vector<int32_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int32_t eosId() const { return eos_; }
  int32_t padId() const { return pad_; }

  struct Impl;  // the two SentencePiece processors and the vocabularies

private:
  explicit MarianTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  int32_t eos_ = -1, pad_ = -1, unk_ = -1;
};

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_HOST_TOKENIZER_H
