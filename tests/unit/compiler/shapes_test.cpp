// Tests for shape rules: broadcastShapes (static, dynamic, rank extension,
// mismatch) and the result types that ops built through GraphBuilder and
// OpBuilder infer (matmul with transpose flags and batch broadcasting,
// layer_norm, split, slice, reduce with keep_dims, transpose, concat, select,
// gather, masks), plus verifier rejections of inconsistent result types.
#include "ir/TransfuseDialect.h"

#include "tests/unit/compiler/TestHelpers.h"

#include "mlir/IR/Diagnostics.h"

#include <gtest/gtest.h>

namespace {

using namespace mlir;
using namespace mlir::transfuse;
using transfuse_test::kDyn;

std::vector<int64_t> bcast(std::vector<int64_t> a, std::vector<int64_t> b, bool *ok = nullptr,
                           std::string *errorOut = nullptr) {
  SmallVector<int64_t> out;
  std::string error;
  LogicalResult r = broadcastShapes(a, b, out, error);
  if (ok)
    *ok = succeeded(r);
  if (errorOut)
    *errorOut = error;
  return std::vector<int64_t>(out.begin(), out.end());
}

using Shape = std::vector<int64_t>;

TEST(BroadcastShapesTest, StaticCases) {
  bool ok = false;
  EXPECT_EQ(bcast({2, 3}, {2, 3}, &ok), (Shape{2, 3}));
  EXPECT_TRUE(ok);
  EXPECT_EQ(bcast({2, 3}, {3}, &ok), (Shape{2, 3}));
  EXPECT_TRUE(ok);
  EXPECT_EQ(bcast({2, 1}, {1, 3}, &ok), (Shape{2, 3}));
  EXPECT_TRUE(ok);
  EXPECT_EQ(bcast({}, {4, 5}, &ok), (Shape{4, 5}));
  EXPECT_TRUE(ok);
  EXPECT_EQ(bcast({}, {}, &ok), (Shape{}));
  EXPECT_TRUE(ok);
  EXPECT_EQ(bcast({5, 1, 4}, {3, 1}, &ok), (Shape{5, 3, 4}));
  EXPECT_TRUE(ok);
}

TEST(BroadcastShapesTest, DynamicCases) {
  bool ok = false;
  // ? vs 1 stays dynamic, both ways.
  EXPECT_EQ(bcast({kDyn}, {1}, &ok), (Shape{kDyn}));
  EXPECT_TRUE(ok);
  EXPECT_EQ(bcast({1}, {kDyn}, &ok), (Shape{kDyn}));
  EXPECT_TRUE(ok);
  // ? vs N > 1 takes N, both ways.
  EXPECT_EQ(bcast({kDyn}, {7}, &ok), (Shape{7}));
  EXPECT_TRUE(ok);
  EXPECT_EQ(bcast({7}, {kDyn}, &ok), (Shape{7}));
  EXPECT_TRUE(ok);
  // ? vs ? stays dynamic.
  EXPECT_EQ(bcast({kDyn}, {kDyn}, &ok), (Shape{kDyn}));
  EXPECT_TRUE(ok);
  // Rank extension: missing leading dimensions count as 1.
  EXPECT_EQ(bcast({kDyn, 8, kDyn, kDyn}, {kDyn}, &ok), (Shape{kDyn, 8, kDyn, kDyn}));
  EXPECT_TRUE(ok);
  EXPECT_EQ(bcast({kDyn, 1, 1, kDyn}, {kDyn, 8, kDyn, kDyn}, &ok),
            (Shape{kDyn, 8, kDyn, kDyn}));
  EXPECT_TRUE(ok);
  EXPECT_EQ(bcast({kDyn, kDyn}, {kDyn, 1, 1, kDyn}, &ok), (Shape{kDyn, 1, kDyn, kDyn}));
  EXPECT_TRUE(ok);
  EXPECT_EQ(bcast({kDyn, kDyn, 512}, {512}, &ok), (Shape{kDyn, kDyn, 512}));
  EXPECT_TRUE(ok);
  EXPECT_EQ(bcast({3, kDyn}, {kDyn, 1, 5}, &ok), (Shape{kDyn, 3, 5}));
  EXPECT_TRUE(ok);
}

TEST(BroadcastShapesTest, StaticMismatchIsAnError) {
  bool ok = true;
  std::string error;
  bcast({2, 3}, {4, 3}, &ok, &error);
  EXPECT_FALSE(ok);
  EXPECT_EQ(error, "dimension 0 of the broadcast result: 2 vs 4");
  ok = true;
  bcast({kDyn, 3}, {5, 2}, &ok, &error);
  EXPECT_FALSE(ok);
  EXPECT_EQ(error, "dimension 1 of the broadcast result: 3 vs 2");
  ok = true;
  // Rank extension shifts the reported dimension to the result's.
  bcast({6, 2, 3}, {4}, &ok, &error);
  EXPECT_FALSE(ok);
  EXPECT_EQ(error, "dimension 2 of the broadcast result: 3 vs 4");
}

/// Builds ops inside a function with arguments of the given types.
class ShapeInferenceTest : public ::testing::Test {
protected:
  ShapeInferenceTest() : b(&ctx) {
    ctx.loadDialect<TransfuseDialect, func::FuncDialect>();
    module = ModuleOp::create(UnknownLoc::get(&ctx));
  }

