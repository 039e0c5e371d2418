// --dtype int8 (docs/int8.md) and --dtype bf16 on the cpu target
// (docs/bf16.md): the tiny encoder-decoder, and a Llama-shaped directory
// (rotary Q/K and SwiGLU: the paired GEMMs), compiled with their products in
// low precision against the same models in fp32, from the same seeded
// weights: the generated code calls the int8 or bf16 GEMM for every packed
// weight (and the fp32 build never; bf16: attention's products too), the
// logits stay within a bound of their scale but differ (the comparison is
// not vacuous). bf16 training: every product of the train step (the
// backward's and attention's too) runs in bf16, its
// loss and gradients stay within a bound of fp32's, and its steps give the
// same bits on 1 and 2 threads. The options they do not take are refused.

#include "compiler/Compiler.h"
#include "models/Models.h"
#include "runtime/host/CompiledModel.h"

#include "llvm/Support/MemoryBuffer.h"

#include "tests/unit/compiler/TestHelpers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace {

using namespace mlir;
using namespace mlir::transfuse;
using transfuse_test::i32Tensor;
namespace rt = ::transfuse::rt;

struct Build {
  compiler::TemporaryDirectory dir;
  std::unique_ptr<rt::CompiledModel> model;
  std::string source;
};

Build compileTiny(const std::string &dtype, const std::string &path, bool train = false,
                  int threads = 2) {
  MLIRContext context;
  BuildOptions options;
  options.maxBatch = 2;
  options.training = train;
  options.decoding = !train;
  auto module = loadModelDefinition(context, path, options);
  EXPECT_TRUE(!!module) << llvm::toString(module.takeError());
  auto dir = compiler::TemporaryDirectory::create("dtype-test");
  EXPECT_TRUE(!!dir);
  Build b{std::move(*dir), nullptr, ""};
  compiler::CompileOptions o;
  o.strategy = *FusionStrategy::parse("all");
  o.build.int8 = dtype == "int8";
  o.build.bf16 = dtype == "bf16";
  o.train = train;
  auto artifact = compiler::compile(**module, b.dir.path(), o);
  EXPECT_TRUE(!!artifact) << llvm::toString(artifact.takeError());
  auto model = rt::CompiledModel::load(b.dir.path() + "/libmodel.so",
                                       {.weightsPath = "", .seed = 3, .threads = threads});
  EXPECT_TRUE(model.isOk()) << model.status().message();
  if (model.isOk()) b.model = std::move(*model);
  if (auto text = llvm::MemoryBuffer::getFile(b.dir.path() + "/model.cpp"))
    b.source = (*text)->getBuffer().str();
  return b;
}

// The largest |x - y| and the largest |x| (at least 1).
std::pair<double, double> diffAndScale(const rt::Tensor &x, const rt::Tensor &y) {
  EXPECT_EQ(x.shape, y.shape);
  double scale = 1, diff = 0;
  for (int64_t i = 0; i < x.numElements(); ++i) {
    scale = std::max(scale, std::abs(double(x.data<float>()[i])));
    diff = std::max(diff, std::abs(double(x.data<float>()[i]) - y.data<float>()[i]));
  }
  return {diff, scale};
}

// Both builds of `path` from seed 3: the low-precision GEMM for every packed
// weight in one and none in the other, logits close but not equal.
void expectCloseButNotEqual(const std::string &dtype, const std::string &path,
                            const std::map<std::string, rt::Tensor> &inputs, double bound) {
  Build f32 = compileTiny("f32", path), low = compileTiny(dtype, path);
  ASSERT_TRUE(f32.model && low.model);
  const std::string call = dtype == "int8" ? "kernels::gemmInt8(" : "kernels::gemmBf16(";
  EXPECT_EQ(f32.source.find(call), std::string::npos);
  EXPECT_NE(low.source.find(call), std::string::npos);
  EXPECT_EQ(low.source.find("c.packed["), std::string::npos) << "an fp32 packed GEMM in " << dtype;
  if (dtype == "bf16") {
    EXPECT_EQ(low.source.find("kernels::gemm("), std::string::npos) << "an fp32 GEMM in bf16";
    EXPECT_NE(low.source.find("args.bf16 = true;"), std::string::npos) << "attention in fp32";
  }
  auto a = f32.model->run("forward", inputs);
  auto b = low.model->run("forward", inputs);
  ASSERT_TRUE(a.isOk() && b.isOk());
  auto [diff, scale] = diffAndScale(a->at("logits"), b->at("logits"));
  EXPECT_LE(diff, bound * scale) << path;
  EXPECT_GT(diff, 0.0) << path;
}

const char *kTiny = TRANSFUSE_SOURCE_DIR "/models/tiny-encoder-decoder.json";
const char *kLlama = TRANSFUSE_SOURCE_DIR "/tests/models/tiny-llama";

std::map<std::string, rt::Tensor> tinyInputs() {
  return {{"src_tokens", i32Tensor({2, 6}, {5, 6, 7, 8, 9, 3, 4, 12, 13, 3, 1, 1})},
          {"tgt_tokens", i32Tensor({2, 4}, {2, 5, 6, 7, 2, 8, 9, 1})}};
}
std::map<std::string, rt::Tensor> llamaInputs() {
  return {{"tokens", i32Tensor({2, 7}, {1, 5, 9, 13, 17, 21, 25, 1, 30, 31, 32, 33, 34, 35})}};
}

