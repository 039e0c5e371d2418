//===- TransfuseDialect.h - the transfuse dialect -------------------------===//
//
// Include this to use the dialect and its ops (see TransfuseOps.td).
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_IR_TRANSFUSEDIALECT_H
#define TRANSFUSE_IR_TRANSFUSEDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/Sizes.h"

#include "ir/TransfuseDialect.h.inc"
#include "ir/TransfuseEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "ir/TransfuseAttrs.h.inc"
#include "ir/TransfuseInterfaces.h.inc"

#define GET_OP_CLASSES
#include "ir/TransfuseOps.h.inc"

namespace mlir::transfuse {

/// Function attributes holding the compile-time maxima of dynamic dimensions.
inline constexpr llvm::StringLiteral kMaxBatchAttr = "transfuse.max_batch";
inline constexpr llvm::StringLiteral kMaxSeqLenAttr = "transfuse.max_seq_len";
/// Argument/result attribute naming an entry point's tensors.
inline constexpr llvm::StringLiteral kNameAttr = "transfuse.name";

/// Broadcasts two shapes like NumPy (trailing alignment). A dynamic size
/// against a static size N > 1 gives N; against 1 or `?` it stays dynamic.
/// Returns failure, with `error` set, when static sizes differ and neither is 1.
LogicalResult broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                              SmallVectorImpl<int64_t> &out, std::string &error);

/// A verified axis attribute made non-negative (I64Attr reads as uint64_t;
/// a negative axis counts from the end).
inline int64_t normalizedAxis(uint64_t attr, int64_t rank) {
  int64_t axis = static_cast<int64_t>(attr);
  return axis < 0 ? axis + rank : axis;
}

/// True when two sizes may be equal at run time: either is dynamic, or they are.
inline bool compatibleSizes(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

/// True for ops a fused_elementwise body may hold: the elementwise math
/// (add, sub, mul, div, scale, relu, gelu, exp, tanh, select, cast) and
/// constants.
bool isElementwise(Operation *op);

/// The activation `op` computes (relu, gelu by its approximation, silu): what
/// a linear epilogue absorbs and activation_grad differentiates; none for
/// other ops.
std::optional<Activation> activationOf(Operation *op);

/// The op computing `activation` of x (activationOf's inverse); x itself
/// for none.
Value createActivation(OpBuilder &b, Location loc, Value x, Activation activation);

} // namespace mlir::transfuse

#endif // TRANSFUSE_IR_TRANSFUSEDIALECT_H
