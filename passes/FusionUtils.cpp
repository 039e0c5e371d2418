//===- FusionUtils.cpp - constants, dimension equality, recording ---------===//

#include "passes/FusionUtils.h"

#include <limits>

#include "ir/TransfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::transfuse;

std::optional<double> mlir::transfuse::constantScalar(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = dyn_cast<DenseFPElementsAttr>(constant.getValue());
  if (!dense || dense.getNumElements() != 1)
    return std::nullopt;
  return (*dense.getValues<APFloat>().begin()).convertToDouble();
}

static bool isDynamic(Value v, int64_t axis) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.isDynamicDim(axis);
}

std::optional<DimEquality::Origin> DimEquality::indexOrigin(Value size) {
  if (auto dim = size.getDefiningOp<DimOp>()) {
    int64_t rank = dim.getInput().getType().getRank();
    int64_t axis = normalizedAxis(dim.getAxis(), rank);
    if (!isDynamic(dim.getInput(), axis))
      return std::nullopt;
    return origin(dim.getInput(), axis);
  }
  return std::nullopt;
}

std::optional<DimEquality::Origin> DimEquality::broadcastOrigin(ValueRange operands,
                                                                int64_t axis, int64_t rank) {
  std::optional<Origin> found;
  for (Value operand : operands) {
    auto t = dyn_cast<RankedTensorType>(operand.getType());
    if (!t)
      continue;
    int64_t a = axis - (rank - t.getRank());
    if (a < 0 || !t.isDynamicDim(a))
      continue; // absent or static (1 broadcasts; N would have made the result static)
    std::optional<Origin> o = origin(operand, a);
    if (!o || (found && *found != *o))
      return std::nullopt; // two dynamic sizes we cannot prove equal (one may be 1)
    found = o;
  }
  return found;
}

std::optional<DimEquality::Origin> DimEquality::origin(Value v, int64_t axis) {
  auto key = std::make_pair(v, axis);
  if (auto it = memo.find(key); it != memo.end())
    return it->second;
  std::optional<Origin> result;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    // The batch contract (docs/ir.md): every dynamic dimension 0 of an entry
    // point's arguments has one size, checked when a call starts.
    Block *block = arg.getOwner();
    if (axis == 0 && block->isEntryBlock() && isa<func::FuncOp>(block->getParentOp())) {
      for (BlockArgument first : block->getArguments())
        if (auto t = dyn_cast<RankedTensorType>(first.getType());
            t && t.getRank() > 0 && t.isDynamicDim(0)) {
          result = Origin{first, 0};
          break;
        }
    } else {
      result = Origin{v, axis};
    }
  } else {
    Operation *op = v.getDefiningOp();
    int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
    result = llvm::TypeSwitch<Operation *, std::optional<Origin>>(op)
        .Case([&](TransposeOp t) { return origin(t.getInput(), t.getPermutation()[axis]); })
        .Case([&](ReshapeOp r) -> std::optional<Origin> {
          // The k-th dynamic dimension of the result is the k-th of the input.
          auto out = r.getType(), in = r.getInput().getType();
          int64_t k = 0;
          for (int64_t d = 0; d < axis; ++d)
            k += out.isDynamicDim(d);
          for (int64_t d = 0; d < in.getRank(); ++d)
            if (in.isDynamicDim(d) && k-- == 0)
              return origin(r.getInput(), d);
          return std::nullopt;
        })
        .Case<ReluOp, ExpOp, TanhOp, GeluOp, ScaleOp, SoftmaxOp, DropoutOp, LayerNormOp>(
            [&](auto o) { return origin(o.getInput(), axis); })
        .Case([&](AddLayerNormOp o) { return origin(o.getInput(), axis); })
        .Case<AddOp, SubOp, MulOp, DivOp, SelectOp, FusedElementwiseOp>(
            [&](Operation *o) { return broadcastOrigin(o->getOperands(), axis, rank); })
        .Case([&](MatmulOp m) -> std::optional<Origin> {
          int64_t lr = m.getLhs().getType().getRank(), rr = m.getRhs().getType().getRank();
          if (axis < rank - 2) // batch dimensions broadcast like elementwise operands
            return broadcastOrigin({m.getLhs(), m.getRhs()}, axis, rank);
          if (axis == rank - 2)
            return origin(m.getLhs(), m.getTransposeLhs() ? lr - 1 : lr - 2);
          return origin(m.getRhs(), m.getTransposeRhs() ? rr - 2 : rr - 1);
        })
        .Case([&](LinearOp l) -> std::optional<Origin> {
          if (axis == rank - 1)
            return std::nullopt;
          return origin(l.getInput(), axis);
        })
        .Case([&](AttentionOp a) -> std::optional<Origin> {
          return axis < 3 ? origin(a.getQuery(), axis) : std::nullopt;
        })
        .Case([&](GatherOp g) -> std::optional<Origin> {
          if (axis < g.getIds().getType().getRank())
            return origin(g.getIds(), axis);
          return std::nullopt;
        })
        .Case([&](SliceOp s) -> std::optional<Origin> {
          int64_t sliced = normalizedAxis(s.getAxis(), rank);
          if (axis == sliced)
            return s.getLength() ? indexOrigin(s.getLength()) : std::nullopt;
          return origin(s.getInput(), axis);
        })
        .Case([&](SplitOp s) -> std::optional<Origin> { return origin(s.getInput(), axis); })
        .Case([&](ConcatOp c) -> std::optional<Origin> {
          // Along its axis a concat makes a size of its own (the sum of its
          // inputs'); every other dimension is its inputs'.
          if (axis == normalizedAxis(c.getAxis(), rank))
            return Origin{v, axis};
          return broadcastOrigin(c.getInputs(), axis, rank);
        })
        .Case([&](KeyPaddingMaskOp k) { return origin(k.getTokens(), axis); })
        .Case([&](CausalMaskOp c) {
          return indexOrigin(axis == 0 ? c.getQueryLen() : c.getKeyLen());
        })
        .Case([&](PositionalEncodingOp p) -> std::optional<Origin> {
          return axis == 0 ? indexOrigin(p.getLength()) : std::nullopt;
        })
        .Default([](Operation *) { return std::nullopt; });
  }
  memo[key] = result;
  return result;
}