  /// Adds a function `name(args)` and points the builder into it.
  SmallVector<Value> args(ArrayRef<Type> types) {
    b.setInsertionPointToEnd(module->getBody());
    auto func = func::FuncOp::create(b, b.getUnknownLoc(), "f" + std::to_string(count++),
                                     b.getFunctionType(types, {}));
    Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);
    return SmallVector<Value>(entry->getArguments().begin(), entry->getArguments().end());
  }

  RankedTensorType f32(Shape shape) { return RankedTensorType::get(shape, b.getF32Type()); }
  RankedTensorType i32(Shape shape) { return RankedTensorType::get(shape, b.getI32Type()); }
  RankedTensorType i1(Shape shape) { return RankedTensorType::get(shape, b.getI1Type()); }
  static Shape shapeOf(Value v) {
    auto s = cast<RankedTensorType>(v.getType()).getShape();
    return Shape(s.begin(), s.end());
  }

  /// Verifies `op`, returning the diagnostics it emits ("" when it verifies).
  std::string verifyErrors(Operation *op) {
    std::string text;
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
      text += d.str() + "\n";
      return success();
    });
    if (succeeded(verify(op)))
      return "";
    return text.empty() ? "failed" : text;
  }

  MLIRContext ctx;
  OpBuilder b;
  OwningOpRef<ModuleOp> module;
  int count = 0;
  Location loc() { return b.getUnknownLoc(); }
};

TEST_F(ShapeInferenceTest, MatmulTransposeFlagsAndBatchBroadcast) {
  auto a = args({f32({kDyn, kDyn, 64}), f32({128, 64}), f32({kDyn, 4, 8}), f32({4, 6}),
                 f32({2, 1, 8, 4}), f32({3, 4, 5}), f32({kDyn, 8, kDyn, 16}),
                 f32({kDyn, 8, kDyn, 16}), f32({6, 4}), f32({5, 6})});
  GraphBuilder g(b, loc());
  // Linear: x [B, S, 64] · Wᵀ with W [128, 64].
  EXPECT_EQ(shapeOf(g.matmul(a[0], a[1], false, true)), (Shape{kDyn, kDyn, 128}));
  EXPECT_EQ(shapeOf(g.linear(a[0], a[1], Value())), (Shape{kDyn, kDyn, 128}));
  // transpose_lhs: [?, 4, 8] read as [?, 8, 4] (M = 8, K = 4).
  EXPECT_EQ(shapeOf(g.matmul(a[2], a[3], true, false)), (Shape{kDyn, 8, 6}));
  // Batch [2, 1] against [3] broadcasts to [2, 3].
  EXPECT_EQ(shapeOf(g.matmul(a[4], a[5])), (Shape{2, 3, 8, 5}));
  // Attention scores: q · kᵀ over [B, H, S, dh].
  EXPECT_EQ(shapeOf(g.matmul(a[6], a[7], false, true)), (Shape{kDyn, 8, kDyn, kDyn}));
  // Both transposed: [6, 4]ᵀ is [4, 6]; [5, 6]ᵀ is [6, 5].
  EXPECT_EQ(shapeOf(g.matmul(a[8], a[9], true, true)), (Shape{4, 5}));
}

