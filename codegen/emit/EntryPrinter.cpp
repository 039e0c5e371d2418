//===- EntryPrinter.cpp - one entry point: storage, checks, functions -----===//

#include "codegen/emit/EntryPrinter.h"

#include "runtime/MemoryLimit.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::emit;
namespace tfk = mlir::transfuse::kernel;

int ModuleState::pack(const Pack &p) {
  for (size_t i = 0; i < packs.size(); ++i)
    if (packs[i] == p)
      return (int)i;
  packs.push_back(p);
  return (int)packs.size() - 1;
}

llvm::Error EntryPrinter::fail(Operation *op, const llvm::Twine &message) const {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 locOf(op) + ": '" + op->getName().getStringRef().str() +
                                     "': " + message.str() + " (" + backend.name().str() +
                                     " target)");
}

std::string EntryPrinter::storageType(Type t) const {
  const char *c = cType(t);
  return c ? c : "";
}

std::string EntryPrinter::storageBytes(Value v) const {
  Type t = cast<MemRefType>(v.getType()).getElementType();
  return module.bf16 && t.isF32() ? "2" : elemBytes(v);
}

std::string EntryPrinter::ptr(Value v) {
  if (!v)
    return "nullptr"; // an optional operand left out
  std::string t = storageType(cast<MemRefType>(v.getType()).getElementType());
  Operation *def = v.getDefiningOp();
  std::string p = llvm::TypeSwitch<Operation *, std::string>(def)
      .Case([&](tfk::InputOp in) {
        return "static_cast<const " + t + "*>(c.inputs[" + std::to_string(in.getIndex()) + "])";
      })
      .Case([&](tfk::OutputOp out) {
        return "static_cast<" + t + "*>(c.outputs[" + std::to_string(out.getIndex()) + "])";
      })
      .Case([&](tfk::ParamOp p) {
        std::string param = "c.params[" + std::to_string(module.paramIndex.lookup(p.getName())) + "]";
        // Under --dtype bf16 the runtime uploads the weights as bf16.
        return module.bf16 ? "reinterpret_cast<const " + t + "*>(" + param + ")" : param;
      })
      .Case([&](tfk::StateOp st) {
        return "static_cast<" + t + "*>(c.state[" +
               std::to_string(module.stateIndex.lookup(st.getName())) + "])";
      })
      .Case([&](tfk::ConstantOp) { return constNames.lookup(v); })
      .Case([&](tfk::AllocOp a) -> std::string {
        if (!a.getOffset())
          return "";
        return "reinterpret_cast<" + t + "*>(c.arena + " + std::to_string(*a.getOffset()) + ")";
      })
      .Case([&](tfk::ReshapeOp r) { return ptr(r.getSource()); })
      .Case([&](tfk::HeadsOp h) {
        return ptr(h.getSource()) + " + " + std::to_string(h.getColumn());
      })
      .Default([](Operation *) { return std::string(); });
  if (p.empty() && storageError.empty())
    storageError = locOf(def ? def : func.getOperation()) +
                   ": a value without planned storage (" + backend.name().str() + " target)";
  return p.empty() ? "nullptr" : p;
}

llvm::Error EntryPrinter::printConstant(tfk::ConstantOp op) {
  auto attr = dyn_cast<DenseElementsAttr>(op.getValue());
  Type e = op.getType().getElementType();
  if (!attr || !cType(e))
    return fail(op, "only dense f32, i32 and i1 constants are supported");
  constNames[op.getView()] = constantArray("kConst" + std::to_string(module.counter++), attr);
  return llvm::Error::success();
}

std::string EntryPrinter::constantArray(const std::string &name, DenseElementsAttr attr) {
  module.constants += "const " + std::string(cType(attr.getElementType())) + " " + name +
                      "[] = {" + constantValues(attr) + "};\n";
  return name;
}

