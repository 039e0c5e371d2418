//===- EntryState.h - what the lowering patterns of one entry share -------===//
//
// Internal to codegen/lowering: the state LowerToKernels.cpp builds for one
// entry point before the conversion (sizes, outputs, input names) and the
// patterns of KernelPatterns.cpp read.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_LOWERING_ENTRYSTATE_H
#define TRANSFUSE_CODEGEN_LOWERING_ENTRYSTATE_H

#include "ir/KernelDialect.h"
#include "ir/State.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/Support/ErrorHandling.h"

#include <map>
#include <string>

namespace mlir::transfuse::lowering {

namespace tfk = mlir::transfuse::kernel;

inline MemRefType memrefOf(Type tensor) {
  auto t = cast<RankedTensorType>(tensor);
  return MemRefType::get(t.getShape(), t.getElementType());
}

/// `v` through reshapes (views of their input).
inline Value rootThroughReshapes(Value v) {
  while (auto r = v.getDefiningOp<ReshapeOp>())
    v = r.getInput();
  return v;
}

/// The parameter a GEMM weight is (through reshapes), or null.
inline ParamOp weightParam(Value w) { return rootThroughReshapes(w).getDefiningOp<ParamOp>(); }

/// A matmul by a 2-D weight: the GEMM kernel with packed panels.
inline bool isGemmByWeight(MatmulOp m) {
  return weightParam(m.getRhs()) && m.getRhs().getType().getRank() == 2 && !m.getTransposeLhs();
}

/// Where a slice ends: start (+ offset) + its size along its axis.
inline SizeExpr sliceEnd(SizeAnalysis &sizes, SliceOp s) {
  int64_t axis = normalizedAxis(s.getAxis(), s.getType().getRank());
  std::vector<SizeExpr> terms{SizeExpr::constant(s.getStart()), sizes.dim(s.getResult(), axis)};
  if (s.getOffset())
    terms.push_back(sizes.index(s.getOffset()));
  return SizeExpr::sum(terms);
}

inline bool supportedElement(Type t) { return t.isF32() || t.isInteger(32) || t.isInteger(1); }

/// What the patterns of one entry point share: the sizes of the original
/// tensor values (derived before any op is replaced), the index value of
/// each, and which results are written to the caller's outputs.
struct Entry {
  SizeAnalysis analysis;
  std::map<std::string, Value> indexOf; // SizeExpr::str() -> index value
  /// Values written into the caller's output buffer: the output's index
  /// and the value returned there (the value itself or a reshape of it).
  llvm::DenseMap<Value, std::pair<unsigned, Value>> output;
  llvm::DenseMap<unsigned, std::string> inputNames;
  /// The state tensors the entry names: their tfk.state (at the top) and
  /// declaration; the positions the entry appends (null: none).
  std::map<std::string, std::pair<Value, StateDecl>> states;
  Value advance;
  OpBuilder top;
  /// Set once the conversion starts: every size exists by then (patterns
  /// must not create ops outside their rewriter).
  bool frozen = false;

  explicit Entry(func::FuncOp f) : top(f.getContext()) {
    top.setInsertionPointToStart(&f.getBody().front());
  }

  /// The index value of `e` (created at the top once per expression).
  Value size(const SizeExpr &e) {
    std::string key = e.str();
    if (auto it = indexOf.find(key); it != indexOf.end())
      return it->second;
    if (frozen)
      llvm::report_fatal_error("lower-to-kernels: size " + llvm::Twine(key) +
                               " was not derived before the conversion");
    Location loc = top.getUnknownLoc();
    Value v;
    switch (e.kind()) {
    case SizeExpr::Kind::kConstant:
      v = arith::ConstantIndexOp::create(top, loc, e.value());
      break;
    case SizeExpr::Kind::kArgument:
      v = tfk::InputDimOp::create(top, loc, top.getIndexType(), e.arg(), e.dim());
      break;
    case SizeExpr::Kind::kStateLength:
      v = tfk::StateLengthOp::create(top, loc, top.getIndexType());
      break;
    case SizeExpr::Kind::kSum:
      for (const SizeExpr &t : e.terms())
        v = v ? Value(arith::AddIOp::create(top, loc, v, size(t))) : size(t);
      break;
    case SizeExpr::Kind::kBroadcast: {
      SmallVector<Value> terms;
      for (const SizeExpr &t : e.terms())
        terms.push_back(size(t));
      v = tfk::BroadcastDimOp::create(top, loc, top.getIndexType(), terms);
      break;
    }
    case SizeExpr::Kind::kUnknown:
      return Value();
    }
    return indexOf[key] = v;
  }
  Value dim(Value tensor, int64_t d) { return size(analysis.dim(tensor, d)); }
  /// One index value per dynamic dimension of `tensor` (a value of the
  /// original graph).
  SmallVector<Value> sizes(Value tensor) {
    SmallVector<Value> s;
    auto t = cast<RankedTensorType>(tensor.getType());
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (t.isDynamicDim(d))
        s.push_back(dim(tensor, d));
    return s;
  }
  bool sameSizes(Value a, Value b) {
    auto ta = cast<RankedTensorType>(a.getType()), tb = cast<RankedTensorType>(b.getType());
    if (ta.getRank() != tb.getRank())
      return false;
    for (int64_t d = 0; d < ta.getRank(); ++d)
      if (!analysis.equal(a, d, b, d))
        return false;
    return true;
  }
  /// True when `small` is a trailing block of `big` (NumPy alignment).
  bool trailing(Value small, Value big) {
    auto ts = cast<RankedTensorType>(small.getType());
    auto tb = cast<RankedTensorType>(big.getType());
    if (ts.getRank() < 1 || ts.getRank() > tb.getRank())
      return false;
    for (int64_t d = 0; d < ts.getRank(); ++d)
      if (!analysis.equal(small, d, big, tb.getRank() - ts.getRank() + d))
        return false;
    return true;
  }
  /// Where `result` is written: the caller's output, or a new alloc.
  Value destination(OpBuilder &b, Location loc, Value result) {
    if (auto it = output.find(result); it != output.end()) {
      auto [index, returned] = it->second;
      Value out = tfk::OutputOp::create(b, loc, memrefOf(returned.getType()), index, sizes(returned));
      if (returned == result)
        return out;
      return tfk::ReshapeOp::create(b, loc, memrefOf(result.getType()), out, sizes(result));
    }
    return tfk::AllocOp::create(b, loc, memrefOf(result.getType()), sizes(result), IntegerAttr(),
                                IntegerAttr());
  }
};

/// Adds one conversion pattern per transfuse op (KernelPatterns.cpp).
void populateKernelPatterns(RewritePatternSet &patterns, const TypeConverter &types, Entry &entry);

} // namespace mlir::transfuse::lowering

#endif // TRANSFUSE_CODEGEN_LOWERING_ENTRYSTATE_H
