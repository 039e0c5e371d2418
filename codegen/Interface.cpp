//===- Interface.cpp - entry points, parameters, binding rules, manifest --===//

#include "codegen/Interface.h"

#include "ir/KernelDialect.h"
#include "ir/TransfuseDialect.h"
#include "passes/MemoryPlan.h"
#include "runtime/exec/model.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::transfuse;
namespace rt = ::transfuse::rt;

/// Compiler and ABI versions recorded in every manifest.
static constexpr const char *kCompilerVersion = "0.1.0";
static constexpr int kAbiVersion = TF_ABI_VERSION;

llvm::StringRef mlir::transfuse::compilerVersion() { return kCompilerVersion; }

static llvm::Error errorAt(Operation *op, const llvm::Twine &message) {
  std::string loc;
  llvm::raw_string_ostream os(loc);
  op->getLoc().print(os);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 loc + ": " + message.str());
}

std::optional<rt::DType> mlir::transfuse::dtypeOf(Type t) {
  if (t.isF32()) return rt::DType::F32;
  if (t.isF64()) return rt::DType::F64;
  if (t.isF16()) return rt::DType::F16;
  if (t.isBF16()) return rt::DType::BF16;
  if (t.isInteger(32)) return rt::DType::I32;
  if (t.isInteger(1)) return rt::DType::Bool;
  return std::nullopt;
}

/// The spec of argument `index` (`returned` null) or of the result whose
/// returned value is `returned`. An argument's dynamic dimension 0 is bounded
/// by max_batch and its others by max_seq_len; a result's dimensions by the
/// maximum of the argument dimension they come from.
static llvm::Expected<rt::TensorSpec> specOf(func::FuncOp func, Type type,
                                             DictionaryAttr attrs, unsigned index,
                                             Value returned, SizeAnalysis &dims) {
  bool isInput = !returned;
  const char *what = isInput ? "argument" : "result";
  auto tensor = dyn_cast<RankedTensorType>(type);
  auto dtype = tensor ? dtypeOf(tensor.getElementType()) : std::nullopt;
  if (!dtype)
    return errorAt(func, llvm::Twine(what) + " " + llvm::Twine(index) + " of @" +
                             func.getName() + " must be a ranked tensor of f32, f64, f16, bf16, i32 or i1");
  rt::TensorSpec spec;
  auto name = attrs ? attrs.getAs<StringAttr>("transfuse.name") : StringAttr();
  spec.name = name ? name.str() : (isInput ? "arg" : "result") + std::to_string(index);
  spec.dtype = *dtype;
  auto maxBatch = func->getAttrOfType<IntegerAttr>(kMaxBatchAttr);
  auto maxSeq = func->getAttrOfType<IntegerAttr>(kMaxSeqLenAttr);
  for (auto [d, size] : llvm::enumerate(tensor.getShape())) {
    if (!ShapedType::isDynamic(size)) {
      spec.shape.push_back(size);
      spec.maxShape.push_back(size);
      continue;
    }
    bool batch = d == 0;
    IntegerAttr bound = batch ? maxBatch : maxSeq;
    if (!bound)
      return errorAt(func, llvm::Twine("@") + func.getName() + " has a dynamic dimension " +
                               llvm::Twine(d) + " in " + what + " '" + spec.name + "' but no " +
                               (batch ? kMaxBatchAttr : kMaxSeqLenAttr) + " attribute");
    int64_t max = bound.getInt();
    if (returned)
      max = dims.maximum(returned, d, maxBatch ? maxBatch.getInt() : 1,
                         maxSeq ? maxSeq.getInt() : 1);
    spec.shape.push_back(-1);
    spec.maxShape.push_back(max);
  }
  if (auto of = attrs ? attrs.getAs<IntegerAttr>(kSizesOfAttr) : IntegerAttr()) {
    auto other = of.getInt() >= 0 && of.getInt() < index
                     ? dyn_cast<RankedTensorType>(func.getArgument(of.getInt()).getType())
                     : RankedTensorType();
    if (!isInput || !other || other.getRank() != tensor.getRank() ||
        llvm::any_of(llvm::seq<int64_t>(0, tensor.getRank()), [&](int64_t d) {
          return tensor.isDynamicDim(d) != other.isDynamicDim(d);
        }))
      return errorAt(func, llvm::Twine(kSizesOfAttr) + " of '" + spec.name + "' in @" +
                               func.getName() +
                               " must name an earlier argument of the same rank and dynamic "
                               "dimensions");
    spec.sizesOf = static_cast<int32_t>(of.getInt());
  }
  return spec;
}

