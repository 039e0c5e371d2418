//===- Toolchain.cpp - building the artifact from the generated source ----===//
//
// Every backend's artifact is linked the same way: its object, the
// precompiled runtime (transfuse_exec whole, for the C ABI; the kernels and
// the core), the backend's archives and system libraries, into a shared
// library, an executable or one merged static archive. The backend gives
// the compile command (Backend::compileCommand).
//
//===----------------------------------------------------------------------===//

#include "codegen/emit/Backend.h"

#include "codegen/emit/ToolchainConfig.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::emit;

//===----------------------------------------------------------------------===//
// Building the artifact
//===----------------------------------------------------------------------===//

std::string mlir::transfuse::emit::defaultCompiler() {
  if (const char *env = std::getenv("TRANSFUSE_CXX"); env && *env)
    return env;
  return TRANSFUSE_DEFAULT_CXX;
}

static llvm::Error runCommand(llvm::ArrayRef<std::string> argv, StringRef log,
                              std::optional<StringRef> input = std::nullopt) {
  auto program = llvm::sys::findProgramByName(argv[0]);
  if (!program || !llvm::sys::fs::can_execute(*program))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "C++ compiler '" + argv[0] +
                                       "' not found (set --cxx or TRANSFUSE_CXX)");
  llvm::SmallVector<StringRef> args(argv.begin(), argv.end());
  std::optional<StringRef> redirects[] = {input, log, log};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*program, args, std::nullopt, redirects, 0, 0, &message);
  if (rc == 0)
    return llvm::Error::success();
  std::string text;
  if (auto buf = llvm::MemoryBuffer::getFile(log))
    text = (*buf)->getBuffer().take_back(4000).str();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "'" + llvm::join(argv, " ") + "' failed" +
                                     (message.empty() ? "" : " (" + message + ")") + ":\n" + text);
}

static llvm::Error writeFile(const llvm::Twine &path, StringRef text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path.str(), ec);
  if (ec)
    return llvm::createStringError(ec, "cannot write '%s': %s", path.str().c_str(),
                                   ec.message().c_str());
  os << text;
  return llvm::Error::success();
}

llvm::Error mlir::transfuse::emit::writeSources(StringRef dir, StringRef source,
                                                const BuildOptions &options) {
  auto backend = backendOf(options);
  if (!backend)
    return backend.takeError();
  if (llvm::Error e = writeFile(dir + "/" + backend->sourceFile(), source))
    return e;
  auto header = llvm::MemoryBuffer::getFile(TRANSFUSE_CODEGEN_SOURCE_DIR "/runtime/exec/model.h");
  if (!header)
    return llvm::createStringError(header.getError(), "cannot read the runtime's model.h");
  return writeFile(dir + "/model.h", (*header)->getBuffer());
}

llvm::Error mlir::transfuse::emit::buildArtifact(StringRef dir, StringRef source,
                                                 const BuildOptions &options) {
  auto found = backendOf(options);
  if (!found)
    return found.takeError();
  const Backend &backend = *found;
  if (llvm::Error e = backend.available())
    return e;
  if (llvm::Error e = writeSources(dir, source, options))
    return e;
  std::string cxx = options.cxx.empty() ? defaultCompiler() : options.cxx;
  std::string log = (dir + "/build.log").str();
  std::string object = (dir + "/model.o").str();
  // The build's sanitizer flags (empty in a plain build) go to every compile
  // and link, so that generated code is checked like the runtime it links.
  llvm::SmallVector<StringRef> split;
  StringRef(TRANSFUSE_ARTIFACT_FLAGS).split(split, ' ', -1, /*KeepEmpty=*/false);
  std::vector<std::string> extraFlags(split.begin(), split.end());
  std::vector<std::string> compile = backend.compileCommand(cxx, extraFlags);
  compile.insert(compile.end(), {"-I", TRANSFUSE_CODEGEN_SOURCE_DIR, "-I", dir.str(), "-c",
                                 (dir + "/" + backend.sourceFile()).str(), "-o", object});
  if (llvm::Error e = runCommand(compile, log))
    return e;
  // transfuse_exec first (whole, for the C ABI), then what it calls; the
  // backend's archives last, before the system libraries.
  std::vector<std::string> libs = {TRANSFUSE_EXEC_LIB, TRANSFUSE_KERNELS_LIB,
                                   TRANSFUSE_RUNTIME_LIB};
  std::vector<std::string> archives = backend.archives();
  libs.insert(libs.end(), archives.begin(), archives.end());
  std::vector<std::string> system = backend.systemLibraries();
  system.insert(system.end(), {"-lhwy", "-lhwy_contrib", "-lpthread", "-ldl"});
  system.insert(system.end(), extraFlags.begin(), extraFlags.end());
  llvm::Error result = llvm::Error::success();
  switch (options.kind) {
  case ArtifactKind::kShared: {
    std::vector<std::string> link = {cxx, "-shared", "-o", (dir + "/libmodel.so").str(), object,
                                     "-Wl,--version-script=" TRANSFUSE_CODEGEN_SOURCE_DIR "/runtime/exec/model.map",
                                     "-Wl,--whole-archive", libs[0], "-Wl,--no-whole-archive"};
    link.insert(link.end(), libs.begin() + 1, libs.end());
    link.insert(link.end(), system.begin(), system.end());
    result = runCommand(link, log);
    break;
  }
  case ArtifactKind::kExecutable: {
    std::vector<std::string> link = {cxx, "-o", (dir + "/model").str(), object,
                                     TRANSFUSE_ARTIFACT_MAIN_LIB, "-Wl,--whole-archive",
                                     libs[0], "-Wl,--no-whole-archive"};
    link.insert(link.end(), libs.begin() + 1, libs.end());
    link.insert(link.end(), system.begin(), system.end());
    result = runCommand(link, log);
    break;
  }
  case ArtifactKind::kStatic: {
    if (dir.find_first_of(" \t\n'\"") != StringRef::npos)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "--emit static needs a directory name without spaces or "
                                     "quotes (ar's MRI scripts cannot quote '" + dir + "')");
    // One archive with the model and every runtime object it needs, so an
    // app links libmodel.a (and Highway) alone: an MRI script merges them.
    std::string script = "create " + (dir + "/libmodel.a").str() + "\naddmod " + object + "\n";
    for (const std::string &lib : libs)
      script += "addlib " + lib + "\n";
    script += "save\nend\n";
    if (llvm::Error e = writeFile(dir + "/libmodel.mri", script))
      return e;
    std::string mri = (dir + "/libmodel.mri").str();
    llvm::sys::fs::remove(dir + "/libmodel.a");
    result = runCommand({TRANSFUSE_AR, "-M"}, log, StringRef(mri));
    llvm::sys::fs::remove(mri);
    break;
  }
  }
  llvm::sys::fs::remove(object);
  return result;
}
