//===- KernelDialect.h - the kernel-level IR (tfk) ------------------------===//
//
// Include this to use the tfk dialect (KernelOps.td) and its helpers.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_IR_KERNELDIALECT_H
#define TRANSFUSE_IR_KERNELDIALECT_H

#include "ir/TransfuseDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"

#include "ir/KernelDialect.h.inc"
#include "ir/KernelInterfaces.h.inc"

namespace mlir::transfuse::kernel {

/// Fails unless `op` reads between `minIns` and `maxIns` operands (-1: any
/// number) and writes `numOuts` buffers.
LogicalResult verifyCallArity(Operation *op, int minIns, int maxIns, int numOuts);

/// The trait TFK_CallArity attaches to each call op (KernelOps.td).
template <int MinIns, int MaxIns, int NumOuts> struct CallArity {
  template <typename ConcreteOp> class Impl : public OpTrait::TraitBase<ConcreteOp, Impl> {
  public:
    static LogicalResult verifyTrait(Operation *op) {
      return verifyCallArity(op, MinIns, MaxIns, NumOuts);
    }
  };
};

} // namespace mlir::transfuse::kernel

#define GET_OP_CLASSES
#include "ir/KernelOps.h.inc"

namespace mlir::transfuse::kernel {

/// The size of dimension `d` of the memref `view`: its static size, or the
/// index value its defining storage or view op holds for it (null when the
/// value is not defined by a tfk op that holds sizes).
OpFoldResult dimSize(Value view, int64_t d);

/// True when dimension `a` of `x` and `b` of `y` are the same size: equal
/// static sizes, or the same index value.
bool sameSize(Value x, int64_t a, Value y, int64_t b);

/// Function attribute: the bytes of the entry's arena (set by
/// --transfuse-plan-memory).
inline constexpr llvm::StringLiteral kArenaBytesAttr = "tfk.arena_bytes";
/// Function attribute: the device the entry runs on, "cpu" (also when
/// absent) or "cuda"; its storage lives there.
inline constexpr llvm::StringLiteral kDeviceAttr = "tfk.device";

} // namespace mlir::transfuse::kernel

#endif // TRANSFUSE_IR_KERNELDIALECT_H
