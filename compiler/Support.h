//===- Support.h - what the compiler library's files share ----------------===//
//
// Private to compiler/: errors as llvm::Error (from a message or from the
// runtime's StatusOr) and wall-clock seconds.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_COMPILER_SUPPORT_H
#define TRANSFUSE_COMPILER_SUPPORT_H

#include "runtime/Status.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <chrono>

namespace mlir::transfuse::compiler {

inline llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message.str());
}

template <typename T>
llvm::Expected<T> fromStatus(::transfuse::rt::StatusOr<T> value) {
  if (!value.isOk())
    return error(value.status().message());
  return std::move(*value);
}

inline double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace mlir::transfuse::compiler

#endif // TRANSFUSE_COMPILER_SUPPORT_H
