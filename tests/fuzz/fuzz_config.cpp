// Fuzz target: model configs (JSON) through parsing, validation, model
// building, the compile pipeline and C++ generation (FuzzCompile.h). The last
// byte picks the fusion strategy. A config with more than a few layers is
// only parsed and validated (building 1024 layers is valid but takes a second,
// which would starve the search); its building is what the small ones cover.
#include "models/ModelConfig.h"
#include "tests/fuzz/FuzzCompile.h"
#include "tests/fuzz/FuzzUtil.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = mlir::transfuse::parseModelConfig(llvm::StringRef(text.data(), text.size()),
                                                  "fuzz.json");
  if (!config) {
    std::string message = llvm::toString(config.takeError());
    FUZZ_CHECK(message.find("fuzz.json") != std::string::npos, "%s", message.c_str());
    return 0;
  }
  const int64_t layers = config->numEncoderLayers + config->numDecoderLayers;
  if (layers > 6 || config->dModel > 4096 || config->dFF > 16384) return 0;
  transfuse::fuzz::compileDefinition(text, "fuzz.json", size ? data[size - 1] : 0);
  return 0;
}
