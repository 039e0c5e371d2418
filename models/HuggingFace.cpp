//===- HuggingFace.cpp - Hugging Face model directories as they are -------===//
//
// See HuggingFace.h: config.json read and checked, its model_type's family
// built. The weights stay in the directory (bound by name when the model is
// loaded).
//
//===----------------------------------------------------------------------===//

#include "models/HuggingFace.h"

#include "runtime/WeightFiles.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::transfuse;

namespace {

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

std::string join(llvm::StringRef dir, llvm::StringRef name) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  return path.str().str();
}

/// Families that Transfuse knows by name but does not compile yet.
const char *const kNotYet[] = {"roberta", "xlm-roberta", "distilbert", "albert", "electra",
                               "deberta", "deberta-v2", "mpnet", "camembert", "vit", "llama",
                               "mistral", "qwen2", "gpt2", "marian", "t5", "bart"};

/// A JSON file of the directory, under the definition limits (size,
/// nesting: llvm::json::parse recurses) of checkDefinitionText.
llvm::Expected<llvm::json::Value> readJson(const std::string &path) {
  auto text = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!text)
    return fail("cannot read '" + path + "': " + text.getError().message());
  if (llvm::Error e = checkDefinitionText((*text)->getBuffer(), path))
    return std::move(e);
  llvm::Expected<llvm::json::Value> json = llvm::json::parse((*text)->getBuffer());
  if (!json)
    return fail(path + ": invalid JSON: " + llvm::toString(json.takeError()));
  return json;
}

/// The rows of a BertForSequenceClassification head's classifier when the
/// directory's weights hold one (with its pooler), else 0. Weights that do
/// not open are left to the load, which names what is wrong.
int64_t classifierRows(llvm::StringRef dir, int64_t hidden) {
  auto files = ::transfuse::rt::WeightFiles::open(dir.str());
  if (!files.isOk())
    return 0;
  auto shape = [&](const std::string &name) -> std::vector<int64_t> {
    for (const std::string &n : {name, "bert." + name})
      if (const auto *f = files->find(n))
        return f->info(n)->shape;
    return {};
  };
  std::vector<int64_t> classifier = shape("classifier.weight");
  if (classifier.size() != 2 || classifier[1] != hidden || classifier[0] < 1 ||
      shape("pooler.dense.weight").empty())
    return 0;
  return classifier[0];
}

} // namespace

llvm::Error mlir::transfuse::readSentenceTransformers(llvm::StringRef dir, BertConfig &config) {
  const std::string modulesPath = join(dir, "modules.json");
  if (!llvm::sys::fs::exists(modulesPath))
    return llvm::Error::success();
  auto modules = readJson(modulesPath);
  if (!modules)
    return modules.takeError();
  const llvm::json::Array *list = modules->getAsArray();
  if (!list)
    return fail(modulesPath + ": not a JSON array of modules");
  std::string poolingPath;
  for (const llvm::json::Value &m : *list) {
    const llvm::json::Object *o = m.getAsObject();
    std::optional<llvm::StringRef> type = o ? o->getString("type") : std::nullopt;
    if (!type)
      return fail(modulesPath + ": a module without a \"type\"");
    llvm::StringRef kind = type->rsplit('.').second.empty() ? *type : type->rsplit('.').second;
    if (kind == "Transformer")
      continue;
    if (kind == "Normalize") {
      config.normalize = true;
    } else if (kind == "Pooling") {
      std::optional<llvm::StringRef> path = o->getString("path");
      if (!path || path->contains("..") || llvm::sys::path::is_absolute(*path))
        return fail(modulesPath + ": the Pooling module's \"path\" must be a folder of the model");
      poolingPath = join(join(dir, *path), "config.json");
    } else {
      return fail(modulesPath + ": module type '" + *type +
                  "' is not supported (supported: Transformer, Pooling, Normalize)");
    }
  }
  if (poolingPath.empty())
    return fail(modulesPath + ": no Pooling module (the embed entry needs one)");
  auto pooling = readJson(poolingPath);
  if (!pooling)
    return pooling.takeError();
  const llvm::json::Object *p = pooling->getAsObject();
  if (!p)
    return fail(poolingPath + ": not a JSON object");
  std::vector<std::string> modes;
  for (const auto &kv : *p) {
    llvm::StringRef key = kv.first;
    if (!key.starts_with("pooling_mode_") || kv.second.getAsBoolean() != true)
      continue;
    static const std::pair<const char *, const char *> kModes[] = {
        {"pooling_mode_cls_token", "cls"},
        {"pooling_mode_mean_tokens", "mean"},
        {"pooling_mode_max_tokens", "max"}};
    auto it = llvm::find_if(kModes, [&](auto &m) { return key == m.first; });
    if (it == std::end(kModes))
      return fail(poolingPath + ": key '" + key +
                  "': not supported (supported: pooling_mode_cls_token, pooling_mode_mean_tokens, "
                  "pooling_mode_max_tokens)");
    modes.push_back(it->second);
  }
  if (modes.size() != 1)
    return fail(poolingPath + ": exactly one pooling_mode_* must be true (" +
                llvm::Twine(modes.size()) + " are)");
  if (std::optional<int64_t> dim = p->getInteger("word_embedding_dimension");
      dim && *dim != config.hidden)
    return fail(poolingPath + ": key 'word_embedding_dimension': " + llvm::Twine(*dim) +
                " is not the model's hidden_size " + llvm::Twine(config.hidden));
  config.pooling = modes[0];
  return llvm::Error::success();
}

