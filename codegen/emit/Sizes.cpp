//===- Sizes.cpp - run-time sizes of the kernel IR as generated code -----===//

#include "codegen/emit/Sizes.h"

#include "ir/KernelDialect.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::emit;
namespace tfk = mlir::transfuse::kernel;

void Sizes::terms(Value v, std::vector<std::string> &out) {
  if (auto add = v.getDefiningOp<arith::AddIOp>()) {
    terms(add.getLhs(), out);
    terms(add.getRhs(), out);
  } else {
    out.push_back(index(v));
  }
}

std::string Sizes::index(Value v) {
  if (auto it = printed.find(v); it != printed.end())
    return it->second;
  std::string s;
  Operation *def = v.getDefiningOp();
  if (auto c = dyn_cast_or_null<arith::ConstantIndexOp>(def)) {
    s = std::to_string(c.value());
  } else if (auto d = dyn_cast_or_null<tfk::InputDimOp>(def)) {
    used.insert({(int64_t)d.getInput(), (int64_t)d.getDim()});
    s = "a" + std::to_string(d.getInput()) + "_" + std::to_string(d.getDim());
  } else if (isa_and_nonnull<tfk::StateLengthOp>(def)) {
    usesLength = true;
    s = "L";
  } else if (isa_and_nonnull<arith::AddIOp>(def)) {
    std::vector<std::string> t;
    terms(v, t);
    for (const std::string &term : t)
      s += (s.empty() ? "(" : " + ") + term;
    s += ")";
  } else if (auto b = dyn_cast_or_null<tfk::BroadcastDimOp>(def)) {
    std::vector<std::string> t;
    for (Value term : b.getTerms())
      t.push_back(index(term));
    s = t.front();
    for (size_t i = 1; i < t.size(); ++i)
      s = "std::max<int64_t>(" + s + ", " + t[i] + ")";
    for (const std::string &term : t)
      checks.push_back({"(" + term + " != " + s + " && " + term + " != 1)",
                        "input sizes that do not broadcast"});
  } else if (error.empty()) {
    error = "an index value that is not a size of the kernel IR";
  }
  return printed[v] = s;
}

std::string Sizes::dim(Value view, int64_t d) {
  OpFoldResult size = tfk::dimSize(view, d);
  if (auto a = dyn_cast<Attribute>(size))
    return std::to_string(cast<IntegerAttr>(a).getInt());
  if (Value v = cast<Value>(size))
    return index(v);
  if (error.empty())
    error = "a view whose sizes are not known";
  return "0";
}

std::string Sizes::numel(Value view) {
  return product(view, 0, cast<MemRefType>(view.getType()).getRank());
}

std::string Sizes::product(Value view, int64_t from, int64_t to) {
  std::string e;
  int64_t n = 1;
  auto type = cast<MemRefType>(view.getType());
  for (int64_t d = from; d < to; ++d) {
    if (type.isDynamicDim(d))
      e += (e.empty() ? "" : " * ") + dim(view, d);
    else
      n *= type.getDimSize(d);
  }
  if (e.empty())
    return std::to_string(n);
  return n == 1 ? "(" + e + ")" : "(" + std::to_string(n) + " * " + e + ")";
}

std::string Sizes::shape(Value view) {
  auto type = cast<MemRefType>(view.getType());
  std::string s = "exec::Shape{";
  for (int64_t d = 0; d < type.getRank(); ++d)
    s += (d ? ", " : "") + dim(view, d);
  return s + "}";
}

std::string Sizes::declarations(llvm::StringRef shapes, llvm::StringRef length) const {
  std::string s;
  if (usesLength)
    s += "  [[maybe_unused]] const int64_t L = " + length.str() + ";\n";
  for (auto [input, d] : used) {
    std::string arg = std::to_string(input), dim = std::to_string(d);
    s += "  [[maybe_unused]] const int64_t a" + arg + "_" + dim + " = " + shapes.str() + "[" +
         arg + "][" + dim + "];\n";
  }
  return s;
}
