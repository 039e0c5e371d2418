//===- OpMath.cpp - which formula of ElementwiseMath.h an op computes -----===//

#include "codegen/lowering/OpMath.h"

#include "ir/TransfuseDialect.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::transfuse;

std::optional<math::Kind> mlir::transfuse::mathKindOf(Operation *op) {
  using K = math::Kind;
  return llvm::TypeSwitch<Operation *, std::optional<K>>(op)
      .Case([](AddOp) { return K::kAdd; })
      .Case([](SubOp) { return K::kSub; })
      .Case([](MulOp) { return K::kMul; })
      .Case([](DivOp) { return K::kDiv; })
      .Case([](ReluOp) { return K::kRelu; })
      .Case([](ExpOp) { return K::kExp; })
      .Case([](TanhOp) { return K::kTanh; })
      .Case([](GeluOp g) {
        return g.getApproximate() == GeluApproximation::Tanh ? K::kGeluTanh : K::kGelu;
      })
      .Default([](Operation *) { return std::nullopt; });
}

std::optional<math::Kind> mlir::transfuse::activationKind(Activation activation) {
  switch (activation) {
  case Activation::None:
    return std::nullopt;
  case Activation::Relu:
    return math::Kind::kRelu;
  case Activation::Gelu:
    return math::Kind::kGelu;
  case Activation::GeluTanh:
    return math::Kind::kGeluTanh;
  }
  return std::nullopt;
}