bool DimEquality::equal(Value x, int64_t a, Value y, int64_t b) {
  auto tx = cast<RankedTensorType>(x.getType()), ty = cast<RankedTensorType>(y.getType());
  if (!tx.isDynamicDim(a) || !ty.isDynamicDim(b))
    return !tx.isDynamicDim(a) && !ty.isDynamicDim(b) && tx.getDimSize(a) == ty.getDimSize(b);
  std::optional<Origin> ox = origin(x, a), oy = origin(y, b);
  return ox && oy && *ox == *oy;
}

bool DimEquality::equalsIndex(Value size, Value x, int64_t a) {
  auto tx = cast<RankedTensorType>(x.getType());
  if (!tx.isDynamicDim(a)) {
    // A static size: the index must be `dim` of a static dimension as large.
    auto dim = size.getDefiningOp<DimOp>();
    if (!dim)
      return false;
    auto t = dim.getInput().getType();
    int64_t axis = normalizedAxis(dim.getAxis(), t.getRank());
    return !t.isDynamicDim(axis) && t.getDimSize(axis) == tx.getDimSize(a);
  }
  std::optional<Origin> os = indexOrigin(size), ox = origin(x, a);
  return os && ox && *os == *ox;
}

Value mlir::transfuse::biasOf(AddOp add, Value product) {
  Value bias = add.getLhs() == product ? add.getRhs() : add.getLhs();
  auto pt = cast<RankedTensorType>(product.getType());
  auto bt = cast<RankedTensorType>(bias.getType());
  if (bias == product || add.getType() != pt || bt.getRank() != 1 ||
      bt.getDimSize(0) != pt.getShape().back() || ShapedType::isDynamic(bt.getDimSize(0)))
    return Value();
  return bias;
}

int64_t DimEquality::maximum(Value v, int64_t axis, int64_t maxBatch, int64_t maxSeqLen) {
  std::optional<Origin> o = origin(v, axis);
  if (!o)
    return std::max(maxBatch, maxSeqLen);
  // A concat's axis reaches the sum of its inputs' maxima.
  if (auto c = o->first.getDefiningOp<ConcatOp>()) {
    int64_t sum = 0;
    for (Value in : c.getInputs()) {
      auto t = cast<RankedTensorType>(in.getType());
      int64_t m = t.isDynamicDim(o->second) ? maximum(in, o->second, maxBatch, maxSeqLen)
                                            : t.getDimSize(o->second);
      if (__builtin_add_overflow(sum, m, &sum))
        return std::numeric_limits<int64_t>::max();
    }
    return sum;
  }
  return o->second == 0 ? maxBatch : maxSeqLen;
}

void FusionRecorder::fused(Location loc) const {
  if (report)
    report->fused(fusion);
  if (remarks)
    emitRemark(loc) << fusion << ": fused";
}

void FusionRecorder::missed(Location loc, const llvm::Twine &reason) const {
  if (report)
    report->missed(fusion, loc, reason.str());
  if (remarks)
    emitRemark(loc) << fusion << ": not fused: " << reason;
}
