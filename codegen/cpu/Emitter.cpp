//===- Emitter.cpp - one entry point: storage, checks, functions ----------===//

#include "codegen/cpu/Emitter.h"

#include "codegen/cpu/CppText.h"
#include "runtime/MemoryLimit.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::cpu;
namespace tfk = mlir::transfuse::kernel;

std::string Emitter::storageType(Type t) const {
  if (bf16 && t.isF32())
    return "tc::bf16";
  const char *c = cType(t);
  return c ? c : "";
}

std::string Emitter::storageBytes(Value v) const {
  Type t = cast<MemRefType>(v.getType()).getElementType();
  return bf16 && t.isF32() ? "2" : elemBytes(v);
}

std::string Emitter::ptr(Value v) {
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
        std::string param = "c.params[" + std::to_string(tables.paramIndex.lookup(p.getName())) + "]";
        // Under --dtype bf16 the runtime uploads the weights as bf16.
        return bf16 ? "reinterpret_cast<const " + t + "*>(" + param + ")" : param;
      })
      .Case([&](tfk::StateOp st) {
        return "static_cast<" + t + "*>(c.state[" +
               std::to_string(tables.stateIndex.lookup(st.getName())) + "])";
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
                   ": a value without planned storage (" + targetName(target) + " target)";
  return p.empty() ? "nullptr" : p;
}

llvm::Error Emitter::constant(tfk::ConstantOp op) {
  auto attr = dyn_cast<DenseElementsAttr>(op.getValue());
  Type e = op.getType().getElementType();
  if (!attr || !cType(e))
    return fail(op, "only dense f32, i32 and i1 constants are supported");
  std::string name = "kConst" + std::to_string(counter++);
  // cuda: in device memory, its address looked up where it is used.
  const bool cuda = target == Target::kCuda;
  if (bf16 && e.isF32()) {
    // bf16 bits (rounded to nearest even), as raw words: a __device__
    // array needs constant initializers.
    std::string s = "__device__ const __nv_bfloat16_raw " + name + "[] = {";
    int64_t i = 0;
    for (const APFloat &v : attr.getValues<APFloat>()) {
      APFloat b = v;
      bool lost = false;
      b.convert(APFloat::BFloat(), APFloat::rmNearestTiesToEven, &lost);
      s += (i++ % 8 ? ", " : "\n    ") + std::string("{") +
           std::to_string(b.bitcastToAPInt().getZExtValue()) + "}";
    }
    constants += s + "};\n";
    constNames[op.getView()] = "reinterpret_cast<const tc::bf16*>(tx::deviceArray(" + name + "))";
    return llvm::Error::success();
  }
  std::string s = (cuda ? "__device__ const " : "const ") + std::string(cType(e)) + " " + name +
                  "[] = {";
  int64_t i = 0;
  if (isa<FloatType>(e)) {
    for (const APFloat &v : attr.getValues<APFloat>())
      s += (i++ % 8 ? ", " : "\n    ") + floatLit(v.convertToDouble());
  } else {
    for (const APInt &v : attr.getValues<APInt>())
      s += (i++ % 16 ? ", " : "\n    ") +
           std::to_string(e.isInteger(1) ? (int64_t)v.getBoolValue() : v.getSExtValue());
  }
  constants += s + "};\n";
  constNames[op.getView()] = cuda ? "tx::deviceArray(" + name + ")" : name;
  return llvm::Error::success();
}

llvm::Error Emitter::emit(std::string &out) {
  Block &block = func.getBody().front();
  auto device = func->getAttrOfType<StringAttr>(kernel::kDeviceAttr);
  if ((device ? device.getValue() : StringRef("cpu")) != targetName(target))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "@" + func.getName().str() + " runs on device '" +
                                       (device ? device.getValue().str() : "cpu") +
                                       "', not on the " + targetName(target) + " target");
  auto arena = func->getAttrOfType<IntegerAttr>(kernel::kArenaBytesAttr);
  if (!arena)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "@" + func.getName().str() +
                                       " has no memory plan (run --transfuse-plan-memory)");
  arenaBytes = arena.getInt();
  if (auto fits = ::transfuse::rt::checkFitsInMemory(
          "@" + func.getName().str() + "'s arena at the compiled maxima",
          static_cast<uint64_t>(std::max<int64_t>(arenaBytes, 0)));
      target == Target::kCpu && !fits)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   fits.message() + "; lower --max-batch or --max-seq-len (cpu target)");
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
    if (llvm::Error e = emitOp(&op))
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
                                   "@" + fn + ": " + dims.error + " (" + targetName(target) +
                                       " target)");
  if (!storageError.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), storageError);
  std::string checks;
  llvm::StringSet<> seen;
  for (auto &[cond, message] : dims.checks)
    if (seen.insert(cond).second)
      checks += "  if " + cond + "\n    return rt::Status::error(\"" + message + "\");\n";
  std::string decl = dims.declarations("c.inputShapes", "*c.stateLength");
  if (target == Target::kCuda) {
    // The kernels' check words are read by the runtime after the run (or
    // its CUDA graph's replay) and turned into the error here; a replay
    // skips the run's host statements, so they stand again in host_<fn>.
    std::string messages;
    for (auto [i, message] : llvm::enumerate(deviceChecks))
      messages += "  if (checks[" + std::to_string(i) + "] != 0xffffffffu)\n    return " +
                  message + ";\n";
    out += "rt::Status checks_" + func.getName().str() +
           "([[maybe_unused]] const uint32_t* checks) {\n" + messages +
           "  return rt::Status::ok();\n}\n\n";
    out += "void host_" + func.getName().str() + "([[maybe_unused]] const exec::Call& c) {\n" +
           decl + hostStatements + "}\n\n";
  }
  out += "rt::Status run_" + fn + "(const exec::Call& c) {\n" + decl + checks + body +
         "  return rt::Status::ok();\n}\n\n";
  out += "void shapes_" + fn + "([[maybe_unused]] const int64_t* const* in, "
         "[[maybe_unused]] int64_t* const* out) {\n" +
         dims.declarations("in", "0") + shapes + "}\n\n";
  out += "double flops_" + fn + "([[maybe_unused]] const int64_t* const* in) {\n" +
         dims.declarations("in", "0") + "  double f = 0;\n" + flopTerms + "  return f;\n}\n\n";
  return llvm::Error::success();
}
