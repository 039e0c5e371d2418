//===- Models.cpp - dispatch to the architectures, loading definitions ----===//

#include "models/Models.h"
#include "models/HuggingFace.h"
#include "frontend/GraphBuilder.h"

#include "ir/TransfuseDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::transfuse;

#include "ir/State.h"

static constexpr int64_t kDefaultMaxBatch = 8;
static constexpr int64_t kDefaultMaxBeam = 4;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Explicit maxima must be positive (0 means "not given").
static llvm::Error checkMaxima(const BuildOptions &options) {
  if (options.maxBatch < 0)
    return makeError("--max-batch must be >= 1, got " + llvm::Twine(options.maxBatch));
  if (options.maxSeqLen < 0)
    return makeError("--max-seq-len must be >= 1, got " + llvm::Twine(options.maxSeqLen));
  if (options.maxBeam < 0)
    return makeError("--max-beam must be >= 1, got " + llvm::Twine(options.maxBeam));
  return llvm::Error::success();
}

bool mlir::transfuse::decodingEntries(const ModelConfig &config, const BuildOptions &options) {
  return options.decoding && !options.training;
}

func::FuncOp mlir::transfuse::createEntry(OpBuilder &b, ModuleOp module, StringRef name,
                                          ArrayRef<StringRef> tokenInputs, int64_t vocab,
                                          bool lastOnly) {
  auto tokens = RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                                      b.getI32Type());
  auto logits = RankedTensorType::get(
      {ShapedType::kDynamic, lastOnly ? 1 : ShapedType::kDynamic, vocab}, b.getF32Type());
  b.setInsertionPointToEnd(module.getBody());
  SmallVector<Type> inputs(tokenInputs.size(), tokens);
  SmallVector<Type> results;
  if (vocab)
    results.push_back(logits);
  auto func = func::FuncOp::create(b, b.getUnknownLoc(), name, b.getFunctionType(inputs, results));
  for (auto [i, input] : llvm::enumerate(tokenInputs))
    func.setArgAttr(i, kNameAttr, b.getStringAttr(input));
  if (vocab)
    func.setResultAttr(0, kNameAttr, b.getStringAttr("logits"));
  b.setInsertionPointToStart(func.addEntryBlock());
  return func;
}

void mlir::transfuse::addLossEntry(OpBuilder &b, ModuleOp module, ArrayRef<StringRef> tokenInputs,
                                   const ModelConfig &config, const BuildOptions &options,
                                   llvm::function_ref<Value(GraphBuilder &, Block *)> body) {
  SmallVector<StringRef> inputs(tokenInputs);
  inputs.push_back("labels");
  auto func = createEntry(b, module, "loss", inputs, 0);
  GraphBuilder g(b, NameLoc::get(b.getStringAttr("loss")));
  Block *entry = &func.getBody().front();
  Value logits = body(g, entry);
  Value loss = g.crossEntropy(logits, entry->getArguments().back(), options.labelSmoothing,
                              config.padId ? *config.padId : -100);
  func::ReturnOp::create(b, b.getUnknownLoc(), loss);
  func.setType(b.getFunctionType(func.getArgumentTypes(), {loss.getType()}));
  func.setResultAttr(0, kNameAttr, b.getStringAttr("loss"));
}

llvm::Expected<OwningOpRef<ModuleOp>>
mlir::transfuse::buildModel(MLIRContext &context, const ModelConfig &config,
                            const BuildOptions &options) {
  int64_t maxSeqLen = options.maxSeqLen ? options.maxSeqLen : config.maxSeqLen;
  if (auto err = checkMaxima(options)) // before building: bad maxima build nothing
    return std::move(err);
  if (config.positional == "learned" && maxSeqLen > config.maxSeqLen)
    return makeError("--max-seq-len " + llvm::Twine(maxSeqLen) +
                     " exceeds the config's max_seq_len " + llvm::Twine(config.maxSeqLen) +
                     " (learned positions have that many rows)");
  OwningOpRef<ModuleOp> module = newModule(context);
  if (config.isDecoderOnly())
    buildDecoderOnly(*module, config, options);
  else
    buildEncoderDecoder(*module, config, options);
  return finishModel(std::move(module), toJson(config), options, config.maxSeqLen);
}

OwningOpRef<ModuleOp> mlir::transfuse::newModule(MLIRContext &context) {
  context.loadDialect<TransfuseDialect, func::FuncDialect>();
  return ModuleOp::create(UnknownLoc::get(&context));
}

