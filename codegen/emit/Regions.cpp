//===- Regions.cpp - the ops of a tfk.elementwise region as expressions ---===//
//
// Both backends print a fused region's body the same way: one `const auto
// tN = ...;` per op over the inputs x0, x1, ..., as Highway vectors or as
// scalars (C++ host code and CUDA device code alike).
//
//===----------------------------------------------------------------------===//

#include "codegen/emit/EntryPrinter.h"

#include "codegen/lowering/OpMath.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::emit;
namespace tfk = mlir::transfuse::kernel;

/// The formulas are the table's (runtime/kernels/ElementwiseMath.h); only
/// their names are printed here.
std::string mlir::transfuse::emit::regionExpr(Operation &inner,
                                             llvm::function_ref<std::string(unsigned)> arg,
                                             bool vector) {
  auto splat = [&](double v) { return vector ? "hn::Set(d, " + floatLit(v) + ")" : floatLit(v); };
  if (auto c = dyn_cast<ConstantOp>(inner)) {
    auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!attr || !attr.isSplat() || !isa<FloatType>(attr.getElementType()))
      return "";
    return splat(attr.getSplatValue<APFloat>().convertToDouble());
  }
  auto call = [&](math::Kind kind, llvm::ArrayRef<std::string> args) {
    const math::KindInfo &f = math::info(kind);
    std::string s = vector ? std::string(f.vector) + "(" + (f.vectorTakesTag ? "d, " : "")
                           : "tm::" + std::string(f.scalar) + "(";
    for (size_t i = 0; i < args.size(); ++i)
      s += (i ? ", " : "") + args[i];
    return s + ")";
  };
  if (auto s = dyn_cast<ScaleOp>(inner)) // x · factor
    return call(math::Kind::kMul, {arg(0), splat(s.getFactor().convertToDouble())});
  if (std::optional<math::Kind> kind = mathKindOf(&inner)) {
    std::vector<std::string> args;
    for (int i = 0; i < math::info(*kind).arity; ++i)
      args.push_back(arg(i));
    return call(*kind, args);
  }
  if (isa<SelectOp>(inner) && !vector)
    return "(" + arg(0) + " ? " + arg(1) + " : " + arg(2) + ")";
  if (auto c = dyn_cast<CastOp>(inner); c && !vector) // an integer or bool input, read as it is
    return "static_cast<float>(" + arg(0) + ")";
  return "";
}

llvm::Error EntryPrinter::regionBody(tfk::ElementwiseOp op, bool vector, StringRef indent,
                                std::string &compute, std::string &result) {
  Block &body = op.getBody().front();
  llvm::DenseMap<Value, std::string> names;
  for (auto [i, arg] : llvm::enumerate(body.getArguments()))
    names[arg] = "x" + std::to_string(i);
  int tmp = 0;
  for (Operation &inner : body.without_terminator()) {
    std::string e = regionExpr(
        inner, [&](unsigned i) { return names.lookup(inner.getOperand(i)); }, vector);
    if (e.empty())
      return fail(&inner, "is not supported in a fused region");
    std::string v = "t" + std::to_string(tmp++);
    compute += indent.str() + "const auto " + v + " = " + e + ";\n";
    names[inner.getResult(0)] = v;
  }
  result = names.lookup(cast<tfk::YieldOp>(body.getTerminator()).getValue());
  return llvm::Error::success();
}

