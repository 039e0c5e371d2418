//===- Cache.cpp - Hugging Face directories compiled on first use --------===//
//
// See Cache.h.
//
//===----------------------------------------------------------------------===//

#include "compiler/Cache.h"

#include "runtime/exec/model.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::compiler;

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

/// Files larger than this (that are not safetensors) enter the key by size
/// and modification time instead of their contents.
constexpr uint64_t kHashWholeFileBelow = 64ull << 20;

/// Adds `s` with its length, so that consecutive fields cannot run together.
void field(llvm::SHA256 &h, llvm::StringRef s) {
  uint64_t n = s.size();
  h.update(llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(&n), sizeof(n)));
  h.update(s);
}

/// What of `path` the artifact can depend on: a safetensors file's header,
/// a small file's contents, a large one's size and time.
llvm::Error hashFile(llvm::SHA256 &h, const std::string &path, const llvm::sys::fs::file_status &st) {
  const bool safetensors = llvm::StringRef(path).ends_with(".safetensors");
  if (!safetensors && st.getSize() >= kHashWholeFileBelow) {
    field(h, std::to_string(st.getSize()) + "@" +
                 std::to_string(st.getLastModificationTime().time_since_epoch().count()));
    return llvm::Error::success();
  }
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer)
    return error("cannot read '" + path + "': " + buffer.getError().message());
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (safetensors && bytes.size() >= 8) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
      n = (n << 8) | static_cast<uint8_t>(bytes[i]);
    bytes = bytes.take_front(8 + std::min<uint64_t>(n, bytes.size() - 8));
  }
  field(h, bytes);
  return llvm::Error::success();
}

/// Every regular file of `dir` and of its folders one level down (where
/// sentence-transformers keeps its modules), by sorted relative path.
llvm::Error hashDirectory(llvm::SHA256 &h, llvm::StringRef dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    if (it->type() == llvm::sys::fs::file_type::directory_file && it.level() >= 1)
      it.no_push(); // folders two levels down (a .git's objects) are not read
    if (it->type() == llvm::sys::fs::file_type::regular_file)
      files.push_back(it->path());
  }
  if (ec)
    return error("cannot list '" + dir + "': " + ec.message());
  std::sort(files.begin(), files.end());
  for (const std::string &f : files) {
    llvm::sys::fs::file_status st;
    if (std::error_code e = llvm::sys::fs::status(f, st))
      return error("cannot stat '" + f + "': " + e.message());
    field(h, llvm::StringRef(f).drop_front(dir.size()));
    if (llvm::Error e = hashFile(h, f, st))
      return e;
  }
  return llvm::Error::success();
}

/// The running transfuse executable: path, size and modification time.
std::string executableIdentity() {
  llvm::SmallString<256> self;
  if (llvm::sys::fs::real_path("/proc/self/exe", self))
    return "unknown";
  llvm::sys::fs::file_status st;
  if (llvm::sys::fs::status(self, st))
    return self.str().str();
  return (self + "#" + std::to_string(st.getSize()) + "@" +
          std::to_string(st.getLastModificationTime().time_since_epoch().count()))
      .str();
}

} // namespace

llvm::Expected<std::string> compiler::cacheRoot() {
  llvm::SmallString<256> root;
  if (std::optional<std::string> xdg = llvm::sys::Process::GetEnv("XDG_CACHE_HOME");
      xdg && !xdg->empty()) {
    root = *xdg;
  } else if (std::optional<std::string> home = llvm::sys::Process::GetEnv("HOME");
             home && !home->empty()) {
    root = *home;
    llvm::sys::path::append(root, ".cache");
  } else {
    return error("no cache for compiled models: set XDG_CACHE_HOME or HOME, or compile the "
                 "directory yourself (transfuse compile DIR -o ARTIFACT)");
  }
  llvm::sys::path::append(root, "transfuse");
  return root.str().str();
}

llvm::Expected<CachedArtifact> compiler::cachedArtifact(llvm::StringRef modelDir,
                                                        const BuildOptions &maxima,
                                                        CompileOptions options) {
  options.emit = Emit::kShared;
  options.sourceDirectory = modelDir.str();
  if (llvm::Error e = checkOptions(options))
    return std::move(e);
  auto root = cacheRoot();
  if (!root)
    return root.takeError();

  llvm::SHA256 h;
  field(h, "transfuse-cache-1 abi " + std::to_string(TF_ABI_VERSION));
  field(h, executableIdentity());
  field(h, options.strategy.str() + " target " + options.build.target + " bf16 " +
               std::to_string(options.build.bf16) + " int8 " + std::to_string(options.build.int8) +
               " cxx " + options.build.cxx + " train " +
               std::to_string(options.train));
  field(h, "batch " + std::to_string(maxima.maxBatch) + " seq " + std::to_string(maxima.maxSeqLen) +
               " beam " + std::to_string(maxima.maxBeam) + " decoding " +
               std::to_string(maxima.decoding) + " image " +
               std::to_string(maxima.imageSize[0]) + "x" + std::to_string(maxima.imageSize[1]));
  if (llvm::Error e = hashDirectory(h, modelDir))
    return std::move(e);
  std::string key = llvm::toHex(h.final(), /*LowerCase=*/true).substr(0, 32);
  llvm::SmallString<256> dir(*root);
  llvm::sys::path::append(dir, key);

  CachedArtifact cached;
  cached.dir = dir.str().str();
  llvm::SmallString<256> manifest(dir), library(dir);
  llvm::sys::path::append(manifest, "manifest.json");
  llvm::sys::path::append(library, "libmodel.so");
  if (llvm::sys::fs::exists(manifest) && llvm::sys::fs::exists(library)) {
    // The definition's warnings are those of the directory, found or not.
    if (maxima.warnings) {
      MLIRContext context;
      if (auto module = loadDefinition(context, modelDir, maxima, options.train); !module)
        llvm::consumeError(module.takeError());
    }
    return cached;
  }

  if (std::error_code ec = llvm::sys::fs::create_directories(*root))
    return error("cannot create the cache '" + *root + "': " + ec.message());
  llvm::SmallString<256> work;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory(llvm::Twine(*root) + "/partial-" + key, work))
    return error("cannot create a folder in the cache '" + *root + "': " + ec.message());
  MLIRContext context;
  auto module = loadDefinition(context, modelDir, maxima, options.train);
  if (!module) {
    llvm::sys::fs::remove_directories(work);
    return module.takeError();
  }
  auto artifact = compile(**module, work, options);
  if (!artifact) {
    llvm::sys::fs::remove_directories(work);
    return artifact.takeError();
  }
  if (std::error_code ec = llvm::sys::fs::rename(work, dir)) {
    // Another process put a whole artifact there first: use it.
    llvm::sys::fs::remove_directories(work);
    if (!llvm::sys::fs::exists(library))
      return error("cannot move the compiled model into the cache '" + cached.dir +
                   "': " + ec.message());
    return cached;
  }
  cached.compiledNow = true;
  cached.seconds = artifact->seconds;
  return cached;
}
