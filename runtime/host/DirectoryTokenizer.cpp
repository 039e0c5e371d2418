// DirectoryTokenizer.h's loaders and the directory's stop ids.
#include "runtime/host/DirectoryTokenizer.h"

#include "runtime/Json.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sys/stat.h>

namespace transfuse::rt {

namespace {

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool isDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A JSON file, or nothing when it is absent or does not parse.
std::optional<JsonValue> readJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  StatusOr<JsonValue> json = JsonValue::parse(text);
  if (!json.isOk()) return std::nullopt;
  return std::move(*json);
}

}  // namespace

StatusOr<HfTokenizer> loadHfTokenizer(const std::string& path) {
  if (!isDirectory(path)) {
    if (!exists(path)) return Status::error("'" + path + "': no such tokenizer.json or directory");
    return HfTokenizer::fromTokenizerJson(path);
  }
  if (exists(path + "/tokenizer.json")) return HfTokenizer::fromTokenizerJson(path + "/tokenizer.json");
  if (!exists(path + "/vocab.txt"))
    return Status::error("'" + path + "' has no tokenizer (tokenizer.json or vocab.txt)");
  WordPieceOptions options;
  if (exists(path + "/tokenizer_config.json")) {
    StatusOr<WordPieceOptions> read = readTokenizerConfig(path + "/tokenizer_config.json");
    if (!read.isOk()) return read.status();
    options = *read;
  }
  return HfTokenizer::fromVocabTxt(path + "/vocab.txt", options);
}

StatusOr<DirectoryTokenizer> DirectoryTokenizer::load(const std::string& path) {
  DirectoryTokenizer t;
  if (isDirectory(path) && exists(path + "/tokenizer.model")) {
    StatusOr<std::unique_ptr<LlamaSentencePiece>> spm = LlamaSentencePiece::load(path);
    if (!spm.isOk()) return spm.status();
    t.spm = std::move(*spm);
    return t;
  }
  StatusOr<HfTokenizer> json = loadHfTokenizer(path);
  if (!json.isOk()) return json.status();
  t.json = std::move(*json);
  return t;
}

StatusOr<std::vector<int32_t>> DirectoryTokenizer::encode(const std::string& text,
                                                         bool plain) const {
  if (spm) return plain ? spm->encode(text) : spm->encodePrompt(text);
  auto e = json->encode(text, nullptr, 0, true, !plain);
  if (!e.isOk()) return e.status();
  return std::move(e->ids);
}

std::string DirectoryTokenizer::decode(const std::vector<int32_t>& ids, bool keepSpecials) const {
  return spm ? spm->decode(ids) : json->decode(ids, !keepSpecials);
}

int32_t DirectoryTokenizer::idOf(const std::string& token) const {
  return spm ? spm->pieceId(token) : json->idOf(token);
}

std::vector<int32_t> stopIds(const std::string& dir, const DirectoryTokenizer* tokenizer,
                             int32_t eos) {
  std::vector<int32_t> out;
  auto add = [&](const JsonValue& id) {
    if (!id.isInteger() || id.asInt64() < 0 || id.asInt64() > INT32_MAX) return;
    const auto v = static_cast<int32_t>(id.asInt64());
    if (v != eos && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  };
  for (const char* file : {"config.json", "generation_config.json"})
    if (std::optional<JsonValue> json = readJson(dir + "/" + file))
      if (const JsonValue* v = json->find("eos_token_id")) {
        if (v->isArray())
          for (const JsonValue& x : v->asArray()) add(x);
        else
          add(*v);
      }
  if (tokenizer)
    if (std::optional<JsonValue> json = readJson(dir + "/tokenizer_config.json"))
      if (const JsonValue* v = json->find("eos_token")) {
        const JsonValue* name = v->isObject() ? v->find("content") : v;
        if (name && name->isString()) add(JsonValue(int64_t{tokenizer->idOf(name->asString())}));
      }
  return out;
}

}  // namespace transfuse::rt
