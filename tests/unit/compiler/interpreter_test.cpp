// Tests for the reference interpreter (codegen/reference/Interpreter.h), one
// op at a time on small hand-computed examples: each test builds a tiny
// function with OpBuilder/GraphBuilder and runs it with f64 outputs.
#include "codegen/reference/Interpreter.h"

#include "runtime/Philox.h"

#include "tests/unit/compiler/TestHelpers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace {

using namespace mlir;
using namespace mlir::transfuse;
using namespace transfuse_test;

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Runs `f` and returns output `out0` (failing the test on an error).
rt::Tensor runOne(TinyFunc &f, const TensorMap &inputs, const std::string &name = "out0") {
  auto out = f.run(inputs);
  if (!out) {
    ADD_FAILURE() << llvm::toString(out.takeError());
    return rt::Tensor();
  }
  auto it = out->find(name);
  if (it == out->end()) {
    ADD_FAILURE() << "no output " << name;
    return rt::Tensor();
  }
  return it->second;
}

void expectValues(const rt::Tensor &t, std::vector<int64_t> shape,
                  const std::vector<double> &expected, double tol = 0.0) {
  EXPECT_EQ(t.shape, shape);
  std::vector<double> got = values(t);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (tol == 0.0)
      EXPECT_EQ(got[i], expected[i]) << "element " << i;
    else
      EXPECT_NEAR(got[i], expected[i], tol) << "element " << i;
  }
}

std::vector<double> iota(int64_t n, double start = 0.0, double step = 1.0) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(start + step * (double)i);
  return v;
}

TEST(InterpreterTest, FloatOutputsAreF64) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"x", f.t({2}, f.f32())}}, [&](GraphBuilder &g, ArrayRef<Value> a) {
    return SmallVector<Value>{g.scale(a[0], 1.0 / 3.0)};
  }));
  rt::Tensor out = runOne(f, {{"x", f32Tensor({2}, {1.0, 2.0})}});
  EXPECT_EQ(out.dtype, rt::DType::F64);
  expectValues(out, {2}, {1.0 / 3.0, 2.0 / 3.0});
  // Without f64Outputs the declared dtype (F32) comes back.
  auto declared = reference::run(f.func, {}, {{"x", f32Tensor({2}, {1.0, 2.0})}}, false);
  ASSERT_TRUE(!!declared) << llvm::toString(declared.takeError());
  EXPECT_EQ(declared->at("out0").dtype, rt::DType::F32);
  EXPECT_EQ(declared->at("out0").data<float>()[0], (float)(1.0 / 3.0));
}

TEST(InterpreterTest, ElementwiseWithBroadcasting) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"x", f.t({2, 3}, f.f32())}, {"y", f.t({3}, f.f32())},
                       {"z", f.t({2, 1}, f.f32())}},
                      [&](GraphBuilder &g, ArrayRef<Value> a) {
                        OpBuilder &b = g.builder();
                        Location l = g.location();
                        return SmallVector<Value>{
                            g.add(a[0], a[1]), SubOp::create(b, l, a[0], a[2]),
                            g.mul(a[2], a[1]), DivOp::create(b, l, a[0], a[1]),
                            g.activation(a[0], "relu"), ExpOp::create(b, l, a[2]),
                            TanhOp::create(b, l, a[2])};
                      }));
  TensorMap in = {{"x", f32Tensor({2, 3}, {1, -2, 3, -4, 5, -6})},
                  {"y", f32Tensor({3}, {10, 20, 40})},
                  {"z", f32Tensor({2, 1}, {0.5, -1})}};
  auto out = f.run(in);
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  expectValues(out->at("out0"), {2, 3}, {11, 18, 43, 6, 25, 34});
  expectValues(out->at("out1"), {2, 3}, {0.5, -2.5, 2.5, -3, 6, -5});
  expectValues(out->at("out2"), {2, 3}, {5, 10, 20, -10, -20, -40});
  expectValues(out->at("out3"), {2, 3}, {0.1, -0.1, 0.075, -0.4, 0.25, -0.15}, 1e-15);
  expectValues(out->at("out4"), {2, 3}, {1, 0, 3, 0, 5, 0});
  expectValues(out->at("out5"), {2, 1}, {std::exp(0.5), std::exp(-1.0)});
  expectValues(out->at("out6"), {2, 1}, {std::tanh(0.5), std::tanh(-1.0)});
}

TEST(InterpreterTest, SoftmaxAllMaskedRowIsZero) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"x", f.t({3, 3}, f.f64())}}, [&](GraphBuilder &g, ArrayRef<Value> a) {
    return SmallVector<Value>{g.softmax(a[0], 1)};
  }));
  rt::Tensor x = rt::Tensor::zeros(rt::DType::F64, {3, 3});
  double in[9] = {1, 2, 3, -kInf, -kInf, -kInf, 0, -kInf, 0};
  std::copy(in, in + 9, x.data<double>());
  auto out = f.run({{"x", x}});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  double s = std::exp(-2.0) + std::exp(-1.0) + 1.0;
  std::vector<double> expected = {std::exp(-2.0) / s, std::exp(-1.0) / s, 1.0 / s, 0, 0, 0,
                                  0.5, 0, 0.5};
  const rt::Tensor &t = out->at("out0");
  expectValues(t, {3, 3}, expected, 1e-15);
  for (double v : values(t))
    EXPECT_FALSE(std::isnan(v));
}

