//===- Cache.h - Hugging Face directories compiled on first use ----------===//
//
// A command given a Hugging Face directory instead of an artifact compiles it
// once into a cache and reuses the artifact after: $XDG_CACHE_HOME/transfuse
// (else ~/.cache/transfuse), one folder per key. The key is a SHA-256 over
// what the artifact depends on: the directory's files (contents, except each
// safetensors file's data: only its header, the names, dtypes and shapes),
// the compile and build options, and the transfuse executable itself (its
// path, size and modification time), so a rebuilt compiler never reuses an
// older one's code. Nothing is written inside the model's directory; the
// weights stay there and are bound from it at run time.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_COMPILER_CACHE_H
#define TRANSFUSE_COMPILER_CACHE_H

#include "compiler/Compiler.h"

namespace mlir::transfuse::compiler {

/// $XDG_CACHE_HOME/transfuse, else $HOME/.cache/transfuse; an error when
/// neither variable is set.
llvm::Expected<std::string> cacheRoot();

struct CachedArtifact {
  std::string dir;
  bool compiledNow = false; // false: found in the cache
  double seconds = 0;       // the compile's, when compiledNow
};

/// The artifact of Hugging Face directory `modelDir` built at `maxima` with
/// `options` (emit kShared; sourceDirectory set here): found in the cache,
/// or compiled now into a temporary folder of the cache renamed into place
/// when whole, so that an interrupted compile leaves nothing a later call
/// would use and two processes compiling at once both get a whole artifact.
/// Warnings of the definition go to maxima.warnings.
llvm::Expected<CachedArtifact> cachedArtifact(llvm::StringRef modelDir, const BuildOptions &maxima,
                                              CompileOptions options);

} // namespace mlir::transfuse::compiler

#endif // TRANSFUSE_COMPILER_CACHE_H
