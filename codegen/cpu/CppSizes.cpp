//===- CppSizes.cpp - run-time sizes printed as C++ expressions -----------===//

#include "codegen/cpu/CppSizes.h"

#include "codegen/cpu/CppText.h"
#include "ir/TransfuseDialect.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::cpu;

std::string CppSizes::print(const SizeExpr &e) {
  switch (e.kind()) {
  case SizeExpr::Kind::kUnknown:
    return "";
  case SizeExpr::Kind::kConstant:
    return std::to_string(e.value());
  case SizeExpr::Kind::kArgument:
    used[{e.arg(), e.dim()}] = true;
    return "a" + std::to_string(e.arg()) + "_" + std::to_string(e.dim());
  case SizeExpr::Kind::kSum: {
    std::string s;
    for (const SizeExpr &t : e.terms())
      s += (s.empty() ? "(" : " + ") + print(t);
    return s + ")";
  }
  case SizeExpr::Kind::kBroadcast: {
    std::vector<std::string> terms;
    for (const SizeExpr &t : e.terms())
      terms.push_back(print(t));
    std::string m = terms.front();
    for (size_t i = 1; i < terms.size(); ++i)
      m = "std::max<int64_t>(" + m + ", " + terms[i] + ")";
    for (const std::string &t : terms)
      checks.push_back({"(" + t + " != " + m + " && " + t + " != 1)",
                        "input sizes that do not broadcast"});
    return m;
  }
  }
  return "";
}

std::string CppSizes::dim(Value v, int64_t d) {
  std::string e = print(sizes.dim(v, d));
  if (e.empty() && error.empty()) {
    Operation *def = v.getDefiningOp();
    error = (def ? locOf(def) + ": '" + def->getName().getStringRef().str() + "': " : "") +
            "cannot derive the run-time size of dimension " + std::to_string(d) + " of its result";
  }
  return e;
}

std::string CppSizes::index(Value v) {
  std::string e = print(sizes.index(v));
  if (e.empty() && error.empty())
    error = "only sizes from transfuse.dim are supported as index values";
  return e;
}

std::string CppSizes::numel(Value v) {
  return product(v, 0, cast<RankedTensorType>(v.getType()).getRank());
}

std::string CppSizes::product(Value v, int64_t from, int64_t to) {
  std::string e;
  int64_t n = 1;
  auto type = cast<RankedTensorType>(v.getType());
  for (int64_t d = from; d < to; ++d) {
    if (type.isDynamicDim(d))
      e += (e.empty() ? "" : " * ") + dim(v, d);
    else
      n *= type.getDimSize(d);
  }
  if (e.empty())
    return std::to_string(n);
  return n == 1 ? "(" + e + ")" : "(" + std::to_string(n) + " * " + e + ")";
}

std::string CppSizes::shape(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  std::string s = "exec::Shape{";
  for (int64_t d = 0; d < type.getRank(); ++d)
    s += (d ? ", " : "") + dim(v, d);
  return s + "}";
}

bool CppSizes::sameSizes(Value a, Value b) {
  auto ta = cast<RankedTensorType>(a.getType()), tb = cast<RankedTensorType>(b.getType());
  if (ta.getRank() != tb.getRank())
    return false;
  for (int64_t d = 0; d < ta.getRank(); ++d)
    if (!sizes.equal(a, d, b, d))
      return false;
  return true;
}

std::string CppSizes::declarations(llvm::StringRef shapes) const {
  std::string s;
  for (const auto &entry : used) {
    std::string arg = std::to_string(entry.first.first), d = std::to_string(entry.first.second);
    s += "  [[maybe_unused]] const int64_t a" + arg + "_" + d + " = " + shapes.str() + "[" + arg +
         "][" + d + "];\n";
  }
  return s;
}