TEST(InterpreterTest, SoftmaxOverAxisZero) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"x", f.t({2, 2}, f.f32())}}, [&](GraphBuilder &g, ArrayRef<Value> a) {
    return SmallVector<Value>{g.softmax(a[0], 0)};
  }));
  rt::Tensor out = runOne(f, {{"x", f32Tensor({2, 2}, {0, 1, 0, 3})}});
  double e = 1.0 / (1.0 + std::exp(2.0));
  expectValues(out, {2, 2}, {0.5, e, 0.5, 1.0 - e}, 1e-15);
}

TEST(InterpreterTest, CausalMaskBottomRightAligned) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"q", f.t({kDyn, kDyn}, f.i32())}, {"k", f.t({kDyn, kDyn}, f.i32())}},
                      [&](GraphBuilder &g, ArrayRef<Value> a) {
                        return SmallVector<Value>{g.causalMask(g.dim(a[0], 1), g.dim(a[1], 1))};
                      }));
  // Query length 2 against key length 5: query i sees keys j <= i + 3.
  rt::Tensor out = runOne(f, {{"q", i32Tensor({1, 2}, {0, 0})},
                              {"k", i32Tensor({1, 5}, {0, 0, 0, 0, 0})}});
  EXPECT_EQ(out.dtype, rt::DType::Bool);
  expectValues(out, {2, 5}, {1, 1, 1, 1, 0,  //
                             1, 1, 1, 1, 1});
  // Equal lengths: the lower triangle.
  out = runOne(f, {{"q", i32Tensor({1, 3}, {0, 0, 0})}, {"k", i32Tensor({1, 3}, {0, 0, 0})}});
  expectValues(out, {3, 3}, {1, 0, 0,  //
                             1, 1, 0,  //
                             1, 1, 1});
  // One query (decoding with a cache) sees every key.
  out = runOne(f, {{"q", i32Tensor({1, 1}, {0})}, {"k", i32Tensor({1, 4}, {0, 0, 0, 0})}});
  expectValues(out, {1, 4}, {1, 1, 1, 1});
}

TEST(InterpreterTest, KeyPaddingMask) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"tokens", f.t({kDyn, kDyn}, f.i32())}},
                      [&](GraphBuilder &g, ArrayRef<Value> a) {
                        Value raw = KeyPaddingMaskOp::create(g.builder(), g.location(), a[0], 1);
                        return SmallVector<Value>{raw, g.keyPaddingMask(a[0], 1)};
                      }));
  auto out = f.run({{"tokens", i32Tensor({2, 3}, {5, 1, 1, 1, 2, 3})}});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  expectValues(out->at("out0"), {2, 3}, {1, 0, 0, 0, 1, 1});
  expectValues(out->at("out1"), {2, 1, 1, 3}, {1, 0, 0, 0, 1, 1});
}

