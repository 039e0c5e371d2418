// The subword tokenizer of training and translation (docs/training.md,
// "Text"): a joint BPE vocabulary trained with SentencePiece (Debian's
// libsentencepiece), the config's special ids reserved in it.
#ifndef TRANSFUSE_RUNTIME_HOST_TOKENIZER_H
#define TRANSFUSE_RUNTIME_HOST_TOKENIZER_H

#include "runtime/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace transfuse::rt {

class Tokenizer {
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
  int32_t vocabSize() const;
  Specials specials() const;
  // Ids of a sentence, without BOS or EOS (the model's conventions add them).
  std::vector<int32_t> encode(const std::string& text) const;
  // Text of ids: specials are dropped, unknown pieces too (no "<unk>" or
  // " ⁇ " in the output).
  std::string decode(const std::vector<int32_t>& ids) const;

  struct Impl;  // SentencePiece's processor (Tokenizer.cpp)

private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_HOST_TOKENIZER_H
