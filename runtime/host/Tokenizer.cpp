// The subword tokenizer: see Tokenizer.h.
#include "runtime/host/Tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <sstream>
#include <unordered_map>

namespace transfuse::rt {

struct Tokenizer::Impl {
  sentencepiece::SentencePieceProcessor processor;
  std::string serialized;
};

namespace {

// Feeds the corpora's lines to the trainer without a temporary file.
class Lines : public sentencepiece::SentenceIterator {
public:
  explicit Lines(const std::vector<const std::vector<std::string>*>& corpora) : corpora_(corpora) {
    skipEmpty();
  }
  bool done() const override { return corpus_ >= corpora_.size(); }
  void Next() override {
    ++line_;
    skipEmpty();
  }
  const std::string& value() const override { return (*corpora_[corpus_])[line_]; }
  sentencepiece::util::Status status() const override { return {}; }

private:
  void skipEmpty() {
    while (corpus_ < corpora_.size() && line_ >= corpora_[corpus_]->size()) {
      ++corpus_;
      line_ = 0;
    }
  }
  const std::vector<const std::vector<std::string>*>& corpora_;
  size_t corpus_ = 0, line_ = 0;
};

StatusOr<std::unique_ptr<Tokenizer::Impl>> fromSerialized(std::string serialized,
                                                          const std::string& name) {
  auto impl = std::make_unique<Tokenizer::Impl>();
  if (auto s = impl->processor.LoadFromSerializedProto(serialized); !s.ok())
    return Status::error(name + ": not a SentencePiece model (" + s.ToString() + ")");
  impl->serialized = std::move(serialized);
  return impl;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::train(
    const std::vector<const std::vector<std::string>*>& corpora, const TrainOptions& options) {
  const Specials& sp = options.specials;
  if (sp.pad == sp.bos || sp.pad == sp.eos || sp.pad == sp.unk || sp.bos == sp.eos ||
      sp.bos == sp.unk || sp.eos == sp.unk)
    return Status::error("the special ids pad, bos, eos and unk must differ");
  for (int32_t id : {sp.pad, sp.bos, sp.eos, sp.unk})
    if (id < 0 || id >= options.vocabSize)
      return Status::error("special id " + std::to_string(id) + " is outside the vocabulary size " +
                           std::to_string(options.vocabSize));
  std::unordered_map<std::string, std::string> args{
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(options.vocabSize)},
      // A corpus too small for the size asked gives a smaller vocabulary
      // (the config follows vocabSize()) instead of failing.
      {"hard_vocab_limit", "false"},
      {"character_coverage", "1.0"},
      {"pad_id", std::to_string(sp.pad)},
      {"bos_id", std::to_string(sp.bos)},
      {"eos_id", std::to_string(sp.eos)},
      {"unk_id", std::to_string(sp.unk)},
      {"num_threads", std::to_string(std::max(1, options.threads))},
      {"input_sentence_size", "0"},  // every sentence
      {"shuffle_input_sentence", "false"},
      {"max_sentence_length", "65536"},
      {"minloglevel", "2"},
  };
  Lines lines(corpora);
  std::string serialized;
  if (auto s = sentencepiece::SentencePieceTrainer::Train(args, &lines, &serialized); !s.ok())
    return Status::error("training the SentencePiece tokenizer failed: " + s.ToString());
  StatusOr<std::unique_ptr<Impl>> impl = fromSerialized(std::move(serialized), "the trained model");
  if (!impl.isOk()) return impl.status();
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(*impl)));
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot read the tokenizer '" + path + "'");
  std::stringstream bytes;
  bytes << in.rdbuf();
  StatusOr<std::unique_ptr<Impl>> impl = fromSerialized(bytes.str(), path);
  if (!impl.isOk()) return impl.status();
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(*impl)));
}

Status Tokenizer::save(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(impl_->serialized.data(), static_cast<std::streamsize>(impl_->serialized.size()));
  out.close();
  if (!out) return Status::error("cannot write the tokenizer '" + path + "'");
  return Status::ok();
}

int32_t Tokenizer::vocabSize() const { return impl_->processor.GetPieceSize(); }

Tokenizer::Specials Tokenizer::specials() const {
  return {impl_->processor.pad_id(), impl_->processor.bos_id(), impl_->processor.eos_id(),
          impl_->processor.unk_id()};
}

std::vector<int32_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  (void)impl_->processor.Encode(text, &ids);  // fails only without a model
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::vector<int> kept;
  for (int32_t id : ids)
    if (id >= 0 && id < vocabSize() && !impl_->processor.IsControl(id) &&
        !impl_->processor.IsUnknown(id))
      kept.push_back(id);
  std::string text;
  (void)impl_->processor.Decode(kept, &text);
  return text;
}

}  // namespace transfuse::rt
