//===- TransfuseOps.cpp - verifiers, shape inference and folds -----------===//
//
// Shape rules of the transfuse ops. Each rule handles dynamic (`?`) sizes:
// a static mismatch is an error, a dynamic size is checked at run time.
//
//===----------------------------------------------------------------------===//

#include "ir/TransfuseDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::transfuse;

namespace {

/// Formats a shape as `2x?x512` for diagnostics.
std::string fmt(ArrayRef<int64_t> shape) {
  std::string s;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (i)
      s += "x";
    s += ShapedType::isDynamic(d) ? "?" : std::to_string(d);
  }
  return s.empty() ? "scalar" : s;
}

/// Normalizes a possibly negative axis; fails with a diagnostic, naming the
/// axis as written, when it is outside [-rank, rank).
LogicalResult normalizeAxis(std::optional<Location> loc, int64_t &axis,
                            int64_t rank, StringRef what) {
  int64_t given = axis;
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return emitOptionalError(loc, what, " ", given, " is out of range for rank ",
                             rank);
  return success();
}

RankedTensorType tensorOf(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

} // namespace

//===----------------------------------------------------------------------===//
// ParamOp, ConstantOp, DimOp
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError("needs a non-empty parameter name");
  auto type = getType();
  if (!type.hasStaticShape())
    return emitOpError("parameter '") << getName() << "' must have a static shape, got "
                                      << type;
  if (getInit() == InitKind::UniformFanIn && (!getFanIn() || *getFanIn() <= 0))
    return emitOpError("init 'uniform_fan_in' needs a positive fan_in");
  if (getInit() == InitKind::XavierUniform && type.getRank() < 2)
    return emitOpError("init 'xavier_uniform' needs a parameter of rank >= 2");
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult DimOp::verify() {
  int64_t axis = getAxis();
  return normalizeAxis(getLoc(), axis, getInput().getType().getRank(), "axis");
}

//===----------------------------------------------------------------------===//
// GatherOp, MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto table = tensorOf(adaptor.getTable());
  auto ids = tensorOf(adaptor.getIds());
  if (!table || !ids)
    return failure();
  if (table.getRank() != 2 || table.isDynamicDim(1))
    return emitOptionalError(loc, "table must be [vocab, dim] with a static dim, got ",
                             fmt(table.getShape()));
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  types.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

SizeExpr GatherOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  // [ids..., D]: the leading dimensions are the ids'.
  return sizes.dim(getIds(), axis);
}

namespace {
/// gather(table, ids) whose ids are consecutive rows c0 + start .. of a
/// constant (c[i] = c[0] + i), sliced and perhaps reshaped: those rows of
/// the table, a slice. Learned positions as an exporter writes them,
/// Gather(table, Range(0, S)), become what the builder writes. The slice's
/// run-time bounds check stands where the gather's id check stood.
struct GatherOfConsecutiveRows : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GatherOp op, PatternRewriter &rw) const override {
    Value ids = op.getIds();
    if (auto r = ids.getDefiningOp<ReshapeOp>())
      ids = r.getInput();
    auto slice = ids.getDefiningOp<SliceOp>();
    auto c = slice ? slice.getInput().getDefiningOp<ConstantOp>() : ConstantOp();
    auto values = c ? dyn_cast<DenseIntElementsAttr>(c.getValue()) : DenseIntElementsAttr();
    if (!values || slice.getOffset() || slice.getType().getRank() != 1 || values.empty())
      return failure();
    const int64_t c0 = (*values.begin()).getSExtValue();
    int64_t i = 0;
    for (const APInt &v : values)
      if (v.getSExtValue() != c0 + i++)
        return failure();
    const int64_t first = c0 + slice.getStart();
    const int64_t rows = op.getTable().getType().getDimSize(0);
    const int64_t n = slice.getType().getDimSize(0);
    if (first < 0 || (!ShapedType::isDynamic(n) && !ShapedType::isDynamic(rows) && first + n > rows))
      return failure(); // the gather's run-time error stands
    Value picked = SliceOp::create(rw, op.getLoc(), op.getTable(), Value(), slice.getLength(), 0,
                                   first, slice.getSizeAttr());
    if (picked.getType() != op.getType())
      picked = ReshapeOp::create(rw, op.getLoc(), op.getType(), picked);
    rw.replaceOp(op, picked);
    return success();
  }
};
} // namespace

void GatherOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *ctx) {
  results.add<GatherOfConsecutiveRows>(ctx);
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto lhs = tensorOf(adaptor.getLhs());
  auto rhs = tensorOf(adaptor.getRhs());
  if (!lhs || !rhs)
    return failure();
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(loc, "element types differ: ", lhs.getElementType(),
                             " vs ", rhs.getElementType());
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOptionalError(loc, "operands need rank >= 2, got ",
                             fmt(lhs.getShape()), " and ", fmt(rhs.getShape()));
  auto ls = lhs.getShape(), rs = rhs.getShape();
  int64_t lr = ls.size(), rr = rs.size();
  bool tl = adaptor.getTransposeLhs(), tr = adaptor.getTransposeRhs();
  int64_t m = tl ? ls[lr - 1] : ls[lr - 2];
  int64_t kl = tl ? ls[lr - 2] : ls[lr - 1];
  int64_t kr = tr ? rs[rr - 1] : rs[rr - 2];
  int64_t n = tr ? rs[rr - 2] : rs[rr - 1];
  if (!compatibleSizes(kl, kr))
    return emitOptionalError(loc, "contraction sizes differ: lhs ", fmt(ls),
                             " has K=", kl, ", rhs ", fmt(rs), " has K=", kr);
  SmallVector<int64_t> batch;
  std::string error;
  if (failed(broadcastShapes(ls.drop_back(2), rs.drop_back(2), batch, error)))
    return emitOptionalError(loc, "batch dimensions do not broadcast: ", error);
  batch.push_back(m);
  batch.push_back(n);
  types.push_back(RankedTensorType::get(batch, lhs.getElementType()));
  return success();
}

SizeExpr MatmulOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  int64_t rank = getType().getRank(), lr = getLhs().getType().getRank(),
          rr = getRhs().getType().getRank();
  if (axis == rank - 2) // M
    return sizes.dim(getLhs(), getTransposeLhs() ? lr - 1 : lr - 2);
  if (axis == rank - 1) // N
    return sizes.dim(getRhs(), getTransposeRhs() ? rr - 2 : rr - 1);
  // Batch dimensions broadcast (right-aligned, like elementwise operands).
  return sizes.broadcast({getLhs(), getRhs()}, axis, rank);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

static LogicalResult inferBinary(std::optional<Location> loc, Value lhsV, Value rhsV,
                                 SmallVectorImpl<Type> &types) {
  auto lhs = tensorOf(lhsV), rhs = tensorOf(rhsV);
  if (!lhs || !rhs)
    return failure();
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(loc, "element types differ: ", lhs.getElementType(),
                             " vs ", rhs.getElementType());
  SmallVector<int64_t> shape;
  std::string error;
  if (failed(broadcastShapes(lhs.getShape(), rhs.getShape(), shape, error)))
    return emitOptionalError(loc, "operands ", fmt(lhs.getShape()), " and ",
                             fmt(rhs.getShape()), " do not broadcast: ", error);
  types.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

#define TRANSFUSE_BINARY_INFER(OP)                                             \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc, \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &types) {           \
    return inferBinary(loc, adaptor.getLhs(), adaptor.getRhs(), types);        \
  }
TRANSFUSE_BINARY_INFER(AddOp)
TRANSFUSE_BINARY_INFER(SubOp)
TRANSFUSE_BINARY_INFER(MulOp)
TRANSFUSE_BINARY_INFER(DivOp)
TRANSFUSE_BINARY_INFER(PowOp)
#undef TRANSFUSE_BINARY_INFER

OpFoldResult ScaleOp::fold(FoldAdaptor) {
  if (getFactor().convertToDouble() == 1.0)
    return getInput();
  return {};
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  SmallVector<Type> values;
  if (failed(inferBinary(loc, adaptor.getOnTrue(), adaptor.getOnFalse(), values)))
    return failure();
  auto cond = tensorOf(adaptor.getCond());
  if (!cond)
    return failure();
  auto value = cast<RankedTensorType>(values.front());
  SmallVector<int64_t> shape;
  std::string error;
  if (failed(broadcastShapes(cond.getShape(), value.getShape(), shape, error)))
    return emitOptionalError(loc, "condition ", fmt(cond.getShape()),
                             " does not broadcast to values ",
                             fmt(value.getShape()), ": ", error);
  types.push_back(RankedTensorType::get(shape, value.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Softmax, LayerNorm, reductions, dropout
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  int64_t axis = getAxis();
  return normalizeAxis(getLoc(), axis, getType().getRank(), "softmax axis");
}

LogicalResult PoolOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto input = tensorOf(adaptor.getInput());
  if (!input || input.getRank() != 3)
    return emitOptionalError(loc, "pool: input must be [B, S, D], got ", adaptor.getInput().getType());
  types.push_back(RankedTensorType::get({input.getDimSize(0), input.getDimSize(2)},
                                        input.getElementType()));
  return success();
}

LogicalResult PoolOp::verify() {
  auto input = getInput().getType(), keep = getKeep().getType();
  if (input.getRank() != 3)
    return emitOpError("input must be [B, S, D], got ") << input;
  if (keep.getRank() != 2)
    return emitOpError("keep must be [B, S], got ") << keep;
  for (int64_t d = 0; d < 2; ++d)
    if (!input.isDynamicDim(d) && !keep.isDynamicDim(d) && input.getDimSize(d) != keep.getDimSize(d))
      return emitOpError("keep ") << keep << " does not match the input " << input;
  return success();
}

SizeExpr PoolOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  return sizes.dim(getInput(), axis == 0 ? 0 : 2);
}