bool mlir::transfuse::isHuggingFaceDirectory(llvm::StringRef path) {
  return llvm::sys::fs::is_directory(path) && llvm::sys::fs::exists(join(path, "config.json"));
}

llvm::Expected<OwningOpRef<ModuleOp>>
mlir::transfuse::loadHuggingFaceDirectory(MLIRContext &context, llvm::StringRef dir,
                                          const BuildOptions &options) {
  const std::string configPath = join(dir, "config.json");
  if (!llvm::sys::fs::exists(join(dir, "model.safetensors")) &&
      !llvm::sys::fs::exists(join(dir, "model.safetensors.index.json")) &&
      llvm::sys::fs::exists(join(dir, "pytorch_model.bin")))
    return fail(dir + ": the weights are pytorch_model.bin (a pickle, which Transfuse does not "
                      "read): save them as safetensors (model.save_pretrained(dir, "
                      "safe_serialization=True))");
  llvm::Expected<llvm::json::Value> json = readJson(configPath);
  if (!json)
    return json.takeError();
  const llvm::json::Object *config = json->getAsObject();
  if (!config)
    return fail(configPath + ": not a JSON object");
  std::optional<llvm::StringRef> type = config->getString("model_type");
  if (!type)
    return fail(configPath + ": key 'model_type': missing (it names the model's family)");
  if (*type != "bert") {
    bool known = llvm::is_contained(kNotYet, *type);
    return fail(configPath + ": key 'model_type': " + (known ? "'" : "unknown family '") + *type +
                (known ? "' is not supported yet" : "'") + " (supported: bert)");
  }
  auto bert = parseBertConfig(*config, configPath, options.warnings);
  if (!bert)
    return bert.takeError();
  if (llvm::Error e = readSentenceTransformers(dir, *bert))
    return std::move(e);
  bert->numLabels = classifierRows(dir, bert->hidden);
  if (options.training && bert->numLabels == 0)
    return fail(dir + ": training a bert model needs a task head: a BertForSequenceClassification's "
                      "pooler.dense and classifier weights (none in the directory)");
  if (options.maxSeqLen > bert->maxPositions)
    return fail("--max-seq-len " + llvm::Twine(options.maxSeqLen) +
                " exceeds the config's max_position_embeddings " +
                llvm::Twine(bert->maxPositions) + " (learned positions have that many rows)");
  OwningOpRef<ModuleOp> module = newModule(context);
  buildBert(*module, *bert, options);
  return finishModel(std::move(module), toJson(*bert), options, bert->maxPositions);
}
