// Fuzz target: a Hugging Face directory's config.json (seeds: BERT, Llama 3 in
// transformers 5's spelling, Marian; sentence-transformers modules aside)
// through loadHuggingFaceDirectory:
// every input is refused with an error naming the file, or builds a module
// that verifies. Sizes are capped so that building stays fast (a config of
// 1024 layers is valid and slow, which would starve the search).
#include "models/HuggingFace.h"
#include "tests/fuzz/FuzzUtil.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"

#include <fstream>

namespace {

// One directory per process, its config.json rewritten for each input.
const std::string &directory() { return transfuse::fuzz::scratchDirectory("transfuse-fuzz-hf"); }

// Keys that scale the model: past these caps an input is only parsed.
bool small(llvm::StringRef text) {
  auto json = llvm::json::parse(text);
  if (!json) {
    llvm::consumeError(json.takeError());
    return true;  // refused by the loader
  }
  const llvm::json::Object* o = json->getAsObject();
  if (!o) return true;
  const std::pair<const char*, int64_t> caps[] = {
      {"num_hidden_layers", 3}, {"hidden_size", 256},       {"intermediate_size", 1024},
      {"vocab_size", 4096},     {"max_position_embeddings", 512}, {"type_vocab_size", 16},
      {"num_attention_heads", 16}, {"d_model", 256},          {"encoder_layers", 3},
      {"decoder_layers", 3},        {"encoder_ffn_dim", 1024},  {"decoder_ffn_dim", 1024},
      {"decoder_vocab_size", 4096}};
  for (const auto& [key, cap] : caps)
    if (std::optional<int64_t> v = o->getInteger(key); v && *v > cap) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char*>(data), size);
  if (!small(text)) return 0;
  const std::string path = directory() + "/config.json";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  mlir::MLIRContext context;
  std::vector<std::string> warnings;
  mlir::transfuse::BuildOptions options;
  options.maxBatch = 2;
  options.warnings = &warnings;
  auto module = mlir::transfuse::loadHuggingFaceDirectory(context, directory(), options);
  if (!module) {
    std::string message = llvm::toString(module.takeError());
    FUZZ_CHECK(message.find(directory()) != std::string::npos, "%s", message.c_str());
    return 0;
  }
  FUZZ_CHECK(mlir::succeeded(mlir::verify(**module)), "the built module does not verify");
  for (const std::string& w : warnings)
    FUZZ_CHECK(w.find("config.json") != std::string::npos, "%s", w.c_str());
  return 0;
}
