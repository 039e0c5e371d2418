//===- DecodeCommands.h - translate, score and bench decode ----------------===//
//
// The commands that decode with a compiled artifact's KV cache through the
// runtime's Translator and Generator (runtime/host/Search.h): `transfuse
// translate`, `transfuse generate`, `transfuse score` and `transfuse bench
// decode` (declared in Commands.h, their flags in Commands.cpp), and what
// they share with the other commands: lines of ids.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_TOOLS_DECODECOMMANDS_H
#define TRANSFUSE_TOOLS_DECODECOMMANDS_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mlir::transfuse::tools {

/// Lines of space-separated ids; an empty line is an empty list. Anything
/// else is an error (exits) naming `name` (the file or flag) and the line.
std::vector<std::vector<int32_t>> parseIdLines(llvm::StringRef text, const std::string &name);
/// The id lines of `path` ("" or "-": stdin).
std::vector<std::vector<int32_t>> readIdLines(const std::string &path);

} // namespace mlir::transfuse::tools

#endif // TRANSFUSE_TOOLS_DECODECOMMANDS_H