LogicalResult UnfoldOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto input = tensorOf(adaptor.getInput());
  ArrayRef<int64_t> patch = adaptor.getPatch();
  if (!input || input.getRank() != 4 || patch.size() != 2 || patch[0] < 1 || patch[1] < 1)
    return emitOptionalError(loc, "unfold: input must be [B, C, H, W] and patch [ph, pw], got ",
                             adaptor.getInput().getType());
  auto rows = [&](int64_t d, int64_t p) {
    return ShapedType::isDynamic(d) ? ShapedType::kDynamic : d / p;
  };
  int64_t n = ShapedType::kDynamic, c = input.getDimSize(1);
  if (!input.isDynamicDim(2) && !input.isDynamicDim(3))
    n = rows(input.getDimSize(2), patch[0]) * rows(input.getDimSize(3), patch[1]);
  types.push_back(RankedTensorType::get(
      {input.getDimSize(0), n, ShapedType::isDynamic(c) ? c : c * patch[0] * patch[1]},
      input.getElementType()));
  return success();
}

LogicalResult UnfoldOp::verify() {
  auto input = getInput().getType();
  ArrayRef<int64_t> patch = getPatch();
  if (input.getRank() != 4 || patch.size() != 2 || patch[0] < 1 || patch[1] < 1)
    return emitOpError("input must be [B, C, H, W] and patch [ph, pw] >= 1, got ") << input;
  for (int64_t d = 1; d < 4; ++d)
    if (input.isDynamicDim(d))
      return emitOpError("C, H and W must be static, got ") << input;
  if (input.getDimSize(2) % patch[0] != 0 || input.getDimSize(3) % patch[1] != 0)
    return emitOpError("the image ") << input.getDimSize(2) << "x" << input.getDimSize(3)
                                     << " is not a whole number of " << patch[0] << "x"
                                     << patch[1] << " patches";
  return success();
}

SizeExpr UnfoldOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  if (axis == 0)
    return sizes.dim(getInput(), 0);
  return SizeExpr::constant(getType().getDimSize(axis));
}

LogicalResult L2NormalizeOp::verify() {
  if (getType().getRank() < 1)
    return emitOpError("needs a rank of at least 1, got ") << getType();
  if (!(getEpsilon().convertToDouble() > 0.0))
    return emitOpError("epsilon must be positive, got ") << getEpsilon().convertToDouble();
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto input = tensorOf(adaptor.getInput());
  auto gamma = tensorOf(adaptor.getGamma());
  if (!input || !gamma)
    return failure();
  int64_t axis = adaptor.getAxis();
  if (failed(normalizeAxis(loc, axis, input.getRank(), "layer_norm axis")))
    return failure();
  auto normalized = input.getShape().drop_front(axis);
  if (ShapedType::isDynamicShape(normalized))
    return emitOptionalError(loc, "normalized dimensions ", fmt(normalized),
                             " must be static");
  SmallVector<std::pair<const char *, RankedTensorType>, 2> params = {{"gamma", gamma}};
  if (adaptor.getBeta())
    params.push_back({"beta", tensorOf(adaptor.getBeta())});
  for (auto [name, t] : params) {
    if (!t)
      return failure();
    if (t.getShape() != normalized)
      return emitOptionalError(loc, name, " has shape ", fmt(t.getShape()),
                               ", expected the normalized shape ", fmt(normalized));
    if (t.getElementType() != input.getElementType())
      return emitOptionalError(loc, name, " element type ", t.getElementType(),
                               " differs from input ", input.getElementType());
  }
  double epsilon = adaptor.getEpsilon().convertToDouble();
  if (!(epsilon >= 0)) // Also rejects NaN.
    return emitOptionalError(loc, "epsilon must be >= 0, got ", epsilon);
  types.push_back(input);
  return success();
}

