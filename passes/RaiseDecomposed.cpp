//===- RaiseDecomposed.cpp - --transfuse-raise-decomposed -----------------===//
//
// An exported graph spells out in primitives what the dialect has as one op:
// GELU as 0.5·x·(1 + erf(x/√2)) or its tanh form, SiLU as x·sigmoid(x),
// LayerNorm and RMSNorm as means, powers, square roots and divisions, the
// causal mask as a slice of a constant triangle, rotary embeddings as
// products with cos/sin caches. These patterns find each form, whatever the
// association of its products and whichever side its operands are on, and
// replace it with the named op, so that the fusions (linear epilogues,
// add_layer_norm, attention) apply to imported graphs as to the builder's.
// Every rewrite computes the same function: constants match to 1e-6 (a
// float32 rounding of √2 or √(2/π) is 6e-8 off), rotary tables to 2e-6,
// and the one assumption about values is documented on RaiseCausalMask.
//
//===----------------------------------------------------------------------===//

#include "passes/PassDetail.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <limits>

namespace mlir::transfuse {
#define GEN_PASS_DEF_TRANSFUSERAISEDECOMPOSED
#include "passes/Passes.h.inc"
} // namespace mlir::transfuse

using namespace mlir;
using namespace mlir::transfuse;

namespace {

/// A constant as written in float32 (or float64) for `want`.
bool near(double value, double want) {
  return std::abs(value - want) <= 1e-6 * std::abs(want);
}

/// c · Π factors: a value flattened through mul, scale, division by a
/// constant and scalar constants (any association, either operand order).
struct Product {
  double coeff = 1.0;
  SmallVector<Value> factors;

