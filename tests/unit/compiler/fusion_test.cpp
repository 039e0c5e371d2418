// Fusion strategies (parsing, names) and the fusion report (counts, reasons,
// JSON), and the fused ops against the unfused graphs they replace on the
// built-in models: fusion=all on the tiny configs gives the same logits.

#include "codegen/Interface.h"
#include "codegen/reference/Interpreter.h"
#include "models/Models.h"
#include "passes/Passes.h"
#include "runtime/WeightBinding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mlir;
using namespace mlir::transfuse;
namespace rt = ::transfuse::rt;

namespace {

TEST(FusionStrategy, ParsesNamesAndCombinations) {
  auto all = FusionStrategy::parse("all");
  ASSERT_TRUE(static_cast<bool>(all));
  EXPECT_TRUE(all->attention && all->layernorm && all->epilogue && all->projections &&
              all->elementwise);
  EXPECT_EQ(all->str(), "all");

  auto none = FusionStrategy::parse("none");
  ASSERT_TRUE(static_cast<bool>(none));
  EXPECT_FALSE(none->attention || none->layernorm || none->epilogue || none->projections ||
               none->elementwise);
  EXPECT_EQ(none->str(), "none");

  auto two = FusionStrategy::parse("layernorm+attention");
  ASSERT_TRUE(static_cast<bool>(two));
  EXPECT_TRUE(two->attention && two->layernorm);
  EXPECT_FALSE(two->epilogue || two->projections || two->elementwise);
  EXPECT_EQ(two->str(), "attention+layernorm");
}

TEST(FusionStrategy, RejectsUnknownNamesNamingThem) {
  auto bad = FusionStrategy::parse("attention+flash");
  ASSERT_FALSE(static_cast<bool>(bad));
  std::string message = llvm::toString(bad.takeError());
  EXPECT_NE(message.find("unknown fusion 'flash'"), std::string::npos) << message;
  EXPECT_NE(message.find("attention+flash"), std::string::npos) << message;
}

TEST(FusionReport, CountsAndReasonsInJson) {
  MLIRContext context;
  FusionReport report;
  report.fused("attention");
  report.fused("attention");
  report.missed("attention", NameLoc::get(StringAttr::get(&context, "layer.3")),
                "softmax over axis 2, not the last (key) axis");
  llvm::json::Value json = report.toJson();
  const llvm::json::Object *attention = json.getAsObject()->getObject("attention");
  ASSERT_NE(attention, nullptr);
  EXPECT_EQ(attention->getInteger("fused"), 2);
  const llvm::json::Array *missed = attention->getArray("not_fused");
  ASSERT_NE(missed, nullptr);
  ASSERT_EQ(missed->size(), 1u);
  EXPECT_EQ((*missed)[0].getAsObject()->getString("location"), "layer.3");
  EXPECT_EQ((*missed)[0].getAsObject()->getString("reason"),
            "softmax over axis 2, not the last (key) axis");
  std::string text = report.format();
  EXPECT_NE(text.find("attention at layer.3: softmax over axis 2"), std::string::npos) << text;
}

/// Builds a tiny config, optionally fuses it, and runs it on fixed inputs.
reference::TensorMap runTiny(const char *config, const char *strategy) {
  MLIRContext context;
  BuildOptions options;
  auto module = loadModelDefinition(
      context, std::string(TRANSFUSE_SOURCE_DIR) + "/models/" + config + ".json", options);
  EXPECT_TRUE(static_cast<bool>(module));
  PassManager pm(&context);
  FusionReport report;
  buildFusionPipeline(pm, *FusionStrategy::parse(strategy), &report);
  EXPECT_TRUE(succeeded(pm.run(**module)));
  auto mi = extractInterface(**module);
  EXPECT_TRUE(static_cast<bool>(mi));
  auto weights = rt::randomWeights(mi->params, /*seed=*/7);
  reference::TensorMap inputs;
  for (const rt::TensorSpec &spec : mi->entryPoints.front().inputs) {
    rt::Tensor t = rt::Tensor::zeros(rt::DType::I32, {2, 5});
    for (int64_t i = 0; i < 10; ++i) // ids 2..8; the last row ends in pad (1)
      t.data<int32_t>()[i] = i >= 8 ? 1 : 2 + (int32_t)(i * 3 % 7);
    inputs[spec.name] = std::move(t);
  }
  auto func = (*module)->lookupSymbol<func::FuncOp>("forward");
  auto out = reference::run(func, weights, inputs, /*f64Outputs=*/true);
  EXPECT_TRUE(static_cast<bool>(out)) << (out ? "" : llvm::toString(out.takeError()));
  return out ? std::move(*out) : reference::TensorMap();
}

TEST(FusionEquivalence, AllStrategyKeepsLogitsOnTinyModels) {
  for (const char *config : {"tiny-encoder-decoder", "tiny-decoder-only-padded"}) {
    reference::TensorMap unfused = runTiny(config, "none");
    reference::TensorMap fused = runTiny(config, "all");
    ASSERT_EQ(unfused.count("logits"), 1u);
    ASSERT_EQ(fused.count("logits"), 1u);
    const rt::Tensor &a = unfused.at("logits"), &b = fused.at("logits");
    ASSERT_EQ(a.shape, b.shape) << config;
    double maxAbs = 0, maxErr = 0;
    for (int64_t i = 0; i < a.numElements(); ++i) {
      maxAbs = std::max(maxAbs, std::fabs(a.data<double>()[i]));
      maxErr = std::max(maxErr, std::fabs(a.data<double>()[i] - b.data<double>()[i]));
    }
    EXPECT_GT(maxAbs, 0.0) << config;
    EXPECT_LE(maxErr, 1e-12 * std::max(1.0, maxAbs)) << config;
  }
}

} // namespace
