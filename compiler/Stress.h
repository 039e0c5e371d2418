//===- Stress.h - compiled models under concurrent load -------------------===//
//
// The steps behind `transfuse stress` (docs/reliability.md): several compiled
// models loaded at once, many threads running them on inputs of mixed dynamic
// sizes with bad inputs interleaved. Every good result must be bit-identical
// to the serial result of the same inputs, every bad input one clear error
// naming the tensor, and every model must give its serial results afterwards.
// The lifecycle part creates, runs and destroys a model many times and loads
// a bad weights file as often, reporting the resident memory before and
// after. Prints nothing; failures come back in the result.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_COMPILER_STRESS_H
#define TRANSFUSE_COMPILER_STRESS_H

#include "codegen/emit/Backend.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::transfuse::compiler {

struct StressOptions {
  /// Compiled model directories, or model definitions (.json, .mlir) that
  /// are compiled first (fusion all, the maxima below) into a temporary one.
  std::vector<std::string> models;
  int threads = 8;       // threads calling tf_model_run at once
  int64_t runs = 1000;   // runs per thread
  int badEvery = 8;      // about one run in badEvery has a bad input
  int64_t lifecycle = 0; // create/run/destroy cycles (and bad-file loads)
  int modelThreads = 1;  // each model's own thread pool
  uint64_t seed = 0;
  int64_t maxBatch = 4, maxSeqLen = 16; // for model definitions
  emit::BuildOptions build;
};

struct StressResult {
  int64_t goodRuns = 0, badRuns = 0, cases = 0;
  double seconds = 0;
  /// Problems found: each a sentence (empty: the stress test passed).
  std::vector<std::string> failures;
  /// Lifecycle: resident memory after the first tenth of the cycles and at
  /// the end (bytes), and the cycles run.
  int64_t rssWarm = 0, rssEnd = 0, cycles = 0;
};

llvm::Expected<StressResult> stressModels(const StressOptions &options);

} // namespace mlir::transfuse::compiler

#endif // TRANSFUSE_COMPILER_STRESS_H