static LogicalResult inferReduce(std::optional<Location> loc, Value inputV,
                                 ArrayRef<int64_t> axes, bool keepDims,
                                 SmallVectorImpl<Type> &types) {
  auto input = tensorOf(inputV);
  if (!input)
    return failure();
  int64_t rank = input.getRank();
  SmallVector<bool> reduced(rank, false);
  if (axes.empty())
    return emitOptionalError(loc, "needs at least one axis");
  for (int64_t axis : axes) {
    if (failed(normalizeAxis(loc, axis, rank, "reduction axis")))
      return failure();
    if (reduced[axis])
      return emitOptionalError(loc, "axis ", axis, " appears twice");
    reduced[axis] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i])
      shape.push_back(input.getDimSize(i));
    else if (keepDims)
      shape.push_back(1);
  }
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

/// Dimension `axis` of a reduction's result: the input's dimension it keeps.
static SizeExpr reducedSize(Value input, ArrayRef<int64_t> axes, bool keepDims, int64_t axis,
                            SizeAnalysis &sizes) {
  int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
  SmallVector<bool> reduced(rank, false);
  for (int64_t a : axes)
    reduced[normalizedAxis(a, rank)] = true;
  for (int64_t i = 0, k = 0; i < rank; ++i) {
    if (reduced[i] && !keepDims)
      continue;
    if (k++ == axis)
      return sizes.dim(input, i);
  }
  return SizeExpr();
}

#define TRANSFUSE_REDUCE_INFER(OP)                                             \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc, \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &types) {           \
    return inferReduce(loc, adaptor.getInput(), adaptor.getAxes(),             \
                       adaptor.getKeepDims(), types);                          \
  }
TRANSFUSE_REDUCE_INFER(ReduceSumOp)
TRANSFUSE_REDUCE_INFER(ReduceMeanOp)
TRANSFUSE_REDUCE_INFER(ReduceMaxOp)
#undef TRANSFUSE_REDUCE_INFER

#define TRANSFUSE_REDUCE_SIZE(OP)                                              \
  SizeExpr OP::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {       \
    return reducedSize(getInput(), getAxes(), getKeepDims(), axis, sizes);     \
  }
TRANSFUSE_REDUCE_SIZE(ReduceSumOp)
TRANSFUSE_REDUCE_SIZE(ReduceMeanOp)
TRANSFUSE_REDUCE_SIZE(ReduceMaxOp)
#undef TRANSFUSE_REDUCE_SIZE

LogicalResult DropoutOp::verify() {
  double rate = getRate().convertToDouble();
  if (!(rate >= 0.0 && rate < 1.0))
    return emitOpError("rate must be in [0, 1), got ") << rate;
  return success();
}

OpFoldResult DropoutOp::fold(FoldAdaptor) {
  if (getRate().convertToDouble() == 0.0)
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("element type changes from ")
           << in.getElementType() << " to " << out.getElementType();
  auto dynamicCount = [](ArrayRef<int64_t> s) {
    return llvm::count_if(s, ShapedType::isDynamic);
  };
  auto staticProduct = [](ArrayRef<int64_t> s) {
    int64_t p = 1;
    for (int64_t d : s)
      if (!ShapedType::isDynamic(d))
        p *= d;
    return p;
  };
  if (dynamicCount(in.getShape()) != dynamicCount(out.getShape()))
    return emitOpError("input ")
           << fmt(in.getShape()) << " and result " << fmt(out.getShape())
           << " must have the same number of dynamic dimensions";
  if (staticProduct(in.getShape()) != staticProduct(out.getShape()))
    return emitOpError("input ")
           << fmt(in.getShape()) << " and result " << fmt(out.getShape())
           << " hold different numbers of elements";
  return success();
}