llvm::Expected<OwningOpRef<ModuleOp>>
mlir::transfuse::finishModel(OwningOpRef<ModuleOp> module, llvm::json::Object config,
                             const BuildOptions &options, int64_t defaultMaxSeqLen) {
  if (auto err = checkMaxima(options))
    return std::move(err);
  int64_t maxBatch = options.maxBatch ? options.maxBatch : kDefaultMaxBatch;
  int64_t maxSeqLen = options.maxSeqLen ? options.maxSeqLen : defaultMaxSeqLen;
  Builder b(module->getContext());
  std::string json;
  llvm::raw_string_ostream os(json);
  os << llvm::json::Value(std::move(config));
  (*module)->setAttr(kConfigAttr, b.getStringAttr(json));
  int64_t maxBeam = options.maxBeam ? options.maxBeam : kDefaultMaxBeam;
  for (auto func : module->getOps<func::FuncOp>()) {
    // The state's rows hold every beam of every sentence.
    int64_t rows = usesState(func) ? maxBatch * maxBeam : maxBatch;
    func->setAttr(kMaxBatchAttr, b.getI64IntegerAttr(rows));
    func->setAttr(kMaxSeqLenAttr, b.getI64IntegerAttr(maxSeqLen));
  }
  if (failed(verify(*module)))
    return makeError("internal error: the built model does not verify");
  return std::move(module);
}

llvm::Expected<onnx_import::ImportedModel>
mlir::transfuse::importOnnxDefinition(MLIRContext &context, llvm::StringRef path,
                                      const BuildOptions &options) {
  if (options.training)
    return makeError("--train differentiates @loss, which an ONNX graph does not define");
  if (options.imageSize[0] != 0)
    return makeError("--image-size applies to a vision model's Hugging Face directory, not to '" +
                     path + "'");
  onnx_import::ImportOptions o;
  o.maxBatch = options.maxBatch;
  o.maxSeqLen = options.maxSeqLen;
  o.dims = options.dims;
  return onnx_import::importOnnxFile(context, path, o);
}

llvm::Expected<OwningOpRef<ModuleOp>>
mlir::transfuse::loadModelDefinition(MLIRContext &context, llvm::StringRef path,
                                     const BuildOptions &options) {
  if (path.ends_with(".onnx")) {
    auto imported = importOnnxDefinition(context, path, options);
    if (!imported)
      return imported.takeError();
    return std::move(imported->module);
  }
  if (!options.dims.empty())
    return makeError("--dim names the dimensions of an ONNX file's inputs, not of '" + path + "'");
  if (isHuggingFaceDirectory(path))
    return loadHuggingFaceDirectory(context, path, options);
  if (options.imageSize[0] != 0)
    return makeError("--image-size applies to a vision model's Hugging Face directory, not to '" +
                     path + "'");
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return makeError("cannot read model definition '" + path + "': " +
                     buffer.getError().message());
  return parseModelDefinition(context, (*buffer)->getBuffer(), path, options);
}

llvm::Expected<OwningOpRef<ModuleOp>>
mlir::transfuse::parseModelDefinition(MLIRContext &context, llvm::StringRef text,
                                      llvm::StringRef name, const BuildOptions &options) {
  if (name.ends_with(".json")) {
    auto config = parseModelConfig(text, name);
    if (!config)
      return config.takeError();
    return buildModel(context, *config, options);
  }
  if (auto err = checkDefinitionText(text, name))
    return std::move(err);
  // MLIR text: parse and verify, capturing diagnostics into the error.
  context.loadDialect<TransfuseDialect, func::FuncDialect>();
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, name), llvm::SMLoc());
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  SourceMgrDiagnosticHandler handler(sourceMgr, &context, os);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return makeError(llvm::StringRef(diagnostics).rtrim());
  if (auto err = checkMaxima(options))
    return std::move(err);
  Builder b(&context);
  for (auto func : module->getOps<func::FuncOp>()) {
    if (options.maxBatch)
      func->setAttr(kMaxBatchAttr, b.getI64IntegerAttr(options.maxBatch));
    if (options.maxSeqLen)
      func->setAttr(kMaxSeqLenAttr, b.getI64IntegerAttr(options.maxSeqLen));
  }
  return std::move(module);
}
