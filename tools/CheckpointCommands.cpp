//===- CheckpointCommands.cpp - checkpoint directories as models ----------===//
//
// A training run's checkpoint directory opened for translation (its config,
// a checkpoint's weights, its tokenizer, a decoding artifact compiled for it
// and cached there) and `transfuse average-checkpoints`. docs/training.md
// says what a checkpoint directory holds.
//
//===----------------------------------------------------------------------===//

#include "tools/TrainCommands.h"

#include "compiler/Compiler.h"
#include "models/Models.h"
#include "runtime/host/Checkpoint.h"
#include "tools/Cli.h"
#include "tools/Commands.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Support/raw_ostream.h"

#include <unistd.h>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::tools;
namespace rt = ::transfuse::rt;
using rt::joinPath;

namespace {

/// The whole checkpoints of `dir`, newest first; the others are named on stderr.
std::vector<int64_t> wholeCheckpoints(const std::string &dir) {
  std::vector<std::string> skipped;
  std::vector<int64_t> whole = rt::wholeCheckpoints(dir, &skipped);
  for (const std::string &why : skipped)
    llvm::errs() << "transfuse: skipping a checkpoint that is not whole: " << why << "\n";
  return whole;
}

llvm::json::Object readJsonObject(const std::string &path) {
  auto text = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!text)
    die("cannot read '" + path + "': " + text.getError().message());
  auto value = llvm::json::parse((*text)->getBuffer());
  if (!value)
    die(path + ": " + llvm::toString(value.takeError()));
  if (!value->getAsObject())
    die(path + ": not a JSON object");
  return std::move(*value->getAsObject());
}

} // namespace

std::string tools::decodeArtifact(const ModelConfig &config, const std::string &dir,
                                  const std::string &dtype) {
  BuildOptions build;
  build.maxBatch = 32;
  build.maxBeam = 4;
  build.maxSeqLen = config.maxSeqLen;
  std::string configText;
  llvm::raw_string_ostream os(configText);
  os << llvm::json::Value(toJson(config));
  std::string exe = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
  llvm::sys::fs::file_status st;
  std::string compiler = compilerVersion().str();
  if (!llvm::sys::fs::status(exe, st))
    compiler += ":" + std::to_string(st.getSize()) + ":" +
                std::to_string(st.getLastModificationTime().time_since_epoch().count());
  std::string key = configText + "|b32|k4|s" + std::to_string(build.maxSeqLen) + "|all|" +
                    (dtype == "f32" ? "" : dtype + "|") + compiler;
  std::string out = joinPath(dir, "artifact-" + llvm::utohexstr(llvm::xxh3_64bits(key), /*LowerCase=*/true));
  if (llvm::sys::fs::exists(joinPath(out, "libmodel.so")))
    return out;
  MLIRContext context;
  auto module = orDie(buildModel(context, config, build));
  auto tmp = orDie(compiler::TemporaryDirectory::create("transfuse-artifact"));
  compiler::CompileOptions options{orDie(FusionStrategy::parse("all"))};
  setDtype(options.build, dtype);
  orDie(compiler::compile(*module, tmp.path(), options));
  // Into place in one rename (a concurrent or killed compile leaves none half-written).
  std::string staging = out + ".tmp-" + std::to_string(::getpid());
  llvm::sys::fs::remove_directories(staging);
  if (std::error_code ec = llvm::sys::fs::create_directories(staging))
    die("cannot create '" + staging + "': " + ec.message());
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(tmp.path(), ec), end; it != end && !ec;
       it.increment(ec)) {
    std::string name = llvm::sys::path::filename(it->path()).str();
    if (llvm::sys::fs::is_regular_file(it->path()))
      if (std::error_code c = llvm::sys::fs::copy_file(it->path(), joinPath(staging, name)))
        die("cannot copy '" + it->path() + "': " + c.message());
  }
  if (std::error_code c = llvm::sys::fs::rename(staging, out)) {
    llvm::sys::fs::remove_directories(staging);
    if (!llvm::sys::fs::exists(joinPath(out, "libmodel.so")))
      die("cannot create '" + out + "': " + c.message());
  }
  return out;
}

