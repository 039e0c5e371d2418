//===- Module.cpp - the generated translation unit ------------------------===//
//
// generateSource prints each entry point of the kernel IR through the
// backend's EntryPrinter, then the tables runtime/exec/ModelDesc.h declares
// (parameters, binding rules, entry points, weights to pack, states) and the
// ModelDesc; the backend's prologue and epilogue wrap them.
//
//===----------------------------------------------------------------------===//

#include "codegen/emit/EntryPrinter.h"

#include "runtime/exec/model.h"
#include "passes/Passes.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::emit;
namespace rt = ::transfuse::rt;

namespace {

/// C++ initializer of a TensorDesc.
std::string tensorDesc(const rt::TensorSpec &s) {
  std::string shape, max;
  for (size_t i = 0; i < s.shape.size(); ++i) {
    shape += (i ? ", " : "") + std::to_string(s.shape[i]);
    max += (i ? ", " : "") + std::to_string(s.maxShape[i]);
  }
  return "{" + quote(s.name) + ", " + std::to_string((int)s.dtype) + ", " +
         std::to_string(s.shape.size()) + ", {" + shape + "}, {" + max + "}, " +
         std::to_string(s.sizesOf) + "}";
}

std::string stringArray(const std::string &name, const std::vector<std::string> &items) {
  std::string s = "const char* const " + name + "[] = {";
  for (const std::string &i : items)
    s += quote(i) + ", ";
  return s + "nullptr};\n";
}

} // namespace

ModelInterface mlir::transfuse::emit::bf16Interface(ModelInterface mi) {
  for (EntryPoint &ep : mi.entryPoints)
    for (auto *specs : {&ep.inputs, &ep.outputs})
      for (rt::TensorSpec &s : *specs)
        if (s.dtype == rt::DType::F32)
          s.dtype = rt::DType::BF16;
  return mi;
}