  /// Whether the factors are exactly `want` (as a multiset).
  bool factorsAre(ArrayRef<Value> want) const {
    if (factors.size() != want.size())
      return false;
    SmallVector<Value> rest(factors);
    for (Value w : want) {
      auto it = llvm::find(rest, w);
      if (it == rest.end())
        return false;
      rest.erase(it);
    }
    return true;
  }
};

void flatten(Value v, Product &p, int depth = 0) {
  if (auto c = constantScalar(v)) {
    p.coeff *= *c;
    return;
  }
  Operation *def = v.getDefiningOp();
  if (def && depth < 8) {
    if (auto m = dyn_cast<MulOp>(def)) {
      flatten(m.getLhs(), p, depth + 1);
      flatten(m.getRhs(), p, depth + 1);
      return;
    }
    if (auto s = dyn_cast<ScaleOp>(def)) {
      p.coeff *= s.getFactor().convertToDouble();
      flatten(s.getInput(), p, depth + 1);
      return;
    }
    if (auto d = dyn_cast<DivOp>(def))
      if (auto c = constantScalar(d.getRhs()); c && *c != 0.0) {
        p.coeff /= *c;
        flatten(d.getLhs(), p, depth + 1);
        return;
      }
  }
  p.factors.push_back(v);
}

Product productOf(Value v) {
  Product p;
  flatten(v, p);
  return p;
}

/// `add` = x + c for a scalar constant c: x.
Value plusConstant(Value v, double c) {
  auto add = v.getDefiningOp<AddOp>();
  if (!add)
    return Value();
  if (auto k = constantScalar(add.getRhs()); k && *k == c)
    return add.getLhs();
  if (auto k = constantScalar(add.getLhs()); k && *k == c)
    return add.getRhs();
  return Value();
}

/// x³ as pow(x, 3) or x·x·x: x.
Value cubeOf(const Product &p) {
  if (p.factors.size() == 3 && llvm::all_equal(p.factors))
    return p.factors[0];
  if (p.factors.size() == 1)
    if (auto pw = p.factors[0].getDefiningOp<PowOp>())
      if (auto e = constantScalar(pw.getRhs()); e && *e == 3.0)
        return pw.getLhs();
  return Value();
}

/// Whether `t` (a tanh's input) is √(2/π)·(x + 0.044715·x³), as a product of
/// a sum or as the sum of the two products.
bool isGeluTanhArgument(Value t, Value x) {
  const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
  auto sumIs = [&](Value s, double scale) {
    auto add = s.getDefiningOp<AddOp>();
    if (!add)
      return false;
    for (auto [a, b] : {std::pair{add.getLhs(), add.getRhs()}, {add.getRhs(), add.getLhs()}}) {
      Product pa = productOf(a), pb = productOf(b);
      if (pa.factorsAre({x}) && near(pa.coeff, scale) && cubeOf(pb) == x &&
          near(pb.coeff, scale * c))
        return true;
    }
    return false;
  };
  Product p = productOf(t);
  if (p.factors.size() == 1 && near(p.coeff, k) && sumIs(p.factors[0], 1.0))
    return true;
  return sumIs(t, k);
}

/// 0.5·x·(1 + erf(x/√2)) -> gelu(x); 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
/// -> gelu(x) {approximate = tanh}; x·sigmoid(x) -> silu(x). Anchored on
/// the outermost product (a mul, scale or division by a constant).
struct RaiseActivation : RewritePattern {
  explicit RaiseActivation(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}
  LogicalResult matchAndRewrite(Operation *root, PatternRewriter &rw) const override {
    if (!isa<MulOp, ScaleOp, DivOp>(root))
      return failure();
    Product p = productOf(root->getResult(0));
    if (p.factors.size() != 2)
      return failure();
    for (auto [x, other] : {std::pair{p.factors[0], p.factors[1]}, {p.factors[1], p.factors[0]}}) {
      if (x.getType() != root->getResult(0).getType())
        continue;
      if (auto s = other.getDefiningOp<SigmoidOp>(); s && s.getInput() == x && p.coeff == 1.0) {
        rw.replaceOpWithNewOp<SiluOp>(root, x);
        return success();
      }
      Value inner = plusConstant(other, 1.0);
      if (!inner || !near(p.coeff, 0.5))
        continue;
      if (auto erf = inner.getDefiningOp<ErfOp>()) {
        Product q = productOf(erf.getInput());
        if (q.factorsAre({x}) && near(q.coeff, M_SQRT1_2)) {
          rw.replaceOpWithNewOp<GeluOp>(root, x, GeluApproximation::None);
          return success();
        }
      }
      if (auto tanh = inner.getDefiningOp<TanhOp>(); tanh && isGeluTanhArgument(tanh.getInput(), x)) {
        rw.replaceOpWithNewOp<GeluOp>(root, x, GeluApproximation::Tanh);
        return success();
      }
    }
    return failure();
  }
};

/// Whether `v` is reduce_mean(x) over the last axis, dimensions kept.
bool isLastAxisMean(Value v, Value x) {
  auto mean = v.getDefiningOp<ReduceMeanOp>();
  if (!mean || mean.getInput() != x || !mean.getKeepDims())
    return false;
  const int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  return rank >= 1 && mean.getAxes().size() == 1 &&
         (mean.getAxes()[0] == rank - 1 || mean.getAxes()[0] == -1);
}

/// y² as pow(y, 2) or y·y: y.
Value squareOf(Value v) {
  if (auto pw = v.getDefiningOp<PowOp>())
    if (auto e = constantScalar(pw.getRhs()); e && *e == 2.0)
      return pw.getLhs();
  if (auto m = v.getDefiningOp<MulOp>(); m && m.getLhs() == m.getRhs())
    return m.getLhs();
  return Value();
}

/// The only user of `v`, when it has one.
Operation *soleUser(Value v) { return v.hasOneUse() ? *v.getUsers().begin() : nullptr; }

/// [D] (or [1, ..., 1, D]) of static D: the affine weight of a norm over a
/// last dimension of D.
Value affineVector(PatternRewriter &rw, Location loc, Value w, int64_t d) {
  auto t = cast<RankedTensorType>(w.getType());
  if (t.getRank() < 1 || t.getShape().back() != d || t.getNumElements() != d)
    return Value();
  if (t.getRank() == 1)
    return w;
  return ReshapeOp::create(rw, loc, RankedTensorType::get({d}, t.getElementType()), w);
}

/// The normalization written out:
///   mean = reduce_mean(x); n = x - mean; var = reduce_mean(n²)    (LayerNorm)
///   n = x; var = reduce_mean(x²)                                   (RMSNorm)
///   y = n / sqrt(var + eps)  or  n · (1 / sqrt(var + eps))
///   z = y · gamma (+ beta)                                         (optional)
/// -> layer_norm(x, gamma, beta) over the last axis, `rms` for RMSNorm.
/// Anchored on the square root.
struct RaiseNorm : OpRewritePattern<SqrtOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SqrtOp sqrt, PatternRewriter &rw) const override {
    auto sum = sqrt.getInput().getDefiningOp<AddOp>();
    if (!sum)
      return failure();
    Value var;
    std::optional<double> eps;
    for (auto [a, b] : {std::pair{sum.getLhs(), sum.getRhs()}, {sum.getRhs(), sum.getLhs()}})
      if (auto c = constantScalar(b); c && *c >= 0.0 && a.getDefiningOp<ReduceMeanOp>()) {
        var = a;
        eps = c;
      }
    if (!var)
      return failure();
    Value n = squareOf(var.getDefiningOp<ReduceMeanOp>().getInput());
    if (!n || !isLastAxisMean(var, var.getDefiningOp<ReduceMeanOp>().getInput()))
      return failure();
    // n / sqrt, or n · (1 / sqrt).
    Value y;
    for (Operation *user : sqrt->getUsers()) {
      auto div = dyn_cast<DivOp>(user);
      if (!div || div.getRhs() != sqrt.getResult())
        continue;
      if (div.getLhs() == n && div.getType() == n.getType())
        y = div.getResult();
      else if (auto one = constantScalar(div.getLhs()); one && *one == 1.0)
        for (Operation *u : div->getUsers())
          if (auto m = dyn_cast<MulOp>(u); m && m.getType() == n.getType() &&
                                             ((m.getLhs() == n && m.getRhs() == div.getResult()) ||
                                              (m.getRhs() == n && m.getLhs() == div.getResult())))
            y = m.getResult();
      if (y)
        break;
    }
    if (!y)
      return failure();
    Value x = n;
    bool rms = true;
    if (auto sub = n.getDefiningOp<SubOp>(); sub && isLastAxisMean(sub.getRhs(), sub.getLhs())) {
      x = sub.getLhs();
      rms = false;
    }
    auto type = cast<RankedTensorType>(x.getType());
    const int64_t d = type.getShape().back();
    if (type != y.getType() || ShapedType::isDynamic(d))
      return failure();
    // The affine part: · gamma, then + beta (either operand order).
    Location loc = sqrt.getLoc();
    Value root = y, gamma, beta;
    auto otherOperand = [](Operation *op, Value v) {
      return op->getOperand(0) == v ? op->getOperand(1) : op->getOperand(0);
    };
    if (auto m = dyn_cast_or_null<MulOp>(soleUser(root)); m && m.getType() == type)
      if (Value g = affineVector(rw, loc, otherOperand(m, root), d)) {
        gamma = g;
        root = m.getResult();
        if (auto a = dyn_cast_or_null<AddOp>(soleUser(root)); a && a.getType() == type)
          if (Value bv = affineVector(rw, loc, otherOperand(a, root), d)) {
            beta = bv;
            root = a.getResult();
          }
      }
    if (!gamma)
      gamma = ConstantOp::create(rw, loc, DenseElementsAttr::get(
                                              RankedTensorType::get({d}, type.getElementType()),
                                              rw.getFloatAttr(type.getElementType(), 1.0)));
    auto norm = LayerNormOp::create(rw, loc, x, gamma, beta, rw.getI64IntegerAttr(type.getRank() - 1),
                                    rw.getF64FloatAttr(*eps), rms ? rw.getUnitAttr() : UnitAttr());
    rw.replaceOp(root.getDefiningOp(), norm.getResult());
    return success();
  }
};