TEST(InterpreterTest, SelectWithBroadcasting) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"c", f.t({2, 1}, f.i1())}, {"m", f.t({3}, f.i1())},
                       {"x", f.t({2, 3}, f.f32())}},
                      [&](GraphBuilder &g, ArrayRef<Value> a) {
                        Value minus = g.scalar(-1.0);
                        return SmallVector<Value>{g.select(a[0], a[2], minus),
                                                  g.select(a[1], a[2], minus),
                                                  g.select(a[1], minus, a[2])};
                      }));
  auto out = f.run({{"c", boolTensor({2, 1}, {1, 0})},
                    {"m", boolTensor({3}, {0, 1, 1})},
                    {"x", f32Tensor({2, 3}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  expectValues(out->at("out0"), {2, 3}, {1, 2, 3, -1, -1, -1});
  expectValues(out->at("out1"), {2, 3}, {-1, 2, 3, -1, 5, 6});
  expectValues(out->at("out2"), {2, 3}, {1, -1, -1, 4, -1, -1});
}

TEST(InterpreterTest, SelectWithMinusInfinityThenSoftmax) {
  // The attention pattern: select(mask, scores, -inf) then softmax.
  TinyFunc f;
  ASSERT_TRUE(f.build({{"m", f.t({2, 3}, f.i1())}, {"x", f.t({2, 3}, f.f32())}},
                      [&](GraphBuilder &g, ArrayRef<Value> a) {
                        Value ninf = g.scalar(-kInf);
                        return SmallVector<Value>{g.softmax(g.select(a[0], a[1], ninf), 1)};
                      }));
  rt::Tensor out = runOne(f, {{"m", boolTensor({2, 3}, {1, 1, 0, 0, 0, 0})},
                              {"x", f32Tensor({2, 3}, {0, 0, 5, 1, 2, 3})}});
  expectValues(out, {2, 3}, {0.5, 0.5, 0, 0, 0, 0});
}

double layerNormValue(const std::vector<double> &row, size_t i, double g, double b, double eps) {
  double mean = 0, var = 0;
  for (double v : row)
    mean += v;
  mean /= row.size();
  for (double v : row)
    var += (v - mean) * (v - mean);
  var /= row.size();
  return (row[i] - mean) / std::sqrt(var + eps) * g + b;
}

TEST(InterpreterTest, LayerNormMatchesTheFormula) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"x", f.t({2, 4}, f.f32())}, {"gamma", f.t({4}, f.f32())},
                       {"beta", f.t({4}, f.f32())}},
                      [&](GraphBuilder &g, ArrayRef<Value> a) {
                        return SmallVector<Value>{g.layerNorm(a[0], a[1], a[2], 1e-5)};
                      }));
  std::vector<double> x = {1, 2, 3, 4, -1, 0, 0, 5}, gamma = {1, 2, 0.5, -1},
                      beta = {0, 1, 0, 0.25};
  rt::Tensor out = runOne(f, {{"x", f32Tensor({2, 4}, x)},
                              {"gamma", f32Tensor({4}, gamma)},
                              {"beta", f32Tensor({4}, beta)}});
  std::vector<double> expected;
  for (int r = 0; r < 2; ++r) {
    std::vector<double> row(x.begin() + 4 * r, x.begin() + 4 * r + 4);
    for (size_t i = 0; i < 4; ++i)
      expected.push_back(layerNormValue(row, i, gamma[i], beta[i], 1e-5));
  }
  expectValues(out, {2, 4}, expected, 1e-12);
  // Row 0 by hand: mean 2.5, var 1.25.
  double inv = 1.0 / std::sqrt(1.25 + 1e-5);
  EXPECT_NEAR(values(out)[0], -1.5 * inv, 1e-12);
  EXPECT_NEAR(values(out)[1], -0.5 * inv * 2 + 1, 1e-12);
}

TEST(InterpreterTest, LayerNormOverTrailingDimensions) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"x", f.t({2, 2, 3}, f.f32())}, {"gamma", f.t({2, 3}, f.f32())},
                       {"beta", f.t({2, 3}, f.f32())}},
                      [&](GraphBuilder &g, ArrayRef<Value> a) {
                        OpBuilder &b = g.builder();
                        return SmallVector<Value>{LayerNormOp::create(
                            b, g.location(), a[0], a[1], a[2], b.getI64IntegerAttr(1),
                            b.getF64FloatAttr(0.0))};
                      }));
  std::vector<double> x = {1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 12};
  std::vector<double> gamma = {1, 1, 1, 2, 2, 2}, beta = {0, 0, 0, 0, 0, 1};
  rt::Tensor out = runOne(f, {{"x", f32Tensor({2, 2, 3}, x)},
                              {"gamma", f32Tensor({2, 3}, gamma)},
                              {"beta", f32Tensor({2, 3}, beta)}});
  std::vector<double> expected;
  for (int r = 0; r < 2; ++r) {
    std::vector<double> row(x.begin() + 6 * r, x.begin() + 6 * r + 6);
    for (size_t i = 0; i < 6; ++i)
      expected.push_back(layerNormValue(row, i, gamma[i], beta[i], 0.0));
  }
  expectValues(out, {2, 2, 3}, expected, 1e-12);
}

/// op(A) for a matrix stored row-major as [rows, cols], read transposed or not.
double at(const std::vector<double> &m, int64_t offset, int64_t cols, int64_t i, int64_t j,
          bool transposed) {
  return transposed ? m[offset + j * cols + i] : m[offset + i * cols + j];
}

TEST(InterpreterTest, MatmulTransposeFlagsAndBatchBroadcast) {
  // lhs batch [2, 1], rhs batch [3] -> [2, 3]; M = 3, K = 4, N = 5.
  const int64_t M = 3, K = 4, N = 5;
  for (bool tl : {false, true})
    for (bool tr : {false, true}) {
      SCOPED_TRACE(std::string("transpose_lhs=") + (tl ? "1" : "0") +
                   " transpose_rhs=" + (tr ? "1" : "0"));
      std::vector<int64_t> lhsShape = {2, 1, tl ? K : M, tl ? M : K};
      std::vector<int64_t> rhsShape = {3, tr ? N : K, tr ? K : N};
      TinyFunc f;
      ASSERT_TRUE(f.build({{"a", f.t(lhsShape, f.f32())}, {"b", f.t(rhsShape, f.f32())}},
                          [&](GraphBuilder &g, ArrayRef<Value> a) {
                            return SmallVector<Value>{g.matmul(a[0], a[1], tl, tr)};
                          }));
      std::vector<double> A, B;
      for (int64_t i = 0; i < 2 * M * K; ++i)
        A.push_back((double)((i * 7) % 11) - 5.0);
      for (int64_t i = 0; i < 3 * K * N; ++i)
        B.push_back(0.5 * (double)((i * 5) % 13) - 3.0);
      rt::Tensor out =
          runOne(f, {{"a", f32Tensor(lhsShape, A)}, {"b", f32Tensor(rhsShape, B)}});
      std::vector<double> expected;
      for (int64_t b0 = 0; b0 < 2; ++b0)
        for (int64_t b1 = 0; b1 < 3; ++b1)
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
              double acc = 0;
              for (int64_t p = 0; p < K; ++p)
                acc += at(A, b0 * M * K, tl ? M : K, i, p, tl) *
                       at(B, b1 * K * N, tr ? K : N, p, j, tr);
              expected.push_back(acc);
            }
      expectValues(out, {2, 3, M, N}, expected);
    }
}

