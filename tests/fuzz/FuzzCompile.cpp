// See FuzzCompile.h.
#include "tests/fuzz/FuzzCompile.h"

#include "codegen/Interface.h"
#include "codegen/emit/Backend.h"
#include "codegen/lowering/Lowering.h"
#include "models/Models.h"
#include "passes/Passes.h"
#include "tests/fuzz/FuzzUtil.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

namespace transfuse::fuzz {

namespace {

using namespace mlir;
using namespace mlir::transfuse;

const char* const kStrategies[] = {"none",     "all",         "attention",          "layernorm",
                                   "epilogue", "projections", "elementwise",        "attention+layernorm",
                                   "attention+epilogue+elementwise"};

// An llvm::Error must carry a message; consumes it.
void expectMessage(llvm::Error err, const char* stage) {
  std::string message = llvm::toString(std::move(err));
  FUZZ_CHECK(!message.empty(), "%s failed without a message", stage);
}

}  // namespace

void compileDefinition(std::string_view text, std::string_view name, uint8_t selector) {
  MLIRContext context(MLIRContext::Threading::DISABLED);
  std::string diagnostics;
  // Diagnostics of passes and of generation go here instead of stderr.
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic& d) {
    diagnostics += d.str();
    return success();
  });
  BuildOptions options;
  options.maxBatch = 2;
  options.maxSeqLen = 8;
  auto module = parseModelDefinition(context, llvm::StringRef(text.data(), text.size()),
                                     llvm::StringRef(name.data(), name.size()), options);
  if (!module)
    return expectMessage(module.takeError(), "parsing");

  auto strategy = FusionStrategy::parse(kStrategies[selector % std::size(kStrategies)]);
  FUZZ_CHECK(!!strategy, "a fixed strategy did not parse");
  FusionReport report;
  PassManager pm(&context);
  buildCompilePipeline(pm, *strategy, &report);
  if (failed(pm.run(**module))) {
    FUZZ_CHECK(!diagnostics.empty(), "the compile pipeline failed without a diagnostic");
    return;
  }
  (void)report.toJson();
  auto mi = extractInterface(**module);
  if (!mi)
    return expectMessage(mi.takeError(), "extractInterface");
  auto kernels = lowerToKernels(**module, "cpu");
  if (!kernels)
    return expectMessage(kernels.takeError(), "lowerToKernels");
  FUZZ_CHECK(succeeded(verify(**kernels)), "the kernel IR does not verify");
  auto source = emit::generateSource(**kernels, *mi, strategy->str());
  if (!source)
    return expectMessage(source.takeError(), "generateSource");
  FUZZ_CHECK(source->find("transfuse_generated_model") != std::string::npos,
             "generated C++ has no model table");
}

}  // namespace transfuse::fuzz