llvm::Expected<ModelInterface> mlir::transfuse::extractInterface(ModuleOp module) {
  ModelInterface mi;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    EntryPoint ep;
    ep.name = func.getName().str();
    SizeAnalysis dims;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto spec = specOf(func, func.getArgument(i).getType(), func.getArgAttrDict(i), i,
                         Value(), dims);
      if (!spec)
        return spec.takeError();
      ep.inputs.push_back(std::move(*spec));
    }
    Operation *terminator = func.getBody().front().getTerminator();
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto spec = specOf(func, func.getResultTypes()[i], func.getResultAttrDict(i), i,
                         terminator->getOperand(i), dims);
      if (!spec)
        return spec.takeError();
      ep.outputs.push_back(std::move(*spec));
    }
    mi.entryPoints.push_back(std::move(ep));
  }
  if (mi.entryPoints.empty())
    return errorAt(module, "the module has no function to run");

  llvm::StringMap<size_t> byName;
  Operation *failedOp = nullptr;
  std::string failure;
  module.walk([&](ParamOp op) {
    if (op.getPrepared())
      return; // an output of @prepare, not a weight
    auto type = op.getType();
    auto [it, inserted] = byName.try_emplace(op.getName(), mi.params.size());
    if (!inserted) {
      if (mi.params[it->second].shape != std::vector<int64_t>(type.getShape()) && !failedOp) {
        failedOp = op;
        failure = "parameter '" + op.getName().str() + "' is used with two shapes";
      }
      return;
    }
    if (!type.getElementType().isF32() && !failedOp) {
      failedOp = op;
      failure = "parameter '" + op.getName().str() + "' must be f32";
    }
    rt::ParamSpec p;
    p.name = op.getName().str();
    p.shape.assign(type.getShape().begin(), type.getShape().end());
    // The dialect's init kinds are rt::InitKind's, with the same spellings.
    if (!rt::parseInitKind(stringifyInitKind(op.getInit()).str(), &p.init) && !failedOp) {
      failedOp = op;
      failure = "parameter '" + op.getName().str() + "' has an init kind the runtime lacks";
    }
    if (type.getRank() >= 2) { // PyTorch: fan_in = size(1) * receptive field, fan_out = size(0) * ...
      int64_t receptive = 1;
      for (int64_t d = 2; d < type.getRank(); ++d)
        receptive *= type.getDimSize(d);
      p.fanIn = type.getDimSize(1) * receptive;
      p.fanOut = type.getDimSize(0) * receptive;
    }
    if (auto fanIn = op.getFanIn())
      p.fanIn = *fanIn;
    p.optional = op.getOptional();
    mi.params.push_back(std::move(p));
  });
  if (failedOp)
    return errorAt(failedOp, failure);
  // A model whose weights cannot be held is refused here, when it is
  // compiled, rather than when it is first loaded.
  if (::transfuse::rt::Status fits = ::transfuse::rt::checkParamsFit(mi.params); !fits)
    return errorAt(module, fits.message());

  if (auto aliases = module->getAttrOfType<DictionaryAttr>("transfuse.weight_aliases"))
    for (NamedAttribute a : aliases)
      if (auto target = dyn_cast<StringAttr>(a.getValue()))
        mi.rules.aliases[a.getName().str()] = target.str();
  if (auto ignored = module->getAttrOfType<ArrayAttr>("transfuse.ignored_weights"))
    for (auto s : ignored.getAsValueRange<StringAttr>())
      mi.rules.ignored.push_back(s.str());
  if (auto prefixes = module->getAttrOfType<ArrayAttr>("transfuse.weight_prefixes"))
    for (auto s : prefixes.getAsValueRange<StringAttr>())
      mi.rules.prefixes.push_back(s.str());
  if (auto config = module->getAttrOfType<StringAttr>("transfuse.config"))
    mi.configJson = config.str();
  return mi;
}

/// Writes each (name, contents) into `dir` as a set: every file goes to a
/// temporary name first and is renamed only when all were written, so an
/// error leaves no partial artifact behind.
static llvm::Error writeFiles(llvm::StringRef dir,
                              ArrayRef<std::pair<const char *, std::string>> files) {
  SmallVector<std::string> written;
  auto cleanup = [&] {
    for (const std::string &tmp : written)
      llvm::sys::fs::remove(tmp);
  };
  for (const auto &[name, contents] : files) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    std::string tmp = (path + ".tmp").str();
    std::error_code ec;
    llvm::raw_fd_ostream os(tmp, ec);
    if (!ec) {
      written.push_back(tmp);
      os << contents;
      os.close();
      if (os.has_error())
        ec = os.error();
    }
    if (ec) {
      cleanup();
      return llvm::createStringError(ec, "cannot write '%s': %s", tmp.c_str(),
                                     ec.message().c_str());
    }
  }
  for (const auto &[name, contents] : files) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    if (std::error_code ec = llvm::sys::fs::rename(path + ".tmp", path)) {
      cleanup();
      return llvm::createStringError(ec, "cannot write '%s': %s", path.c_str(),
                                     ec.message().c_str());
    }
  }
  return llvm::Error::success();
}