TEST(InterpreterTest, MatmulRank2WeightAppliesToEveryBatch) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"x", f.t({kDyn, kDyn, 2}, f.f32())}, {"w", f.t({3, 2}, f.f32())},
                       {"bias", f.t({3}, f.f32())}},
                      [&](GraphBuilder &g, ArrayRef<Value> a) {
                        return SmallVector<Value>{g.linear(a[0], a[1], a[2])};
                      }));
  // y = x·Wᵀ + b, x [2, 1, 2].
  rt::Tensor out = runOne(f, {{"x", f32Tensor({2, 1, 2}, {1, 2, 3, 4})},
                              {"w", f32Tensor({3, 2}, {1, 0, 0, 1, 1, 1})},
                              {"bias", f32Tensor({3}, {0.5, 0, -1})}});
  expectValues(out, {2, 1, 3}, {1.5, 2, 2, 3.5, 4, 6});
}

TEST(InterpreterTest, GatherAndOutOfRangeTokenId) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"ids", f.t({kDyn, kDyn}, f.i32())}},
                      [&](GraphBuilder &g, ArrayRef<Value> a) {
                        Value table = g.param("emb.weight", {4, 3}, "normal_0.02");
                        return SmallVector<Value>{g.gather(table, a[0])};
                      }));
  TensorMap weights = {{"emb.weight", f32Tensor({4, 3}, iota(12))}};
  auto out = f.run({{"ids", i32Tensor({2, 2}, {3, 0, 1, 3})}}, weights);
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  expectValues(out->at("out0"), {2, 2, 3}, {9, 10, 11, 0, 1, 2, 3, 4, 5, 9, 10, 11});

  for (int32_t bad : {4, -1, 1000}) {
    auto err = f.run({{"ids", i32Tensor({1, 3}, {0, bad, 1})}}, weights);
    ASSERT_FALSE(!!err) << "id " << bad << " accepted";
    std::string msg = llvm::toString(err.takeError());
    EXPECT_TRUE(contains(msg, "input 'ids'")) << msg;
    EXPECT_TRUE(contains(msg, "token id " + std::to_string(bad))) << msg;
    EXPECT_TRUE(contains(msg, "outside the vocabulary [0, 4)")) << msg;
  }
}

TEST(InterpreterTest, MissingWeightIsAnError) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"ids", f.t({kDyn, kDyn}, f.i32())}},
                      [&](GraphBuilder &g, ArrayRef<Value> a) {
                        return SmallVector<Value>{
                            g.gather(g.param("emb.weight", {4, 3}, "normal_0.02"), a[0])};
                      }));
  auto err = f.run({{"ids", i32Tensor({1, 1}, {0})}}, {});
  ASSERT_FALSE(!!err);
  std::string msg = llvm::toString(err.takeError());
  EXPECT_TRUE(contains(msg, "emb.weight")) << msg;
}

double expectedPe(int64_t q, int64_t j, int64_t d) {
  double angle = (double)q / std::pow(10000.0, (double)(j - j % 2) / (double)d);
  return j % 2 == 0 ? std::sin(angle) : std::cos(angle);
}

