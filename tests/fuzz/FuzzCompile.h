// The compiler half of the fuzz targets of configs and MLIR text: a model
// definition through parsing (and building), verification, the compile
// pipeline of a fusion strategy, the model interface and C++ generation for
// the cpu target; nothing is written or compiled. Every failure must be an
// error with a message, never a crash (tests/fuzz/README.md).
#ifndef TRANSFUSE_TESTS_FUZZ_FUZZCOMPILE_H
#define TRANSFUSE_TESTS_FUZZ_FUZZCOMPILE_H

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace transfuse::fuzz {

// `name` decides the kind of definition (".json": a config; else MLIR).
// `selector` picks the fusion strategy. Aborts (a crash for libFuzzer) only on
// an error without a message or an internal inconsistency.
void compileDefinition(std::string_view text, std::string_view name, uint8_t selector);

}  // namespace transfuse::fuzz

#endif  // TRANSFUSE_TESTS_FUZZ_FUZZCOMPILE_H
