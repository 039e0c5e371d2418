// Fuzz target: MLIR text of the transfuse dialect through the input limits,
// MLIR's parser, the verifiers, the compile pipeline and C++ generation
// (FuzzCompile.h). The input's length picks the fusion strategy, so that a
// mutation of one byte keeps the text's meaning.
#include "tests/fuzz/FuzzCompile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  transfuse::fuzz::compileDefinition(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.mlir",
      static_cast<uint8_t>(size));
  return 0;
}
