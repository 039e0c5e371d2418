//===- Emitter.cpp - one entry point: storage, plan, checks, functions ----===//

#include "codegen/cpu/Emitter.h"

#include "codegen/cpu/CppText.h"
#include "runtime/MemoryLimit.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::cpu;

Value mlir::transfuse::cpu::rootOf(Value v) {
  static const llvm::DenseMap<Value, Value> none;
  return storageRoot(v, none);
}

std::string Emitter::ptr(Value v) {
  Value root = storageRoot(v, aliases);
  auto type = cast<RankedTensorType>(root.getType());
  std::string t = cType(type.getElementType());
  if (auto arg = dyn_cast<BlockArgument>(root))
    return "static_cast<const " + t + "*>(c.inputs[" + std::to_string(arg.getArgNumber()) + "])";
  if (auto p = root.getDefiningOp<ParamOp>())
    return "c.params[" + std::to_string(tables.paramIndex.lookup(p.getName())) + "]";
  if (auto it = constNames.find(root); it != constNames.end())
    return it->second;
  if (auto it = outputOwned.find(root); it != outputOwned.end())
    return "static_cast<" + t + "*>(c.outputs[" + std::to_string(it->second) + "])";
  if (auto it = offsets.find(root); it != offsets.end())
    return "reinterpret_cast<" + t + "*>(c.arena + " + std::to_string(it->second) + ")";
  if (storageError.empty())
    storageError = locOf(v.getDefiningOp() ? v.getDefiningOp() : func) +
                   ": a value without storage (cpu target)";
  return "nullptr";
}

std::string Emitter::constant(ConstantOp op, llvm::Error &err) {
  auto attr = dyn_cast<DenseElementsAttr>(op.getValue());
  Type e = op.getType().getElementType();
  if (!attr || !cType(e)) {
    err = fail(op, "only dense f32, i32 and i1 constants are supported");
    return "";
  }
  std::string name = "kConst" + std::to_string(counter++);
  std::string s = "const " + std::string(cType(e)) + " " + name + "[] = {";
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
  return name;
}

llvm::Error Emitter::emit(std::string &out) {
  Block &block = func.getBody().front();
  // Types the generated code can hold: f32, i32, i1 tensors of rank <= 8.
  Operation *badOp = nullptr;
  std::string bad;
  func.walk([&](Operation *op) {
    for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults())) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (!t || badOp)
        continue;
      if (!cType(t.getElementType())) {
        llvm::raw_string_ostream os(bad);
        os << "element type " << t.getElementType() << " is not supported (f32, i32, i1 are)";
        badOp = op;
      } else if (t.getRank() > 8) { // exec::kMaxRank (runtime/exec/Ops.h)
        bad = "rank " + std::to_string(t.getRank()) + " is over the supported 8";
        badOp = op;
      }
    }
  });
  if (badOp)
    return fail(badOp, bad);
  findViews();
  plan = planMemory(func, aliases);
  arenaBytes = plan.arenaSize;
  if (auto fits = ::transfuse::rt::checkFitsInMemory(
          "@" + func.getName().str() + "'s arena at the compiled maxima",
          static_cast<uint64_t>(std::max<int64_t>(arenaBytes, 0)));
      !fits)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   fits.message() + "; lower --max-batch or --max-seq-len (cpu target)");
  for (const PlannedBuffer &b : plan.buffers)
    offsets[b.value] = b.offset;
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  // Results computed by an op are written straight into the caller's buffer;
  // others (an input, a parameter, a value returned twice) are copied.
  llvm::SmallVector<std::pair<unsigned, Value>> copies;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    Value root = rootOf(v);
    Operation *def = root.getDefiningOp();
    if (def && !isa<ParamOp, ConstantOp>(def) && !outputOwned.count(root))
      outputOwned[root] = i;
    else
      copies.push_back({(unsigned)i, v});
  }
  for (Operation &op : block.without_terminator())
    if (llvm::Error e = emitOp(&op))
      return e;
  for (auto [i, v] : copies) {
    auto type = cast<RankedTensorType>(v.getType());
    call("exec::copyBytes(" + ptr(v) + ", c.outputs[" + std::to_string(i) + "], " +
         dims.numel(v) + " * " + std::to_string(elemSize(type.getElementType())) + ");");
  }
  std::string fn = func.getName().str();
  std::string shapes;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    auto type = cast<RankedTensorType>(v.getType());
    for (int64_t d = 0; d < type.getRank(); ++d)
      shapes += "  out[" + std::to_string(i) + "][" + std::to_string(d) + "] = " + dims.dim(v, d) + ";\n";
  }
  // Every intermediate must fit the room the plan gave it at the maxima
  // (the maxima are derived separately from these sizes; this keeps a wrong
  // bound an error, never an overflow).
  // Buffers of one size expression need one check, against the least room.
  std::map<std::string, int64_t> room;
  for (const PlannedBuffer &b : plan.buffers) {
    auto type = cast<RankedTensorType>(b.value.getType());
    if (type.hasStaticShape()) // planned at its one size
      continue;
    std::string bytes =
        dims.numel(b.value) + " * " + std::to_string(elemSize(type.getElementType()));
    auto [it, inserted] = room.try_emplace(bytes, b.size);
    it->second = std::min(it->second, b.size);
  }
  for (const auto &[bytes, size] : room)
    dims.checks.push_back({"(" + bytes + " > " + std::to_string(size) + ")",
                           "an intermediate larger than the arena planned at the compiled maxima"});
  if (!dims.error.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "@" + fn + ": " + dims.error + " (cpu target)");
  if (!storageError.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), storageError);
  std::string checks;
  llvm::StringSet<> seen;
  for (auto &[cond, message] : dims.checks)
    if (seen.insert(cond).second)
      checks += "  if " + cond + "\n    return rt::Status::error(\"" + message + "\");\n";
  std::string decl = dims.declarations("c.inputShapes");
  out += "rt::Status run_" + fn + "(const exec::Call& c) {\n" + decl + checks + body +
         "  return rt::Status::ok();\n}\n\n";
  out += "void shapes_" + fn + "([[maybe_unused]] const int64_t* const* in, "
         "[[maybe_unused]] int64_t* const* out) {\n" +
         dims.declarations("in") + shapes + "}\n\n";
  out += "double flops_" + fn + "([[maybe_unused]] const int64_t* const* in) {\n" +
         dims.declarations("in") + "  double f = 0;\n" + flopTerms + "  return f;\n}\n\n";
  return llvm::Error::success();
}