/// [Sq, Sk] of a constant [1, ..., 1, P, P] boolean triangle sliced to
/// [0, Lq) and [0, Lk) on its last two axes (and perhaps reshaped): the
/// lengths, and whether the triangle keeps (j <= i) or masks (j > i).
struct SlicedTriangle {
  Value queryLen, keyLen;
  bool keeps = true;
};

std::optional<SlicedTriangle> slicedTriangle(Value cond) {
  if (auto r = cond.getDefiningOp<ReshapeOp>())
    cond = r.getInput();
  auto outer = cond.getDefiningOp<SliceOp>();
  auto inner = outer ? outer.getInput().getDefiningOp<SliceOp>() : SliceOp();
  auto c = inner ? inner.getInput().getDefiningOp<ConstantOp>() : ConstantOp();
  if (!c || outer.getOffset() || inner.getOffset() || outer.getStart() != 0 ||
      inner.getStart() != 0 || !outer.getLength() || !inner.getLength())
    return std::nullopt;
  auto t = cast<RankedTensorType>(c.getType());
  const int64_t rank = t.getRank();
  if (rank < 2 || !t.getElementType().isInteger(1) || !t.hasStaticShape())
    return std::nullopt;
  auto axis = [&](SliceOp s) { return s.getAxis() < 0 ? s.getAxis() + rank : s.getAxis(); };
  SliceOp rows = axis(inner) == rank - 2 ? inner : outer, cols = rows == inner ? outer : inner;
  if (axis(rows) != rank - 2 || axis(cols) != rank - 1)
    return std::nullopt;
  // At most 8192 positions (a splat is no triangle).
  const int64_t p = t.getDimSize(rank - 2);
  if (p < 2 || p > 8192 || t.getDimSize(rank - 1) != p || t.getNumElements() != p * p)
    return std::nullopt;
  auto values = dyn_cast<DenseIntElementsAttr>(c.getValue());
  if (!values || values.isSplat())
    return std::nullopt;
  bool lower = true, strictUpper = true;
  int64_t k = 0;
  for (bool bit : values.getValues<bool>()) {
    const int64_t i = k / p, j = k % p;
    lower &= bit == (j <= i);
    strictUpper &= bit == (j > i);
    ++k;
  }
  if (!lower && !strictUpper)
    return std::nullopt;
  return SlicedTriangle{rows.getLength(), cols.getLength(), lower};
}

