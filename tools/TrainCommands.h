//===- TrainCommands.h - transfuse train ----------------------------------===//
//
// `transfuse train CONFIG.json`: its flags are listed in transfuse.cpp's
// command table; docs/training.md says what it runs.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_TOOLS_TRAINCOMMANDS_H
#define TRANSFUSE_TOOLS_TRAINCOMMANDS_H

#include <map>
#include <string>
#include <vector>

namespace mlir::transfuse::tools {

int runTrain(const std::vector<std::string> &positional,
             const std::map<std::string, std::string> &flags);

} // namespace mlir::transfuse::tools

#endif // TRANSFUSE_TOOLS_TRAINCOMMANDS_H