TEST(InterpreterTest, PositionalEncodingWithOffset) {
  const int64_t D = 6;
  TinyFunc f;
  ASSERT_TRUE(f.build({{"tokens", f.t({kDyn, kDyn}, f.i32())},
                       {"cache", f.t({kDyn, kDyn}, f.i32())}},
                      [&](GraphBuilder &g, ArrayRef<Value> a) {
                        Value len = g.dim(a[0], 1), off = g.dim(a[1], 1);
                        auto type = RankedTensorType::get({kDyn, D}, g.builder().getF32Type());
                        Value withOffset = PositionalEncodingOp::create(
                            g.builder(), g.location(), type, len, off);
                        return SmallVector<Value>{g.positionalEncoding(len, D), withOffset};
                      }));
  auto out = f.run({{"tokens", i32Tensor({1, 3}, {0, 0, 0})},
                    {"cache", i32Tensor({1, 5}, {0, 0, 0, 0, 0})}});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  std::vector<double> plain, shifted;
  for (int64_t p = 0; p < 3; ++p)
    for (int64_t j = 0; j < D; ++j) {
      plain.push_back(expectedPe(p, j, D));
      shifted.push_back(expectedPe(p + 5, j, D));
    }
  expectValues(out->at("out0"), {3, D}, plain, 1e-12);
  expectValues(out->at("out1"), {3, D}, shifted, 1e-12);
  // Position 0: sin(0) = 0 on even columns, cos(0) = 1 on odd ones.
  std::vector<double> v = values(out->at("out0"));
  EXPECT_EQ(v[0], 0.0);
  EXPECT_EQ(v[1], 1.0);
  EXPECT_EQ(v[4], 0.0);
  EXPECT_EQ(v[5], 1.0);
  // Position 1, column pair 0: sin(1), cos(1); column pair 1: 1/10000^(2/6).
  EXPECT_NEAR(v[6], std::sin(1.0), 1e-15);
  EXPECT_NEAR(v[7], std::cos(1.0), 1e-15);
  EXPECT_NEAR(v[8], std::sin(std::pow(10000.0, -2.0 / 6.0)), 1e-15);
  EXPECT_NEAR(v[9], std::cos(std::pow(10000.0, -2.0 / 6.0)), 1e-15);
  // Offset 5, position 0: sin(5), cos(5).
  std::vector<double> w = values(out->at("out1"));
  EXPECT_NEAR(w[0], std::sin(5.0), 1e-15);
  EXPECT_NEAR(w[1], std::cos(5.0), 1e-15);
}

TEST(InterpreterTest, GeluExactAndTanh) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"x", f.t({8}, f.f32())}}, [&](GraphBuilder &g, ArrayRef<Value> a) {
    return SmallVector<Value>{g.activation(a[0], "gelu"), g.activation(a[0], "gelu_tanh")};
  }));
  auto out = f.run({{"x", f32Tensor({8}, {-2, -1, -0.5, 0, 0.5, 1, 2, 3})}});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  // Reference values of 0.5·x·(1 + erf(x/√2)) and of the tanh form.
  expectValues(out->at("out0"), {8},
               {-0.04550026389635842, -0.15865525393145707, -0.15426876936299344, 0.0,
                0.34573123063700656, 0.8413447460685429, 1.9544997361036416,
                2.99595030590511},
               1e-14);
  expectValues(out->at("out1"), {8},
               {-0.04540230591222494, -0.15880800939172324, -0.15428599017485606, 0.0,
                0.34571400982514394, 0.8411919906082768, 1.954597694087775,
                2.996362607918227},
               1e-14);
}

TEST(InterpreterTest, Silu) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"x", f.t({8}, f.f32())}}, [&](GraphBuilder &g, ArrayRef<Value> a) {
    return SmallVector<Value>{g.activation(a[0], "silu")};
  }));
  auto out = f.run({{"x", f32Tensor({8}, {-30, -2, -0.5, 0, 0.5, 1, 2, 30})}});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  // x · sigmoid(x).
  expectValues(out->at("out0"), {8},
               {-2.8072868906517896e-12, -0.2384058440442351, -0.1887703343990727, 0.0,
                0.3112296656009273, 0.7310585786300049, 1.7615941559557646,
                29.999999999997197},
               1e-14);
}

/// f(x) = dropout(x) with the given attributes; x is [64, 64].
struct DropoutFunc {
  TinyFunc f;
  DropoutFunc(double rate, int64_t seed, int64_t stream, bool withStep = false) {
    std::vector<std::pair<std::string, Type>> args = {{"x", f.t({64, 64}, f.f32())}};
    if (withStep)
      args.push_back({"steps", f.t({kDyn, kDyn}, f.i32())});
    EXPECT_TRUE(f.build(args, [&](GraphBuilder &g, ArrayRef<Value> a) {
      Value step = withStep ? g.dim(a[1], 1) : Value();
      OpBuilder &b = g.builder();
      return SmallVector<Value>{DropoutOp::create(b, g.location(), a[0], step,
                                                  b.getF64FloatAttr(rate),
                                                  b.getI64IntegerAttr(seed),
                                                  b.getI64IntegerAttr(stream))};
    }));
  }
  std::vector<double> run(int32_t step = 0) {
    TensorMap in = {{"x", f32Tensor({64, 64}, std::vector<double>(4096, 1.0))}};
    if (step > 0)
      in["steps"] = i32Tensor({1, step}, std::vector<int32_t>(step, 0));
    return values(runOne(f, in));
  }
};