/// select(tri, s, fill), tri a constant lower triangle sliced to the first
/// L rows and columns (GPT-2's causal buffer), or select(upper, fill, s)
/// with the strict upper triangle (masked_fill's form) -> select(causal_mask
/// (L, L), s, fill), which attention fusion takes as `causal`. Both slices
/// must have provably one length L: the triangle is then top-left and
/// bottom-right aligned at once, and no row is wholly masked. A finite fill
/// of -1e30 or less (finfo(float32).min) becomes -inf: with a key kept in
/// every row, exp(fill - max) is 0 in fp32 for any kept score above
/// -1e30 + 104, as exp(-inf) is.
struct RaiseCausalMask : OpRewritePattern<SelectOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SelectOp sel, PatternRewriter &rw) const override {
    auto tri = slicedTriangle(sel.getCond());
    if (!tri)
      return failure();
    SizeAnalysis sizes;
    SizeExpr len = sizes.index(tri->queryLen);
    if (!len.known() || len != sizes.index(tri->keyLen))
      return failure();
    Value scores = tri->keeps ? sel.getOnTrue() : sel.getOnFalse();
    Value fill = tri->keeps ? sel.getOnFalse() : sel.getOnTrue();
    if (auto f = constantScalar(fill); f && std::isfinite(*f) && *f <= -1e30) {
      auto ft = cast<RankedTensorType>(fill.getType());
      fill = ConstantOp::create(
          rw, sel.getLoc(),
          DenseElementsAttr::get(ft, rw.getFloatAttr(ft.getElementType(),
                                                     -std::numeric_limits<double>::infinity())));
    }
    Value causal = CausalMaskOp::create(
        rw, sel.getLoc(), RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                                                rw.getI1Type()),
        tri->queryLen, tri->queryLen);
    rw.replaceOpWithNewOp<SelectOp>(sel, sel.getType(), causal, scores, fill);
    return success();
  }
};

/// Whether `cat` joins two halves along the last axis of a static, even
/// size: the size.
std::optional<int64_t> halvesJoined(ConcatOp cat) {
  auto type = cat.getType();
  const int64_t rank = type.getRank(), d = type.getShape().back();
  if (cat.getInputs().size() != 2 || ShapedType::isDynamic(d) || d % 2 != 0 ||
      (cat.getAxis() != rank - 1 && cat.getAxis() != -1))
    return std::nullopt;
  return d;
}