TEST_F(ShapeInferenceTest, MatmulRejectsMismatchedContraction) {
  auto a = args({f32({3, 4}), f32({5, 6})});
  // Give it a result type: a builder that infers would assert on failure.
  auto op = MatmulOp::create(b, loc(), f32({3, 6}), a[0], a[1], false, false);
  std::string errors = verifyErrors(op);
  EXPECT_NE(errors, "");
  EXPECT_TRUE(transfuse_test::contains(errors, "contraction sizes differ")) << errors;
}

TEST_F(ShapeInferenceTest, ResultTypeMustMatchInference) {
  auto a = args({f32({2, 3}), f32({3})});
  auto op = AddOp::create(b, loc(), f32({2, 4}), a[0], a[1]);
  EXPECT_NE(verifyErrors(op), "");
  auto good = AddOp::create(b, loc(), a[0], a[1]);
  EXPECT_EQ(shapeOf(good), (Shape{2, 3}));
  EXPECT_EQ(verifyErrors(good), "");
}

TEST_F(ShapeInferenceTest, ElementwiseAndSelectBroadcast) {
  auto a = args({f32({kDyn, kDyn, 16}), f32({16}), i1({kDyn, 1, 1, kDyn}),
                 f32({kDyn, 8, kDyn, kDyn}), f32({}), f32({kDyn, 1})});
  GraphBuilder g(b, loc());
  EXPECT_EQ(shapeOf(g.add(a[0], a[1])), (Shape{kDyn, kDyn, 16}));
  EXPECT_EQ(shapeOf(g.mul(a[5], a[1])), (Shape{kDyn, 16}));
  Value s = g.select(a[2], a[3], a[4]);
  EXPECT_EQ(shapeOf(s), (Shape{kDyn, 8, kDyn, kDyn}));
  EXPECT_TRUE(cast<RankedTensorType>(s.getType()).getElementType().isF32());
  Value ninf = g.scalar(-1.0);
  EXPECT_EQ(shapeOf(ninf), (Shape{}));
  EXPECT_EQ(shapeOf(g.scale(a[0], 0.5)), (Shape{kDyn, kDyn, 16}));
  EXPECT_EQ(shapeOf(g.activation(a[0], "gelu_tanh")), (Shape{kDyn, kDyn, 16}));
  EXPECT_EQ(shapeOf(g.softmax(a[3], 3)), (Shape{kDyn, 8, kDyn, kDyn}));
}

TEST_F(ShapeInferenceTest, LayerNorm) {
  auto a = args({f32({kDyn, kDyn, 16}), f32({16}), f32({16}), f32({kDyn, 2, 3}),
                 f32({2, 3}), f32({2, 3})});
  GraphBuilder g(b, loc());
  EXPECT_EQ(shapeOf(g.layerNorm(a[0], a[1], a[2], 1e-5)), (Shape{kDyn, kDyn, 16}));
  auto ln = LayerNormOp::create(b, loc(), a[3], a[4], a[5], b.getI64IntegerAttr(1),
                                b.getF64FloatAttr(1e-5));
  EXPECT_EQ(shapeOf(ln), (Shape{kDyn, 2, 3}));
  // The named-params helper creates gamma/beta of the last dimension.
  Value y = g.layerNorm(a[0], "enc.norm", 1e-6);
  EXPECT_EQ(shapeOf(y), (Shape{kDyn, kDyn, 16}));
  auto op = cast<LayerNormOp>(y.getDefiningOp());
  EXPECT_EQ(op.getAxis(), 2);
  EXPECT_DOUBLE_EQ(op.getEpsilon().convertToDouble(), 1e-6);
  auto gamma = op.getGamma().getDefiningOp<ParamOp>();
  ASSERT_TRUE(gamma);
  EXPECT_EQ(gamma.getName(), "enc.norm.weight");
  EXPECT_EQ(gamma.getInit(), InitKind::Ones);
  EXPECT_EQ(shapeOf(gamma), (Shape{16}));
  auto beta = op.getBeta().getDefiningOp<ParamOp>();
  ASSERT_TRUE(beta);
  EXPECT_EQ(beta.getName(), "enc.norm.bias");
  EXPECT_EQ(beta.getInit(), InitKind::Zeros);
}