TEST(InterpreterTest, DropoutDeterministicScaledAndNearTheRate) {
  const double rate = 0.25;
  DropoutFunc d(rate, /*seed=*/7, /*stream=*/3);
  std::vector<double> first = d.run(), second = d.run();
  ASSERT_EQ(first.size(), 4096u);
  EXPECT_EQ(first, second);
  int64_t dropped = 0;
  for (size_t i = 0; i < first.size(); ++i) {
    bool keep = rt::philoxUniform(7, 0, 3, i) >= rate;
    EXPECT_EQ(first[i], keep ? 1.0 / (1.0 - rate) : 0.0) << "element " << i;
    if (first[i] == 0.0)
      ++dropped;
    else
      EXPECT_EQ(first[i], 4.0 / 3.0);
  }
  // 4096 draws: the standard deviation of the fraction is about 0.0068.
  EXPECT_NEAR((double)dropped / 4096.0, rate, 0.035);

  // The same seed and stream in another function give the same mask.
  DropoutFunc same(rate, 7, 3);
  EXPECT_EQ(same.run(), first);
  // Another stream, another seed: different masks.
  DropoutFunc otherStream(rate, 7, 4);
  EXPECT_NE(otherStream.run(), first);
  DropoutFunc otherSeed(rate, 8, 3);
  EXPECT_NE(otherSeed.run(), first);
}

TEST(InterpreterTest, DropoutStepOperand) {
  const double rate = 0.5;
  DropoutFunc d(rate, 1, 2, /*withStep=*/true);
  std::vector<double> step3 = d.run(3), step3Again = d.run(3), step4 = d.run(4);
  EXPECT_EQ(step3, step3Again);
  EXPECT_NE(step3, step4);
  for (size_t i = 0; i < step3.size(); ++i)
    EXPECT_EQ(step3[i], rt::philoxUniform(1, 3, 2, i) >= rate ? 2.0 : 0.0) << i;
}

TEST(InterpreterTest, ReshapeWithDynamicDims) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"x", f.t({kDyn, kDyn, 4}, f.f32())}},
                      [&](GraphBuilder &g, ArrayRef<Value> a) {
                        Value split = g.reshape(a[0], {kDyn, kDyn, 2, 2});
                        Value merged = g.reshape(split, {kDyn, 4, kDyn});
                        return SmallVector<Value>{split, merged};
                      }));
  auto out = f.run({{"x", f32Tensor({2, 3, 4}, iota(24))}});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  expectValues(out->at("out0"), {2, 3, 2, 2}, iota(24));
  expectValues(out->at("out1"), {2, 4, 3}, iota(24));
}

TEST(InterpreterTest, Transpose) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"x", f.t({2, 3, 4}, f.f32())}}, [&](GraphBuilder &g, ArrayRef<Value> a) {
    return SmallVector<Value>{g.transpose(a[0], {2, 0, 1}), g.transpose(a[0], {0, 2, 1})};
  }));
  auto out = f.run({{"x", f32Tensor({2, 3, 4}, iota(24))}});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  // out0[i][j][k] = x[j][k][i]; out1[i][j][k] = x[i][k][j]; x[a][b][c] = 12a + 4b + c.
  std::vector<double> e0, e1;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k)
        e0.push_back(12 * j + 4 * k + i);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k)
        e1.push_back(12 * i + 4 * k + j);
  expectValues(out->at("out0"), {4, 2, 3}, e0);
  expectValues(out->at("out1"), {2, 4, 3}, e1);
}

TEST(InterpreterTest, Concat) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"a", f.t({2, 1}, f.f32())}, {"b", f.t({2, 3}, f.f32())},
                       {"c", f.t({1, 3}, f.f32())}},
                      [&](GraphBuilder &g, ArrayRef<Value> a) {
                        OpBuilder &b = g.builder();
                        Location l = g.location();
                        return SmallVector<Value>{
                            ConcatOp::create(b, l, ValueRange{a[0], a[1]}, 1),
                            ConcatOp::create(b, l, ValueRange{a[2], a[1], a[2]}, 0),
                            ConcatOp::create(b, l, ValueRange{a[1], a[0]}, -1)};
                      }));
  auto out = f.run({{"a", f32Tensor({2, 1}, {-1, -2})},
                    {"b", f32Tensor({2, 3}, {1, 2, 3, 4, 5, 6})},
                    {"c", f32Tensor({1, 3}, {7, 8, 9})}});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  expectValues(out->at("out0"), {2, 4}, {-1, 1, 2, 3, -2, 4, 5, 6});
  expectValues(out->at("out1"), {4, 3}, {7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  expectValues(out->at("out2"), {2, 4}, {1, 2, 3, -1, 4, 5, 6, -2});
}

TEST(InterpreterTest, Split) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"x", f.t({5, 2}, f.f32())}, {"y", f.t({2, 4}, f.f32())}},
                      [&](GraphBuilder &g, ArrayRef<Value> a) {
                        auto rows = g.split(a[0], 0, {2, 3});
                        auto cols = g.split(a[1], 1, {1, 3});
                        return SmallVector<Value>{rows[0], rows[1], cols[0], cols[1]};
                      }));
  auto out = f.run({{"x", f32Tensor({5, 2}, iota(10))}, {"y", f32Tensor({2, 4}, iota(8))}});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  expectValues(out->at("out0"), {2, 2}, {0, 1, 2, 3});
  expectValues(out->at("out1"), {3, 2}, {4, 5, 6, 7, 8, 9});
  expectValues(out->at("out2"), {2, 1}, {0, 4});
  expectValues(out->at("out3"), {2, 3}, {1, 2, 3, 5, 6, 7});
}