static llvm::json::Array specsToJson(const std::vector<rt::TensorSpec> &specs) {
  llvm::json::Array out;
  for (const auto &s : specs) {
    llvm::json::Object o{{"name", s.name},
                         {"dtype", rt::dtypeName(s.dtype)},
                         {"shape", llvm::json::Array(s.shape)},
                         {"max_shape", llvm::json::Array(s.maxShape)}};
    if (s.sizesOf >= 0)
      o["sizes_of"] = specs[s.sizesOf].name;
    out.push_back(std::move(o));
  }
  return out;
}

llvm::Error mlir::transfuse::writeMlirArtifact(ModuleOp module, ModuleOp kernels,
                                               const ModelInterface &mi,
                                               llvm::StringRef dir,
                                               llvm::StringRef fusion,
                                               llvm::StringRef dtype,
                                               llvm::json::Value report) {
  // Render everything first, so that nothing is written for a bad module.
  std::string mlirText;
  {
    llvm::raw_string_ostream os(mlirText);
    module->print(os);
    os << "\n"; // as transfuse-opt prints it
  }
  llvm::json::Object manifest;
  manifest["compiler_version"] = kCompilerVersion;
  manifest["abi_version"] = kAbiVersion;
  manifest["fusion"] = fusion;
  manifest["dtype"] = dtype;
  if (!mi.configJson.empty()) {
    auto config = llvm::json::parse(mi.configJson);
    if (!config)
      return config.takeError();
    manifest["config"] = std::move(*config);
  }
  llvm::json::Array entryPoints;
  for (const auto &ep : mi.entryPoints) {
    auto f = kernels ? kernels.lookupSymbol<func::FuncOp>(ep.name) : func::FuncOp();
    auto bytes = f ? f->getAttrOfType<IntegerAttr>(kernel::kArenaBytesAttr) : IntegerAttr();
    int64_t arena = bytes ? bytes.getInt()
                          : planMemory(module.lookupSymbol<func::FuncOp>(ep.name)).arenaSize;
    entryPoints.push_back(llvm::json::Object{{"name", ep.name},
                                             {"inputs", specsToJson(ep.inputs)},
                                             {"outputs", specsToJson(ep.outputs)},
                                             {"arena_bytes", arena}});
  }
  manifest["entry_points"] = std::move(entryPoints);
  llvm::json::Array params;
  for (const auto &p : mi.params) {
    llvm::json::Object o{{"name", p.name},
                         {"dtype", "F32"},
                         {"shape", llvm::json::Array(p.shape)},
                         {"init", rt::initKindName(p.init)},
                         {"optional", p.optional}};
    params.push_back(std::move(o));
  }
  manifest["parameters"] = std::move(params);
  llvm::json::Object aliases;
  for (const auto &[alias, target] : mi.rules.aliases)
    aliases[alias] = target;
  manifest["weight_aliases"] = std::move(aliases);
  manifest["ignored_weights"] = llvm::json::Array(mi.rules.ignored);
  manifest["weight_prefixes"] = llvm::json::Array(mi.rules.prefixes);
  std::string manifestText;
  {
    llvm::raw_string_ostream os(manifestText);
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest))) << "\n";
  }

  std::string reportText;
  {
    llvm::raw_string_ostream os(reportText);
    os << llvm::formatv("{0:2}", report) << "\n";
  }
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return llvm::createStringError(ec, "cannot create output directory '%s': %s",
                                   dir.str().c_str(), ec.message().c_str());
  std::vector<std::pair<const char *, std::string>> files = {
      {"model.mlir", std::move(mlirText)},
      {"manifest.json", std::move(manifestText)},
      {"report.json", std::move(reportText)}};
  if (kernels) {
    std::string kernelText;
    llvm::raw_string_ostream os(kernelText);
    kernels->print(os);
    os << "\n";
    files.push_back({"kernels.mlir", std::move(kernelText)});
  }
  return writeFiles(dir, files);
}