/// x where `v` = x[..., start : start + half] (a static slice of the last
/// axis of x, which has the same rank); else null.
Value halfOf(Value v, int64_t start, int64_t half) {
  auto sl = v.getDefiningOp<SliceOp>();
  const int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
  if (!sl || sl.getOffset() || sl.getLength() || sl.getStart() != start ||
      (sl.getAxis() != rank - 1 && sl.getAxis() != -1) || sl.getType().getShape().back() != half)
    return Value();
  return sl.getInput();
}

/// x as rotate_half(x) = concat(-x[..., h:], x[..., :h]) writes it (static
/// slices of the last axis, the negation as a scale, mul or division by a
/// constant): x.
Value rotatedHalfOf(Value v) {
  auto cat = v.getDefiningOp<ConcatOp>();
  std::optional<int64_t> d = cat ? halvesJoined(cat) : std::nullopt;
  if (!d)
    return Value();
  Product neg = productOf(cat.getInputs()[0]);
  if (neg.coeff != -1.0 || neg.factors.size() != 1)
    return Value();
  Value x = halfOf(neg.factors[0], *d / 2, *d / 2);
  if (!x || halfOf(cat.getInputs()[1], 0, *d / 2) != x || x.getType() != v.getType())
    return Value();
  return x;
}

/// A constant table [P, D] sliced to its first rows (perhaps with leading
/// unit dimensions added): the table and the slice.
std::pair<DenseFPElementsAttr, SliceOp> slicedTable(Value v) {
  if (auto r = v.getDefiningOp<ReshapeOp>())
    v = r.getInput();
  auto slice = v.getDefiningOp<SliceOp>();
  auto c = slice ? slice.getInput().getDefiningOp<ConstantOp>() : ConstantOp();
  auto table = c ? dyn_cast<DenseFPElementsAttr>(c.getValue()) : DenseFPElementsAttr();
  if (!table || table.isSplat() || table.getNumElements() > (int64_t{1} << 22) ||
      slice.getOffset() || slice.getStart() != 0 || slice.getAxis() != 0 ||
      cast<RankedTensorType>(table.getType()).getRank() != 2)
    return {};
  return {table, slice};
}

/// The frequencies f [D/2] when cos and sin are the tables of rotary
/// embeddings, cos[p, j] = cos(fp32(p·f[j mod D/2])) and sin likewise (a
/// model's cos/sin caches: D columns, rotate-half's duplicated halves, or
/// D/2 with `halves`), within 2e-6; none otherwise. Each f is read off the
/// last row's angle (its turns counted from row 1's) and the float32
/// nearest to it is searched for the one that makes the tables.
std::optional<SmallVector<float>> rotaryFrequencies(DenseFPElementsAttr cosTable,
                                                    DenseFPElementsAttr sinTable, bool halves) {
  auto shape = cast<RankedTensorType>(cosTable.getType()).getShape();
  if (shape != cast<RankedTensorType>(sinTable.getType()).getShape() ||
      (!halves && shape[1] % 2 != 0) || shape[0] < 2)
    return std::nullopt;
  const int64_t rows = shape[0], d = shape[1], h = halves ? d : d / 2;
  SmallVector<float> c(cosTable.getValues<float>()), s(sinTable.getValues<float>());
  auto at = [&](const SmallVector<float> &t, int64_t p, int64_t j) { return (double)t[p * d + j]; };
  SmallVector<float> freqs;
  for (int64_t j = 0; j < h; ++j) {
    const double f1 = std::atan2(at(s, 1, j), at(c, 1, j));
    const int64_t last = rows - 1;
    const double turns = std::round((f1 * last - std::atan2(at(s, last, j), at(c, last, j))) /
                                    (2 * M_PI));
    const float estimate =
        (float)((std::atan2(at(s, last, j), at(c, last, j)) + 2 * M_PI * turns) / last);
    // The estimate and its float32 neighbours, 4 either side: the one whose
    // angles make the table.
    float f = estimate;
    for (int k = 0; k < 4; ++k)
      f = std::nextafter(f, -INFINITY);
    float best = f;
    double bestError = std::numeric_limits<double>::infinity();
    for (int k = 0; k <= 8; ++k, f = std::nextafter(f, INFINITY)) {
      double error = 0;
      for (int64_t p = 0; p < rows; ++p) {
        const float angle = (float)p * f;
        for (int64_t col : {j, halves ? j : j + h})
          error = std::max({error, std::abs(at(c, p, col) - std::cos((double)angle)),
                            std::abs(at(s, p, col) - std::sin((double)angle))});
      }
      if (error < bestError)
        best = f, bestError = error;
    }
    if (bestError > 2e-6)
      return std::nullopt;
    freqs.push_back(best);
  }
  return freqs;
}

