//===- KernelDialect.cpp - tfk registration, verifiers, helpers -----------===//

#include "ir/KernelDialect.h"

#include "runtime/kernels/ElementwiseMath.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace mlir::transfuse::kernel;
namespace tmath = ::transfuse::kernels::math;

#include "ir/KernelDialect.cpp.inc"
#include "ir/KernelInterfaces.cpp.inc"

void TFKDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/KernelOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "ir/KernelOps.cpp.inc"

OpFoldResult mlir::transfuse::kernel::dimSize(Value view, int64_t d) {
  auto type = cast<MemRefType>(view.getType());
  if (!type.isDynamicDim(d))
    return IntegerAttr::get(IndexType::get(view.getContext()), type.getDimSize(d));
  auto sized = view.getDefiningOp<SizedOpInterface>();
  if (!sized)
    return Value();
  return sized.getSizes()[type.getDynamicDimIndex(d)];
}

bool mlir::transfuse::kernel::sameSize(Value x, int64_t a, Value y, int64_t b) {
  OpFoldResult sx = dimSize(x, a), sy = dimSize(y, b);
  if (auto vx = dyn_cast<Value>(sx))
    return vx && vx == dyn_cast<Value>(sy);
  auto ax = cast<IntegerAttr>(cast<Attribute>(sx));
  auto ay = dyn_cast_or_null<IntegerAttr>(dyn_cast<Attribute>(sy));
  return ay && ax.getInt() == ay.getInt();
}

LogicalResult TFKDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  if (attr.getName() == kArenaBytesAttr) {
    auto bytes = dyn_cast<IntegerAttr>(attr.getValue());
    if (!bytes || bytes.getInt() < 0)
      return op->emitError() << "'" << kArenaBytesAttr << "' must be a non-negative integer";
    return success();
  }
  if (attr.getName() == kDeviceAttr) {
    auto device = dyn_cast<StringAttr>(attr.getValue());
    if (!device || (device.getValue() != "cpu" && device.getValue() != "cuda"))
      return op->emitError() << "'" << kDeviceAttr << "' must be \"cpu\" or \"cuda\"";
    return success();
  }
  return op->emitError() << "unknown tfk attribute '" << attr.getName().getValue() << "'";
}

/// One index value per dynamic dimension of the result.
static LogicalResult verifySizes(Operation *op, Type type, ValueRange sizes) {
  auto memref = cast<MemRefType>(type);
  if (static_cast<int64_t>(sizes.size()) != memref.getNumDynamicDims())
    return op->emitOpError() << "has " << sizes.size() << " sizes for "
                             << memref.getNumDynamicDims() << " dynamic dimensions";
  return success();
}

LogicalResult InputOp::verify() { return verifySizes(*this, getType(), getSizes()); }
LogicalResult OutputOp::verify() { return verifySizes(*this, getType(), getSizes()); }
LogicalResult AllocOp::verify() { return verifySizes(*this, getType(), getSizes()); }
LogicalResult StateOp::verify() {
  if (getName().empty())
    return emitOpError("needs a name");
  return verifySizes(*this, getType(), getSizes());
}
LogicalResult ReshapeOp::verify() {
  if (failed(verifySizes(*this, getType(), getSizes())))
    return failure();
  auto from = getSource().getType(), to = getType();
  if (from.getElementType() != to.getElementType())
    return emitOpError("changes the element type");
  if (from.hasStaticShape() && to.hasStaticShape() &&
      from.getNumElements() != to.getNumElements())
    return emitOpError("changes the number of elements");
  return success();
}
LogicalResult HeadsOp::verify() {
  if (failed(verifySizes(*this, getType(), getSizes())))
    return failure();
  auto from = getSource().getType(), to = getType();
  if ((from.getRank() != 3 && from.getRank() != 4) || to.getRank() != 4)
    return emitOpError("views a [B, S, N] or [B, S, H, D] source as [B, H, S, D]");
  int64_t n = from.getDimSize(2) * (from.getRank() == 4 ? from.getDimSize(3) : 1);
  if (from.isDynamicDim(from.getRank() - 1) || (from.getRank() == 4 && from.isDynamicDim(2)) ||
      to.isDynamicDim(1) || to.isDynamicDim(3))
    return emitOpError("needs static head counts, head sizes and columns");
  if (getColumn() < 0 || getColumn() + to.getDimSize(1) * to.getDimSize(3) > n)
    return emitOpError("reads columns past the source's ") << n;
  return success();
}

