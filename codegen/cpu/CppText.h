//===- CppText.h - small pieces of generated C++ text ---------------------===//
//
// Literals, type names and locations as the CPU printer writes them.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_CPU_CPPTEXT_H
#define TRANSFUSE_CODEGEN_CPU_CPPTEXT_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace mlir::transfuse::cpu {

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
/// The integer attribute `name` of `op`, which the op's verifier ensures.
int64_t intAttr(Operation *op, llvm::StringRef name);

} // namespace mlir::transfuse::cpu

#endif // TRANSFUSE_CODEGEN_CPU_CPPTEXT_H