std::string EntryPrinter::constantValues(DenseElementsAttr attr) {
  Type e = attr.getElementType();
  // `perLine` values a line, separated by commas across lines too.
  std::string s;
  int64_t i = 0;
  auto next = [&](int64_t perLine) {
    const char *sep = i == 0 ? "\n    " : i % perLine ? ", " : ",\n    ";
    ++i;
    return sep;
  };
  if (isa<FloatType>(e)) {
    for (const APFloat &v : attr.getValues<APFloat>())
      s += next(8) + floatLit(v.convertToDouble());
  } else {
    for (const APInt &v : attr.getValues<APInt>())
      s += next(16) + std::to_string(e.isInteger(1) ? (int64_t)v.getBoolValue() : v.getSExtValue());
  }
  return s;
}

llvm::Error EntryPrinter::print(std::string &out) {
  Block &block = func.getBody().front();
  auto device = func->getAttrOfType<StringAttr>(kernel::kDeviceAttr);
  if ((device ? device.getValue() : StringRef("cpu")) != backend.name())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "@" + func.getName().str() + " runs on device '" +
                                       (device ? device.getValue().str() : "cpu") +
                                       "', not on the " + backend.name() + " target");
  auto arena = func->getAttrOfType<IntegerAttr>(kernel::kArenaBytesAttr);
  if (!arena)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "@" + func.getName().str() +
                                       " has no memory plan (run --transfuse-plan-memory)");
  arenaBytes = arena.getInt();
  if (auto fits = ::transfuse::rt::checkFitsInMemory(
          "@" + func.getName().str() + "'s arena at the compiled maxima",
          static_cast<uint64_t>(std::max<int64_t>(arenaBytes, 0)));
      backend.hostArena() && !fits)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   fits.message() + "; lower --max-batch or --max-seq-len (" +
                                       backend.name() + " target)");
  // Every intermediate must fit the room the plan gave it at the maxima
  // (the maxima come from the same index values evaluated at the compiled
  // bounds; this keeps a wrong bound an error, never an overflow). Buffers
  // of one size expression need one check, against the least room.
  std::map<std::string, int64_t> room;
  std::map<int64_t, Value> outputs;
  for (Operation &op : block.without_terminator()) {
    if (auto a = dyn_cast<tfk::AllocOp>(op); a && !a.getType().hasStaticShape() && a.getBytes()) {
      std::string bytes =
          dims.numel(a.getView()) + " * " + std::to_string(elemSize(a.getType().getElementType()));
      auto [it, inserted] = room.try_emplace(bytes, *a.getBytes());
      it->second = std::min<int64_t>(it->second, *a.getBytes());
    }
    if (auto o = dyn_cast<tfk::OutputOp>(op))
      outputs.try_emplace(o.getIndex(), o.getView());
    if (llvm::Error e = printOp(&op))
      return e;
  }
  std::string shapes;
  for (auto [i, view] : outputs)
    for (int64_t d = 0; d < cast<MemRefType>(view.getType()).getRank(); ++d)
      shapes += "  out[" + std::to_string(i) + "][" + std::to_string(d) + "] = " + dims.dim(view, d) +
                ";\n";
  for (const auto &[bytes, size] : room)
    dims.checks.push_back({"(" + bytes + " > " + std::to_string(size) + ")",
                           "an intermediate larger than the arena planned at the compiled maxima"});
  std::string fn = func.getName().str();
  if (!dims.error.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "@" + fn + ": " + dims.error + " (" + backend.name() +
                                       " target)");
  if (!storageError.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), storageError);
  std::string checks;
  llvm::StringSet<> seen;
  for (auto &[cond, message] : dims.checks)
    if (seen.insert(cond).second)
      checks += "  if " + cond + "\n    return rt::Status::error(\"" + message + "\");\n";
  std::string decl = dims.declarations("c.inputShapes", "*c.stateLength");
  out += entryFunctions(decl);
  out += "rt::Status run_" + fn + "(const exec::Call& c) {\n" + decl + checks + body +
         "  return rt::Status::ok();\n}\n\n";
  out += "void shapes_" + fn + "([[maybe_unused]] const int64_t* const* in, "
         "[[maybe_unused]] int64_t* const* out) {\n" +
         dims.declarations("in", "0") + shapes + "}\n\n";
  out += "double flops_" + fn + "([[maybe_unused]] const int64_t* const* in) {\n" +
         dims.declarations("in", "0") + "  double f = 0;\n" + flopTerms + "  return f;\n}\n\n";
  return llvm::Error::success();
}