CheckpointDir tools::openCheckpointDir(const std::string &dir, const std::string &which,
                                       const std::string &dtype) {
  CheckpointDir c;
  c.dir = dir;
  std::string configPath = joinPath(dir, rt::kConfigFile);
  auto text = llvm::MemoryBuffer::getFile(configPath, /*IsText=*/true);
  if (!text)
    die("'" + dir + "' is neither a compiled artifact (manifest.json) nor a checkpoint directory (" +
        rt::kConfigFile + ")");
  c.config = orDie(parseModelConfig((*text)->getBuffer(), configPath));
  std::string checkpoint;
  if (which == "averaged") {
    checkpoint = joinPath(dir, "averaged");
  } else if (which == "best" || which == "last") {
    std::vector<int64_t> whole = wholeCheckpoints(dir);
    if (whole.empty())
      die("'" + dir + "' holds no whole checkpoint");
    int64_t step = which == "best" ? orDie(rt::bestCheckpoint(dir, whole)) : -1;
    checkpoint = joinPath(dir, rt::checkpointName(step >= 0 ? step : whole.front()));
  } else {
    checkpoint = joinPath(dir, which);
    if (!llvm::sys::fs::is_directory(checkpoint))
      die("--checkpoint " + which + ": '" + dir +
          "' has no such checkpoint (best, last, averaged or a step-N name)");
  }
  if (rt::Status s = rt::verifyDirectory(checkpoint); !s.isOk())
    die("--checkpoint " + which + ": " + s.message());
  c.weights = joinPath(checkpoint, rt::kWeightsFile);
  if (llvm::sys::fs::exists(joinPath(dir, rt::kTokenizerFile)))
    c.tokenizer = orDie(rt::Tokenizer::load(joinPath(dir, rt::kTokenizerFile)));
  c.artifact = decodeArtifact(c.config, dir, dtype);
  return c;
}

int tools::runAverageCheckpoints(const std::vector<std::string> &positional,
                                 const std::map<std::string, std::string> &flags) {
  if (positional.size() != 1)
    die("average-checkpoints expects one checkpoint directory");
  const std::string &dir = positional[0];
  const std::string out = flag(flags, "-o");
  if (out.empty())
    die("average-checkpoints needs an output: -o DIR (e.g. " + dir + "/averaged)");
  const int64_t last = intFlag(flags, "--last", 5, 1, 1 << 20);
  std::vector<int64_t> whole = wholeCheckpoints(dir);
  if (whole.empty())
    die("'" + dir + "' holds no whole checkpoint");
  if ((int64_t)whole.size() < last)
    die("--last " + llvm::Twine(last) + ": '" + dir + "' holds " + llvm::Twine(whole.size()) +
        " whole checkpoints");
  std::vector<std::string> paths;
  llvm::json::Array steps;
  for (int64_t i = last - 1; i >= 0; --i) {
    paths.push_back(joinPath(joinPath(dir, rt::checkpointName(whole[i])), rt::kWeightsFile));
    steps.push_back(whole[i]);
  }
  std::map<std::string, rt::Tensor> mean = orDie(rt::averageSafetensors(paths));
  std::string newest = joinPath(joinPath(dir, rt::checkpointName(whole.front())), rt::kStateFile);
  llvm::json::Object st = readJsonObject(newest);
  llvm::json::Object state{{"averaged_steps", std::move(steps)}};
  if (auto *c = st.getObject("config"))
    state["config"] = llvm::json::Object(*c);
  rt::Status s = rt::commitDirectory(out, [&](const std::string &tmp) {
    writeTensors(joinPath(tmp, rt::kWeightsFile), mean);
    std::error_code ec;
    llvm::raw_fd_ostream os(joinPath(tmp, rt::kStateFile), ec);
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(state))) << "\n";
    os.close();
    return ec || os.has_error() ? rt::Status::error("cannot write " + joinPath(tmp, rt::kStateFile))
                                : rt::Status::ok();
  });
  if (!s.isOk())
    die(s.message());
  llvm::outs() << "averaged " << last << " checkpoints (steps " << whole[last - 1] << " to "
               << whole.front() << ") into " << out << "\n";
  return 0;
}
