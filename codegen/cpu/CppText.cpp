//===- CppText.cpp - small pieces of generated C++ text -------------------===//

#include "codegen/cpu/CppText.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>

using namespace mlir;

std::string mlir::transfuse::cpu::locOf(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  op->getLoc().print(os);
  return s;
}

std::string mlir::transfuse::cpu::quote(StringRef s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      r += '\\';
    if (c == '\n') {
      r += "\\n";
      continue;
    }
    r += c;
  }
  return r + "\"";
}

std::string mlir::transfuse::cpu::floatLit(double v) {
  // <cmath>'s macros: constants in host code and in CUDA device code alike.
  if (std::isnan(v))
    return "NAN";
  if (std::isinf(v))
    return v < 0 ? "-INFINITY" : "INFINITY";
  char buf[64];
  snprintf(buf, sizeof buf, "%.9gf", (double)(float)v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos)
    s.insert(s.size() - 1, ".0");
  return s;
}

const char *mlir::transfuse::cpu::cType(Type t) {
  if (t.isF32()) return "float";
  if (t.isInteger(32)) return "int32_t";
  if (t.isInteger(1)) return "uint8_t";
  return nullptr;
}

int64_t mlir::transfuse::cpu::elemSize(Type t) { return t.isInteger(1) ? 1 : t.getIntOrFloatBitWidth() / 8; }

std::string mlir::transfuse::cpu::elemBytes(Value v) {
  return std::to_string(elemSize(cast<MemRefType>(v.getType()).getElementType()));
}

int64_t mlir::transfuse::cpu::rankOf(Value v) { return cast<MemRefType>(v.getType()).getRank(); }

int64_t mlir::transfuse::cpu::intAttr(Operation *op, llvm::StringRef name) {
  return op->getAttrOfType<IntegerAttr>(name).getInt();
}
