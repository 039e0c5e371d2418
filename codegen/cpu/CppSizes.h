//===- CppSizes.h - run-time sizes printed as C++ expressions -------------===//
//
// The generated code computes every dynamic size once per call from the
// input shapes: dimension d of argument n is the variable a<n>_<d>, and
// every other size is the expression SizeAnalysis (ir/Sizes.h) derives from
// the ops' shape rules, printed here. A broadcast of dynamic sizes prints as
// their maximum and adds a run-time check that each is that size or 1.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_CPU_CPPSIZES_H
#define TRANSFUSE_CODEGEN_CPU_CPPSIZES_H

#include "ir/Sizes.h"

#include "llvm/ADT/StringRef.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mlir::transfuse::cpu {

class CppSizes {
public:
  /// Dimension `d` of `v`; empty (and `error` set) when not derivable.
  std::string dim(Value v, int64_t d);
  /// An index value (transfuse.dim).
  std::string index(Value v);
  /// The number of elements of `v`, static sizes folded.
  std::string numel(Value v);
  /// The product of dimensions [from, to) of `v`.
  std::string product(Value v, int64_t from, int64_t to);
  /// "exec::Shape{...}" of `v`.
  std::string shape(Value v);

  /// True when dimension `a` of `x` and `b` of `y` are provably equal.
  bool equal(Value x, int64_t a, Value y, int64_t b) { return sizes.equal(x, a, y, b); }
  /// True when `a` and `b` have the same rank and provably the same sizes.
  bool sameSizes(Value a, Value b);

  /// Declarations of the argument sizes used, reading `shapes` (an
  /// `const int64_t* const*` expression).
  std::string declarations(llvm::StringRef shapes) const;

  /// Conditions that make a call invalid (true = error) and their messages,
  /// checked at the start of a run.
  std::vector<std::pair<std::string, std::string>> checks;
  /// The first size that could not be derived, with the op it belongs to.
  std::string error;

private:
  std::string print(const SizeExpr &e);

  SizeAnalysis sizes;
  std::map<std::pair<unsigned, int64_t>, bool> used;
};

} // namespace mlir::transfuse::cpu

#endif // TRANSFUSE_CODEGEN_CPU_CPPSIZES_H
