//===- TrainData.h - what transfuse train reads ---------------------------===//
//
// `transfuse train`'s flags, its config and its corpus resolved before
// anything is trained: every file read and checked (lines, ids, lengths,
// the tokenizer trained or resumed), made examples for the Trainer.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_TOOLS_TRAINDATA_H
#define TRANSFUSE_TOOLS_TRAINDATA_H

#include "models/ModelConfig.h"
#include "tools/Commands.h"
#include "runtime/host/Tokenizer.h"
#include "runtime/host/Trainer.h"

#include "llvm/Support/JSON.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mlir::transfuse::tools {

namespace rt = ::transfuse::rt;

using IdLines = std::vector<std::vector<int32_t>>;

/// What `transfuse train`'s flags and files resolve to before anything is
/// trained.
struct TrainRun {
  bool compiled = true;
  std::string ckptDir;
  bool resume = false, resuming = false; // --resume, and a run to resume exists
  std::string configPath;
  ModelConfig config;
  std::string tokenizerKind;
  std::unique_ptr<rt::Tokenizer> tokenizer;
  std::string srcPath, tgtPath, srcValid, tgtValid;
  rt::TrainingData data;
  int64_t maxLen = 1;
  IdLines validSrc, validTgt;
  std::vector<std::string> validRefs; // the raw references, for BLEU
};

/// The flags' combinations, and the config (on --resume the run's, resolved
/// at its first run: the tokenizer's vocabulary and the flags that change it).
TrainRun readTrainFlags(const std::vector<std::string> &positional, const Flags &flags);

/// Every file read and checked before anything is trained: the lines (text:
/// a blank line is a sentence missing; ids: an empty list is allowed), the
/// tokenizer, the ids, the examples and the validation pairs.
void readCorpus(TrainRun &run, const Flags &flags);

/// The resolved config as JSON (a run directory's config.json).
inline llvm::json::Value configJson(const ModelConfig &config) {
  return llvm::json::Value(toJson(config));
}

} // namespace mlir::transfuse::tools

#endif // TRANSFUSE_TOOLS_TRAINDATA_H
