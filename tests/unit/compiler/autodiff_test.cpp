// Gradient checks: --transfuse-autodiff's gradients (ir/Gradients.cpp, run
// by the fp64 reference backend) against central finite differences of the
// loss, every parameter element: |analytic - numeric| <= 1e-5 + 1e-3·|numeric|
// with eps 1e-6. Each case is a small @loss over parameters (random, fp64)
// and inputs; most end in sum(y · r) with a random input r, so that every
// element of y gets its own weight. Covered: matmul with every transpose
// and batch broadcasting, broadcast binary ops, the activations, softmax
// over causally masked scores with a fully masked row, layer norm,
// embedding with repeated ids and a tied output projection, cross-entropy
// with label smoothing and an ignored label, reshape and transpose,
// split / concat, dropout (the regenerated mask), reductions, pooling in
// every mode and l2_normalize.
#include "models/Models.h"
#include "passes/Passes.h"
#include "tests/unit/compiler/TestHelpers.h"

#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cmath>
#include <limits>
#include <random>

using namespace mlir;
using namespace mlir::transfuse;
using namespace transfuse_test;

namespace {

struct Input {
  std::string name;
  rt::Tensor value;
};

/// Random F32 values in [-1, 1].
rt::Tensor randomF32(std::vector<int64_t> shape, std::mt19937 &rng) {
  rt::Tensor t = rt::Tensor::zeros(rt::DType::F32, std::move(shape));
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.data<float>()[i] = u(rng);
  return t;
}

/// Differentiates @loss of `module` and checks the gradient of every
/// parameter (at most `perParam` elements of each, spread evenly) against
/// finite differences, with random fp64 weights.
void checkModule(ModuleOp module, const std::vector<Input> &inputs, uint32_t seed,
                 int64_t perParam) {
  PassManager pm(module.getContext());
  pm.addPass(createTransfuseAutodiff());
  ASSERT_TRUE(succeeded(pm.run(module)));
  auto loss = module.lookupSymbol<func::FuncOp>("loss");
  auto grad = module.lookupSymbol<func::FuncOp>("loss_grad");
  ASSERT_TRUE(loss && grad);

  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  TensorMap weights;
  std::vector<std::string> names;
  loss.walk([&](ParamOp p) {
    std::string name = p.getName().str();
    if (weights.count(name))
      return;
    auto type = cast<RankedTensorType>(p.getType());
    rt::Tensor w = rt::Tensor::zeros(rt::DType::F64, std::vector<int64_t>(type.getShape()));
    for (int64_t i = 0; i < w.numElements(); ++i)
      w.data<double>()[i] = u(rng);
    weights.emplace(name, std::move(w));
    names.push_back(name);
  });
  TensorMap in;
  for (const Input &i : inputs)
    in.emplace(i.name, i.value);

  auto analytic = reference::run(grad, weights, in, /*f64Outputs=*/true);
  ASSERT_TRUE(bool(analytic)) << errorText(analytic);
  auto lossAt = [&](const TensorMap &w) {
    auto out = reference::run(loss, w, in, true);
    EXPECT_TRUE(bool(out)) << errorText(out);
    return out ? out->begin()->second.data<double>()[0] : NAN;
  };
  const double base = lossAt(weights);
  EXPECT_NEAR(analytic->at("loss").data<double>()[0], base, 1e-12 * (1 + std::fabs(base)));
  const double eps = 1e-6;
  for (const std::string &name : names) {
    const rt::Tensor &g = analytic->at("grad." + name);
    const int64_t n = weights.at(name).numElements();
    ASSERT_EQ(g.numElements(), n) << name;
    const int64_t step = std::max<int64_t>(1, n / perParam);
    for (int64_t i = (n - 1) % step; i < n; i += step) {
      TensorMap w = weights;
      double *p = w.at(name).data<double>() + i;
      const double x = *p;
      *p = x + eps;
      const double plus = lossAt(w);
      *p = x - eps;
      const double minus = lossAt(w);
      const double numeric = (plus - minus) / (2 * eps);
      ASSERT_NEAR(g.data<double>()[i], numeric, 1e-5 + 1e-3 * std::fabs(numeric))
          << "grad." << name << "[" << i << "]";
    }
  }
}

/// Parses `body` as @loss (inputs named by transfuse.name), differentiates
/// it, and checks every element of every parameter's gradient.
void checkGradients(const std::string &body, const std::vector<Input> &inputs, uint32_t seed = 1) {
  MLIRContext context;
  context.loadDialect<TransfuseDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(body, &context);
  ASSERT_TRUE(module) << body;
  SCOPED_TRACE(body);
  checkModule(*module, inputs, seed, std::numeric_limits<int64_t>::max());
}

const char *kHeader = R"mlir(
func.func @loss()mlir";
const char *kAttrs = R"mlir( -> (tensor<f32> {transfuse.name = "loss"})
    attributes {transfuse.max_batch = 4 : i64, transfuse.max_seq_len = 8 : i64} {
)mlir";

std::string lossFunc(const std::string &args, const std::string &ops) {
  return kHeader + args + ")" + kAttrs + ops + "}\n";
}

TEST(Autodiff, MatmulEveryTransposeAndBatchBroadcast) {
  std::mt19937 rng(3);
  // y = x·Wᵀ + b, tanh, then a batched [2,3,4]·[4,5] with the weight
  // broadcast over the batch, and an [2,5,3]ᵀ-stored operand.
  checkGradients(lossFunc(R"(%x: tensor<?x3x4xf32> {transfuse.name = "x"}, %r: tensor<?x3x5xf32> {transfuse.name = "r"})",
                          R"(
  %w = transfuse.param "w" {init = #transfuse.init<zeros>} : tensor<4x4xf32>
  %b = transfuse.param "b" {init = #transfuse.init<zeros>} : tensor<4xf32>
  %v = transfuse.param "v" {init = #transfuse.init<zeros>} : tensor<4x5xf32>
  %u = transfuse.param "u" {init = #transfuse.init<zeros>} : tensor<2x3x3xf32>
  %y = transfuse.matmul %x, %w {transpose_rhs = true} : (tensor<?x3x4xf32>, tensor<4x4xf32>) -> tensor<?x3x4xf32>
  %z = transfuse.add %y, %b : (tensor<?x3x4xf32>, tensor<4xf32>) -> tensor<?x3x4xf32>
  %t = transfuse.tanh %z : tensor<?x3x4xf32>
  %o = transfuse.matmul %t, %v : (tensor<?x3x4xf32>, tensor<4x5xf32>) -> tensor<?x3x5xf32>
  %p = transfuse.matmul %u, %o {transpose_lhs = true} : (tensor<2x3x3xf32>, tensor<?x3x5xf32>) -> tensor<2x3x5xf32>
  %q = transfuse.matmul %o, %u {transpose_lhs = true, transpose_rhs = true} : (tensor<?x3x5xf32>, tensor<2x3x3xf32>) -> tensor<2x5x3xf32>
  %m = transfuse.mul %p, %r : (tensor<2x3x5xf32>, tensor<?x3x5xf32>) -> tensor<2x3x5xf32>
  %s1 = transfuse.reduce_sum %m {axes = array<i64: 0, 1, 2>} : (tensor<2x3x5xf32>) -> tensor<f32>
  %q2 = transfuse.mul %q, %q : (tensor<2x5x3xf32>, tensor<2x5x3xf32>) -> tensor<2x5x3xf32>
  %s2 = transfuse.reduce_mean %q2 {axes = array<i64: 1>, keep_dims = true} : (tensor<2x5x3xf32>) -> tensor<2x1x3xf32>
  %s3 = transfuse.reduce_sum %s2 {axes = array<i64: 0, 1, 2>} : (tensor<2x1x3xf32>) -> tensor<f32>
  %l = transfuse.add %s1, %s3 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
)"),
                 {{"x", randomF32({2, 3, 4}, rng)}, {"r", randomF32({2, 3, 5}, rng)}});
}

TEST(Autodiff, BroadcastBinaryOpsAndActivations) {
  std::mt19937 rng(4);
  checkGradients(lossFunc(R"(%x: tensor<?x4xf32> {transfuse.name = "x"}, %r: tensor<?x4xf32> {transfuse.name = "r"})",
                          R"(
  %a = transfuse.param "a" {init = #transfuse.init<zeros>} : tensor<4xf32>
  %c = transfuse.param "c" {init = #transfuse.init<zeros>} : tensor<3x1xf32>
  %d = transfuse.param "d" {init = #transfuse.init<zeros>} : tensor<f32>
  %s = transfuse.sub %x, %a : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  %m = transfuse.mul %s, %c : (tensor<?x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  %e = transfuse.exp %c : tensor<3x1xf32>
  %q = transfuse.div %m, %e : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  %g = transfuse.gelu %q : tensor<3x4xf32>
  %h = transfuse.gelu %q {approximate = #transfuse.approximation<tanh>} : tensor<3x4xf32>
  %k = transfuse.scale %h {factor = -1.5 : f64} : tensor<3x4xf32>
  %sum = transfuse.add %g, %k : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %n = transfuse.add %sum, %d : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
  %re = transfuse.relu %n : tensor<3x4xf32>
  %w = transfuse.mul %re, %r : (tensor<3x4xf32>, tensor<?x4xf32>) -> tensor<3x4xf32>
  %l = transfuse.reduce_sum %w {axes = array<i64: 0, 1>} : (tensor<3x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
)"),
                 {{"x", randomF32({3, 4}, rng)}, {"r", randomF32({3, 4}, rng)}});
}

// silu alone and in a linear layer's epilogue (fused: linear {silu}, and its
// backward linear_input_grad {silu}).
TEST(Autodiff, Silu) {
  std::mt19937 rng(12);
  checkGradients(lossFunc(R"(%x: tensor<?x4xf32> {transfuse.name = "x"}, %r: tensor<?x3xf32> {transfuse.name = "r"})",
                          R"(
  %w = transfuse.param "w" {init = #transfuse.init<zeros>} : tensor<4x3xf32>
  %b = transfuse.param "b" {init = #transfuse.init<zeros>} : tensor<3xf32>
  %v = transfuse.param "v" {init = #transfuse.init<zeros>} : tensor<3x3xf32>
  %h = transfuse.matmul %x, %w : (tensor<?x4xf32>, tensor<4x3xf32>) -> tensor<?x3xf32>
  %hb = transfuse.add %h, %b : (tensor<?x3xf32>, tensor<3xf32>) -> tensor<?x3xf32>
  %s = transfuse.silu %hb : tensor<?x3xf32>
  %o = transfuse.matmul %s, %v : (tensor<?x3xf32>, tensor<3x3xf32>) -> tensor<?x3xf32>
  %t = transfuse.silu %o : tensor<?x3xf32>
  %m = transfuse.mul %t, %r : (tensor<?x3xf32>, tensor<?x3xf32>) -> tensor<?x3xf32>
  %l = transfuse.reduce_sum %m {axes = array<i64: 0, 1>} : (tensor<?x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
)"),
                 {{"x", randomF32({3, 4}, rng)}, {"r", randomF32({3, 3}, rng)}});
}

// Softmax over causally masked scores: with 3 queries and 2 keys query 0
// sees no key, a fully masked row (zeros forward, zero gradient).
TEST(Autodiff, MaskedSoftmaxWithAFullyMaskedRow) {
  std::mt19937 rng(5);
  checkGradients(lossFunc(R"(%r: tensor<2x3x2xf32> {transfuse.name = "r"})",
                          R"(
  %q = transfuse.param "q" {init = #transfuse.init<zeros>} : tensor<2x3x4xf32>
  %k = transfuse.param "k" {init = #transfuse.init<zeros>} : tensor<2x2x4xf32>
  %s = transfuse.matmul %q, %k {transpose_rhs = true} : (tensor<2x3x4xf32>, tensor<2x2x4xf32>) -> tensor<2x3x2xf32>
  %t = transfuse.scale %s {factor = 0.5 : f64} : tensor<2x3x2xf32>
  %c3 = transfuse.dim %q, 1 : tensor<2x3x4xf32>
  %c2 = transfuse.dim %k, 1 : tensor<2x2x4xf32>
  %m = transfuse.causal_mask %c3, %c2 : tensor<?x?xi1>
  %ninf = transfuse.constant dense<0xFF800000> : tensor<f32>
  %sel = transfuse.select %m, %t, %ninf : (tensor<?x?xi1>, tensor<2x3x2xf32>, tensor<f32>) -> tensor<2x3x2xf32>
  %p = transfuse.softmax %sel {axis = 2 : i64} : tensor<2x3x2xf32>
  %w = transfuse.mul %p, %r : (tensor<2x3x2xf32>, tensor<2x3x2xf32>) -> tensor<2x3x2xf32>
  %l = transfuse.reduce_sum %w {axes = array<i64: 0, 1, 2>} : (tensor<2x3x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
)"),
                 {{"r", randomF32({2, 3, 2}, rng)}});
}

TEST(Autodiff, LayerNorm) {
  std::mt19937 rng(6);
  checkGradients(lossFunc(R"(%r: tensor<?x5xf32> {transfuse.name = "r"})",
                          R"(
  %x = transfuse.param "x" {init = #transfuse.init<zeros>} : tensor<3x5xf32>
  %g = transfuse.param "g" {init = #transfuse.init<zeros>} : tensor<5xf32>
  %b = transfuse.param "b" {init = #transfuse.init<zeros>} : tensor<5xf32>
  %y = transfuse.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<3x5xf32>, tensor<5xf32>, tensor<5xf32>) -> tensor<3x5xf32>
  %w = transfuse.mul %y, %r : (tensor<3x5xf32>, tensor<?x5xf32>) -> tensor<3x5xf32>
  %l = transfuse.reduce_sum %w {axes = array<i64: 0, 1>} : (tensor<3x5xf32>) -> tensor<f32>
  return %l : tensor<f32>
)"),
                 {{"r", randomF32({3, 5}, rng)}});
}

// Sentence pooling over a key-padding mask (a padded row, a row with one
// kept token) in each mode, then l2_normalize: the embed entry's tail.
TEST(Autodiff, PoolingAndL2Normalize) {
  for (const char *mode : {"cls", "mean", "max"}) {
    std::mt19937 rng(9);
    rt::Tensor ids = rt::Tensor::zeros(rt::DType::I32, {3, 4});
    const int32_t tokens[] = {5, 6, 7, 8, 5, 6, 0, 0, 9, 0, 0, 0};
    std::copy(std::begin(tokens), std::end(tokens), ids.data<int32_t>());
    checkGradients(lossFunc(R"(%ids: tensor<?x?xi32> {transfuse.name = "ids"}, %r: tensor<?x3xf32> {transfuse.name = "r"})",
                            std::string(R"(
  %x = transfuse.param "x" {init = #transfuse.init<zeros>} : tensor<3x4x3xf32>
  %keep = transfuse.key_padding_mask %ids {pad_id = 0 : i64} : (tensor<?x?xi32>) -> tensor<?x?xi1>
  %p = transfuse.pool %x, %keep {mode = #transfuse.pooling<)") + mode + R"(>} : (tensor<3x4x3xf32>, tensor<?x?xi1>) -> tensor<3x3xf32>
  %n = transfuse.l2_normalize %p : tensor<3x3xf32>
  %w = transfuse.mul %n, %r : (tensor<3x3xf32>, tensor<?x3xf32>) -> tensor<3x3xf32>
  %l = transfuse.reduce_sum %w {axes = array<i64: 0, 1>} : (tensor<3x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
)"),
                   {{"ids", ids}, {"r", randomF32({3, 3}, rng)}});
  }
}

// The Vision Transformer's embedding: an image unfolded into patches (2x3
// patches of a 4x6 image, 2 channels) through a linear projection, a learned
// CLS token expanded over the batch and concatenated in front.
TEST(Autodiff, UnfoldExpandAndConcat) {
  std::mt19937 rng(11);
  checkGradients(lossFunc(R"(%r: tensor<?x5x5xf32> {transfuse.name = "r"})", R"(
  %img = transfuse.param "img" {init = #transfuse.init<zeros>} : tensor<2x2x4x6xf32>
  %w = transfuse.param "w" {init = #transfuse.init<zeros>} : tensor<5x12xf32>
  %cls = transfuse.param "cls" {init = #transfuse.init<zeros>} : tensor<1x1x5xf32>
  %p = transfuse.unfold %img {patch = array<i64: 2, 3>} : (tensor<2x2x4x6xf32>) -> tensor<2x4x12xf32>
  %e = transfuse.matmul %p, %w {transpose_rhs = true} : (tensor<2x4x12xf32>, tensor<5x12xf32>) -> tensor<2x4x5xf32>
  %first = transfuse.slice %e {axis = 1 : i64, start = 0 : i64, size = 1 : i64} : (tensor<2x4x5xf32>) -> tensor<2x1x5xf32>
  %c = transfuse.expand %cls, %first : (tensor<1x1x5xf32>, tensor<2x1x5xf32>) -> tensor<2x1x5xf32>
  %h = transfuse.concat %c, %e {axis = 1 : i64} : (tensor<2x1x5xf32>, tensor<2x4x5xf32>) -> tensor<2x5x5xf32>
  %t = transfuse.tanh %h : tensor<2x5x5xf32>
  %m = transfuse.mul %t, %r : (tensor<2x5x5xf32>, tensor<?x5x5xf32>) -> tensor<2x5x5xf32>
  %l = transfuse.reduce_sum %m {axes = array<i64: 0, 1, 2>} : (tensor<2x5x5xf32>) -> tensor<f32>
  return %l : tensor<f32>
)"),
                 {{"r", randomF32({2, 5, 5}, rng)}});
}

// Llama's new ops: RMSNorm, the rotary embedding of two heads of 4 (the
// rotation's transpose is the rotation by -θ) at positions offset by 3, and
// RMSNorm fused with its residual add (the sum used too).
TEST(Autodiff, RmsNormAndRotary) {
  std::mt19937 rng(12);
  checkGradients(lossFunc(R"(%r: tensor<2x3x8xf32> {transfuse.name = "r"})", R"(
  %x = transfuse.param "x" {init = #transfuse.init<zeros>} : tensor<2x3x8xf32>
  %g = transfuse.param "g" {init = #transfuse.init<zeros>} : tensor<8xf32>
  %n = transfuse.layer_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-05 : f64, rms} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %f = transfuse.constant dense<[1.0, 0.3]> : tensor<2xf32>
  %three = transfuse.dim %r, 1 : tensor<2x3x8xf32>
  %q = transfuse.rotary %n, %f offset %three {head_dim = 4 : i64} : (tensor<2x3x8xf32>, tensor<2xf32>, index) -> tensor<2x3x8xf32>
  %y, %s = transfuse.add_layer_norm %q, %x, %g {epsilon = 1.0e-05 : f64, rms} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>)
  %t = transfuse.tanh %y : tensor<2x3x8xf32>
  %u = transfuse.add %t, %s : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %m = transfuse.mul %u, %r : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %l = transfuse.reduce_sum %m {axes = array<i64: 0, 1, 2>} : (tensor<2x3x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
)"),
                 {{"r", randomF32({2, 3, 8}, rng)}});
}

// The paired epilogues of transfuse.linear: gated (SwiGLU: silu of the
// first half times the second, with a bias; GeGLU) and rotary (the first 8
// of 12 columns rotated in heads of 4 at positions offset by 3, with a
// bias), each gradient through x, the weight and the bias.
TEST(Autodiff, GatedAndRotaryLinear) {
  std::mt19937 rng(14);
  for (const char *act : {"silu", "gelu"})
    checkGradients(lossFunc(R"(%r: tensor<2x3x5xf32> {transfuse.name = "r"})", std::string(R"(
  %x = transfuse.param "x" {init = #transfuse.init<zeros>} : tensor<2x3x4xf32>
  %w = transfuse.param "w" {init = #transfuse.init<zeros>} : tensor<10x4xf32>
  %b = transfuse.param "b" {init = #transfuse.init<zeros>} : tensor<10xf32>
  %y = transfuse.linear %x, %w bias %b {activation = #transfuse.activation<)") + act + R"(>, gated, transpose_weight} : (tensor<2x3x4xf32>, tensor<10x4xf32>, tensor<10xf32>) -> tensor<2x3x5xf32>
  %m = transfuse.mul %y, %r : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %l = transfuse.reduce_sum %m {axes = array<i64: 0, 1, 2>} : (tensor<2x3x5xf32>) -> tensor<f32>
  return %l : tensor<f32>
)"),
                   {{"r", randomF32({2, 3, 5}, rng)}});
  checkGradients(lossFunc(R"(%r: tensor<2x3x12xf32> {transfuse.name = "r"})", R"(
  %x = transfuse.param "x" {init = #transfuse.init<zeros>} : tensor<2x3x4xf32>
  %w = transfuse.param "w" {init = #transfuse.init<zeros>} : tensor<4x12xf32>
  %b = transfuse.param "b" {init = #transfuse.init<zeros>} : tensor<12xf32>
  %f = transfuse.constant dense<[1.0, 0.3]> : tensor<2xf32>
  %three = transfuse.dim %r, 1 : tensor<2x3x12xf32>
  %y = transfuse.linear %x, %w bias %b rotary %f offset %three {head_dim = 4 : i64, rotary_columns = 8 : i64} : (tensor<2x3x4xf32>, tensor<4x12xf32>, tensor<12xf32>, tensor<2xf32>, index) -> tensor<2x3x12xf32>
  %m = transfuse.mul %y, %r : (tensor<2x3x12xf32>, tensor<2x3x12xf32>) -> tensor<2x3x12xf32>
  %l = transfuse.reduce_sum %m {axes = array<i64: 0, 1, 2>} : (tensor<2x3x12xf32>) -> tensor<f32>
  return %l : tensor<f32>
)"),
                 {{"r", randomF32({2, 3, 12}, rng)}});
}

// An embedding read by gather (ids repeat) and, tied, as the output
// projection: one parameter whose gradient sums both uses; cross-entropy
// with label smoothing 0.1 over the vocabulary, label 0 ignored.
TEST(Autodiff, TiedEmbeddingAndCrossEntropy) {
  checkGradients(lossFunc(R"(%ids: tensor<?x?xi32> {transfuse.name = "ids"}, %labels: tensor<?x?xi32> {transfuse.name = "labels"})",
                          R"(
  %e = transfuse.param "emb" {init = #transfuse.init<zeros>} : tensor<6x4xf32>
  %e2 = transfuse.param "emb" {init = #transfuse.init<zeros>} : tensor<6x4xf32>
  %h = transfuse.gather %e, %ids : (tensor<6x4xf32>, tensor<?x?xi32>) -> tensor<?x?x4xf32>
  %t = transfuse.tanh %h : tensor<?x?x4xf32>
  %z = transfuse.matmul %t, %e2 {transpose_rhs = true} : (tensor<?x?x4xf32>, tensor<6x4xf32>) -> tensor<?x?x6xf32>
  %l = transfuse.cross_entropy %z, %labels {ignore_index = 0 : i64, label_smoothing = 1.0e-01 : f64} : (tensor<?x?x6xf32>, tensor<?x?xi32>) -> tensor<f32>
  return %l : tensor<f32>
)"),
                 {{"ids", i32Tensor({2, 3}, {1, 3, 3, 5, 1, 1})},
                  {"labels", i32Tensor({2, 3}, {2, 0, 5, 1, 4, 0})}});
}

TEST(Autodiff, ShapesSplitConcatAndDropout) {
  std::mt19937 rng(7);
  checkGradients(lossFunc(R"(%r: tensor<2x4x3xf32> {transfuse.name = "r"})",
                          R"(
  %w = transfuse.param "w" {init = #transfuse.init<zeros>} : tensor<9x4xf32>
  %a, %b, %c = transfuse.split %w {axis = 0 : i64, sizes = array<i64: 3, 3, 3>} : (tensor<9x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
  %cat = transfuse.concat %c, %a {axis = 0 : i64} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<6x4xf32>
  %rs = transfuse.reshape %cat : (tensor<6x4xf32>) -> tensor<2x3x4xf32>
  %tr = transfuse.transpose %rs {permutation = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  %d = transfuse.dropout %tr {rate = 3.0e-01 : f64, seed = 5 : i64, stream = 2 : i64} : tensor<2x4x3xf32>
  %x = transfuse.mul %d, %d : (tensor<2x4x3xf32>, tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  %y = transfuse.mul %x, %r : (tensor<2x4x3xf32>, tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  %l = transfuse.reduce_sum %y {axes = array<i64: 0, 1, 2>} : (tensor<2x4x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
)"),
                 {{"r", randomF32({2, 4, 3}, rng)}});
}

// relu's derivative is read from its result, or from the dropout that is
// the result's only use (Gradients.cpp, reluDerivativeSource): a fused
// linear relu layer and a relu op, each under dropout at rates that drop
// many elements of both signs.
TEST(Autodiff, ReluDerivativeFromItsResultOrItsDropout) {
  std::mt19937 rng(11);
  checkGradients(lossFunc(R"(%x: tensor<2x5x3xf32> {transfuse.name = "x"}, %s: tensor<2x5x4xf32> {transfuse.name = "s"}, )"
                          R"(%q: tensor<2x5x4xf32> {transfuse.name = "q"})",
                          R"(
  %w = transfuse.param "w" {init = #transfuse.init<zeros>} : tensor<4x3xf32>
  %b = transfuse.param "b" {init = #transfuse.init<zeros>} : tensor<4xf32>
  %h = transfuse.linear %x, %w bias %b {activation = #transfuse.activation<relu>, transpose_weight} : (tensor<2x5x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<2x5x4xf32>
  %d = transfuse.dropout %h {rate = 5.0e-01 : f64, seed = 3 : i64, stream = 1 : i64} : tensor<2x5x4xf32>
  %e = transfuse.mul %d, %s : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  %t = transfuse.relu %e : tensor<2x5x4xf32>
  %u = transfuse.dropout %t {rate = 4.0e-01 : f64, seed = 3 : i64, stream = 2 : i64} : tensor<2x5x4xf32>
  %y = transfuse.mul %u, %q : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  %l = transfuse.reduce_sum %y {axes = array<i64: 0, 1, 2>} : (tensor<2x5x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
)"),
                 {{"x", randomF32({2, 5, 3}, rng)},
                  {"s", randomF32({2, 5, 4}, rng)},
                  {"q", randomF32({2, 5, 4}, rng)}});
}

// cross_entropy's value as PyTorch defines CrossEntropyLoss(label_smoothing,
// ignore_index): -Σ_c q_c·log p_c with q = (1 - ε)·onehot(y) + ε/V, mean
// over the tokens whose label is not ignored; 0 when every label is.
TEST(Autodiff, CrossEntropyIsPyTorchsDefinition) {
  MLIRContext context;
  context.loadDialect<TransfuseDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
      lossFunc(R"(%z: tensor<?x4xf32> {transfuse.name = "z"}, %y: tensor<?xi32> {transfuse.name = "y"})", R"(
  %l = transfuse.cross_entropy %z, %y {ignore_index = 3 : i64, label_smoothing = 2.5e-01 : f64} : (tensor<?x4xf32>, tensor<?xi32>) -> tensor<f32>
  return %l : tensor<f32>
)"),
      &context);
  ASSERT_TRUE(module);
  auto loss = module->lookupSymbol<func::FuncOp>("loss");
  const std::vector<double> z = {0.5, -1, 2, 0.25, 1, 1, -3, 0, 0.1, 0.2, 0.3, 0.4};
  const std::vector<int32_t> y = {2, 3, 0};
  double expected = 0;
  for (int t = 0; t < 3; ++t) {
    if (y[t] == 3)
      continue;
    double sum = 0;
    for (int c = 0; c < 4; ++c)
      sum += std::exp(z[t * 4 + c]);
    for (int c = 0; c < 4; ++c) {
      double q = (c == y[t] ? 0.75 : 0.0) + 0.25 / 4;
      expected -= q * std::log(std::exp(z[t * 4 + c]) / sum);
    }
  }
  expected /= 2;
  auto out = reference::run(loss, {}, {{"z", f32Tensor({3, 4}, z)}, {"y", i32Tensor({3}, y)}}, true);
  ASSERT_TRUE(bool(out)) << errorText(out);
  EXPECT_NEAR(out->at("loss").data<double>()[0], expected, 1e-6);
  auto none = reference::run(loss, {}, {{"z", f32Tensor({1, 4}, {1, 2, 3, 4})}, {"y", i32Tensor({1}, {3})}}, true);
  ASSERT_TRUE(bool(none)) << errorText(none);
  EXPECT_EQ(none->at("loss").data<double>()[0], 0.0);
  auto bad = reference::run(loss, {}, {{"z", f32Tensor({1, 4}, {1, 2, 3, 4})}, {"y", i32Tensor({1}, {4})}}, true);
  EXPECT_TRUE(contains(errorText(bad), "label 4 in input 'y' is outside the vocabulary [0, 4)"))
      << errorText(bad);
}

// The whole paper model (tiny sizes, post-LN, dropout 0.1 on, label
// smoothing 0.1, padded sources and targets): the `loss` entry of a
// training build, every parameter checked at a few elements.
TEST(Autodiff, TinyEncoderDecoderLoss) {
  for (const char *config : {"tiny-encoder-decoder.json", "tiny-encoder-decoder-pre.json"}) {
    SCOPED_TRACE(config);
    MLIRContext context;
    BuildOptions options;
    options.training = true;
    options.maxBatch = 2;
    options.maxSeqLen = 8;
    auto module = loadModelDefinition(
        context, std::string(TRANSFUSE_SOURCE_DIR "/models/") + config, options);
    ASSERT_TRUE(bool(module)) << errorText(module);
    int dropouts = 0;
    (**module).lookupSymbol<func::FuncOp>("loss").walk([&](DropoutOp) { ++dropouts; });
    EXPECT_GT(dropouts, 10) << "a training build has dropout";
    // pad_id 1: the second source and target are padded.
    checkModule(**module,
                {{"src_tokens", i32Tensor({2, 5}, {0, 5, 7, 9, 2, 4, 6, 2, 1, 1})},
                 {"tgt_tokens", i32Tensor({2, 4}, {0, 3, 4, 5, 0, 8, 1, 1})},
                 {"labels", i32Tensor({2, 4}, {3, 4, 5, 2, 8, 2, 1, 1})}},
                9, 3);
  }
}

// GPT-2 style (pre-LN, learned positions, gelu_tanh, tied lm_head): tokens
// and labels shifted by one, as the trainer makes them.
TEST(Autodiff, TinyDecoderOnlyLoss) {
  MLIRContext context;
  BuildOptions options;
  options.training = true;
  options.maxBatch = 2;
  options.maxSeqLen = 8;
  auto module = loadModelDefinition(context, TRANSFUSE_SOURCE_DIR "/models/tiny-decoder-only.json",
                                    options);
  ASSERT_TRUE(bool(module)) << errorText(module);
  checkModule(**module,
              {{"tokens", i32Tensor({2, 4}, {0, 3, 4, 5, 0, 8, 9, 2})},
               {"labels", i32Tensor({2, 4}, {3, 4, 5, 2, 8, 9, 2, 1})}},
              11, 3);
}

// Autodiff after fusion: each strategy's fused ops (attention with its
// masks, add_layer_norm, linear epilogues, merged projections, fused
// elementwise chains) differentiated by their rules, the whole tiny model
// checked against finite differences.
TEST(Autodiff, FusedTinyModels) {
  for (const char *config : {"tiny-encoder-decoder.json", "tiny-encoder-decoder-pre.json",
                             "tiny-decoder-only.json"})
    for (const char *strategy : {"attention+layernorm", "all"}) {
      SCOPED_TRACE(std::string(config) + " " + strategy);
      MLIRContext context;
      BuildOptions options;
      options.training = true;
      options.maxBatch = 2;
      options.maxSeqLen = 8;
      options.labelSmoothing = 0.1;
      auto module = loadModelDefinition(
          context, std::string(TRANSFUSE_SOURCE_DIR "/models/") + config, options);
      ASSERT_TRUE(bool(module)) << errorText(module);
      PassManager pm(&context);
      buildFusionPipeline(pm, llvm::cantFail(FusionStrategy::parse(strategy)), nullptr);
      ASSERT_TRUE(succeeded(pm.run(**module)));
      int attention = 0;
      (**module).lookupSymbol<func::FuncOp>("loss").walk([&](AttentionOp) { ++attention; });
      EXPECT_GT(attention, 0) << "the loss is fused";
      std::vector<Input> inputs;
      if (std::string(config) == "tiny-decoder-only.json")
        inputs = {{"tokens", i32Tensor({2, 4}, {0, 3, 4, 5, 0, 8, 9, 2})},
                  {"labels", i32Tensor({2, 4}, {3, 4, 5, 2, 8, 9, 2, 1})}};
      else
        inputs = {{"src_tokens", i32Tensor({2, 5}, {2, 5, 7, 9, 3, 4, 6, 3, 1, 1})},
                  {"tgt_tokens", i32Tensor({2, 4}, {2, 3, 4, 5, 2, 8, 1, 1})},
                  {"labels", i32Tensor({2, 4}, {3, 4, 5, 3, 8, 3, 1, 1})}};
      checkModule(**module, inputs, 13, 2);
    }
}

// A parameter the loss does not read gets zeros; an op without a rule (an
// attention with an additive bias) is an error naming it.
TEST(Autodiff, UnusedParameterAndMissingRule) {
  checkGradients(lossFunc(R"(%r: tensor<3xf32> {transfuse.name = "r"})",
                          R"(
  %w = transfuse.param "w" {init = #transfuse.init<zeros>} : tensor<3xf32>
  %unused = transfuse.param "unused" {init = #transfuse.init<zeros>} : tensor<2xf32>
  %y = transfuse.mul %w, %r : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %l = transfuse.reduce_sum %y {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
)"),
                 {{"r", f32Tensor({3}, {1, 2, 3})}});
  MLIRContext context;
  context.loadDialect<TransfuseDialect, func::FuncDialect>();
  std::string error;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    error += d.str();
    return success();
  });
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
      lossFunc(R"(%bias: tensor<1x1x2x2xf32> {transfuse.name = "bias"})", R"(
  %q = transfuse.param "q" {init = #transfuse.init<zeros>} : tensor<1x1x2x4xf32>
  %o = transfuse.attention %q, %q, %q bias %bias {scale = 0.5 : f64} : (tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x4xf32>
  %l = transfuse.reduce_sum %o {axes = array<i64: 0, 1, 2, 3>} : (tensor<1x1x2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
)"),
      &context);
  ASSERT_TRUE(module);
  PassManager pm(&context);
  pm.addPass(createTransfuseAutodiff());
  EXPECT_TRUE(failed(pm.run(*module)));
  EXPECT_TRUE(contains(error, "'transfuse.attention' op with an additive bias has no gradient rule"))
      << error;
}

} // namespace
