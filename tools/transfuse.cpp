//===- transfuse.cpp - the transfuse driver --------------------------------===//
//
// `transfuse COMMAND [arguments] [flags]`: finds the command in the table
// (Commands.cpp), checks every flag against the command's own (a flag's
// value follows it or is given as --flag=value), prints the help, and runs
// the command. Errors: one message naming the file, tensor or flag, exit
// code 1, and no output file left behind.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/Targets.h"
#include "tools/Cli.h"
#include "tools/Commands.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir::transfuse::tools;
namespace tk = ::transfuse::kernels;

namespace {

constexpr size_t kWidth = 80;  // help lines wrap here
constexpr size_t kMaxLeft = 28; // a longer flag puts its help on the next line

/// `text` wrapped at kWidth, each line after the first indented by `indent`
/// (the first line starts at column `indent` too); "\n" in it breaks a line.
void printWrapped(llvm::raw_ostream &os, llvm::StringRef text, size_t indent) {
  size_t column = indent;
  bool lineStart = true;
  while (!text.empty()) {
    if (text.front() == '\n') {
      os << "\n" << std::string(indent, ' ');
      column = indent;
      lineStart = true;
      text = text.drop_front();
      continue;
    }
    size_t end = text.find_first_of(" \n");
    llvm::StringRef word = text.take_front(end);
    text = text.drop_front(word.size());
    if (!text.empty() && text.front() == ' ')
      text = text.drop_front();
    if (!lineStart && column + 1 + word.size() > kWidth) {
      os << "\n" << std::string(indent, ' ');
      column = indent;
      lineStart = true;
    }
    if (!lineStart) {
      os << " ";
      ++column;
    }
    os << word;
    column += word.size();
    lineStart = false;
  }
  os << "\n";
}

void printTopHelp(llvm::raw_ostream &os) {
  os << "usage: transfuse COMMAND [options]   (transfuse COMMAND --help for details)\n\n"
        "commands:\n";
  size_t left = 0;
  for (const Command &c : commands())
    left = std::max(left, llvm::StringRef(c.name).size());
  for (const Command &c : commands()) {
    os << "  " << llvm::left_justify(c.name, left + 2);
    printWrapped(os, c.summary, left + 4);
  }
}

void printHelp(const Command &c) {
  llvm::raw_ostream &os = llvm::outs();
  os << "usage: transfuse " << c.usage << "\n\n";
  printWrapped(os, c.summary, 0);
  if (*c.details) {
    os << "\n";
    printWrapped(os, c.details, 0);
  }
  os << "\noptions:\n";
  std::vector<std::string> lefts;
  size_t left = std::string("  --help").size();
  for (const FlagSpec &f : c.flags) {
    lefts.push_back(std::string("  ") + f.name + (f.metavar ? std::string(" ") + f.metavar : ""));
    if (lefts.back().size() <= kMaxLeft)
      left = std::max(left, lefts.back().size());
  }
  auto row = [&](const std::string &flagText, llvm::StringRef help) {
    os << flagText;
    if (flagText.size() > left)
      os << "\n" << std::string(left + 2, ' ');
    else
      os << std::string(left + 2 - flagText.size(), ' ');
    printWrapped(os, help, left + 2);
  };
  for (size_t i = 0; i < c.flags.size(); ++i)
    row(lefts[i], c.flags[i].help);
  row("  --help", "show this help");
}

} // namespace

int main(int argc, char **argv) {
  if (::transfuse::rt::Status s = tk::forceTargetFromEnvironment(); !s.isOk())
    die(s.message());
  if (argc < 2) {
    printTopHelp(llvm::errs());
    return 1;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    printTopHelp(llvm::outs());
    return 0;
  }
  auto cmd = llvm::find_if(commands(), [&](const Command &c) { return name == c.name; });
  if (cmd == commands().end())
    die("unknown command '" + name + "' (try transfuse --help)");

  Positional positional;
  Flags flags;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      printHelp(*cmd);
      return 0;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    std::string value;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    auto spec = llvm::find_if(cmd->flags, [&](const FlagSpec &f) { return arg == f.name; });
    if (spec == cmd->flags.end())
      die("unknown flag '" + arg + "' for '" + name + "' (try transfuse " + name + " --help)");
    if (spec->metavar && value.empty()) {
      if (i + 1 >= argc)
        die("flag " + arg + " needs a value (" + spec->metavar + ")");
      value = argv[++i];
    }
    flags[arg] = value;
  }
  return cmd->run(positional, flags);
}