SizeExpr ReshapeOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  // The k-th dynamic dimension of the result is the input's k-th (verified).
  auto out = getType(), in = getInput().getType();
  int64_t k = 0;
  for (int64_t d = 0; d < axis; ++d)
    k += out.isDynamicDim(d);
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (in.isDynamicDim(d) && k-- == 0)
      return sizes.dim(getInput(), d);
  return SizeExpr();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) = reshape(x): both keep the dynamic dimensions' order.
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    if (inner.getInput().getType() == getType())
      return inner.getInput();
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> perm = getPermutation();
  // transpose(transpose(x, p), q) = transpose(x, p∘q): result[i] = x[p[q[i]]].
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    ArrayRef<int64_t> p = inner.getPermutation();
    SmallVector<int64_t> composed;
    for (int64_t q : perm)
      composed.push_back(p[q]);
    getInputMutable().assign(inner.getInput());
    setPermutation(composed);
    perm = getPermutation();
    if (!llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
      return getResult();
  }
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return getInput();
  return {};
}

SizeExpr TransposeOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  return sizes.dim(getInput(), getPermutation()[axis]);
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto input = tensorOf(adaptor.getInput());
  if (!input)
    return failure();
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  int64_t rank = input.getRank();
  if ((int64_t)perm.size() != rank)
    return emitOptionalError(loc, "permutation has ", perm.size(),
                             " entries for an input of rank ", rank);
  SmallVector<bool> seen(rank, false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return emitOptionalError(loc, "permutation is not a permutation of 0..",
                               rank - 1);
    seen[p] = true;
    shape.push_back(input.getDimSize(p));
  }
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(loc, "needs at least one input");
  auto first = tensorOf(adaptor.getInputs().front());
  if (!first)
    return failure();
  int64_t axis = adaptor.getAxis();
  if (failed(normalizeAxis(loc, axis, first.getRank(), "concat axis")))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  for (auto [i, v] : llvm::enumerate(adaptor.getInputs().drop_front())) {
    auto t = tensorOf(v);
    if (!t)
      return failure();
    if (t.getRank() != first.getRank() || t.getElementType() != first.getElementType())
      return emitOptionalError(loc, "input ", i + 1, " has type ", t,
                               ", incompatible with input 0 ", first);
    for (int64_t d = 0; d < first.getRank(); ++d) {
      int64_t size = t.getDimSize(d);
      if (d == axis) {
        shape[d] = ShapedType::isDynamic(shape[d]) || ShapedType::isDynamic(size)
                       ? ShapedType::kDynamic
                       : shape[d] + size;
      } else if (!compatibleSizes(shape[d], size)) {
        return emitOptionalError(loc, "input ", i + 1, " has size ", size,
                                 " in dimension ", d, ", expected ", shape[d]);
      } else if (ShapedType::isDynamic(shape[d])) {
        shape[d] = size;
      }
    }
  }
  types.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

/// concat(split(x)) of all the pieces, in order and on the same axis, is x.
SizeExpr ConcatOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  // The sum of the inputs' sizes along the axis; every other dimension is
  // the inputs' (verified compatible; the first one's is taken).
  if (axis != normalizedAxis(getAxis(), getType().getRank()))
    return sizes.dim(getInputs().front(), axis);
  std::vector<SizeExpr> terms;
  for (Value in : getInputs())
    terms.push_back(sizes.dim(in, axis));
  return SizeExpr::sum(terms);
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  auto split = getInputs().front().getDefiningOp<SplitOp>();
  if (!split || getInputs().size() != split.getNumResults() ||
      split.getInput().getType() != getType())
    return {};
  int64_t rank = getType().getRank();
  if (normalizedAxis(getAxis(), rank) != normalizedAxis(split.getAxis(), rank))
    return {};
  for (auto [input, piece] : llvm::zip(getInputs(), split.getResults()))
    if (input != piece)
      return {};
  return split.getInput();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto input = tensorOf(adaptor.getInput());
  if (!input)
    return failure();
  int64_t axis = adaptor.getAxis();
  if (failed(normalizeAxis(loc, axis, input.getRank(), "split axis")))
    return failure();
  if (input.isDynamicDim(axis))
    return emitOptionalError(loc, "split axis ", axis, " must be static");
  int64_t total = 0;
  for (int64_t s : adaptor.getSizes()) {
    if (s <= 0)
      return emitOptionalError(loc, "split sizes must be positive, got ", s);
    total += s;
  }
  if (total != input.getDimSize(axis))
    return emitOptionalError(loc, "split sizes sum to ", total, " but axis ",
                             axis, " has size ", input.getDimSize(axis));
  for (int64_t s : adaptor.getSizes()) {
    SmallVector<int64_t> shape(input.getShape());
    shape[axis] = s;
    types.push_back(RankedTensorType::get(shape, input.getElementType()));
  }
  return success();
}

SizeExpr SplitOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  return sizes.dim(getInput(), axis); // the split axis is static
}

