//===- TrainCommands.h - checkpoint directories for the commands ----------===//
//
// What `transfuse train` (TrainCommands.cpp) writes and `translate` reads:
// a training run's checkpoint directory opened as a model, and the decoding
// artifact compiled for it (CheckpointCommands.cpp). docs/training.md says
// what a checkpoint directory holds.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_TOOLS_TRAINCOMMANDS_H
#define TRANSFUSE_TOOLS_TRAINCOMMANDS_H

#include "models/ModelConfig.h"
#include "runtime/host/Tokenizer.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mlir::transfuse::tools {

/// A checkpoint directory opened for translation: its config, the weights
/// of checkpoint `which` (best, last, averaged, or a checkpoint's name),
/// its tokenizer (null for lines of ids) and the decoding artifact compiled
/// for it, cached in the directory. Exits with an error naming the
/// directory when it is not one or holds no whole checkpoint.
struct CheckpointDir {
  std::string dir, weights, artifact;
  ModelConfig config;
  std::unique_ptr<::transfuse::rt::Tokenizer> tokenizer;
};
CheckpointDir openCheckpointDir(const std::string &dir, const std::string &which,
                                const std::string &dtype = "f32");

/// A compiled decoding artifact of `config` for translation and validation,
/// cached in DIR/artifact-<key> (the key hashes the config, the build
/// options and this compiler); weights come from a checkpoint at load.
/// `dtype`: f32, bf16 (products on bf16 operands, docs/bf16.md) or int8
/// (linear layers on int8 weights, docs/int8.md).
std::string decodeArtifact(const ModelConfig &config, const std::string &dir,
                           const std::string &dtype = "f32");

} // namespace mlir::transfuse::tools

#endif // TRANSFUSE_TOOLS_TRAINCOMMANDS_H
