//===- Backends.cpp - the backends this build knows, by name --------------===//
//
// The one list of targets: a new backend is its own folder (a Backend and
// its EntryPrinter over codegen/emit) and one line here.
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/CpuBackend.h"
#include "codegen/cuda/CudaBackend.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::transfuse;

static llvm::ArrayRef<const emit::Backend *> backends() {
  static const emit::Backend *const list[] = {&cpu::backend(), &cuda::backend()};
  return list;
}

std::vector<std::string> emit::backendNames() {
  std::vector<std::string> names;
  for (const emit::Backend *b : backends())
    names.push_back(b->name().str());
  return names;
}

const emit::Backend *emit::backendNamed(llvm::StringRef name) {
  for (const emit::Backend *b : backends())
    if (b->name() == name)
      return b;
  return nullptr;
}

llvm::Expected<const emit::Backend &> emit::backendOf(const BuildOptions &options) {
  if (const emit::Backend *b = backendNamed(options.target))
    return *b;
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "no backend named '" + options.target + "' (known: " +
                                     llvm::join(backendNames(), ", ") + ")");
}
