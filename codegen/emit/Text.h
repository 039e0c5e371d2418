//===- Text.h - small pieces of generated C++ and CUDA text ----------------===//
//
// Literals, type names and locations as every backend prints them.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_EMIT_TEXT_H
#define TRANSFUSE_CODEGEN_EMIT_TEXT_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace mlir::transfuse::emit {

/// The location of `op` as MLIR prints it.
std::string locOf(Operation *op);
/// A C++ string literal.
std::string quote(llvm::StringRef s);
/// An exact C++ float literal (infinities and NaN as <cmath>'s INFINITY and
/// NAN, which host and CUDA device code both accept).
std::string floatLit(double v);
/// The C++ element type of a tensor element type (f32, i32, i1); null otherwise.
const char *cType(Type t);
/// Bytes per element as the generated code stores it (i1 as one byte).
int64_t elemSize(Type t);
/// elemSize of the elements of the memref `v`, as text.
std::string elemBytes(Value v);
/// The rank of the memref `v`.
int64_t rankOf(Value v);

/// The comment that opens every generated source: the target, the fusion
/// strategy, and what the code calls (`calls`, one phrase).
std::string generatedHeader(llvm::StringRef target, llvm::StringRef fusion, llvm::StringRef calls);

} // namespace mlir::transfuse::emit

#endif // TRANSFUSE_CODEGEN_EMIT_TEXT_H