// Measured: 0.03 of a scale of 2.3 (the encoder-decoder), 0.0045 of 1 (Llama).
TEST(Int8Model, LinearLayersRunOnInt8WeightsWithinTheirScale) {
  expectCloseButNotEqual("int8", kTiny, tinyInputs(), 0.05);
}

TEST(Int8Model, PairedGemmsOfLlamaRunOnInt8Weights) {
  expectCloseButNotEqual("int8", kLlama, llamaInputs(), 0.05);
}

// bf16 keeps 8 bits of each operand: a relative error near 2^-9 per
// product, a few times that through the layers.
TEST(Bf16Model, EveryProductRunsOnBf16OperandsWithinTheirScale) {
  expectCloseButNotEqual("bf16", kTiny, tinyInputs(), 0.02);
}

TEST(Bf16Model, PairedGemmsOfLlamaRunOnBf16Operands) {
  expectCloseButNotEqual("bf16", kLlama, llamaInputs(), 0.02);
}

// One train step's loss and gradients (micro-batch of 2, seed 7).
struct StepOut {
  double loss = 0;
  std::vector<float> grads;
};
StepOut trainStep(Build &b) {
  std::map<std::string, rt::Tensor> in = tinyInputs();
  in["labels"] = i32Tensor({2, 4}, {5, 6, 7, 3, 8, 9, 3, 1});
  StepOut out;
  auto loss = b.model->accumulateGradients("loss_grad", in, 1.0, 7);
  EXPECT_TRUE(loss.isOk()) << loss.status().message();
  if (!loss.isOk()) return out;
  out.loss = *loss;
  EXPECT_TRUE(b.model->takeGradients(out.grads).isOk());
  return out;
}

TEST(Bf16Model, TrainingRunsEveryProductInBf16WithinFp32sGradients) {
  Build f32 = compileTiny("f32", kTiny, /*train=*/true);
  Build bf16 = compileTiny("bf16", kTiny, /*train=*/true);
  Build bf16One = compileTiny("bf16", kTiny, /*train=*/true, /*threads=*/1);
  ASSERT_TRUE(f32.model && bf16.model && bf16One.model);
  // The forward's, the backward's (derivative epilogues) and the weight
  // gradients' products: none left in fp32.
  EXPECT_EQ(bf16.source.find("kernels::gemm("), std::string::npos);
  EXPECT_EQ(bf16.source.find("c.packed["), std::string::npos);
  EXPECT_NE(bf16.source.find("kernels::gemmBf16("), std::string::npos);
  // Attention's products, forward and backward.
  EXPECT_NE(bf16.source.find("args.bf16 = true;"), std::string::npos);
  EXPECT_NE(bf16.source.find("args.forward.bf16 = true;"), std::string::npos);
  // Every weight gradient and matmul call passes its bf16 flag.
  int flagged = 0;
  for (const char *callee : {"exec::weightGrad(", "exec::matmul("})
    for (size_t at = bf16.source.find(callee); at != std::string::npos;
         at = bf16.source.find(callee, at + 1)) {
      const std::string call = bf16.source.substr(at, bf16.source.find(");", at) - at);
      EXPECT_NE(call.find("c.pool, true"), std::string::npos) << call;
      ++flagged;
    }
  EXPECT_GT(flagged, 0);
  const StepOut a = trainStep(f32), b = trainStep(bf16), c = trainStep(bf16One);
  ASSERT_EQ(a.grads.size(), b.grads.size());
  ASSERT_FALSE(a.grads.empty());
  EXPECT_NEAR(a.loss, b.loss, 0.01 * std::abs(a.loss));
  EXPECT_NE(a.loss, b.loss);
  // The gradients as a vector: close in norm (relative), not equal.
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.grads.size(); ++i) {
    diff += (double(a.grads[i]) - b.grads[i]) * (double(a.grads[i]) - b.grads[i]);
    norm += double(a.grads[i]) * a.grads[i];
  }
  EXPECT_LE(std::sqrt(diff), 0.02 * std::sqrt(norm));
  EXPECT_GT(diff, 0.0);
  // The same bits on one thread.
  EXPECT_EQ(b.loss, c.loss);
  ASSERT_EQ(b.grads.size(), c.grads.size());
  EXPECT_EQ(0, std::memcmp(b.grads.data(), c.grads.data(), b.grads.size() * sizeof(float)));
}

TEST(DtypeModel, OptionsTheTargetsDoNotTakeAreRefused) {
  compiler::CompileOptions o;
  o.build.int8 = true;
  o.train = true;
  llvm::Error train = compiler::checkOptions(o);
  ASSERT_TRUE(!!train);
  EXPECT_NE(llvm::toString(std::move(train)).find("inference"), std::string::npos);
  o.train = false;
  o.build.target = "cuda";
  llvm::Error cuda = compiler::checkOptions(o);
  ASSERT_TRUE(!!cuda);
  EXPECT_NE(llvm::toString(std::move(cuda)).find("cpu target"), std::string::npos);
  // bf16 trains on the cpu target.
  compiler::CompileOptions b;
  b.build.bf16 = true;
  b.train = true;
  EXPECT_FALSE(!!compiler::checkOptions(b));
}

}  // namespace
