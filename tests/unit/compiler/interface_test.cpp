// Tests for entry-point inputs: rt::validateInputs (unknown and missing
// names, dtype, rank, static and dynamic sizes, batch agreement) and its use
// by reference::run; extractInterface on a built model; and running the tiny
// encoder-decoder model on the reference interpreter with random weights for
// two dynamic sizes, deterministically.
#include "codegen/Interface.h"
#include "codegen/reference/Interpreter.h"
#include "ir/Sizes.h"
#include "models/Models.h"
#include "runtime/Init.h"
#include "runtime/TensorSpec.h"
#include "runtime/WeightBinding.h"

#include "tests/unit/compiler/TestHelpers.h"

#include <gtest/gtest.h>

#include <cmath>

#ifndef TRANSFUSE_SOURCE_DIR
#error "TRANSFUSE_SOURCE_DIR must name the source tree"
#endif

namespace {

using namespace mlir;
using namespace mlir::transfuse;
using namespace transfuse_test;

std::vector<rt::TensorSpec> specs() {
  return {{"tokens", rt::DType::I32, {-1, -1}, {4, 16}},
          {"mask", rt::DType::Bool, {-1, 3}, {4, 3}},
          {"scale", rt::DType::F32, {2}, {2}}};
}

TensorMap goodInputs() {
  return {{"tokens", i32Tensor({2, 5}, std::vector<int32_t>(10, 1))},
          {"mask", boolTensor({2, 3}, {1, 1, 1, 1, 1, 0})},
          {"scale", f32Tensor({2}, {1, 2})}};
}

std::string check(const TensorMap &inputs) {
  rt::Status s = rt::validateInputs(specs(), inputs);
  return s.isOk() ? "" : s.message();
}

// The dialect's init kinds (#transfuse.init) and the runtime's (rt::InitKind)
// are one list: every enum case parses as the runtime kind of the same place.
TEST(InitKindTest, DialectKindsAreTheRuntimes) {
  for (uint32_t i = 0; i <= getMaxEnumValForInitKind(); ++i) {
    std::optional<InitKind> kind = symbolizeInitKind(i);
    ASSERT_TRUE(kind) << i;
    rt::InitKind r;
    std::string name = stringifyInitKind(*kind).str();
    ASSERT_TRUE(rt::parseInitKind(name, &r)) << name;
    EXPECT_EQ(static_cast<uint32_t>(r), i) << name;
  }
}

TEST(ValidateInputsTest, AcceptsGoodInputsAtTheBounds) {
  EXPECT_EQ(check(goodInputs()), "");
  TensorMap in = goodInputs();
  in["tokens"] = i32Tensor({4, 16}, std::vector<int32_t>(64, 0));
  in["mask"] = boolTensor({4, 3}, std::vector<int>(12, 1));
  EXPECT_EQ(check(in), "");
  in["tokens"] = i32Tensor({1, 1}, {0});
  in["mask"] = boolTensor({1, 3}, {1, 1, 1});
  EXPECT_EQ(check(in), "");
}

TEST(ValidateInputsTest, UnknownName) {
  TensorMap in = goodInputs();
  in["tokenz"] = i32Tensor({2, 5}, std::vector<int32_t>(10, 1));
  std::string msg = check(in);
  EXPECT_TRUE(contains(msg, "input 'tokenz' is not an input of the model")) << msg;
  EXPECT_TRUE(contains(msg, "'tokens', 'mask', 'scale'")) << msg;
}

TEST(ValidateInputsTest, MissingInput) {
  TensorMap in = goodInputs();
  in.erase("scale");
  EXPECT_EQ(check(in), "missing input 'scale'");
}

TEST(ValidateInputsTest, WrongDType) {
  TensorMap in = goodInputs();
  in["tokens"] = f32Tensor({2, 5}, std::vector<double>(10, 1));
  EXPECT_EQ(check(in), "input 'tokens' has dtype F32, expected I32 (or I64)");
  in = goodInputs();
  in["mask"] = i32Tensor({2, 3}, std::vector<int32_t>(6, 1));
  EXPECT_EQ(check(in), "input 'mask' has dtype I32, expected BOOL");
}

TEST(ValidateInputsTest, WrongRank) {
  TensorMap in = goodInputs();
  in["tokens"] = i32Tensor({10}, std::vector<int32_t>(10, 1));
  std::string msg = check(in);
  EXPECT_TRUE(contains(msg, "input 'tokens' has rank 1")) << msg;
  EXPECT_TRUE(contains(msg, "expected rank 2")) << msg;
  in = goodInputs();
  in["scale"] = f32Tensor({1, 2}, {1, 2});
  msg = check(in);
  EXPECT_TRUE(contains(msg, "input 'scale' has rank 2")) << msg;
}

TEST(ValidateInputsTest, StaticSizeMismatch) {
  TensorMap in = goodInputs();
  in["mask"] = boolTensor({2, 4}, std::vector<int>(8, 1));
  EXPECT_EQ(check(in), "input 'mask' has size 4 in dimension 1, expected 3");
  in = goodInputs();
  in["scale"] = f32Tensor({3}, {1, 2, 3});
  EXPECT_EQ(check(in), "input 'scale' has size 3 in dimension 0, expected 2");
}

TEST(ValidateInputsTest, DynamicSizeOverTheMaximumOrZero) {
  TensorMap in = goodInputs();
  in["tokens"] = i32Tensor({2, 17}, std::vector<int32_t>(34, 1));
  std::string msg = check(in);
  EXPECT_TRUE(contains(msg, "input 'tokens' has size 17 in dimension 1, outside [1, 16]"))
      << msg;
  in["tokens"] = i32Tensor({2, 0}, {});
  msg = check(in);
  EXPECT_TRUE(contains(msg, "input 'tokens' has size 0 in dimension 1, outside [1, 16]"))
      << msg;
  in = goodInputs();
  in["tokens"] = i32Tensor({5, 2}, std::vector<int32_t>(10, 1));
  msg = check(in);
  EXPECT_TRUE(contains(msg, "input 'tokens' has size 5 in dimension 0, outside [1, 4]"))
      << msg;
  in = goodInputs();
  in["mask"] = boolTensor({0, 3}, {});
  msg = check(in);
  EXPECT_TRUE(contains(msg, "input 'mask' has size 0 in dimension 0, outside [1, 4]")) << msg;
}

TEST(ValidateInputsTest, DifferentBatchSizes) {
  TensorMap in = goodInputs();
  in["mask"] = boolTensor({3, 3}, std::vector<int>(9, 1));
  EXPECT_EQ(check(in), "inputs 'tokens' and 'mask' have different batch sizes (2 vs 3)");
}

// An input with `sizesOf` must have every dynamic size of that input (a
// BERT attention_mask beside input_ids); static sizes are checked as ever.
TEST(ValidateInputsTest, SizesOfAnotherInput) {
  std::vector<rt::TensorSpec> s = {{"ids", rt::DType::I32, {-1, -1}, {4, 16}},
                                   {"mask", rt::DType::I32, {-1, -1}, {4, 16}, /*sizesOf=*/0}};
  auto check2 = [&](TensorMap in) {
    rt::Status st = rt::validateInputs(s, in);
    return st.isOk() ? "" : st.message();
  };
  TensorMap in = {{"ids", i32Tensor({2, 5}, std::vector<int32_t>(10, 1))},
                  {"mask", i32Tensor({2, 5}, std::vector<int32_t>(10, 1))}};
  EXPECT_EQ(check2(in), "");
  in["mask"] = i32Tensor({2, 4}, std::vector<int32_t>(8, 1));
  EXPECT_EQ(check2(in), "input 'mask' has shape [2, 4], but it must have the sizes of 'ids' [2, 5]");
  s[1].sizesOf = -1; // without the contract, sequence lengths are free
  EXPECT_EQ(check2(in), "");
}

// Token ids (I32 inputs) also come as I64, as PyTorch passes them; other
// dtypes still must match, and narrowing names an id outside int32.
TEST(ValidateInputsTest, IdsMayBeInt64) {
  TensorMap in = goodInputs();
  rt::Tensor ids = rt::Tensor::zeros(rt::DType::I64, {2, 5});
  in["tokens"] = ids;
  EXPECT_EQ(check(in), "");
  in["scale"] = rt::Tensor::zeros(rt::DType::F64, {2});
  EXPECT_EQ(check(in), "input 'scale' has dtype F64, expected F32");
  int64_t wide[3] = {7, -1, int64_t{1} << 40};
  int32_t narrow[3];
  rt::Status s = rt::narrowIds("tokens", wide, 3, narrow);
  EXPECT_EQ(s.message(), "input 'tokens' holds 1099511627776 at element 2, outside int32 (ids are)");
  EXPECT_TRUE(rt::narrowIds("tokens", wide, 2, narrow).isOk());
  EXPECT_EQ(narrow[0], 7);
  EXPECT_EQ(narrow[1], -1);
}

// A BERT directory's entry: attention_mask and token_type_ids carry
// transfuse.sizes_of = 0, so every size of theirs is input_ids' (what lets
// the fusion passes prove the embedding sum and the mask line up), and the
// interface says so.
TEST(ValidateInputsTest, BertInputsShareInputIdsSizes) {
  MLIRContext context;
  auto module = loadModelDefinition(context, TRANSFUSE_SOURCE_DIR "/tests/models/tiny-bert",
                                    BuildOptions());
  ASSERT_TRUE(!!module) << llvm::toString(module.takeError());
  auto func = (**module).lookupSymbol<func::FuncOp>("encode");
  ASSERT_TRUE(func);
  SizeAnalysis sizes;
  for (unsigned arg : {1u, 2u})
    for (int64_t d : {0, 1})
      EXPECT_TRUE(sizes.equal(func.getArgument(arg), d, func.getArgument(0), d)) << arg << " " << d;
  auto interface = extractInterface(**module);
  ASSERT_TRUE(!!interface) << llvm::toString(interface.takeError());
  const EntryPoint &ep = interface->entryPoints[0];
  ASSERT_EQ(ep.inputs.size(), 3u);
  EXPECT_EQ(ep.inputs[0].sizesOf, -1);
  EXPECT_EQ(ep.inputs[1].sizesOf, 0);
  EXPECT_EQ(ep.inputs[2].sizesOf, 0);
  EXPECT_EQ(ep.outputs[0].name, "last_hidden_state");
}

TEST(ValidateInputsTest, ReferenceRunReportsTheSameErrors) {
  TinyFunc f;
  ASSERT_TRUE(f.build({{"tokens", f.t({kDyn, kDyn}, f.i32())}, {"mask", f.t({kDyn, 3}, f.i1())}},
                      [&](GraphBuilder &g, ArrayRef<Value> a) {
                        return SmallVector<Value>{g.keyPaddingMask(a[0], 0)};
                      },
                      /*maxBatch=*/4, /*maxSeqLen=*/16));
  auto interface = extractInterface(*f.module);
  ASSERT_TRUE(!!interface) << llvm::toString(interface.takeError());
  ASSERT_EQ(interface->entryPoints.size(), 1u);
  const EntryPoint &ep = interface->entryPoints[0];
  EXPECT_EQ(ep.name, "f");
  ASSERT_EQ(ep.inputs.size(), 2u);
  EXPECT_EQ(ep.inputs[0].name, "tokens");
  EXPECT_EQ(ep.inputs[0].dtype, rt::DType::I32);
  EXPECT_EQ(ep.inputs[0].shape, (std::vector<int64_t>{-1, -1}));
  EXPECT_EQ(ep.inputs[0].maxShape, (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(ep.inputs[1].dtype, rt::DType::Bool);
  EXPECT_EQ(ep.inputs[1].shape, (std::vector<int64_t>{-1, 3}));
  EXPECT_EQ(ep.inputs[1].maxShape, (std::vector<int64_t>{4, 3}));
  ASSERT_EQ(ep.outputs.size(), 1u);
  EXPECT_EQ(ep.outputs[0].name, "out0");
  EXPECT_EQ(ep.outputs[0].shape, (std::vector<int64_t>{-1, 1, 1, -1}));

  auto run = [&](const TensorMap &in) {
    auto out = f.run(in);
    return out ? std::string() : llvm::toString(out.takeError());
  };
  TensorMap in = {{"tokens", i32Tensor({2, 2}, {1, 0, 0, 1})},
                  {"mask", boolTensor({2, 3}, {1, 1, 1, 1, 1, 1})}};
  EXPECT_EQ(run(in), "");
  in["mask"] = boolTensor({1, 3}, {1, 1, 1});
  EXPECT_EQ(run(in), "inputs 'tokens' and 'mask' have different batch sizes (2 vs 1)");
  in.erase("mask");
  EXPECT_EQ(run(in), "missing input 'mask'");
  in["mask"] = boolTensor({2, 3}, std::vector<int>(6, 1));
  in["tokens"] = i32Tensor({2, 17}, std::vector<int32_t>(34, 1));
  EXPECT_TRUE(contains(run(in), "input 'tokens' has size 17 in dimension 1, outside [1, 16]"));
}

//===----------------------------------------------------------------------===//
// The tiny encoder-decoder on the reference interpreter.
//===----------------------------------------------------------------------===//

class TinyModelTest : public ::testing::Test {
protected:
  void SetUp() override {
    ctx.loadDialect<TransfuseDialect, func::FuncDialect>();
    BuildOptions options;
    options.maxBatch = 4;
    auto m = loadModelDefinition(ctx, TRANSFUSE_SOURCE_DIR "/models/tiny-encoder-decoder.json",
                                 options);
    ASSERT_TRUE(!!m) << llvm::toString(m.takeError());
    module = std::move(*m);
    auto mi = extractInterface(*module);
    ASSERT_TRUE(!!mi) << llvm::toString(mi.takeError());
    interface = std::move(*mi);
    auto random = rt::randomWeights(interface.params, /*seed=*/1234);
    ASSERT_TRUE(random.isOk()) << random.status().message();
    weights = std::move(*random);
    func = module->lookupSymbol<func::FuncOp>("forward");
    ASSERT_TRUE(func);
  }

  llvm::Expected<TensorMap> run(const rt::Tensor &src, const rt::Tensor &tgt) {
    return reference::run(func, weights, {{"src_tokens", src}, {"tgt_tokens", tgt}}, true);
  }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  ModelInterface interface;
  TensorMap weights;
  func::FuncOp func;
};

TEST_F(TinyModelTest, InterfaceOfTheBuiltModel) {
  ASSERT_EQ(interface.entryPoints.size(), 3u); // and encode, decode_step
  const EntryPoint &ep = interface.entryPoints[0];
  EXPECT_EQ(ep.name, "forward");
  ASSERT_EQ(ep.inputs.size(), 2u);
  EXPECT_EQ(ep.inputs[0].name, "src_tokens");
  EXPECT_EQ(ep.inputs[1].name, "tgt_tokens");
  EXPECT_EQ(ep.inputs[0].dtype, rt::DType::I32);
  EXPECT_EQ(ep.inputs[0].shape, (std::vector<int64_t>{-1, -1}));
  EXPECT_EQ(ep.inputs[0].maxShape, (std::vector<int64_t>{4, 16}));
  ASSERT_EQ(ep.outputs.size(), 1u);
  EXPECT_EQ(ep.outputs[0].name, "logits");
  EXPECT_EQ(ep.outputs[0].dtype, rt::DType::F32);
  EXPECT_EQ(ep.outputs[0].shape, (std::vector<int64_t>{-1, -1, 19}));
  EXPECT_EQ(ep.outputs[0].maxShape, (std::vector<int64_t>{4, 16, 19}));
  EXPECT_FALSE(interface.configJson.empty());
  // Every param has weights of its shape.
  for (const rt::ParamSpec &p : interface.params) {
    ASSERT_TRUE(weights.count(p.name)) << p.name;
    EXPECT_EQ(weights.at(p.name).shape, p.shape) << p.name;
  }
}

TEST_F(TinyModelTest, RunsForTwoDynamicSizesDeterministically) {
  rt::Tensor src1 = i32Tensor({2, 5}, {4, 7, 9, 3, 1, 22, 5, 6, 1, 1});
  rt::Tensor tgt1 = i32Tensor({2, 3}, {2, 8, 18, 2, 11, 1});
  rt::Tensor src2 = i32Tensor({1, 7}, {2, 3, 4, 5, 6, 7, 8});
  rt::Tensor tgt2 = i32Tensor({1, 4}, {2, 3, 4, 5});

  auto a = run(src1, tgt1);
  ASSERT_TRUE(!!a) << llvm::toString(a.takeError());
  const rt::Tensor &logits = a->at("logits");
  EXPECT_EQ(logits.dtype, rt::DType::F64);
  EXPECT_EQ(logits.shape, (std::vector<int64_t>{2, 3, 19}));
  bool anyNonZero = false;
  for (double v : values(logits)) {
    EXPECT_TRUE(std::isfinite(v));
    anyNonZero |= v != 0.0;
  }
  EXPECT_TRUE(anyNonZero);

  auto b = run(src2, tgt2);
  ASSERT_TRUE(!!b) << llvm::toString(b.takeError());
  EXPECT_EQ(b->at("logits").shape, (std::vector<int64_t>{1, 4, 19}));
  for (double v : values(b->at("logits")))
    EXPECT_TRUE(std::isfinite(v));

  // The same inputs give bitwise the same logits.
  auto again = run(src1, tgt1);
  ASSERT_TRUE(!!again) << llvm::toString(again.takeError());
  EXPECT_EQ(again->at("logits").bytes, logits.bytes);
}

TEST_F(TinyModelTest, BatchRowsAreIndependent) {
  // Row 1 of a batch of two equals the same sequence run alone.
  rt::Tensor src = i32Tensor({2, 4}, {4, 7, 9, 3, 10, 12, 1, 1});
  rt::Tensor tgt = i32Tensor({2, 3}, {2, 8, 18, 2, 5, 1});
  auto both = run(src, tgt);
  ASSERT_TRUE(!!both) << llvm::toString(both.takeError());
  auto alone = run(i32Tensor({1, 4}, {10, 12, 1, 1}), i32Tensor({1, 3}, {2, 5, 1}));
  ASSERT_TRUE(!!alone) << llvm::toString(alone.takeError());
  std::vector<double> x = values(both->at("logits")), y = values(alone->at("logits"));
  ASSERT_EQ(y.size(), 3u * 19u);
  for (size_t i = 0; i < y.size(); ++i)
    EXPECT_NEAR(x[y.size() + i], y[i], 1e-12) << i;
}

TEST_F(TinyModelTest, CausalityEarlierPositionsIgnoreLaterTargets) {
  // Changing the last target token leaves the logits of earlier positions.
  auto a = run(i32Tensor({1, 4}, {4, 7, 9, 3}), i32Tensor({1, 3}, {2, 8, 18}));
  auto b = run(i32Tensor({1, 4}, {4, 7, 9, 3}), i32Tensor({1, 3}, {2, 8, 6}));
  ASSERT_TRUE(!!a) << llvm::toString(a.takeError());
  ASSERT_TRUE(!!b) << llvm::toString(b.takeError());
  std::vector<double> x = values(a->at("logits")), y = values(b->at("logits"));
  for (size_t i = 0; i < 2 * 19; ++i)
    EXPECT_NEAR(x[i], y[i], 1e-12) << i;
  bool lastDiffers = false;
  for (size_t i = 2 * 19; i < 3 * 19; ++i)
    lastDiffers |= x[i] != y[i];
  EXPECT_TRUE(lastDiffers);
}

TEST_F(TinyModelTest, BadInputsAreReportedByName) {
  // src_vocab_size is 23: id 23 is out of range.
  auto err = run(i32Tensor({1, 2}, {4, 23}), i32Tensor({1, 2}, {2, 3}));
  ASSERT_FALSE(!!err);
  std::string msg = llvm::toString(err.takeError());
  EXPECT_TRUE(contains(msg, "input 'src_tokens'")) << msg;
  EXPECT_TRUE(contains(msg, "token id 23")) << msg;
  EXPECT_TRUE(contains(msg, "[0, 23)")) << msg;
  // tgt_vocab_size is 19.
  err = run(i32Tensor({1, 2}, {4, 5}), i32Tensor({1, 2}, {2, 19}));
  ASSERT_FALSE(!!err);
  msg = llvm::toString(err.takeError());
  EXPECT_TRUE(contains(msg, "input 'tgt_tokens'")) << msg;
  EXPECT_TRUE(contains(msg, "[0, 19)")) << msg;
  // Over the compiled maxima.
  err = run(i32Tensor({5, 1}, {1, 1, 1, 1, 1}), i32Tensor({5, 1}, {1, 1, 1, 1, 1}));
  ASSERT_FALSE(!!err);
  msg = llvm::toString(err.takeError());
  EXPECT_TRUE(contains(msg, "input 'src_tokens' has size 5 in dimension 0, outside [1, 4]"))
      << msg;
}

TEST(LoadModelDefinitionTest, ErrorsNameTheFile) {
  MLIRContext ctx;
  auto missing = loadModelDefinition(ctx, "/nonexistent/model.json", BuildOptions());
  ASSERT_FALSE(!!missing);
  std::string msg = llvm::toString(missing.takeError());
  EXPECT_TRUE(contains(msg, "/nonexistent/model.json")) << msg;
}

} // namespace