SizeExpr SliceOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  if (axis == normalizedAxis(getAxis(), getType().getRank()))
    return getLength() ? sizes.index(getLength()) : SizeExpr();
  return sizes.dim(getInput(), axis);
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto input = tensorOf(adaptor.getInput());
  if (!input)
    return failure();
  int64_t axis = adaptor.getAxis();
  if (failed(normalizeAxis(loc, axis, input.getRank(), "slice axis")))
    return failure();
  int64_t start = adaptor.getStart();
  std::optional<int64_t> size = adaptor.getSize();
  bool dynamic = static_cast<bool>(adaptor.getLength());
  if (dynamic == size.has_value())
    return emitOptionalError(loc, "needs exactly one of a `length` operand or a `size` attribute");
  bool offset = static_cast<bool>(adaptor.getOffset());
  if (start < 0 && !offset)
    return emitOptionalError(loc, "slice start ", start, " must be >= 0 (or have an offset)");
  if (size && *size < 0)
    return emitOptionalError(loc, "slice size ", *size, " must be >= 0");
  // A dynamic axis is checked at run time.
  int64_t dim = input.getDimSize(axis);
  if (!offset && !ShapedType::isDynamic(dim) && start > dim)
    return emitOptionalError(loc, "start ", start, " is outside axis ", axis,
                             " of size ", dim);
  if (size && !offset && !ShapedType::isDynamic(dim) && *size > dim - start)
    return emitOptionalError(loc, "slice [", start, ", ", start + *size,
                             ") is outside axis ", axis, " of size ", dim);
  SmallVector<int64_t> shape(input.getShape());
  shape[axis] = size ? *size : ShapedType::kDynamic;
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Masks, positions
//===----------------------------------------------------------------------===//

LogicalResult CausalMaskOp::verify() {
  if (getType().getRank() != 2)
    return emitOpError("result must be a rank-2 [query, key] mask, got ") << getType();
  return success();
}

SizeExpr CausalMaskOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  return sizes.index(axis == 0 ? getQueryLen() : getKeyLen());
}

LogicalResult CastOp::verify() {
  if (getInput().getType().getShape() != getType().getShape())
    return emitOpError("result shape must be the input's, got ") << getType();
  return success();
}

SizeExpr CastOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  return sizes.dim(getInput(), axis);
}

SizeExpr KeyPaddingMaskOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  return sizes.dim(getTokens(), axis);
}

LogicalResult KeyPaddingMaskOp::inferReturnTypes(MLIRContext *ctx,
                                                 std::optional<Location>,
                                                 Adaptor adaptor,
                                                 SmallVectorImpl<Type> &types) {
  auto tokens = tensorOf(adaptor.getTokens());
  if (!tokens)
    return failure();
  types.push_back(RankedTensorType::get(tokens.getShape(), IntegerType::get(ctx, 1)));
  return success();
}

LogicalResult PositionalEncodingOp::verify() {
  auto type = getType();
  if (type.getRank() != 2 || type.isDynamicDim(1))
    return emitOpError("result must be [length, D] with a static D, got ") << type;
  if (getHalves() && type.getDimSize(1) % 2 != 0)
    return emitOpError("halves needs an even D, got ") << type.getDimSize(1);
  return success();
}

SizeExpr PositionalEncodingOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  return axis == 0 ? sizes.index(getLength()) : SizeExpr();
}

LogicalResult RotaryOp::verify() {
  auto x = getInput().getType(), freq = getInvFreq().getType();
  int64_t headDim = getHeadDim();
  if (getType() != x)
    return emitOpError("result must have the input's type ") << x;
  if (x.getRank() < 2 || x.isDynamicDim(x.getRank() - 1))
    return emitOpError("input must be [..., S, N] with a static N, got ") << x;
  if (headDim <= 0 || x.getShape().back() % headDim != 0)
    return emitOpError("head_dim ") << headDim << " does not divide the input's last dimension "
                                    << x.getShape().back();
  if (freq.getRank() != 1 || freq.isDynamicDim(0) || 2 * freq.getDimSize(0) > headDim ||
      !freq.getElementType().isF32())
    return emitOpError("inv_freq must be f32 [R] with 2R <= head_dim, got ") << freq;
  return success();
}

SizeExpr RotaryOp::resultSize(unsigned, int64_t axis, SizeAnalysis &sizes) {
  return sizes.dim(getInput(), axis);
}

#define GET_OP_CLASSES
#include "ir/TransfuseOps.cpp.inc"
