// Tests for the run-time size rules (ir/Sizes.h): SizeExpr canonical forms
// and maxima, and SizeAnalysis following each op's shape rule back to the
// entry point's arguments (batch contract, reshape, transpose, matmul,
// concat sums, broadcasts, reductions, slices with a length, masks,
// positional tables, attention, linear, fused_elementwise bodies).
#include "ir/Sizes.h"
#include "ir/TransfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>

namespace {

using namespace mlir;
using namespace mlir::transfuse;

TEST(SizeExprTest, CanonicalSums) {
  SizeExpr a = SizeExpr::argument(0, 1), b = SizeExpr::argument(1, 1);
  EXPECT_EQ(SizeExpr::sum({a, SizeExpr::constant(2), SizeExpr::constant(3)}).str(), "(a0_1 + 5)");
  // Nested sums flatten; constants fold; a lone term is itself.
  SizeExpr ab = SizeExpr::sum({a, b});
  EXPECT_EQ(SizeExpr::sum({ab, SizeExpr::constant(1), SizeExpr::sum({a, SizeExpr::constant(2)})}).str(),
            "(a0_1 + a1_1 + a0_1 + 3)");
  EXPECT_EQ(SizeExpr::sum({a}), a);
  EXPECT_EQ(SizeExpr::sum({SizeExpr::constant(4), SizeExpr::constant(5)}), SizeExpr::constant(9));
  EXPECT_FALSE(SizeExpr::sum({a, SizeExpr()}).known());
  EXPECT_FALSE(SizeExpr::sum({SizeExpr::constant(std::numeric_limits<int64_t>::max()),
                              SizeExpr::constant(1)})
                   .known());
}

TEST(SizeExprTest, CanonicalBroadcasts) {
  SizeExpr a = SizeExpr::argument(0, 1), b = SizeExpr::argument(1, 1);
  EXPECT_EQ(SizeExpr::broadcast({a, a}), a);
  EXPECT_EQ(SizeExpr::broadcast({a, SizeExpr::constant(1)}), a);
  EXPECT_EQ(SizeExpr::broadcast({a, SizeExpr::constant(7)}), SizeExpr::constant(7));
  EXPECT_EQ(SizeExpr::broadcast({SizeExpr::constant(1)}), SizeExpr::constant(1));
  SizeExpr ab = SizeExpr::broadcast({a, b});
  EXPECT_EQ(ab.str(), "max(a0_1, a1_1)");
  EXPECT_EQ(SizeExpr::broadcast({ab, a, b}), ab);
  EXPECT_NE(ab, a);
  EXPECT_FALSE(SizeExpr::broadcast({a, SizeExpr()}).known());
}

TEST(SizeExprTest, UnknownEqualsNothing) {
  EXPECT_NE(SizeExpr(), SizeExpr());
  EXPECT_NE(SizeExpr::argument(0, 0), SizeExpr::argument(0, 1));
  EXPECT_NE(SizeExpr::argument(0, 1), SizeExpr::argument(1, 1));
  EXPECT_EQ(SizeExpr::argument(2, 1), SizeExpr::argument(2, 1));
}

TEST(SizeExprTest, MaximaAtTheCompiledBounds) {
  SizeExpr batch = SizeExpr::argument(0, 0), seq = SizeExpr::argument(0, 1);
  EXPECT_EQ(batch.maximum(8, 64), 8);
  EXPECT_EQ(seq.maximum(8, 64), 64);
  EXPECT_EQ(SizeExpr::sum({seq, seq, SizeExpr::constant(3)}).maximum(8, 64), 131);
  EXPECT_EQ(SizeExpr::broadcast({batch, seq}).maximum(8, 64), 64);
  EXPECT_EQ(SizeExpr().maximum(8, 64), 64);
  EXPECT_EQ(SizeExpr::sum({seq, seq}).maximum(8, std::numeric_limits<int64_t>::max()),
            std::numeric_limits<int64_t>::max());
}

/// Parses one function and names its values by their `transfuse.name`-free
/// SSA order: values(i) is the i-th op result in the body.
class SizeAnalysisTest : public ::testing::Test {
protected:
  SizeAnalysisTest() { ctx.loadDialect<TransfuseDialect, func::FuncDialect>(); }

