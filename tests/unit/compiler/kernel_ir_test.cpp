// The kernel IR (tfk) of every shipped config at the fusion strategies none
// and all: it verifies, prints and parses back to the same text, and its
// memory plan is checked here independently of --transfuse-plan-memory: every
// alloc has a slot, aligned, inside the arena, with room for its sizes at the
// compiled maxima, and no two allocs that some kernel span uses together
// share a byte; the arena is at most the graph-level plan's.

#include "codegen/emit/Backend.h"
#include "codegen/lowering/Lowering.h"
#include "codegen/lowering/OpMath.h"
#include "ir/KernelDialect.h"
#include "models/Models.h"
#include "passes/MemoryPlan.h"
#include "passes/Passes.h"
#include "runtime/host/CompiledModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

using namespace mlir;
using namespace mlir::transfuse;
namespace tfk = mlir::transfuse::kernel;

namespace {

std::string print(ModuleOp m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  m->print(os);
  return s;
}

/// An index value of the kernel IR at the maxima, evaluated here from the
/// ops' meaning (dimension 0 of an input at maxBatch, others at maxSeq).
int64_t atMaxima(Value v, int64_t maxBatch, int64_t maxSeq) {
  Operation *def = v.getDefiningOp();
  if (auto c = dyn_cast<arith::ConstantIndexOp>(def))
    return c.value();
  if (auto d = dyn_cast<tfk::InputDimOp>(def))
    return d.getDim() == 0 ? maxBatch : maxSeq;
  if (auto a = dyn_cast<arith::AddIOp>(def))
    return atMaxima(a.getLhs(), maxBatch, maxSeq) + atMaxima(a.getRhs(), maxBatch, maxSeq);
  int64_t m = 1;
  for (Value t : cast<tfk::BroadcastDimOp>(def).getTerms())
    m = std::max(m, atMaxima(t, maxBatch, maxSeq));
  return m;
}

/// The allocs whose memory `v` is or views.
Operation *bufferOf(Value v) {
  Operation *def = v.getDefiningOp();
  while (def && isa<tfk::ReshapeOp, tfk::HeadsOp>(def))
    def = def->getOperand(0).getDefiningOp();
  return def && isa<tfk::AllocOp>(def) ? def : nullptr;
}

void checkPlan(func::FuncOp f, const std::string &what) {
  auto arena = f->getAttrOfType<IntegerAttr>(tfk::kArenaBytesAttr);
  ASSERT_TRUE(arena) << what;
  auto bound = [&](StringRef name) { // @prepare has none: nothing is dynamic there
    auto a = f->getAttrOfType<IntegerAttr>(name);
    return a ? a.getInt() : int64_t{1};
  };
  int64_t maxBatch = bound(kMaxBatchAttr), maxSeq = bound(kMaxSeqLenAttr);
  // Live range of each alloc: the kernel ops (in order) that touch it.
  std::map<Operation *, std::pair<int64_t, int64_t>> live;
  int64_t position = 0;
  for (Operation &op : f.getBody().front()) {
    if (!isa<tfk::GemmOp, tfk::MatmulOp, tfk::AttentionOp, tfk::AddLayerNormOp,
             tfk::LayerNormOp, tfk::ElementwiseOp, tfk::KernelCallInterface>(op))
      continue;
    for (Value v : op.getOperands())
      if (Operation *buf = bufferOf(v)) {
        auto [it, inserted] = live.try_emplace(buf, position, position);
        it->second.second = position;
      }
    ++position;
  }
  std::vector<tfk::AllocOp> allocs(f.getBody().front().getOps<tfk::AllocOp>().begin(),
                                   f.getBody().front().getOps<tfk::AllocOp>().end());
  for (tfk::AllocOp a : allocs) {
    ASSERT_TRUE(a.getOffset() && a.getBytes()) << what << ": an alloc without a slot";
    EXPECT_TRUE(live.count(a)) << what << ": an alloc no kernel touches";
    EXPECT_EQ(*a.getOffset() % kArenaAlignment, 0) << what;
    EXPECT_LE(int64_t(*a.getOffset() + *a.getBytes()), arena.getInt()) << what;
    MemRefType t = a.getType();
    int64_t need = t.getElementType().isInteger(1) ? 1 : t.getElementTypeBitWidth() / 8;
    for (int64_t d = 0; d < t.getRank(); ++d)
      need *= t.isDynamicDim(d) ? atMaxima(a.getSizes()[t.getDynamicDimIndex(d)], maxBatch, maxSeq)
                                : t.getDimSize(d);
    EXPECT_GE(int64_t(*a.getBytes()), need) << what;
  }
  for (size_t i = 0; i < allocs.size(); ++i)
    for (size_t j = i + 1; j < allocs.size(); ++j) {
      auto [fi, li] = live[allocs[i]];
      auto [fj, lj] = live[allocs[j]];
      int64_t oi = *allocs[i].getOffset(), oj = *allocs[j].getOffset();
      int64_t ei = oi + *allocs[i].getBytes(), ej = oj + *allocs[j].getBytes();
      bool together = fi <= lj && fj <= li, overlap = oi < ej && oj < ei;
      EXPECT_FALSE(together && overlap) << what << ": allocs " << i << " and " << j;
    }
}

// The dialect's activation attribute and the kernels' enum are one list: the
// same cases, values and spellings (the compiler converts by value,
// codegen/lowering/OpMath.cpp), and each has the formula its name says.
TEST(KernelIR, ActivationsAreTheKernels) {
  namespace tk = ::transfuse::kernels;
  EXPECT_EQ(tk::kNumActivations, static_cast<int>(getMaxEnumValForActivation()) + 1);
  for (uint32_t i = 0; i <= getMaxEnumValForActivation(); ++i) {
    std::optional<Activation> a = symbolizeActivation(i);
    ASSERT_TRUE(a.has_value()) << i;
    EXPECT_EQ(stringifyActivation(*a).str(), tk::activationName(toKernels(*a))) << i;
    EXPECT_EQ(tk::parseActivation(stringifyActivation(*a).str()), toKernels(*a)) << i;
    std::optional<math::Kind> formula = activationKind(*a);
    EXPECT_EQ(formula.has_value(), *a != Activation::None) << i;
    if (formula)  // relu -> kRelu, gelu_tanh -> kGeluTanh, ...
      EXPECT_STREQ(math::info(*formula).enumerator, tk::activationInfo(toKernels(*a)).enumerator)
          << i;
  }
}

TEST(KernelIR, EveryShippedConfigLowersVerifiesRoundTripsAndPlansSafely) {
  MLIRContext context;
  std::vector<std::string> configs;
  for (const auto &entry :
       std::filesystem::directory_iterator(std::string(TRANSFUSE_SOURCE_DIR) + "/models"))
    if (entry.path().extension() == ".json")
      configs.push_back(entry.path().string());
  ASSERT_GE(configs.size(), 7u);
  for (const std::string &config : configs) {
    for (const char *strategy : {"none", "all"}) {
      std::string what = config + " (" + strategy + ")";
      auto loaded = loadModelDefinition(context, config, BuildOptions());
      ASSERT_TRUE(static_cast<bool>(loaded)) << what;
      OwningOpRef<ModuleOp> module = std::move(*loaded);
      PassManager pm(&context);
      buildCompilePipeline(pm, *FusionStrategy::parse(strategy), nullptr);
      ASSERT_TRUE(succeeded(pm.run(*module))) << what;
      auto kernels = lowerToKernels(*module, "cpu");
      ASSERT_TRUE(static_cast<bool>(kernels)) << what << ": " << llvm::toString(kernels.takeError());
      ASSERT_TRUE(succeeded(verify(**kernels))) << what;
      std::string text = print(**kernels);
      OwningOpRef<ModuleOp> again = parseSourceString<ModuleOp>(text, &context);
      ASSERT_TRUE(again) << what;
      EXPECT_EQ(print(*again), text) << what;
      for (auto f : (*kernels)->getOps<func::FuncOp>()) {
        checkPlan(f, what + " @" + f.getName().str());
        EXPECT_TRUE(f.getFunctionType().getInputs().empty() && f.getFunctionType().getResults().empty());
        // Never more than the graph-level plan, which knows no views.
        int64_t graph = planMemory(module->lookupSymbol<func::FuncOp>(f.getName())).arenaSize;
        EXPECT_LE(f->getAttrOfType<IntegerAttr>(tfk::kArenaBytesAttr).getInt(), graph) << what;
        // Nothing of the fused graph is left outside fused regions.
        for (Operation &op : f.getBody().front())
          EXPECT_FALSE(isa<TransfuseDialect>(op.getDialect())) << what << ": " << op.getName().getStringRef().str();
      }
    }
  }
}

TEST(KernelIR, AnOpTheKernelsCannotRunIsOneErrorNamingIt) {
  MLIRContext context;
  context.loadDialect<TransfuseDialect, func::FuncDialect>();
  const char *source = R"mlir(
    func.func @forward(%x: tensor<2x4x8x16xf32> {transfuse.name = "x"},
                       %m: tensor<1x4x8x8xi1> {transfuse.name = "m"}) -> tensor<2x4x8x16xf32> {
      %y = transfuse.attention %x, %x, %x mask %m {scale = 2.500000e-01 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<1x4x8x8xi1>) -> tensor<2x4x8x16xf32>
      return %y : tensor<2x4x8x16xf32>
    })mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  ASSERT_TRUE(module);
  std::string before = print(*module);
  auto kernels = lowerToKernels(*module, "cpu");
  ASSERT_FALSE(static_cast<bool>(kernels));
  std::string message = llvm::toString(kernels.takeError());
  EXPECT_NE(message.find("'transfuse.attention': a boolean mask operand is not supported"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("loc("), std::string::npos) << message;
  EXPECT_EQ(print(*module), before); // the input module is left as it was
}

/// What the CPU printer says of a kernel IR function it cannot print yet.
std::string printError(const char *body, const char *attrs = "") {
  MLIRContext context;
  context.loadDialect<tfk::TFKDialect, func::FuncDialect>();
  std::string source = std::string("func.func @forward() attributes {tfk.arena_bytes = 0 : i64") +
                       attrs + "} {\n" + body + "\n  return\n}";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  EXPECT_TRUE(module);
  if (!module)
    return "";
  ModelInterface mi;
  mi.entryPoints.push_back(EntryPoint{"forward", {}, {}});
  auto cpp = emit::generateSource(*module, mi, "none");
  EXPECT_FALSE(static_cast<bool>(cpp));
  return cpp ? std::string() : llvm::toString(cpp.takeError());
}

TEST(KernelIR, TheCpuPrinterRefusesDynamicStateAndOtherDevicesByName) {
  std::string state = printError(R"mlir(
    %b = tfk.input_dim 0, 0
    %k = tfk.state "kv.decoder.0.self.k" [%b] : memref<?x8xf32>)mlir");
  EXPECT_NE(state.find("'tfk.state': a state tensor's type must be its capacity"), std::string::npos)
      << state;
  std::string f16 = printError(R"mlir(
    %k = tfk.state "kv" : memref<4x8xf16>)mlir");
  EXPECT_NE(f16.find("state 'kv' has an element type the cpu target does not hold"),
            std::string::npos)
      << f16;
  std::string device = printError("", ", tfk.device = \"cuda\"");
  EXPECT_NE(device.find("@forward runs on device 'cuda', not on the cpu target"), std::string::npos)
      << device;
}

// A kernel-IR entry that reads and writes a state tensor, printed, built
// into an artifact and run through the loader: the state accumulates across
// calls of one state, independently per state, and reset clears it (the
// generated state table, Call::state and EntryDesc::usesState, end to end).
TEST(KernelIR, StateIsPrintedBuiltAndKeptBetweenCalls) {
  MLIRContext context;
  context.loadDialect<tfk::TFKDialect, func::FuncDialect>();
  const char *source = R"mlir(
    func.func @accumulate() attributes {tfk.arena_bytes = 0 : i64} {
      %x = tfk.input 0 : memref<4x3xf32>
      %s = tfk.state "acc" : memref<4x3xf32>
      %y = tfk.output 0 : memref<4x3xf32>
      tfk.binary(%s, %x : memref<4x3xf32>, memref<4x3xf32>) into(%s : memref<4x3xf32>) {kind = "kAdd"}
      tfk.copy(%s : memref<4x3xf32>) into(%y : memref<4x3xf32>)
      return
    })mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  ASSERT_TRUE(module);
  ModelInterface mi;
  EntryPoint ep{"accumulate", {}, {}};
  ep.inputs.push_back({"x", ::transfuse::rt::DType::F32, {4, 3}, {4, 3}});
  ep.outputs.push_back({"y", ::transfuse::rt::DType::F32, {4, 3}, {4, 3}});
  mi.entryPoints.push_back(ep);
  auto cpp = emit::generateSource(*module, mi, "none");
  ASSERT_TRUE(static_cast<bool>(cpp)) << llvm::toString(cpp.takeError());
  EXPECT_NE(cpp->find("static_cast<float*>(c.state[0])"), std::string::npos);
  EXPECT_NE(cpp->find("{\"acc\", 0, 2, {4, 3}, {4, 3}}"), std::string::npos);
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("kernel-ir-state", dir));
  auto built = emit::buildArtifact(dir, *cpp);
  ASSERT_FALSE(static_cast<bool>(built)) << llvm::toString(std::move(built));
  auto m = ::transfuse::rt::CompiledModel::load(std::string(dir) + "/libmodel.so", {});
  ASSERT_TRUE(m.isOk()) << m.status().message();
  ASSERT_EQ((*m)->states().size(), 1u);
  auto a = (*m)->createState(), b = (*m)->createState();
  ASSERT_TRUE(a.isOk() && b.isOk());
  ::transfuse::rt::Tensor x = ::transfuse::rt::Tensor::zeros(::transfuse::rt::DType::F32, {4, 3});
  for (int i = 0; i < 12; ++i)
    x.data<float>()[i] = float(i);
  std::map<std::string, ::transfuse::rt::Tensor> in{{"x", x}};
  auto y1 = (*m)->run("accumulate", in, a->get());
  auto y2 = (*m)->run("accumulate", in, a->get());
  auto yb = (*m)->run("accumulate", in, b->get());
  ASSERT_TRUE(y1.isOk() && y2.isOk() && yb.isOk()) << y1.status().message();
  EXPECT_EQ(y1->at("y").data<float>()[5], 5.0f);
  EXPECT_EQ(y2->at("y").data<float>()[5], 10.0f);
  EXPECT_EQ(yb->at("y").data<float>()[5], 5.0f);
  ASSERT_TRUE((*a)->reset().isOk());
  auto y3 = (*m)->run("accumulate", in, a->get());
  ASSERT_TRUE(y3.isOk());
  EXPECT_EQ(y3->at("y").data<float>()[11], 11.0f);
  EXPECT_FALSE((*m)->run("accumulate", in).isOk()); // an entry with state needs one
  llvm::sys::fs::remove_directories(dir); // the states, then the model, go at the end of scope
}

} // namespace