/// Replaces `root` with rotary(x) when `cosv` and `sinv` are constant caches
/// (D columns, or D/2 with `halves`) sliced to x's first L rows, L provably
/// x's length (dimension -2: row s at position s), whose values are a
/// rotary table's (rotaryFrequencies).
LogicalResult rotaryOfTables(PatternRewriter &rw, Operation *root, Value x, Value cosv, Value sinv,
                             bool halves) {
  auto [cosTable, cosSlice] = slicedTable(cosv);
  auto [sinTable, sinSlice] = slicedTable(sinv);
  auto xt = cast<RankedTensorType>(x.getType());
  const int64_t d = xt.getShape().back();
  if (!cosTable || !sinTable || xt.getRank() < 2 || x.getType() != root->getResult(0).getType() ||
      cast<RankedTensorType>(cosTable.getType()).getDimSize(1) != (halves ? d / 2 : d))
    return failure();
  SizeAnalysis sizes;
  SizeExpr len = sizes.dim(x, xt.getRank() - 2);
  if (!len.known() || sizes.dim(cosSlice, 0) != len || sizes.dim(sinSlice, 0) != len)
    return failure();
  auto freqs = rotaryFrequencies(cosTable, sinTable, halves);
  if (!freqs)
    return failure();
  auto ft = RankedTensorType::get({(int64_t)freqs->size()}, rw.getF32Type());
  Value invFreq =
      ConstantOp::create(rw, root->getLoc(), DenseElementsAttr::get(ft, ArrayRef<float>(*freqs)));
  rw.replaceOpWithNewOp<RotaryOp>(root, xt, x, invFreq, Value(), rw.getI64IntegerAttr(d),
                                  UnitAttr());
  return success();
}

/// x·cos + rotate_half(x)·sin, cos and sin constant caches sliced to the
/// first L rows with L provably x's length (dimension -2), any operand order
/// -> rotary(x) with the frequencies the tables hold (rotaryFrequencies).
/// Hugging Face's apply_rotary_pos_emb over caches (Llama, GPT-NeoX, Qwen2
/// exports).
struct RaiseRotary : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rw) const override {
    Product a = productOf(add.getLhs()), b = productOf(add.getRhs());
    if (a.coeff != 1.0 || b.coeff != 1.0 || a.factors.size() != 2 || b.factors.size() != 2)
      return failure();
    for (auto [pc, ps] : {std::pair{&a, &b}, {&b, &a}})
      for (int i : {0, 1})
        for (int k : {0, 1}) {
          Value x = pc->factors[i], cosv = pc->factors[1 - i];
          Value rotated = ps->factors[k], sinv = ps->factors[1 - k];
          if (rotatedHalfOf(rotated) == x &&
              succeeded(rotaryOfTables(rw, add, x, cosv, sinv, /*halves=*/false)))
            return success();
        }
    return failure();
  }
};

/// concat(x1·cos - x2·sin, x2·cos + x1·sin) of x's halves x1 = x[..., :D/2]
/// and x2 = x[..., D/2:], cos and sin [P, D/2] caches sliced to x's first L
/// rows (ONNX RotaryEmbedding as the importer writes it, positions 0..L-1)
/// -> rotary(x).
struct RaiseRotaryHalves : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp cat, PatternRewriter &rw) const override {
    std::optional<int64_t> d = halvesJoined(cat);
    auto sub = cat.getInputs().size() == 2 ? cat.getInputs()[0].getDefiningOp<SubOp>() : SubOp();
    auto add = cat.getInputs().size() == 2 ? cat.getInputs()[1].getDefiningOp<AddOp>() : AddOp();
    if (!d || !sub || !add)
      return failure();
    // a·b where one factor is `x` and the other is returned.
    auto times = [](Value v, Value x) -> Value {
      auto m = v.getDefiningOp<MulOp>();
      if (!m)
        return Value();
      return m.getLhs() == x ? m.getRhs() : m.getRhs() == x ? m.getLhs() : Value();
    };
    auto m1 = sub.getLhs().getDefiningOp<MulOp>();
    if (!m1)
      return failure();
    for (Value x1 : {m1.getLhs(), m1.getRhs()}) {
      Value x = halfOf(x1, 0, *d / 2);
      if (!x || x.getType() != cat.getType())
        continue;
      auto x2s = llvm::filter_to_vector(x.getUsers(), [&](Operation *u) {
        return isa<SliceOp>(u) && halfOf(u->getResult(0), *d / 2, *d / 2) == x;
      });
      for (Operation *x2op : x2s) {
        Value x2 = x2op->getResult(0);
        Value c = times(sub.getLhs(), x1), sn = times(sub.getRhs(), x2);
        if (c && sn && times(add.getLhs(), x2) == c && times(add.getRhs(), x1) == sn &&
            succeeded(rotaryOfTables(rw, cat, x, c, sn, /*halves=*/true)))
          return success();
      }
    }
    return failure();
  }
};