LogicalResult CheckOp::verify() {
  if (getPredicate() != "le" && getPredicate() != "eq")
    return emitOpError("predicate must be \"le\" or \"eq\"");
  return success();
}

LogicalResult GemmOp::verify() {
  const bool derivative = getDerivative() != transfuse::Activation::None;
  if (derivative != static_cast<bool>(getPre()))
    return emitOpError("takes `derivative_of` exactly when it has a derivative");
  if (derivative && (getBias() || getResidual() || getActivation() != transfuse::Activation::None))
    return emitOpError("with a derivative has no bias, activation or residual");
  if (!derivative && getScale().convertToDouble() != 1.0)
    return emitOpError("scales only with a derivative");
  if ((getGated() || getInvFreq()) && (derivative || getResidual()))
    return emitOpError("pairs columns only without a derivative or residual");
  if (static_cast<bool>(getInvFreq()) != (getRotaryColumns() > 0) ||
      (getOffset() && !getInvFreq()))
    return emitOpError("takes `rotary` exactly with rotary_columns (and an offset only then)");
  return success();
}

LogicalResult ElementwiseOp::verify() {
  if (getKinds().size() != getInputs().size())
    return emitOpError("has ") << getKinds().size() << " kinds for " << getInputs().size()
                               << " inputs";
  for (Attribute k : getKinds())
    if (!llvm::is_contained({"full", "trailing", "splat", "strided"},
                            cast<StringAttr>(k).getValue()))
      return emitOpError("input kind ") << k << " is not full, trailing, splat or strided";
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body has ") << body.getNumArguments() << " arguments for "
                                    << getInputs().size() << " inputs";
  return success();
}

LogicalResult mlir::transfuse::kernel::verifyCallArity(Operation *op, int minIns, int maxIns,
                                                      int numOuts) {
  auto call = cast<KernelCallInterface>(op); // TFK_CallOp attaches both
  const int ins = static_cast<int>(call.getIns().size());
  const int outs = static_cast<int>(call.getOuts().size());
  if (ins < minIns || (maxIns >= 0 && ins > maxIns))
    return op->emitOpError("reads ")
           << ins << " operands; it takes " << minIns
           << (maxIns < 0 ? " or more" : maxIns == minIns ? "" : " to " + std::to_string(maxIns));
  if (outs != numOuts)
    return op->emitOpError("writes ") << outs << " buffers; it writes " << numOuts;
  return success();
}

/// `kind` names a formula of runtime/kernels/ElementwiseMath.h of `arity`.
static LogicalResult verifyFormula(Operation *op, StringRef kind, int arity) {
  std::optional<tmath::Kind> k = tmath::kindNamed(std::string_view(kind.data(), kind.size()));
  if (!k || tmath::info(*k).arity != arity)
    return op->emitOpError("kind '") << kind << "' is no formula of " << arity
                                      << " operand(s) (ElementwiseMath.h: kAdd, kExp, ...)";
  return success();
}

LogicalResult BinaryOp::verify() { return verifyFormula(*this, getKind(), 2); }
LogicalResult UnaryOp::verify() { return verifyFormula(*this, getKind(), 1); }

LogicalResult ReduceOp::verify() {
  if (!llvm::is_contained({"kSum", "kMean", "kMax"}, getKind()))
    return emitOpError("kind '") << getKind() << "' is not kSum, kMean or kMax";
  return success();
}

LogicalResult ActivationGradOp::verify() {
  if (getActivation() == transfuse::Activation::None)
    return emitOpError("needs an activation");
  return success();
}
