// The subword tokenizer: see Tokenizer.h.
#include "runtime/host/Tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

#include "runtime/Json.h"

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

std::string Tokenizer::piece(int32_t id) const {
  return id >= 0 && id < vocabSize() ? impl_->processor.IdToPiece(id) : std::string();
}

int32_t Tokenizer::pieceId(const std::string& piece) const {
  const int id = impl_->processor.PieceToId(piece);
  // PieceToId answers the unknown id for a piece it does not have.
  return id == impl_->processor.unk_id() && piece != impl_->processor.IdToPiece(id) ? -1 : id;
}

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

// ------------------------------------------------------------------ Marian

struct MarianTokenizer::Impl {
  sentencepiece::SentencePieceProcessor source, target;
  std::unordered_map<std::string, int32_t> encoder;  // vocab.json
  std::unordered_map<int32_t, std::string> decoder;  // the target vocabulary, inverted
  bool separate = false;
};

namespace {

StatusOr<std::string> readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot read '" + path + "'");
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// A vocab.json: {piece: id}.
Status readVocab(const std::string& path, std::unordered_map<std::string, int32_t>& out) {
  StatusOr<std::string> text = readBytes(path);
  if (!text.isOk()) return text.status();
  StatusOr<JsonValue> json = JsonValue::parse(*text);
  if (!json.isOk()) return Status::error(path + ": not valid JSON: " + json.status().message());
  if (!json->isObject()) return Status::error(path + ": expected an object of ids");
  for (const auto& [piece, id] : json->members()) {
    if (!id.isInteger() || id.asInt64() < 0 || id.asInt64() >= INT32_MAX)
      return Status::error(path + ": the id of \"" + piece + "\" is not a valid id");
    out[piece] = static_cast<int32_t>(id.asInt64());
  }
  return Status::ok();
}

}  // namespace

MarianTokenizer::MarianTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MarianTokenizer::~MarianTokenizer() = default;

StatusOr<std::unique_ptr<MarianTokenizer>> MarianTokenizer::load(const std::string& dir) {
  auto impl = std::make_unique<Impl>();
  std::string unk = "<unk>", eos = "</s>", pad = "<pad>";
  const std::string config = dir + "/tokenizer_config.json";
  if (std::ifstream(config).good()) {
    StatusOr<std::string> text = readBytes(config);
    if (!text.isOk()) return text.status();
    StatusOr<JsonValue> json = JsonValue::parse(*text);
    if (!json.isOk() || !json->isObject())
      return Status::error(config + ": not a JSON object");
    if (const JsonValue* v = json->find("separate_vocabs"); v && v->isBool())
      impl->separate = v->asBool();
    for (auto [key, name] : {std::pair{"unk_token", &unk}, {"eos_token", &eos}, {"pad_token", &pad}})
      if (const JsonValue* v = json->find(key)) {
        const JsonValue* content = v->isObject() ? v->find("content") : v;
        if (!content || !content->isString())
          return Status::error(config + ": " + key + ": expected a string");
        *name = content->asString();
      }
  }
  for (auto [file, processor] :
       {std::pair{"source.spm", &impl->source}, {"target.spm", &impl->target}}) {
    const std::string path = dir + "/" + file;
    StatusOr<std::string> bytes = readBytes(path);
    if (!bytes.isOk())
      return Status::error(dir + ": no readable " + file +
                           " (a Marian directory's SentencePiece models and vocab.json)");
    if (auto s = processor->LoadFromSerializedProto(*bytes); !s.ok())
      return Status::error(path + ": not a SentencePiece model (" + s.ToString() + ")");
  }
  if (Status s = readVocab(dir + "/vocab.json", impl->encoder); !s.isOk()) return s;
  std::unordered_map<std::string, int32_t> target;
  if (impl->separate)
    if (Status s = readVocab(dir + "/target_vocab.json", target); !s.isOk()) return s;
  for (const auto& [piece, id] : impl->separate ? target : impl->encoder) impl->decoder[id] = piece;
  auto idOf = [&](const std::string& token) {
    auto it = impl->encoder.find(token);
    return it == impl->encoder.end() ? -1 : it->second;
  };
  const int32_t unkId = idOf(unk), eosId = idOf(eos), padId = idOf(pad);
  if (unkId < 0) return Status::error(dir + "/vocab.json: no \"" + unk + "\" (the unknown token)");
  std::unique_ptr<MarianTokenizer> t(new MarianTokenizer(std::move(impl)));
  t->unk_ = unkId;
  t->eos_ = eosId;
  t->pad_ = padId;
  return t;
}