TEST_F(ShapeInferenceTest, LayerNormRejectsWrongGamma) {
  auto a = args({f32({kDyn, 16}), f32({8}), f32({16})});
  auto op = LayerNormOp::create(b, loc(), f32({kDyn, 16}), a[0], a[1], a[2],
                                b.getI64IntegerAttr(1), b.getF64FloatAttr(1e-5));
  std::string errors = verifyErrors(op);
  EXPECT_TRUE(transfuse_test::contains(errors, "gamma has shape 8")) << errors;
}

TEST_F(ShapeInferenceTest, Split) {
  auto a = args({f32({1536, 512}), f32({kDyn, 6}), f32({12})});
  GraphBuilder g(b, loc());
  auto qkv = g.split(a[0], 0, {512, 512, 512});
  ASSERT_EQ(qkv.size(), 3u);
  for (Value v : qkv)
    EXPECT_EQ(shapeOf(v), (Shape{512, 512}));
  auto cols = g.split(a[1], 1, {2, 4});
  ASSERT_EQ(cols.size(), 2u);
  EXPECT_EQ(shapeOf(cols[0]), (Shape{kDyn, 2}));
  EXPECT_EQ(shapeOf(cols[1]), (Shape{kDyn, 4}));
  auto neg = g.split(a[1], -1, {1, 5});
  EXPECT_EQ(shapeOf(neg[1]), (Shape{kDyn, 5}));
  auto v = g.split(a[2], 0, {3, 9});
  EXPECT_EQ(shapeOf(v[0]), (Shape{3}));
  EXPECT_EQ(shapeOf(v[1]), (Shape{9}));
}

TEST_F(ShapeInferenceTest, SliceStaticAndDynamicLength) {
  auto a = args({f32({1024, 768}), i32({kDyn, kDyn}), f32({kDyn, 10})});
  GraphBuilder g(b, loc());
  Value t = g.dim(a[1], 1);
  EXPECT_TRUE(t.getType().isIndex());
  EXPECT_EQ(shapeOf(g.sliceLeading(a[0], 0, t)), (Shape{kDyn, 768}));
  auto s = SliceOp::create(b, loc(), a[2], Value(), Value(), 1, 2, b.getI64IntegerAttr(5));
  EXPECT_EQ(shapeOf(s), (Shape{kDyn, 5}));
  auto d = SliceOp::create(b, loc(), a[2], Value(), t, 1, 3, IntegerAttr());
  EXPECT_EQ(shapeOf(d), (Shape{kDyn, kDyn}));
}

TEST_F(ShapeInferenceTest, ReduceWithAndWithoutKeepDims) {
  auto a = args({f32({2, kDyn, 4})});
  EXPECT_EQ(shapeOf(ReduceSumOp::create(b, loc(), a[0], ArrayRef<int64_t>{1}, true)),
            (Shape{2, 1, 4}));
  EXPECT_EQ(shapeOf(ReduceSumOp::create(b, loc(), a[0], ArrayRef<int64_t>{1}, false)),
            (Shape{2, 4}));
  EXPECT_EQ(shapeOf(ReduceMeanOp::create(b, loc(), a[0], ArrayRef<int64_t>{-1}, false)),
            (Shape{2, kDyn}));
  EXPECT_EQ(shapeOf(ReduceMaxOp::create(b, loc(), a[0], ArrayRef<int64_t>{0, 2}, true)),
            (Shape{1, kDyn, 1}));
  EXPECT_EQ(shapeOf(ReduceMaxOp::create(b, loc(), a[0], ArrayRef<int64_t>{0, 1, 2}, false)),
            (Shape{}));
}