/// rotary(transpose{0,2,1,3}(reshape x [B, S, H·D] -> [B, S, H, D])) ->
/// transpose(reshape(rotary(x))): the rotation is per head and per row, so
/// it applies before the heads are split as after, where the linear
/// epilogue fusion takes it into the Q/K projection (the builder's order).
struct RotaryBeforeHeadSplit : OpRewritePattern<RotaryOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RotaryOp op, PatternRewriter &rw) const override {
    auto t = op.getInput().getDefiningOp<TransposeOp>();
    auto r = t ? t.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
    if (!r || t.getPermutation() != ArrayRef<int64_t>{0, 2, 1, 3} || op.getInverse())
      return failure();
    auto xt = cast<RankedTensorType>(r.getInput().getType());
    auto rt = cast<RankedTensorType>(r.getType());
    if (xt.getRank() != 3 || rt.getRank() != 4 || rt.getDimSize(3) != op.getHeadDim() ||
        ShapedType::isDynamic(xt.getDimSize(2)) || ShapedType::isDynamic(rt.getDimSize(2)) ||
        xt.getDimSize(2) != rt.getDimSize(2) * rt.getDimSize(3))
      return failure();
    SizeAnalysis sizes;
    if (!sizes.equal(r.getInput(), 0, r, 0) || !sizes.equal(r.getInput(), 1, r, 1))
      return failure();
    Value rotated = RotaryOp::create(rw, op.getLoc(), xt, r.getInput(), op.getInvFreq(),
                                     op.getOffset(), op.getHeadDimAttr(), UnitAttr());
    Value heads = ReshapeOp::create(rw, op.getLoc(), rt, rotated);
    rw.replaceOpWithNewOp<TransposeOp>(op, op.getType(), heads, t.getPermutationAttr());
    return success();
  }
};

/// x + y where y [1, ..., 1, S, D] only broadcasts along leading unit
/// dimensions -> x + y as [S, D] (positions added to a batch of
/// embeddings): what a residual must be for add_layer_norm (the sum's
/// shape or its trailing dimensions). NumPy broadcasting adds the ones back.
struct DropLeadingUnitDims : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rw) const override {
    for (int i : {0, 1}) {
      Value y = add->getOperand(i), x = add->getOperand(1 - i);
      auto yt = cast<RankedTensorType>(y.getType());
      if (x.getType() != add.getType() || yt.getRank() < 2 || yt.getDimSize(0) != 1 ||
          add.getType().getDimSize(0) == 1)
        continue;
      ArrayRef<int64_t> shape = yt.getShape();
      while (shape.size() > 1 && shape.front() == 1)
        shape = shape.drop_front();
      Value trailing = ReshapeOp::create(rw, add.getLoc(),
                                         RankedTensorType::get(shape, yt.getElementType()), y);
      rw.modifyOpInPlace(add, [&] { add->setOperand(i, trailing); });
      return success();
    }
    return failure();
  }
};

struct RaiseDecomposedPass
    : mlir::transfuse::impl::TransfuseRaiseDecomposedBase<RaiseDecomposedPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseActivation, RaiseNorm, RaiseCausalMask, RaiseRotary, RaiseRotaryHalves,
                 RotaryBeforeHeadSplit, DropLeadingUnitDims>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
