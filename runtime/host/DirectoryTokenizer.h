// The tokenizer of a directory (a Hugging Face model's, or an artifact that
// carries its files), as the commands and the Python package take text:
// tokenizer.model (SentencePiece: Llama 2, Mistral; the family's <s> per
// tokenizer_config.json), else tokenizer.json, else the BERT family's
// vocab.txt with tokenizer_config.json's settings. Also the ids that end a
// continuation as the directory says (generation's stop ids).
#ifndef TRANSFUSE_RUNTIME_HOST_DIRECTORYTOKENIZER_H
#define TRANSFUSE_RUNTIME_HOST_DIRECTORYTOKENIZER_H

#include "runtime/Status.h"
#include "runtime/host/HfTokenizer.h"
#include "runtime/host/Tokenizer.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace transfuse::rt {

// `path` is a tokenizer.json, or a directory with tokenizer.json, else
// vocab.txt (and tokenizer_config.json's settings). Errors name the file.
StatusOr<HfTokenizer> loadHfTokenizer(const std::string& path);

struct DirectoryTokenizer {
  std::unique_ptr<LlamaSentencePiece> spm;
  std::optional<HfTokenizer> json;

  // `path`: a directory with tokenizer.model, else what loadHfTokenizer takes.
  static StatusOr<DirectoryTokenizer> load(const std::string& path);

  // The ids of `text`, the conventions' specials added unless `plain`;
  // invalid UTF-8 (tokenizer.json) is an error naming the byte offset.
  StatusOr<std::vector<int32_t>> encode(const std::string& text, bool plain = false) const;
  // The text of ids, special tokens dropped unless `keepSpecials`
  // (tokenizer.json only: SentencePiece always drops them).
  std::string decode(const std::vector<int32_t>& ids, bool keepSpecials = false) const;
  int32_t idOf(const std::string& token) const;
};

// Ids that end a continuation besides `eos`, from the files a directory
// (or an artifact compiled from one) carries: config.json's and
// generation_config.json's eos_token_id (an id or a list: Llama 3
// Instruct's <|end_of_text|> and <|eot_id|>), and tokenizer_config.json's
// eos_token through `tokenizer` (when given). A file that does not parse
// adds none (compile checked config.json; the others are hints).
std::vector<int32_t> stopIds(const std::string& dir, const DirectoryTokenizer* tokenizer,
                             int32_t eos);

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_HOST_DIRECTORYTOKENIZER_H
