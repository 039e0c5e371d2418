//===- Sizes.cpp - symbolic sizes and their derivation ---------------------===//

#include "ir/Sizes.h"

#include "ir/TransfuseDialect.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::transfuse;

SizeExpr SizeExpr::constant(int64_t n) {
  SizeExpr e;
  e.kind_ = Kind::kConstant;
  e.a_ = n;
  return e;
}

SizeExpr SizeExpr::argument(unsigned arg, int64_t dim) {
  SizeExpr e;
  e.kind_ = Kind::kArgument;
  e.a_ = arg;
  e.b_ = dim;
  return e;
}

SizeExpr SizeExpr::stateLength() {
  SizeExpr e;
  e.kind_ = Kind::kStateLength;
  return e;
}

SizeExpr SizeExpr::sum(const std::vector<SizeExpr> &terms) {
  std::vector<SizeExpr> flat;
  int64_t constant = 0;
  for (const SizeExpr &t : terms) {
    if (!t.known())
      return SizeExpr();
    if (t.kind_ == Kind::kConstant) {
      if (__builtin_add_overflow(constant, t.a_, &constant))
        return SizeExpr();
    } else if (t.kind_ == Kind::kSum) {
      for (const SizeExpr &inner : t.terms())
        if (inner.kind_ != Kind::kConstant)
          flat.push_back(inner);
        else if (__builtin_add_overflow(constant, inner.a_, &constant))
          return SizeExpr();
    } else {
      flat.push_back(t);
    }
  }
  if (constant != 0 || flat.empty())
    flat.push_back(SizeExpr::constant(constant));
  if (flat.size() == 1)
    return flat.front();
  SizeExpr e;
  e.kind_ = Kind::kSum;
  e.terms_ = std::make_shared<const std::vector<SizeExpr>>(std::move(flat));
  return e;
}

SizeExpr SizeExpr::broadcast(const std::vector<SizeExpr> &terms) {
  std::vector<SizeExpr> unique;
  auto add = [&](const SizeExpr &t) {
    if (!llvm::is_contained(unique, t))
      unique.push_back(t);
  };
  for (const SizeExpr &t : terms) {
    if (!t.known())
      return SizeExpr();
    if (t.kind_ == Kind::kConstant && t.a_ != 1)
      return t; // a static size other than 1 is the size
    if (t.kind_ == Kind::kConstant)
      continue; // 1 broadcasts to anything
    if (t.kind_ == Kind::kBroadcast)
      llvm::for_each(t.terms(), add); // flattened
    else
      add(t);
  }
  if (unique.empty())
    return SizeExpr::constant(1);
  if (unique.size() == 1)
    return unique.front();
  SizeExpr e;
  e.kind_ = Kind::kBroadcast;
  e.terms_ = std::make_shared<const std::vector<SizeExpr>>(std::move(unique));
  return e;
}

const std::vector<SizeExpr> &SizeExpr::terms() const {
  static const std::vector<SizeExpr> none;
  return terms_ ? *terms_ : none;
}

bool SizeExpr::operator==(const SizeExpr &o) const {
  if (kind_ != o.kind_ || kind_ == Kind::kUnknown)
    return false;
  switch (kind_) {
  case Kind::kConstant:
    return a_ == o.a_;
  case Kind::kArgument:
    return a_ == o.a_ && b_ == o.b_;
  case Kind::kStateLength:
    return true;
  default:
    return terms() == o.terms();
  }
}

int64_t SizeExpr::maximum(int64_t maxBatch, int64_t maxSeqLen) const {
  switch (kind_) {
  case Kind::kUnknown:
    return std::max(maxBatch, maxSeqLen);
  case Kind::kConstant:
    return a_;
  case Kind::kArgument:
    return b_ == 0 ? maxBatch : maxSeqLen;
  case Kind::kStateLength:
    return maxSeqLen;
  case Kind::kSum: {
    int64_t total = 0;
    for (const SizeExpr &t : terms())
      if (__builtin_add_overflow(total, t.maximum(maxBatch, maxSeqLen), &total))
        return std::numeric_limits<int64_t>::max();
    return total;
  }
  case Kind::kBroadcast: {
    int64_t m = 0;
    for (const SizeExpr &t : terms())
      m = std::max(m, t.maximum(maxBatch, maxSeqLen));
    return m;
  }
  }
  return std::max(maxBatch, maxSeqLen);
}