llvm::Expected<std::string> mlir::transfuse::emit::generateSource(ModuleOp module,
                                                                 const ModelInterface &mi,
                                                                 StringRef fusion,
                                                                 const BuildOptions &options) {
  auto found = backendOf(options);
  if (!found)
    return found.takeError();
  const Backend &backend = *found;
  const bool bf16 = options.bf16;
  if (bf16 && !backend.takesBf16())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "bf16 storage is not an option of the " + backend.name() +
                                       " target");
  if (options.int8 && backend.name() != "cpu")
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "int8 weights are not an option of the " + backend.name() +
                                       " target");
  if (mi.entryPoints.size() > 64)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "too many entry points");
  ModuleState shared;
  shared.bf16 = bf16 && backend.storesBf16();
  shared.bf16Products = bf16 && !backend.storesBf16();
  shared.int8 = options.int8;
  // The param table: weights (the interface's order), then prepared params.
  std::string params;
  for (const rt::ParamSpec &p : mi.params) {
    shared.paramIndex[p.name] = (int)shared.paramIndex.size();
    std::string shape;
    for (size_t i = 0; i < p.shape.size(); ++i)
      shape += (i ? ", " : "") + std::to_string(p.shape[i]);
    params += "    {" + quote(p.name) + ", " + std::to_string(p.shape.size()) + ", {" + shape +
              "}, " + quote(rt::initKindName(p.init)) + ", " + std::to_string(p.fanIn) + ", " +
              std::to_string(p.fanOut) + ", " + (p.optional ? "true" : "false") + ", false},\n";
  }
  auto prepare = module.lookupSymbol<func::FuncOp>(kPrepareFunction);
  module.walk([&](kernel::ParamOp p) {
    if (!p.getPrepared() || shared.paramIndex.count(p.getName()))
      return;
    shared.paramIndex[p.getName()] = (int)shared.paramIndex.size();
    std::string shape;
    for (int64_t i = 0; i < p.getType().getRank(); ++i)
      shape += (i ? ", " : "") + std::to_string(p.getType().getDimSize(i));
    params += "    {" + quote(p.getName()) + ", " + std::to_string(p.getType().getRank()) +
              ", {" + shape + "}, \"zeros\", 0, 0, false, true},\n";
  });

  // The state table (ABI 2): every tfk.state by name, at its capacity.
  std::string states, badState;
  module.walk([&](kernel::StateOp st) {
    if (shared.stateIndex.count(st.getName()))
      return;
    shared.stateIndex[st.getName()] = (int)shared.stateIndex.size();
    MemRefType t = st.getType();
    if (!cType(t.getElementType()) && badState.empty())
      badState = locOf(st) + ": state '" + st.getName().str() +
                 "' has an element type the " + backend.name().str() +
                 " target does not hold (f32, i32, i1 are)";
    std::string shape;
    for (int64_t i = 0; i < t.getRank(); ++i)
      shape += (i ? ", " : "") + std::to_string(t.getDimSize(i));
    rt::DType held = dtypeOf(t.getElementType()).value_or(rt::DType::F32);
    if (shared.bf16 && held == rt::DType::F32)
      held = rt::DType::BF16;
    int dtype = static_cast<int>(held);
    states += "    {" + quote(st.getName()) + ", " + std::to_string(dtype) + ", " +
              std::to_string(t.getRank()) + ", {" + shape + "}, {" + shape + "}},\n";
  });

  if (!badState.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), badState);
  // The positions axis of each state the entries write (K transposed keeps
  // positions last): the extents generated code tracks are along it.
  std::vector<int> positionAxis(shared.stateIndex.size(), -1);
  module.walk([&](kernel::StateWriteOp w) {
    auto st = w.getState().getDefiningOp<kernel::StateOp>();
    if (st)
      positionAxis[shared.stateIndex.lookup(st.getName())] = w.getKeys() ? 3 : 2;
  });
  std::string axes;
  for (int a : positionAxis)
    axes += (axes.empty() ? "" : ", ") + std::to_string(a);

  std::string functions, entryTables;
  std::string entries, prepareDesc = "nullptr";
  for (const EntryPoint &ep : mi.entryPoints) {
    auto func = module.lookupSymbol<func::FuncOp>(ep.name);
    if (!func)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "the kernel IR has no entry point @" + ep.name);
    std::unique_ptr<EntryPrinter> printer = backend.entryPrinter(func, shared);
    if (llvm::Error e = printer->print(functions))
      return std::move(e);
    std::string ins, outs;
    for (const rt::TensorSpec &s : ep.inputs)
      ins += "    " + tensorDesc(s) + ",\n";
    for (const rt::TensorSpec &s : ep.outputs)
      outs += "    " + tensorDesc(s) + ",\n";
    // Zero-length arrays are not C++: a placeholder entry, never read.
    std::string placeholder = "    {\"\", 0, 0, {}, {}},\n";
    entryTables += "const exec::TensorDesc kIn_" + ep.name + "[] = {\n" +
                   (ins.empty() ? placeholder : ins) + "};\n";
    entryTables += "const exec::TensorDesc kOut_" + ep.name + "[] = {\n" +
                   (outs.empty() ? placeholder : outs) + "};\n";
    std::string desc = "{" + quote(ep.name) + ", kIn_" + ep.name + ", " +
                       std::to_string(ep.inputs.size()) + ", kOut_" + ep.name + ", " +
                       std::to_string(ep.outputs.size()) + ", " +
                       std::to_string(printer->arenaBytes) + ", " +
                       std::to_string(printer->kernelCalls) + ", run_" + ep.name + ", shapes_" +
                       ep.name + ", flops_" + ep.name + printer->entryDescTail() + "}";
    if (prepare && func == prepare) {
      entryTables += "const exec::EntryDesc kPrepare = " + desc + ";\n";
      prepareDesc = "&kPrepare";
    } else {
      entries += "    " + desc + ",\n";
    }
  }
  std::string packs;
  for (const ModuleState::Pack &p : shared.packs)
    packs += "    {" + std::to_string(p.param) + ", " + std::to_string(p.k) + ", " +
             std::to_string(p.n) + ", " + (p.transB ? "true" : "false") + ", " +
             std::to_string(p.pairKind) + ", " + std::to_string(p.headDim) + ", " +
             std::to_string(p.pairColumns) + ", " + (p.int8 ? "true" : "false") + ", " +
             (p.bf16 ? "true" : "false") + "},\n";

  std::vector<std::string> aliases;
  for (const auto &[alias, canonical] : mi.rules.aliases) {
    aliases.push_back(alias);
    aliases.push_back(canonical);
  }

  std::string src = backend.prologue(shared, fusion);
  llvm::raw_string_ostream os(src);
  os << "namespace {\n\n" << shared.constants << "\n" << shared.code << functions << entryTables
     << "\nconst exec::ParamDesc kParams[] = {\n"
     << (params.empty() ? "    {\"\", 0, {}, \"zeros\", 0, 0, false, false},\n" : params)
     << "};\nconst exec::EntryDesc kEntries[] = {\n" << entries
     << "};\nconst exec::PackDesc kPacks[] = {\n"
     << (packs.empty() ? "    {0, 0, 0, false, 0, 0, 0},\n" : packs) << "};\n"
     << "const exec::TensorDesc kStates[] = {\n"
     << (states.empty() ? "    {\"\", 0, 0, {}, {}},\n" : states) << "};\n"
     << "const int32_t kStatePositionAxis[] = {" << (axes.empty() ? "-1" : axes) << "};\n"
     << stringArray("kAliases", aliases) << stringArray("kIgnored", mi.rules.ignored)
     << stringArray("kPrefixes", mi.rules.prefixes)
     << "\nconst exec::ModelDesc kModel = {\n    " << TF_ABI_VERSION << ", "
     << quote(fusion) << ",\n    " << quote(mi.configJson) << ",\n    kParams, "
     << shared.paramIndex.size() << ",\n    kAliases, " << mi.rules.aliases.size()
     << ", kIgnored, " << mi.rules.ignored.size() << ", kPrefixes, " << mi.rules.prefixes.size()
     << ",\n    " << prepareDesc << ", kEntries, "
     << (mi.entryPoints.size() - (prepareDesc == "nullptr" ? 0 : 1)) << ", kPacks, "
     << shared.packs.size() << ", kStates, " << shared.stateIndex.size()
     << ", kStatePositionAxis" << backend.modelDescTail(shared)
     << "};\n\n}  // namespace\n}  // namespace transfuse_generated\n\n"
     << "extern \"C\" const transfuse::exec::ModelDesc* transfuse_generated_model(void) {\n"
        "  return &transfuse_generated::kModel;\n}\n"
     << backend.epilogue(shared);
  return src;
}
