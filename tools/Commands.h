//===- Commands.h - the transfuse driver's commands -----------------------===//
//
// The command table (Commands.cpp): each command's usage, summary, details,
// flags and the function that runs it. A command's function gets the
// positional arguments and the flags given (name -> value, "" for a boolean
// flag), every flag already known to be one of its own; it returns the
// exit code or exits with an error (Cli.h's die).
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_TOOLS_COMMANDS_H
#define TRANSFUSE_TOOLS_COMMANDS_H


#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlir::transfuse::tools {

using Positional = std::vector<std::string>;
using Flags = std::map<std::string, std::string>;

struct FlagSpec {
  const char *name;
  const char *metavar; // nullptr: a boolean flag
  const char *help;
};

struct Command {
  const char *name;
  const char *usage;
  /// One sentence: what `transfuse --help` lists.
  const char *summary;
  /// What `transfuse NAME --help` adds below the summary ("" for none).
  const char *details;
  std::vector<FlagSpec> flags;
  int (*run)(const Positional &positional, const Flags &flags);
};

/// Every command, in the order `transfuse --help` lists them.
const std::vector<Command> &commands();

// ModelCommands.cpp
int runCompile(const Positional &positional, const Flags &flags);
int runRun(const Positional &positional, const Flags &flags);
int runStress(const Positional &positional, const Flags &flags);
int runDemo(const Positional &positional, const Flags &flags);
// EmbedCommands.cpp
int runTokenize(const Positional &positional, const Flags &flags);
int runEmbed(const Positional &positional, const Flags &flags);
// ClassifyCommands.cpp
int runClassify(const Positional &positional, const Flags &flags);

/// The artifact a command runs and the weights it binds, from a MODEL
/// argument: an artifact directory (manifest.json; weights from --weights,
/// else none) or a Hugging Face directory compiled on first use into the
/// cache at --max-batch `batch` and --max-seq-len, --fusion (default all),
/// its weights its own unless --weights says otherwise.
struct ModelArtifact {
  std::string dir, weights;
};
ModelArtifact modelArtifact(const std::string &model, const Flags &flags, int64_t batch,
                            std::array<int64_t, 2> imageSize = {0, 0});
// BenchCommands.cpp (bench decode: DecodeCommands.cpp)
int runBench(const Positional &positional, const Flags &flags);
int runExportKernel(const Positional &positional, const Flags &flags);
// TrainCommands.cpp, CheckpointCommands.cpp
int runTrain(const Positional &positional, const Flags &flags);
int runAverageCheckpoints(const Positional &positional, const Flags &flags);
// DecodeCommands.cpp
int runTranslate(const Positional &positional, const Flags &flags);
int runGenerate(const Positional &positional, const Flags &flags);
int runScore(const Positional &positional, const Flags &flags);
/// `bench decode MODEL`: positional[0] is "decode".
int runBenchDecode(const Positional &positional, const Flags &flags);

} // namespace mlir::transfuse::tools

#endif // TRANSFUSE_TOOLS_COMMANDS_H
