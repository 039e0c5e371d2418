//===- OpMath.cpp - which formula of ElementwiseMath.h an op computes -----===//

#include "codegen/lowering/OpMath.h"

#include "ir/TransfuseDialect.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::transfuse;

std::optional<math::Kind> mlir::transfuse::mathKindOf(Operation *op) {
  if (std::optional<Activation> a = activationOf(op)) // relu, the gelus, silu
    return activationKind(*a);
  using K = math::Kind;
  return llvm::TypeSwitch<Operation *, std::optional<K>>(op)
      .Case([](AddOp) { return K::kAdd; })
      .Case([](SubOp) { return K::kSub; })
      .Case([](MulOp) { return K::kMul; })
      .Case([](DivOp) { return K::kDiv; })
      .Case([](PowOp) { return K::kPow; })
      .Case([](SigmoidOp) { return K::kSigmoid; })
      .Case([](SqrtOp) { return K::kSqrt; })
      .Case([](ErfOp) { return K::kErf; })
      .Case([](ExpOp) { return K::kExp; })
      .Case([](TanhOp) { return K::kTanh; })
      .Default([](Operation *) { return std::nullopt; });
}

// The dialect's enum and the kernels' are one list in one order (ir/
// TransfuseAttrs.td, runtime/kernels/Activation.h); the spellings are
// checked by tests/unit/compiler/kernel_ir_test.cpp (ActivationsAreTheKernels).
#define TRANSFUSE_SAME_AS_KERNELS(dialect, enumerator)                                         \
  static_assert(static_cast<int>(Activation::dialect) ==                                        \
                static_cast<int>(::transfuse::kernels::Activation::enumerator));
TRANSFUSE_SAME_AS_KERNELS(None, kNone)
TRANSFUSE_SAME_AS_KERNELS(Relu, kRelu)
TRANSFUSE_SAME_AS_KERNELS(Gelu, kGelu)
TRANSFUSE_SAME_AS_KERNELS(GeluTanh, kGeluTanh)
TRANSFUSE_SAME_AS_KERNELS(Silu, kSilu)
#undef TRANSFUSE_SAME_AS_KERNELS
static_assert(::transfuse::kernels::kNumActivations == 5, "a new activation: add it above");

::transfuse::kernels::Activation mlir::transfuse::toKernels(Activation activation) {
  return static_cast<::transfuse::kernels::Activation>(activation);
}

std::optional<math::Kind> mlir::transfuse::activationKind(Activation activation) {
  return math::activationKind(toKernels(activation));
}