TEST(InterpreterTest, SliceWithDynamicAndStaticLength) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"tokens", f.t({kDyn, kDyn}, f.i32())}, {"x", f.t({6, 2}, f.f32())}},
                      [&](GraphBuilder &g, ArrayRef<Value> a) {
                        OpBuilder &b = g.builder();
                        Value t = g.dim(a[0], 1);
                        Value leading = g.sliceLeading(a[1], 0, t);
                        Value fromTwo = SliceOp::create(b, g.location(), a[1], Value(), t, 0, 2,
                                                        IntegerAttr());
                        Value col = SliceOp::create(b, g.location(), a[1], Value(), Value(), 1, 1,
                                                    b.getI64IntegerAttr(1));
                        return SmallVector<Value>{leading, fromTwo, col};
                      }));
  TensorMap in = {{"tokens", i32Tensor({1, 3}, {0, 0, 0})}, {"x", f32Tensor({6, 2}, iota(12))}};
  auto out = f.run(in);
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  expectValues(out->at("out0"), {3, 2}, {0, 1, 2, 3, 4, 5});
  expectValues(out->at("out1"), {3, 2}, {4, 5, 6, 7, 8, 9});
  expectValues(out->at("out2"), {6, 1}, {1, 3, 5, 7, 9, 11});
  // Length 5 from start 2 runs past the 6 rows.
  in["tokens"] = i32Tensor({1, 5}, {0, 0, 0, 0, 0});
  auto err = f.run(in);
  ASSERT_FALSE(!!err);
  std::string msg = llvm::toString(err.takeError());
  EXPECT_TRUE(contains(msg, "slice [2, 7) is outside axis 0 of size 6")) << msg;
}

TEST(InterpreterTest, Reductions) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"x", f.t({2, 3}, f.f32())}}, [&](GraphBuilder &g, ArrayRef<Value> a) {
    OpBuilder &b = g.builder();
    Location l = g.location();
    return SmallVector<Value>{
        ReduceSumOp::create(b, l, a[0], ArrayRef<int64_t>{1}, false),
        ReduceSumOp::create(b, l, a[0], ArrayRef<int64_t>{0}, true),
        ReduceMeanOp::create(b, l, a[0], ArrayRef<int64_t>{-1}, true),
        ReduceMeanOp::create(b, l, a[0], ArrayRef<int64_t>{0, 1}, false),
        ReduceMaxOp::create(b, l, a[0], ArrayRef<int64_t>{0}, false),
        ReduceMaxOp::create(b, l, a[0], ArrayRef<int64_t>{1}, true)};
  }));
  auto out = f.run({{"x", f32Tensor({2, 3}, {1, -5, 3, -4, -2, -6})}});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  expectValues(out->at("out0"), {2}, {-1, -12});
  expectValues(out->at("out1"), {1, 3}, {-3, -7, -3});
  expectValues(out->at("out2"), {2, 1}, {-1.0 / 3.0, -4});
  expectValues(out->at("out3"), {}, {-13.0 / 6.0});
  expectValues(out->at("out4"), {3}, {1, -2, 3});
  expectValues(out->at("out5"), {2, 1}, {3, -2});
}

TEST(InterpreterTest, ReductionOverTheMiddleAxisOfRank3) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"x", f.t({2, 3, 2}, f.f32())}}, [&](GraphBuilder &g, ArrayRef<Value> a) {
    OpBuilder &b = g.builder();
    return SmallVector<Value>{
        ReduceSumOp::create(b, g.location(), a[0], ArrayRef<int64_t>{1}, true),
        ReduceMaxOp::create(b, g.location(), a[0], ArrayRef<int64_t>{0, 2}, false)};
  }));
  auto out = f.run({{"x", f32Tensor({2, 3, 2}, iota(12))}});
  ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
  expectValues(out->at("out0"), {2, 1, 2}, {6, 9, 24, 27});
  expectValues(out->at("out1"), {3}, {7, 9, 11});
}

//===----------------------------------------------------------------------===//
// Negative axes. The verifiers accept axis -1 for softmax, layer_norm, split,
// slice and dim (normalizeAxis); the interpreter must read it as rank - 1.
// Each case runs in a child process, because a misread axis indexes a shape
// out of bounds and may crash: the child exits 0 when the values match.
//===----------------------------------------------------------------------===//