std::vector<int32_t> MarianTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> ids;
  std::string rest = text;
  // A language code (">>fr<<") of a multilingual model: one token.
  if (rest.rfind(">>", 0) == 0)
    if (size_t end = rest.find("<<"); end != std::string::npos) {
      auto it = impl_->encoder.find(rest.substr(0, end + 2));
      ids.push_back(it == impl_->encoder.end() ? unk_ : it->second);
      rest = rest.substr(end + 2);
    }
  std::vector<std::string> pieces;
  (void)impl_->source.Encode(rest, &pieces);  // fails only without a model
  for (const std::string& piece : pieces) {
    auto it = impl_->encoder.find(piece);
    ids.push_back(it == impl_->encoder.end() ? unk_ : it->second);
  }
  return ids;
}

std::string MarianTokenizer::decode(const std::vector<int32_t>& ids) const {
  const sentencepiece::SentencePieceProcessor& spm = impl_->separate ? impl_->target : impl_->source;
  std::vector<std::string> pieces;
  for (int32_t id : ids) {
    if (id == eos_ || id == pad_ || id == unk_) continue;
    if (auto it = impl_->decoder.find(id); it != impl_->decoder.end())
      pieces.push_back(it->second);
    else if (id >= 0 && id < spm.GetPieceSize())
      pieces.push_back(spm.IdToPiece(id));
  }
  std::string text;
  (void)spm.Decode(pieces, &text);
  // "▁" left by pieces SentencePiece does not know, as spaces; the ends stripped.
  for (size_t at; (at = text.find("\xE2\x96\x81")) != std::string::npos;) text.replace(at, 3, " ");
  const size_t first = text.find_first_not_of(" \t\n\r\f\v");
  if (first == std::string::npos) return std::string();
  return text.substr(first, text.find_last_not_of(" \t\n\r\f\v") - first + 1);
}

// ------------------------------------------------------- Llama tokenizer.model

LlamaSentencePiece::LlamaSentencePiece(std::unique_ptr<Tokenizer> spm, bool bos, bool eos)
    : spm_(std::move(spm)), addBos_(bos), addEos_(eos) {
  // Whether the model adds a dummy "▁" before a text: the first piece of
  // a word says.
  std::vector<int32_t> ids = spm_->encode("a");
  dummyPrefix_ = !ids.empty() && spm_->piece(ids[0]).rfind("\xE2\x96\x81", 0) == 0;
  spaceId_ = spm_->pieceId("\xE2\x96\x81");
}
LlamaSentencePiece::~LlamaSentencePiece() = default;

StatusOr<std::unique_ptr<LlamaSentencePiece>> LlamaSentencePiece::load(const std::string& dir) {
  auto spm = Tokenizer::load(dir + "/tokenizer.model");
  if (!spm.isOk()) return spm.status();
  bool bos = true, eos = false;
  const std::string config = dir + "/tokenizer_config.json";
  if (std::ifstream(config).good()) {
    StatusOr<std::string> text = readBytes(config);
    if (!text.isOk()) return text.status();
    StatusOr<JsonValue> json = JsonValue::parse(*text);
    if (!json.isOk() || !json->isObject()) return Status::error(config + ": not a JSON object");
    for (auto [key, flag] : {std::pair{"add_bos_token", &bos}, {"add_eos_token", &eos}})
      if (const JsonValue* v = json->find(key); v && !v->isNull()) {
        if (!v->isBool()) return Status::error(config + ": " + key + ": expected true or false");
        *flag = v->asBool();
      }
  }
  return std::unique_ptr<LlamaSentencePiece>(new LlamaSentencePiece(std::move(*spm), bos, eos));
}

std::vector<int32_t> LlamaSentencePiece::encode(const std::string& text) const {
  // The leading space stands for the dummy prefix (which SentencePiece
  // adds to no empty text: " " alone is the "▁" piece).
  if (dummyPrefix_ && !text.empty() && text[0] == ' ') {
    if (text.size() == 1 && spaceId_ >= 0) return {spaceId_};
    return spm_->encode(text.substr(1));
  }
  return spm_->encode(text);
}

std::vector<int32_t> LlamaSentencePiece::encodePrompt(const std::string& text) const {
  std::vector<int32_t> ids;
  if (addBos_) ids.push_back(spm_->specials().bos);
  std::vector<int32_t> body = encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  if (addEos_) ids.push_back(spm_->specials().eos);
  return ids;
}

std::string LlamaSentencePiece::decode(const std::vector<int32_t>& ids) const {
  return spm_->decode(ids);
}

int32_t LlamaSentencePiece::pieceId(const std::string& piece) const {
  return spm_->pieceId(piece);
}

}  // namespace transfuse::rt