std::string SizeExpr::str() const {
  auto join = [&](const char *open, const char *sep) {
    std::string s = open;
    for (size_t i = 0; i < terms().size(); ++i)
      s += (i ? sep : "") + terms()[i].str();
    return s + ")";
  };
  switch (kind_) {
  case Kind::kUnknown:
    return "?";
  case Kind::kConstant:
    return std::to_string(a_);
  case Kind::kArgument:
    return "a" + std::to_string(a_) + "_" + std::to_string(b_);
  case Kind::kStateLength:
    return "L";
  case Kind::kSum:
    return join("(", " + ");
  case Kind::kBroadcast:
    return join("max(", ", ");
  }
  return "?";
}

SizeExpr SizeAnalysis::dim(Value v, int64_t axis) {
  auto type = cast<RankedTensorType>(v.getType());
  if (axis < 0 || axis >= type.getRank())
    return SizeExpr();
  if (!type.isDynamicDim(axis))
    return SizeExpr::constant(type.getDimSize(axis));
  auto key = std::make_pair(v, axis);
  if (auto it = memo.find(key); it != memo.end())
    return it->second;
  SizeExpr e = derive(v, axis);
  memo[key] = e;
  return e;
}

SizeExpr SizeAnalysis::derive(Value v, int64_t axis) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    Block *block = arg.getOwner();
    Operation *parent = block->getParentOp();
    // A fused_elementwise body argument has the size of the op's operand.
    if (auto fused = dyn_cast_or_null<FusedElementwiseOp>(parent))
      return dim(fused.getInputs()[arg.getArgNumber()], axis);
    if (!parent || !block->isEntryBlock() || !isa<FunctionOpInterface>(parent))
      return SizeExpr();
    unsigned number = arg.getArgNumber();
    // An argument with another's sizes (checked when a call starts).
    if (auto fn = dyn_cast<FunctionOpInterface>(parent))
      if (auto of = fn.getArgAttrOfType<IntegerAttr>(number, kSizesOfAttr);
          of && of.getInt() >= 0 && of.getInt() < static_cast<int64_t>(number) &&
          cast<ShapedType>(arg.getType()).isDynamicDim(axis))
        return dim(block->getArgument(of.getInt()), axis);
    // The batch contract (docs/ir.md), checked when a call starts.
    if (axis == 0)
      for (BlockArgument first : block->getArguments())
        if (auto t = dyn_cast<RankedTensorType>(first.getType());
            t && t.getRank() > 0 && t.isDynamicDim(0)) {
          number = first.getArgNumber();
          break;
        }
    return SizeExpr::argument(number, axis);
  }
  auto result = cast<OpResult>(v);
  auto rule = dyn_cast<ShapeRuleOpInterface>(result.getOwner());
  if (!rule)
    return SizeExpr();
  return rule.resultSize(result.getResultNumber(), axis, *this);
}

void SizeAnalysis::assumeSameSizes(Value v, Value original) {
  int64_t rank = cast<ShapedType>(original.getType()).getRank();
  for (int64_t d = 0; d < rank; ++d)
    memo[{v, d}] = dim(original, d);
}

SizeExpr SizeAnalysis::index(Value size) {
  if (size.getDefiningOp<StateLengthOp>())
    return SizeExpr::stateLength();
  auto d = size.getDefiningOp<DimOp>();
  if (!d)
    return SizeExpr();
  int64_t rank = d.getInput().getType().getRank();
  return dim(d.getInput(), normalizedAxis(d.getAxis(), rank));
}

SizeExpr SizeAnalysis::broadcast(ValueRange operands, int64_t axis, int64_t rank) {
  std::vector<SizeExpr> terms;
  for (Value operand : operands) {
    auto t = dyn_cast<RankedTensorType>(operand.getType());
    if (!t)
      continue;
    int64_t a = axis - (rank - t.getRank());
    if (a >= 0)
      terms.push_back(dim(operand, a));
  }
  return SizeExpr::broadcast(terms);
}