/// Runs `f` on `inputs` and compares output out0 with `expected`; 0 if equal.
int childCheck(TinyFunc &f, const TensorMap &inputs, std::vector<int64_t> shape,
               const std::vector<double> &expected) {
  auto out = f.run(inputs);
  if (!out) {
    fprintf(stderr, "error: %s\n", llvm::toString(out.takeError()).c_str());
    return 2;
  }
  const rt::Tensor &t = out->at("out0");
  if (t.shape != shape) {
    fprintf(stderr, "shape %s, expected %s\n", rt::shapeToString(t.shape).c_str(),
            rt::shapeToString(shape).c_str());
    return 1;
  }
  std::vector<double> got = values(t);
  for (size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - expected[i]) > 1e-12) {
      fprintf(stderr, "element %zu is %g, expected %g\n", i, got[i], expected[i]);
      return 1;
    }
  return 0;
}

class InterpreterNegativeAxisDeathTest : public ::testing::Test {
protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(InterpreterNegativeAxisDeathTest, Softmax) {
  EXPECT_EXIT(
      {
        TinyFunc f;
        f.build({{"x", f.t({1, 2}, f.f32())}}, [&](GraphBuilder &g, ArrayRef<Value> a) {
          return SmallVector<Value>{g.softmax(a[0], -1)};
        });
        double e = 1.0 / (1.0 + std::exp(1.0));
        std::exit(childCheck(f, {{"x", f32Tensor({1, 2}, {0, 1})}}, {1, 2}, {e, 1 - e}));
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(InterpreterNegativeAxisDeathTest, LayerNorm) {
  EXPECT_EXIT(
      {
        TinyFunc f;
        f.build({{"x", f.t({1, 2}, f.f32())}, {"g", f.t({2}, f.f32())}, {"b", f.t({2}, f.f32())}},
                [&](GraphBuilder &g, ArrayRef<Value> a) {
                  OpBuilder &b = g.builder();
                  return SmallVector<Value>{LayerNormOp::create(b, g.location(), a[0], a[1], a[2],
                                                                b.getI64IntegerAttr(-1),
                                                                b.getF64FloatAttr(0.0))};
                });
        std::exit(childCheck(f,
                             {{"x", f32Tensor({1, 2}, {1, 3})}, {"g", f32Tensor({2}, {1, 1})},
                              {"b", f32Tensor({2}, {0, 0})}},
                             {1, 2}, {-1, 1}));
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(InterpreterNegativeAxisDeathTest, Split) {
  EXPECT_EXIT(
      {
        TinyFunc f;
        f.build({{"x", f.t({2, 3}, f.f32())}}, [&](GraphBuilder &g, ArrayRef<Value> a) {
          return SmallVector<Value>{g.split(a[0], -1, {1, 2})[1]};
        });
        std::exit(childCheck(f, {{"x", f32Tensor({2, 3}, iota(6))}}, {2, 2}, {1, 2, 4, 5}));
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(InterpreterNegativeAxisDeathTest, Slice) {
  EXPECT_EXIT(
      {
        TinyFunc f;
        f.build({{"x", f.t({2, 3}, f.f32())}}, [&](GraphBuilder &g, ArrayRef<Value> a) {
          OpBuilder &b = g.builder();
          return SmallVector<Value>{
              SliceOp::create(b, g.location(), a[0], Value(), Value(), -1, 1, b.getI64IntegerAttr(2))};
        });
        std::exit(childCheck(f, {{"x", f32Tensor({2, 3}, iota(6))}}, {2, 2}, {1, 2, 4, 5}));
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(InterpreterNegativeAxisDeathTest, Dim) {
  EXPECT_EXIT(
      {
        TinyFunc f;
        f.build({{"tokens", f.t({kDyn, kDyn}, f.i32())}, {"x", f.t({6, 2}, f.f32())}},
                [&](GraphBuilder &g, ArrayRef<Value> a) {
                  return SmallVector<Value>{g.sliceLeading(a[1], 0, g.dim(a[0], -1))};
                });
        std::exit(childCheck(f, {{"tokens", i32Tensor({1, 2}, {0, 0})},
                                 {"x", f32Tensor({6, 2}, iota(12))}},
                             {2, 2}, {0, 1, 2, 3}));
      },
      ::testing::ExitedWithCode(0), "");
}


TEST(InterpreterTest, UnnamedInputsAndMissingMaximaAreRejected) {
  // A dynamic dimension without max attributes cannot be run.
  TinyFunc f;
  ASSERT_TRUE(f.build({{"x", f.t({kDyn, 2}, f.f32())}}, [&](GraphBuilder &g, ArrayRef<Value> a) {
    return SmallVector<Value>{g.scale(a[0], 2.0)};
  }));
  f.func->removeAttr(kMaxBatchAttr);
  auto err = f.run({{"x", f32Tensor({1, 2}, {1, 2})}});
  ASSERT_FALSE(!!err);
  std::string msg = llvm::toString(err.takeError());
  EXPECT_TRUE(contains(msg, "transfuse.max_batch")) << msg;
  EXPECT_TRUE(contains(msg, "'x'")) << msg;
}

} // namespace