  func::FuncOp parse(const std::string &text) {
    module = parseSourceString<ModuleOp>(text, &ctx);
    EXPECT_TRUE(module);
    func::FuncOp f = *module->getOps<func::FuncOp>().begin();
    named.clear();
    f.walk([&](Operation *op) {
      if (auto name = op->getAttrOfType<StringAttr>("test.name"))
        named[name.str()] = op->getResult(0);
    });
    return f;
  }
  /// dim(value named `name`, axis) as text.
  std::string size(const std::string &name, int64_t axis) {
    EXPECT_TRUE(named.count(name)) << name;
    return sizes.dim(named[name], axis).str();
  }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  std::map<std::string, Value> named;
  SizeAnalysis sizes;
};

TEST_F(SizeAnalysisTest, FollowsRulesToTheArguments) {
  parse(R"mlir(
func.func @f(%x: tensor<?x?x16xf32>, %ids: tensor<?x?xi32>, %y: tensor<?x?x16xf32>) {
  %t = transfuse.param "t" {init = #transfuse.init<zeros>} : tensor<100x16xf32>
  %e = transfuse.gather %t, %ids {test.name = "gather"} : (tensor<100x16xf32>, tensor<?x?xi32>) -> tensor<?x?x16xf32>
  %h = transfuse.reshape %x {test.name = "reshape"} : (tensor<?x?x16xf32>) -> tensor<?x?x4x4xf32>
  %p = transfuse.transpose %h {test.name = "transpose", permutation = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x4xf32>) -> tensor<?x4x?x4xf32>
  %s = transfuse.matmul %p, %p {test.name = "scores", transpose_rhs = true} : (tensor<?x4x?x4xf32>, tensor<?x4x?x4xf32>) -> tensor<?x4x?x?xf32>
  %c = transfuse.concat %x, %y, %x {test.name = "concat", axis = 1 : i64} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %a = transfuse.add %x, %y {test.name = "add"} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %r = transfuse.reduce_sum %c {test.name = "reduce", axes = array<i64: 0>} : (tensor<?x?x16xf32>) -> tensor<?x16xf32>
  %n = transfuse.dim %ids, 1 : tensor<?x?xi32>
  %l = transfuse.slice %t length %n {test.name = "slice", axis = 0 : i64, start = 0 : i64} : (tensor<100x16xf32>, index) -> tensor<?x16xf32>
  %m = transfuse.causal_mask %n, %n {test.name = "causal"} : tensor<?x?xi1>
  %k = transfuse.key_padding_mask %ids {test.name = "kpm", pad_id = 0 : i64} : (tensor<?x?xi32>) -> tensor<?x?xi1>
  %pe = transfuse.positional_encoding %n {test.name = "pe"} : tensor<?x16xf32>
  return
}
)mlir");
  // Every dynamic dimension 0 is argument 0's (the batch contract).
  EXPECT_EQ(size("gather", 0), "a0_0");
  EXPECT_EQ(size("gather", 1), "a1_1");
  EXPECT_EQ(size("gather", 2), "16");
  EXPECT_EQ(size("reshape", 1), "a0_1");
  EXPECT_EQ(size("transpose", 2), "a0_1");
  EXPECT_EQ(size("scores", 0), "a0_0");
  EXPECT_EQ(size("scores", 2), "a0_1");
  EXPECT_EQ(size("scores", 3), "a0_1");
  EXPECT_EQ(size("concat", 1), "(a0_1 + a2_1 + a0_1)");
  EXPECT_EQ(size("add", 1), "max(a0_1, a2_1)");
  EXPECT_EQ(size("reduce", 0), "(a0_1 + a2_1 + a0_1)");
  EXPECT_EQ(size("slice", 0), "a1_1");
  EXPECT_EQ(size("causal", 0), "a1_1");
  EXPECT_EQ(size("causal", 1), "a1_1");
  EXPECT_EQ(size("kpm", 1), "a1_1");
  EXPECT_EQ(size("pe", 0), "a1_1");
  // Maxima follow: a concat of three sequences reaches three maxima.
  EXPECT_EQ(sizes.maximum(named["concat"], 1, 8, 64), 192);
  EXPECT_EQ(sizes.maximum(named["gather"], 0, 8, 64), 8);
  // Proofs: the slice's length is the ids' length; the scores' rows and
  // columns are equal; the add's broadcast is neither of its inputs'.
  EXPECT_TRUE(sizes.equal(named["slice"], 0, named["kpm"], 1));
  EXPECT_TRUE(sizes.equal(named["scores"], 2, named["scores"], 3));
  EXPECT_FALSE(sizes.equal(named["add"], 1, named["gather"], 1));
}

TEST_F(SizeAnalysisTest, FusedOpsAndRegionArguments) {
  parse(R"mlir(
func.func @f(%q: tensor<?x2x?x8xf32>, %k: tensor<?x2x?x8xf32>, %x: tensor<?x?x8xf32>, %pe: tensor<?x8xf32>) {
  %w = transfuse.param "w" {init = #transfuse.init<zeros>} : tensor<8x8xf32>
  %o = transfuse.attention %q, %k, %k {test.name = "attention", scale = 1.0 : f64} : (tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x2x?x8xf32>
  %y = transfuse.linear %x, %w {test.name = "linear"} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r = transfuse.fused_elementwise %x, %pe {test.name = "fused"} : (tensor<?x?x8xf32>, tensor<?x8xf32>) -> tensor<?x?x8xf32> {
  ^bb0(%a: tensor<?x?x8xf32>, %b: tensor<?x8xf32>):
    %s = transfuse.add %a, %b {test.name = "inner"} : (tensor<?x?x8xf32>, tensor<?x8xf32>) -> tensor<?x?x8xf32>
    transfuse.yield %s : tensor<?x?x8xf32>
  }
  return
}
)mlir");
  EXPECT_EQ(size("attention", 0), "a0_0");
  EXPECT_EQ(size("attention", 2), "a0_2");
  EXPECT_EQ(size("linear", 1), "a2_1");
  // %pe's dimension 0 is an argument's dimension 0: the batch size (a0_0).
  EXPECT_EQ(size("fused", 1), "max(a2_1, a0_0)");
  // A body argument has its operand's sizes.
  EXPECT_EQ(size("inner", 1), "max(a2_1, a0_0)");
}

} // namespace
