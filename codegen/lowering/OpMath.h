//===- OpMath.h - which formula of ElementwiseMath.h an op computes -------===//
//
// The one mapping from dialect ops to the math of runtime/kernels/
// ElementwiseMath.h, shared by the reference interpreter (which evaluates
// the scalar templates in double) and the backends (which print the names
// the table gives for scalar and Highway code).
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_OPMATH_H
#define TRANSFUSE_CODEGEN_OPMATH_H

#include "ir/TransfuseDialect.h"
#include "runtime/kernels/Activation.h"
#include "runtime/kernels/ElementwiseMath.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace mlir::transfuse {

namespace math = ::transfuse::kernels::math;

/// The formula of an elementwise op: add, sub, mul, div, relu, exp, tanh,
/// gelu (by its approximation), silu; none for other ops (scale, select and
/// constants are not formulas of the table).
std::optional<math::Kind> mathKindOf(Operation *op);

/// The kernels' Activation of the dialect's: the one conversion.
::transfuse::kernels::Activation toKernels(Activation activation);

/// The formula of an activation; none for Activation::None.
std::optional<math::Kind> activationKind(Activation activation);

} // namespace mlir::transfuse

#endif // TRANSFUSE_CODEGEN_OPMATH_H
