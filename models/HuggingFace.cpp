//===- HuggingFace.cpp - Hugging Face model directories as they are -------===//
//
// See HuggingFace.h: config.json read and checked, its model_type's family
// built. The weights stay in the directory (bound by name when the model is
// loaded).
//
//===----------------------------------------------------------------------===//

#include "models/HuggingFace.h"

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

} // namespace

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
  auto text = llvm::MemoryBuffer::getFile(configPath, /*IsText=*/true);
  if (!text)
    return fail("cannot read '" + configPath + "': " + text.getError().message());
  if (llvm::Error e = checkDefinitionText((*text)->getBuffer(), configPath))
    return std::move(e);
  llvm::Expected<llvm::json::Value> json = llvm::json::parse((*text)->getBuffer());
  if (!json)
    return fail(configPath + ": invalid JSON: " + llvm::toString(json.takeError()));
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
  if (options.training)
    return fail(configPath + ": training a bert model needs a task head (none is supported yet)");
  auto bert = parseBertConfig(*config, configPath, options.warnings);
  if (!bert)
    return bert.takeError();
  if (options.maxSeqLen > bert->maxPositions)
    return fail("--max-seq-len " + llvm::Twine(options.maxSeqLen) +
                " exceeds the config's max_position_embeddings " +
                llvm::Twine(bert->maxPositions) + " (learned positions have that many rows)");
  OwningOpRef<ModuleOp> module = newModule(context);
  buildBert(*module, *bert, options);
  return finishModel(std::move(module), toJson(*bert), options, bert->maxPositions);
}
