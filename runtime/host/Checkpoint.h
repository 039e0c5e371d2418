// Checkpoint directories (docs/training.md, "Checkpoints"): committed
// atomically, verified before use, listed by step, pruned, averaged.
//
// commitDirectory writes a directory's files under a temporary name in the
// same parent, fsyncs each, writes CHECKSUMS (the size and CRC-32 of every
// file) and fsyncs it, renames the directory into place and fsyncs the
// parent. A process killed at any point leaves either no directory under the
// final name or a whole one; verifyDirectory checks the sums anyway (a disk
// or a person can still damage a file), so a torn checkpoint never loads.
#ifndef TRANSFUSE_RUNTIME_HOST_CHECKPOINT_H
#define TRANSFUSE_RUNTIME_HOST_CHECKPOINT_H

#include "runtime/Json.h"
#include "runtime/Status.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace transfuse::rt {

// Creates `path` atomically with the files `write` puts into the directory it
// is given (regular files only). An existing `path` is replaced in one step
// (renameat2's exchange), then removed. Leftover temporaries of killed
// commits in the parent are removed first.
Status commitDirectory(const std::string& path,
                       const std::function<Status(const std::string& tmpDir)>& write);

// Writes `bytes` to `path` through a temporary file in the same directory:
// fsync, rename, fsync of the directory.
Status writeFileAtomically(const std::string& path, const std::string& bytes);

// Ok when `path` has CHECKSUMS and every file it lists has its size and
// CRC-32; the error names the directory and the file.
Status verifyDirectory(const std::string& path);

// The name of step `step`'s checkpoint ("step-00000123"), and the steps of
// those under `dir`, ascending (names only: verify before loading).
std::string checkpointName(int64_t step);
std::vector<int64_t> listCheckpoints(const std::string& dir);

// What a run's directory holds besides its step-* checkpoints (the
// resolved config, the tokenizer trained for it), and each checkpoint's files.
inline constexpr const char* kConfigFile = "config.json";
inline constexpr const char* kTokenizerFile = "tokenizer.model";
inline constexpr const char* kStateFile = "state.json";
inline constexpr const char* kWeightsFile = "model.safetensors";
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";

// `dir`/`name`.
std::string joinPath(const std::string& dir, const std::string& name);

// The step-* checkpoints of `dir` that verify, newest first; why each other
// one was skipped goes to `skipped`.
std::vector<int64_t> wholeCheckpoints(const std::string& dir,
                                      std::vector<std::string>* skipped = nullptr);

// The state.json of checkpoint directory `checkpoint`, a JSON object; the
// error names the file.
StatusOr<JsonValue> readState(const std::string& checkpoint);

// Among `steps`, the checkpoint whose state.json has the lowest valid_loss
// (-1 when none has one).
StatusOr<int64_t> bestCheckpoint(const std::string& dir, const std::vector<int64_t>& steps);

// Removes `path` and its files (a checkpoint directory: no subdirectories).
Status removeDirectory(const std::string& path);

// The element-wise mean (in double, stored F32) of the tensors of the
// safetensors files `paths`, which must hold the same names and shapes.
StatusOr<std::map<std::string, Tensor>> averageSafetensors(const std::vector<std::string>& paths);

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_HOST_CHECKPOINT_H
