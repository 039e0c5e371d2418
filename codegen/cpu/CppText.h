//===- CppText.h - small pieces of generated C++ text ---------------------===//
//
// Literals, type names and locations as the CPU printer writes them.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_CPU_CPPTEXT_H
#define TRANSFUSE_CODEGEN_CPU_CPPTEXT_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace mlir::transfuse::cpu {

/// The location of `op` as MLIR prints it.
std::string locOf(Operation *op);
/// A C++ string literal.
std::string quote(llvm::StringRef s);
/// An exact C++ float literal (infinities and NaN through numeric_limits).
std::string floatLit(double v);
/// The C++ element type of a tensor element type (f32, i32, i1); null otherwise.
const char *cType(Type t);
/// Bytes per element as the generated code stores it (i1 as one byte).
int64_t elemSize(Type t);

} // namespace mlir::transfuse::cpu

#endif // TRANSFUSE_CODEGEN_CPU_CPPTEXT_H
