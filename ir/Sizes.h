//===- Sizes.h - run-time sizes of tensor dimensions, stated once per op --===//
//
// Batch and sequence dimensions are dynamic (`?`) in the IR. Each op states
// the size of every result dimension as a symbolic expression over its
// operands' sizes (ShapeRuleOpInterface, implemented beside the op's type
// inference); SizeAnalysis follows those rules back to the entry point's
// arguments. Everything that needs a run-time size reads it from here:
// fusion proofs (two sizes are equal when their expressions are), the memory
// plan's and the manifest's maxima (an expression evaluated at the compiled
// maxima), and the size expressions generated code computes per call.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_IR_SIZES_H
#define TRANSFUSE_IR_SIZES_H

#include "mlir/IR/Value.h"
#include "mlir/IR/ValueRange.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mlir::transfuse {

/// A symbolic size: a constant, dimension `dim` of entry-point argument
/// `arg`, the decoding state's length L (transfuse.state_length: the
/// positions cached before the call), a sum (a concat's axis, a cache of L
/// + n positions), or a broadcast (the size every term is, or 1: their
/// maximum, each checked at run time to be it or 1). A
/// default-constructed SizeExpr is unknown: no rule could derive it. Values
/// are canonical (sums flattened with constants folded, broadcast terms
/// unique), so equal expressions mean equal sizes at run time.
class SizeExpr {
public:
  enum class Kind { kUnknown, kConstant, kArgument, kStateLength, kSum, kBroadcast };

  SizeExpr() = default;
  static SizeExpr constant(int64_t n);
  static SizeExpr argument(unsigned arg, int64_t dim);
  static SizeExpr stateLength();
  /// Unknown when any term is.
  static SizeExpr sum(const std::vector<SizeExpr> &terms);
  static SizeExpr broadcast(const std::vector<SizeExpr> &terms);

  Kind kind() const { return kind_; }
  bool known() const { return kind_ != Kind::kUnknown; }
  /// The value of a constant.
  int64_t value() const { return a_; }
  /// The argument number and dimension of an argument size.
  unsigned arg() const { return static_cast<unsigned>(a_); }
  int64_t dim() const { return b_; }
  /// The terms of a sum or broadcast.
  const std::vector<SizeExpr> &terms() const;

  /// Structural equality; an unknown size equals nothing, itself included.
  bool operator==(const SizeExpr &o) const;
  bool operator!=(const SizeExpr &o) const { return !(*this == o); }

  /// The value at the compiled maxima: an argument's dimension 0 at
  /// `maxBatch`, its other dimensions and the state length at `maxSeqLen`
  /// (the cache's capacity); an unknown size at the
  /// larger of the two. Saturates at INT64_MAX.
  int64_t maximum(int64_t maxBatch, int64_t maxSeqLen) const;

  /// For diagnostics and tests: `a0_1`, `L`, `(a0_1 + 3)`, `max(a0_1, a1_1)`, `?`.
  std::string str() const;

private:
  Kind kind_ = Kind::kUnknown;
  int64_t a_ = 0, b_ = 0;
  std::shared_ptr<const std::vector<SizeExpr>> terms_;
};

/// An entry-point argument attribute: the index of an earlier argument whose
/// dynamic sizes this one has (attention_mask beside input_ids), checked when
/// a call starts, like the batch size.
inline constexpr llvm::StringLiteral kSizesOfAttr = "transfuse.sizes_of";

/// Derives the run-time sizes of the values of one function from the ops'
/// shape rules, memoized. Entry-point arguments share one batch size
/// (docs/ir.md): every dynamic dimension 0 of them is the first one's; an
/// argument with kSizesOfAttr has that argument's sizes.
class SizeAnalysis {
public:
  /// Dimension `axis` of `v` (a constant when static).
  SizeExpr dim(Value v, int64_t axis);
  /// The value of an index (a transfuse.dim or transfuse.state_length);
  /// unknown for other indices.
  SizeExpr index(Value size);
  /// The size that dimensions of `operands` broadcast into dimension `axis`
  /// of a result of rank `rank` (NumPy trailing alignment; operands that are
  /// not tensors are skipped): a static size other than 1 when one has it,
  /// otherwise the broadcast of the dynamic sizes (1 when there are none).
  SizeExpr broadcast(ValueRange operands, int64_t axis, int64_t rank);

  /// True when dimension `a` of `x` and `b` of `y` are provably equal.
  bool equal(Value x, int64_t a, Value y, int64_t b) { return dim(x, a) == dim(y, b); }
  /// True when the index `size` provably equals dimension `a` of `x`.
  bool equalsIndex(Value size, Value x, int64_t a) { return index(size) == dim(x, a); }
  /// The compiled maximum of dimension `axis` of `v`.
  int64_t maximum(Value v, int64_t axis, int64_t maxBatch, int64_t maxSeqLen) {
    return dim(v, axis).maximum(maxBatch, maxSeqLen);
  }

  /// From now on `v` has the sizes `original` has (a rewrite that replaces
  /// an argument by another value keeps its sizes).
  void assumeSameSizes(Value v, Value original);

private:
  SizeExpr derive(Value v, int64_t axis);
  llvm::DenseMap<std::pair<Value, int64_t>, SizeExpr> memo;
};

} // namespace mlir::transfuse

#endif // TRANSFUSE_IR_SIZES_H
