// Fusion strategies (parsing, names) and the fusion report (counts, reasons,
// JSON), and the fused ops against the unfused graphs they replace on the
// built-in models: fusion=all on the tiny configs gives the same logits.

#include "codegen/Interface.h"
#include "codegen/reference/Interpreter.h"
#include "ir/TransfuseDialect.h"
#include "models/Models.h"
#include "passes/MemoryPlan.h"
#include "passes/Passes.h"
#include "runtime/WeightBinding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
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

/// Builds a tiny config, fuses it with `strategy`, and runs it on fixed
/// inputs; `fused` counts the sites the report says fused.
reference::TensorMap runTiny(const char *config, const char *strategy, int64_t &fused) {
  MLIRContext context;
  BuildOptions options;
  auto module = loadModelDefinition(
      context, std::string(TRANSFUSE_SOURCE_DIR) + "/models/" + config + ".json", options);
  if (!module) {
    ADD_FAILURE() << llvm::toString(module.takeError());
    return {};
  }
  auto parsed = FusionStrategy::parse(strategy);
  if (!parsed) {
    ADD_FAILURE() << llvm::toString(parsed.takeError());
    return {};
  }
  PassManager pm(&context);
  FusionReport report;
  buildFusionPipeline(pm, *parsed, &report);
  EXPECT_TRUE(succeeded(pm.run(**module)));
  fused = 0;
  for (const auto &[name, entry] : report.all())
    fused += entry.fused;
  auto mi = extractInterface(**module);
  if (!mi) {
    ADD_FAILURE() << llvm::toString(mi.takeError());
    return {};
  }
  auto random = rt::randomWeights(mi->params, /*seed=*/7);
  if (!random.isOk()) {
    ADD_FAILURE() << random.status().message();
    return {};
  }
  auto weights = std::move(*random);
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
    int64_t fusedNone = 0, fusedAll = 0;
    reference::TensorMap unfused = runTiny(config, "none", fusedNone);
    reference::TensorMap fused = runTiny(config, "all", fusedAll);
    EXPECT_EQ(fusedNone, 0) << config;
    EXPECT_GE(fusedAll, 10) << config; // attention, add+layer_norm, linears, ...
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

namespace {

/// The arena plan of the base model's forward at a fusion strategy.
mlir::transfuse::MemoryPlan planBase(MLIRContext &context, const char *strategy,
                                     OwningOpRef<ModuleOp> &module) {
  auto loaded = loadModelDefinition(
      context, std::string(TRANSFUSE_SOURCE_DIR) + "/models/transformer-base.json",
      BuildOptions());
  EXPECT_TRUE(static_cast<bool>(loaded));
  module = std::move(*loaded);
  PassManager pm(&context);
  buildFusionPipeline(pm, *FusionStrategy::parse(strategy), nullptr);
  EXPECT_TRUE(succeeded(pm.run(*module)));
  return planMemory(module->lookupSymbol<func::FuncOp>("forward"));
}

void expectNoLiveOverlap(const mlir::transfuse::MemoryPlan &plan) {
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const auto &a = plan.buffers[i];
    EXPECT_EQ(a.offset % kArenaAlignment, 0);
    EXPECT_LE(a.offset + a.size, plan.arenaSize);
    for (size_t j = i + 1; j < plan.buffers.size(); ++j) {
      const auto &b = plan.buffers[j];
      bool liveTogether = a.firstUse <= b.lastUse && b.firstUse <= a.lastUse;
      bool sharesBytes = a.offset < b.offset + b.size && b.offset < a.offset + a.size;
      EXPECT_FALSE(liveTogether && sharesBytes)
          << "buffers " << i << " and " << j << " are live together and overlap";
    }
  }
}

TEST(MemoryPlan, NoTwoLiveBuffersOverlapAndFusionNeedsLessArena) {
  MLIRContext context;
  OwningOpRef<ModuleOp> unfusedModule, fusedModule;
  auto unfused = planBase(context, "none", unfusedModule);
  auto fused = planBase(context, "all", fusedModule);
  expectNoLiveOverlap(unfused);
  expectNoLiveOverlap(fused);
  ASSERT_GT(unfused.buffers.size(), 100u);
  // The plan reuses memory: far less than every buffer side by side.
  int64_t total = 0;
  for (const auto &b : unfused.buffers)
    total += b.size;
  EXPECT_LT(unfused.arenaSize, total / 4);
  // Fused attention never materializes the [B, H, S, S] scores.
  EXPECT_LT(fused.arenaSize, unfused.arenaSize);
}

TEST(MemoryPlan, SizesAtTheMaximaAndViewsShareTheirInput) {
  MLIRContext context;
  context.loadDialect<TransfuseDialect, func::FuncDialect>();
  const char *source = R"mlir(
    func.func @forward(%x: tensor<?x?x8xf32> {transfuse.name = "x"}) -> tensor<?x?x8xf32>
        attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 3 : i64} {
      %a = transfuse.relu %x : tensor<?x?x8xf32>
      %b = transfuse.reshape %a : (tensor<?x?x8xf32>) -> tensor<?x?x2x4xf32>
      %c = transfuse.exp %b : tensor<?x?x2x4xf32>
      %d = transfuse.reshape %c : (tensor<?x?x2x4xf32>) -> tensor<?x?x8xf32>
      %e = transfuse.tanh %d : tensor<?x?x8xf32>
      return %e : tensor<?x?x8xf32>
    })mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  ASSERT_TRUE(module);
  auto plan = planMemory(module->lookupSymbol<func::FuncOp>("forward"));
  // relu and exp own buffers (the reshapes are views, tanh is the result):
  // 2·3·8 floats = 192 bytes each, live together while exp reads relu's.
  ASSERT_EQ(plan.buffers.size(), 2u);
  EXPECT_EQ(plan.buffers[0].size, 192);
  EXPECT_EQ(plan.buffers[1].size, 192);
  EXPECT_EQ(plan.buffers[0].lastUse, 2); // read by exp through the view
  EXPECT_EQ(plan.arenaSize, 384);
  expectNoLiveOverlap(plan);
}

} // namespace

namespace {

TEST(MemoryPlan, SequenceFirstTensorsTakeTheSequenceMaximum) {
  MLIRContext context;
  context.loadDialect<TransfuseDialect, func::FuncDialect>();
  // pe is [S, 8] with S from dimension 1 of the input: dimension 0 of pe is a
  // sequence length (max 5), not a batch (max 2).
  const char *source = R"mlir(
    func.func @forward(%x: tensor<?x?x8xf32> {transfuse.name = "x"}) -> tensor<?x?x8xf32>
        attributes {transfuse.max_batch = 2 : i64, transfuse.max_seq_len = 5 : i64} {
      %s = transfuse.dim %x, 1 : tensor<?x?x8xf32>
      %pe = transfuse.positional_encoding %s : tensor<?x8xf32>
      %y = transfuse.add %x, %pe : (tensor<?x?x8xf32>, tensor<?x8xf32>) -> tensor<?x?x8xf32>
      return %y : tensor<?x?x8xf32>
    })mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  ASSERT_TRUE(module);
  auto plan = planMemory(module->lookupSymbol<func::FuncOp>("forward"));
  ASSERT_EQ(plan.buffers.size(), 1u);
  EXPECT_EQ(plan.buffers[0].size, 5 * 8 * 4 + 64 - (5 * 8 * 4) % 64); // aligned to 64
  EXPECT_EQ(plan.arenaSize, plan.buffers[0].size);
}

} // namespace