TEST_F(ShapeInferenceTest, TransposeReshapeConcatGatherMasks) {
  auto a = args({f32({kDyn, 3, kDyn, 5}), f32({kDyn, kDyn, 512}), f32({2, kDyn}),
                 f32({2, 3}), f32({kDyn, 3}), f32({1000, 64}), i32({kDyn, kDyn})});
  GraphBuilder g(b, loc());
  EXPECT_EQ(shapeOf(g.transpose(a[0], {0, 2, 1, 3})), (Shape{kDyn, kDyn, 3, 5}));
  EXPECT_EQ(shapeOf(g.transpose(a[0], {3, 1, 0, 2})), (Shape{5, 3, kDyn, kDyn}));
  EXPECT_EQ(shapeOf(g.reshape(a[1], {kDyn, kDyn, 8, 64})), (Shape{kDyn, kDyn, 8, 64}));
  // Concat: a dynamic size along the axis makes the result dynamic; a
  // dynamic size elsewhere takes the static size of another input.
  EXPECT_EQ(shapeOf(ConcatOp::create(b, loc(), ValueRange{a[2], a[3]}, 1)), (Shape{2, kDyn}));
  EXPECT_EQ(shapeOf(ConcatOp::create(b, loc(), ValueRange{a[3], a[3]}, 0)), (Shape{4, 3}));
  EXPECT_EQ(shapeOf(ConcatOp::create(b, loc(), ValueRange{a[4], a[3]}, 1)), (Shape{2, 6}));
  EXPECT_EQ(shapeOf(g.gather(a[5], a[6])), (Shape{kDyn, kDyn, 64}));
  Value kpm = g.keyPaddingMask(a[6], 1);
  EXPECT_EQ(shapeOf(kpm), (Shape{kDyn, 1, 1, kDyn}));
  EXPECT_TRUE(cast<RankedTensorType>(kpm.getType()).getElementType().isInteger(1));
  Value t = g.dim(a[6], 1);
  EXPECT_EQ(shapeOf(g.causalMask(t, t)), (Shape{kDyn, kDyn}));
  EXPECT_EQ(shapeOf(g.positionalEncoding(t, 64)), (Shape{kDyn, 64}));
}

TEST_F(ShapeInferenceTest, MultiHeadAttentionKeepsQueryShape) {
  auto a = args({f32({kDyn, kDyn, 16}), f32({kDyn, kDyn, 16}), i32({kDyn, kDyn})});
  GraphBuilder g(b, loc());
  AttentionWeights w;
  w.wq = g.param("wq", {16, 16}, "xavier_uniform");
  w.wk = g.param("wk", {16, 16}, "xavier_uniform");
  w.wv = g.param("wv", {16, 16}, "xavier_uniform");
  w.wo = g.param("wo", {16, 16}, "xavier_uniform");
  w.bq = g.param("bq", {16}, "zeros");
  w.bk = g.param("bk", {16}, "zeros");
  w.bv = g.param("bv", {16}, "zeros");
  w.bo = g.param("bo", {16}, "zeros");
  Value mask = g.keyPaddingMask(a[2], 0);
  Value y = g.multiHeadAttention(a[0], a[1], w, 4, {mask}, 0.0);
  EXPECT_EQ(shapeOf(y), (Shape{kDyn, kDyn, 16}));
  // Requesting a param twice returns the same value.
  EXPECT_EQ(g.param("wq", {16, 16}, "xavier_uniform"), w.wq);
  func::ReturnOp::create(b, loc());
  EXPECT_EQ(verifyErrors(*module), "");
}

} // namespace
