//===- Sizes.h - run-time sizes of the kernel IR as generated code -------===//
//
// The generated code computes every dynamic size once per call from the
// input shapes: `tfk.input_dim n, d` is the variable a<n>_<d>, `arith.addi`
// a sum and `tfk.broadcast_dim` the maximum of its terms, with a run-time
// check that each term is that maximum or 1, and `tfk.state_length` the
// variable L. Dimensions of a memref are its static sizes or the index
// values its storage or view op holds.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_EMIT_SIZES_H
#define TRANSFUSE_CODEGEN_EMIT_SIZES_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace mlir::transfuse::emit {

class Sizes {
public:
  /// An index value of the kernel IR.
  std::string index(Value v);
  /// Dimension `d` of the memref `view`.
  std::string dim(Value view, int64_t d);
  /// The number of elements of `view`, static sizes folded.
  std::string numel(Value view);
  /// The product of dimensions [from, to) of `view`.
  std::string product(Value view, int64_t from, int64_t to);
  /// "exec::Shape{...}" of `view`.
  std::string shape(Value view);

  /// Declarations of the input sizes used, reading `shapes` (an
  /// `const int64_t* const*` expression), and of L as `length`.
  std::string declarations(llvm::StringRef shapes, llvm::StringRef length) const;

  /// Conditions that make a call invalid (true = error) and their messages,
  /// checked at the start of a run.
  std::vector<std::pair<std::string, std::string>> checks;
  /// The first size that could not be printed.
  std::string error;

private:
  void terms(Value v, std::vector<std::string> &out);

  llvm::DenseMap<Value, std::string> printed;
  std::set<std::pair<int64_t, int64_t>> used;
  bool usesLength = false;
};

} // namespace mlir::transfuse::emit

#endif // TRANSFUSE_CODEGEN_EMIT_SIZES_H
