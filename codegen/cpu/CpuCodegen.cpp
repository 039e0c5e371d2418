//===- CpuCodegen.cpp - fused IR to C++ over the runtime kernels ----------===//
//
// One Emitter per entry point walks the body in order and writes one
// statement per op. Values live in the caller's inputs and outputs, in the
// parameter table, in constant arrays, or at their arena offsets; a reshape
// is a view. Every dynamic size is an expression over the inputs' dynamic
// dimensions (DimExprs), so shapes, strides and FLOP counts are computed
// once per call from the input shapes.
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/CpuCodegen.h"

#include "codegen/cpu/CppSizes.h"
#include "codegen/cpu/CppText.h"
#include "codegen/cpu/ToolchainConfig.h"
#include "runtime/MemoryLimit.h"
#include "runtime/exec/model.h"
#include "ir/TransfuseDialect.h"
#include "passes/MemoryPlan.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <map>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::cpu;
namespace rt = ::transfuse::rt;

namespace {

/// What one entry point needs from the rest of the model.
struct ModelTables {
  llvm::StringMap<int> paramIndex;               // name -> param table index
  std::vector<std::pair<int, bool>> packs;       // (param, transB)
  std::vector<std::array<int64_t, 2>> packShape; // (k, n)
  int pack(int param, bool transB, int64_t k, int64_t n) {
    for (size_t i = 0; i < packs.size(); ++i)
      if (packs[i] == std::make_pair(param, transB))
        return (int)i;
    packs.push_back({param, transB});
    packShape.push_back({k, n});
    return (int)packs.size() - 1;
  }
};

/// Writes one entry point: its run, output-shape and FLOP functions.
class Emitter {
public:
  Emitter(func::FuncOp func, const EntryPoint &ep, ModelTables &tables, std::string &kernels,
          std::string &constants, int &counter)
      : func(func), ep(ep), tables(tables), dims(func), kernels(kernels),
        constants(constants), counter(counter) {}

  llvm::Error emit(std::string &out);
  int64_t arenaBytes = 0, kernelCalls = 0;

private:
  llvm::Error fail(Operation *op, const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   locOf(op) + ": '" + op->getName().getStringRef().str() +
                                       "': " + message.str() + " (cpu target)");
  }
  /// A typed pointer expression to the storage of `v`.
  std::string ptr(Value v);
  /// The same, for an operand (read-only by convention).
  std::string in(Value v) { return ptr(v); }
  void line(const std::string &s) { body += "  " + s + "\n"; }
  void call(const std::string &s) {
    line(s);
    ++kernelCalls;
  }
  void checked(const std::string &s) {
    line("if (rt::Status s = " + s + "; !s.isOk()) return s;");
    ++kernelCalls;
  }
  void flops(const std::string &e) { flopTerms += "  f += " + e + ";\n"; }
  llvm::Error emitOp(Operation *op);
  llvm::Error emitLinear(Operation *op, Value x, Value w, bool transW, Value bias,
                         StringRef act, Value residual, Value result);
  llvm::Error emitAttention(AttentionOp op);
  llvm::Error emitFused(FusedElementwiseOp op);
  std::string constant(ConstantOp op, llvm::Error &err);
  std::string nameOf(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return "input '" + ep.inputs[arg.getArgNumber()].name + "'";
    return "an operand";
  }

  func::FuncOp func;
  const EntryPoint &ep;
  ModelTables &tables;
  CppSizes dims;
  std::string &kernels, &constants;
  int &counter;
  void findViews();
  /// "data, batch stride, head stride, row stride" of attention operand `v`.
  std::string attentionTensor(Value v);

  MemoryPlan plan;
  // Strided views around attention (docs/codegen.md): Q/K/V are read from
  // the projection GEMM's output through strides, and attention writes its
  // output in the [B, S, H, D] layout the next GEMM reads. The split and
  // transpose ops of such chains emit nothing.
  struct HeadView {
    Value storage;        // the [B, S, N] GEMM output
    int64_t column = 0;   // first column of this tensor in it
  };
  llvm::DenseMap<Value, HeadView> headViews;   // transposed attention operands
  llvm::DenseMap<Value, Value> aliases;        // for planMemory
  llvm::DenseSet<Operation *> elided;
  llvm::DenseMap<Value, int64_t> offsets;        // arena values
  llvm::DenseMap<Value, unsigned> outputOwned;   // results written in place
  llvm::DenseMap<Value, std::string> constNames;
  std::string body, flopTerms, storageError;

public:
  std::string scalarKernels; // region functions without Highway
};

/// The value `v` is a reshape of (or `v`).
Value rootOf(Value v) {
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

std::string binaryName(Operation *op) {
  if (isa<AddOp>(op)) return "kAdd";
  if (isa<SubOp>(op)) return "kSub";
  if (isa<MulOp>(op)) return "kMul";
  return "kDiv";
}

static bool isHeadTranspose(TransposeOp t) {
  return t && t.getPermutation() == ArrayRef<int64_t>{0, 2, 1, 3};
}

void Emitter::findViews() {
  func.walk([&](AttentionOp a) {
    for (Value operand : {a.getQuery(), a.getKey(), a.getValue()}) {
      // transpose{0,2,1,3}(reshape [B,S,H·D] -> [B,S,H,D] (x)), x a column
      // range (split on the last axis) of a [B,S,N] value or that value.
      auto t = operand.getDefiningOp<TransposeOp>();
      if (!isHeadTranspose(t) || !operand.hasOneUse() || headViews.count(operand))
        continue;
      auto r = t.getInput().getDefiningOp<ReshapeOp>();
      if (!r || !r.getResult().hasOneUse() || r.getInput().getType().getRank() != 3 ||
          !dims.equal(r.getInput(), 0, r.getResult(), 0) ||
          !dims.equal(r.getInput(), 1, r.getResult(), 1))
        continue;
      Value x = r.getInput();
      HeadView view{x, 0};
      if (auto split = x.getDefiningOp<SplitOp>()) {
        auto in = split.getInput().getType();
        if (!x.hasOneUse() || normalizedAxis(split.getAxis(), in.getRank()) != 2 ||
            in.isDynamicDim(2))
          continue;
        unsigned i = cast<OpResult>(x).getResultNumber();
        for (unsigned j = 0; j < i; ++j)
          view.column += split.getSizes()[j];
        view.storage = split.getInput();
        aliases[x] = view.storage;
      } else if (cast<RankedTensorType>(x.getType()).isDynamicDim(2)) {
        continue;
      }
      headViews[operand] = view;
      aliases[operand] = r.getResult();
      elided.insert(t);
    }
    // The output, transposed back to [B, S, H, D]: written there directly.
    Value out = a.getResult();
    if (out.hasOneUse())
      if (auto t = dyn_cast<TransposeOp>(*out.getUsers().begin()); isHeadTranspose(t)) {
        aliases[out] = t.getResult();
        elided.insert(t);
      }
  });
}

std::string Emitter::attentionTensor(Value v) {
  auto it = headViews.find(v);
  if (it == headViews.end())
    return in(v) + ", 0, 0, 0"; // dense [B, H, S, D]
  auto type = cast<RankedTensorType>(it->second.storage.getType());
  std::string n = std::to_string(type.getDimSize(2));
  std::string seq = dims.dim(it->second.storage, 1);
  std::string headDim = std::to_string(cast<RankedTensorType>(v.getType()).getDimSize(3));
  return in(it->second.storage) + " + " + std::to_string(it->second.column) + ", size_t(" + seq +
         " * " + n + "), " + headDim + ", " + n;
}

llvm::Error Emitter::emitOp(Operation *op) {
  auto res = [&](unsigned i = 0) { return op->getResult(i); };
  if (elided.count(op))
    return llvm::Error::success();
  return llvm::TypeSwitch<Operation *, llvm::Error>(op)
      .Case<ParamOp, DimOp, ReshapeOp>([](auto) { return llvm::Error::success(); })
      .Case([&](ConstantOp c) -> llvm::Error {
        llvm::Error err = llvm::Error::success();
        std::string name = constant(c, err);
        if (err)
          return err;
        constNames[c.getResult()] = name;
        return llvm::Error::success();
      })
      .Case([&](GatherOp g) {
        auto table = g.getTable().getType();
        checked("exec::gather(" + in(g.getTable()) + ", " + std::to_string(table.getDimSize(0)) +
                ", " + std::to_string(table.getDimSize(1)) + ", " + in(g.getIds()) + ", " +
                dims.shape(g.getIds()) + ", " + quote(nameOf(g.getIds())) + ", " + ptr(res()) + ")");
        return llvm::Error::success();
      })
      .Case([&](MatmulOp m) -> llvm::Error {
        Value rhs = rootOf(m.getRhs());
        auto rt = m.getRhs().getType();
        if (rhs.getDefiningOp<ParamOp>() && rt.getRank() == 2 && !m.getTransposeLhs())
          return emitLinear(op, m.getLhs(), m.getRhs(), m.getTransposeRhs(), Value(), "none",
                            Value(), res());
        auto lt = m.getLhs().getType();
        std::string kExpr = dims.dim(m.getLhs(), m.getTransposeLhs() ? lt.getRank() - 2 : lt.getRank() - 1);
        call("exec::matmul(" + in(m.getLhs()) + ", " + dims.shape(m.getLhs()) + ", " +
             (m.getTransposeLhs() ? "true" : "false") + ", " + in(m.getRhs()) + ", " +
             dims.shape(m.getRhs()) + ", " + (m.getTransposeRhs() ? "true" : "false") + ", " +
             ptr(res()) + ", " + dims.shape(res()) + ", c.pool);");
        flops("2.0 * " + dims.numel(res()) + " * " + kExpr);
        return llvm::Error::success();
      })
      .Case<AddOp, SubOp, MulOp, DivOp>([&](auto b) {
        call("exec::binary(exec::BinaryOp::" + binaryName(op) + ", " + in(b.getLhs()) + ", " +
             dims.shape(b.getLhs()) + ", " + in(b.getRhs()) + ", " + dims.shape(b.getRhs()) +
             ", " + ptr(res()) + ", " + dims.shape(res()) + ", c.pool);");
        return llvm::Error::success();
      })
      .Case([&](ScaleOp s) {
        call("exec::scale(" + in(s.getInput()) + ", " + floatLit(s.getFactor().convertToDouble()) +
             ", " + ptr(res()) + ", " + dims.numel(res()) + ", c.pool);");
        return llvm::Error::success();
      })
      .Case<ReluOp, ExpOp, TanhOp, GeluOp>([&](auto u) {
        std::string kind = isa<ReluOp>(op)  ? "kRelu"
                           : isa<ExpOp>(op) ? "kExp"
                           : isa<TanhOp>(op) ? "kTanh"
                           : cast<GeluOp>(op).getApproximate() == "tanh" ? "kGeluTanh"
                                                                         : "kGelu";
        call("exec::unary(exec::UnaryOp::" + kind + ", " + in(u.getInput()) + ", " + ptr(res()) +
             ", " + dims.numel(res()) + ", c.pool);");
        return llvm::Error::success();
      })
      .Case([&](SelectOp s) {
        call("exec::select(" + in(s.getCond()) + ", " + dims.shape(s.getCond()) + ", " +
             in(s.getOnTrue()) + ", " + dims.shape(s.getOnTrue()) + ", " + in(s.getOnFalse()) +
             ", " + dims.shape(s.getOnFalse()) + ", " + ptr(res()) + ", " + dims.shape(res()) + ");");
        return llvm::Error::success();
      })
      .Case([&](SoftmaxOp s) {
        auto t = s.getInput().getType();
        call("exec::softmax(" + in(s.getInput()) + ", " + dims.shape(s.getInput()) + ", " +
             std::to_string(normalizedAxis(s.getAxis(), t.getRank())) + ", " + ptr(res()) +
             ", c.pool);");
        return llvm::Error::success();
      })
      .Case([&](LayerNormOp l) {
        auto t = l.getInput().getType();
        int64_t axis = normalizedAxis(l.getAxis(), t.getRank());
        call("kernels::layerNorm(" + in(l.getInput()) + ", " + in(l.getGamma()) + ", " +
             in(l.getBeta()) + ", " + ptr(res()) + ", " + dims.product(l.getInput(), 0, axis) +
             ", " + dims.product(l.getInput(), axis, t.getRank()) + ", " +
             floatLit(l.getEpsilon().convertToDouble()) + ", c.pool);");
        return llvm::Error::success();
      })
      .Case([&](AddLayerNormOp l) -> llvm::Error {
        // x + residual with one of them possibly a trailing block of the
        // other ([T, D] positions into [B, T, D] tokens): one call per block.
        Value x = l.getInput(), r = l.getResidual();
        auto t = cast<RankedTensorType>(l.getResult().getType());
        if (x.getType() != t)
          std::swap(x, r);
        auto rt = cast<RankedTensorType>(r.getType());
        bool trailing = dims.sameSizes(x, l.getResult()) && rt.getRank() >= 1 &&
                        rt.getRank() <= t.getRank() && t.getRank() >= 1;
        for (int64_t d = 0; trailing && d < rt.getRank(); ++d)
          trailing = dims.equal(r, d, l.getResult(), t.getRank() - rt.getRank() + d);
        if (!trailing)
          return fail(op, "this broadcast of the residual is not supported");
        std::string width = std::to_string(t.getDimSize(t.getRank() - 1));
        std::string blockRows = dims.product(r, 0, rt.getRank() - 1);
        std::string blocks = dims.product(l.getResult(), 0, t.getRank() - rt.getRank());
        std::string sum = l.getSum().use_empty() ? "nullptr" : ptr(l.getSum());
        std::string args = in(l.getGamma()) + ", " + in(l.getBeta()) + ", ";
        std::string eps = floatLit(l.getEpsilon().convertToDouble());
        if (dims.sameSizes(r, l.getResult())) {
          call("kernels::addLayerNorm(" + in(x) + ", " + in(r) + ", " + args + ptr(l.getResult()) +
               ", " + sum + ", " + blockRows + ", " + width + ", " + eps + ", c.pool);");
          return llvm::Error::success();
        }
        std::string block = "(" + blockRows + " * " + width + ")";
        line("for (int64_t b = 0, n = " + block + "; b < " + blocks + "; ++b)");
        call("  kernels::addLayerNorm(" + in(x) + " + b * n, " + in(r) + ", " + args +
             ptr(l.getResult()) + " + b * n, " +
             (sum == "nullptr" ? sum : sum + " + b * n") + ", " + blockRows + ", " + width +
             ", " + eps + ", c.pool);");
        return llvm::Error::success();
      })
      .Case([&](LinearOp l) {
        return emitLinear(op, l.getInput(), l.getWeight(), l.getTransposeWeight(), l.getBias(),
                          l.getActivation(), l.getResidual(), res());
      })
      .Case([&](AttentionOp a) { return emitAttention(a); })
      .Case([&](FusedElementwiseOp f) { return emitFused(f); })
      .Case([&](TransposeOp t) {
        std::string perm;
        for (int64_t p : t.getPermutation())
          perm += (perm.empty() ? "" : ", ") + std::to_string(p);
        call("exec::transpose(" + in(t.getInput()) + ", " + dims.shape(t.getInput()) +
             ", std::array<int64_t, " + std::to_string(t.getPermutation().size()) + ">{" + perm +
             "}.data(), " + ptr(res()) + ", " +
             std::to_string(elemSize(t.getType().getElementType())) + ");");
        return llvm::Error::success();
      })
      .Case([&](ConcatOp cc) {
        std::string ptrs, shapes;
        for (Value v : cc.getInputs()) {
          ptrs += (ptrs.empty() ? "" : ", ") + in(v);
          shapes += (shapes.empty() ? "" : ", ") + dims.shape(v);
        }
        auto t = cc.getType();
        line("{");
        line("  const void* ins[] = {" + ptrs + "};");
        line("  const exec::Shape shapes[] = {" + shapes + "};");
        call("  exec::concat(ins, shapes, " + std::to_string(cc.getInputs().size()) + ", " +
             std::to_string(normalizedAxis(cc.getAxis(), t.getRank())) + ", " + ptr(res()) + ", " +
             std::to_string(elemSize(t.getElementType())) + ");");
        line("}");
        return llvm::Error::success();
      })
      .Case([&](SplitOp s) {
        auto t = s.getInput().getType();
        int64_t axis = normalizedAxis(s.getAxis(), t.getRank()), start = 0;
        for (auto [r, size] : llvm::zip(s.getResults(), s.getSizes())) {
          if (!r.use_empty() && !aliases.count(r))
            call("exec::slice(" + in(s.getInput()) + ", " + dims.shape(s.getInput()) + ", " +
                 std::to_string(axis) + ", " + std::to_string(start) + ", " + std::to_string(size) +
                 ", " + ptr(r) + ", " + std::to_string(elemSize(t.getElementType())) + ");");
          start += size;
        }
        return llvm::Error::success();
      })
      .Case([&](SliceOp s) {
        auto t = s.getInput().getType();
        int64_t axis = normalizedAxis(s.getAxis(), t.getRank());
        if (s.getLength())
          dims.checks.push_back({"(" + std::to_string(s.getStart()) + " + " + dims.dim(res(), axis) +
                                     " > " + dims.dim(s.getInput(), axis) + ")",
                                 "a slice past the end of its axis (a length over the table?)"});
        call("exec::slice(" + in(s.getInput()) + ", " + dims.shape(s.getInput()) + ", " +
             std::to_string(axis) + ", " + std::to_string(s.getStart()) + ", " +
             dims.dim(res(), axis) + ", " + ptr(res()) + ", " +
             std::to_string(elemSize(t.getElementType())) + ");");
        return llvm::Error::success();
      })
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>([&](auto r) {
        auto t = r.getInput().getType();
        uint32_t mask = 0;
        for (int64_t a : r.getAxes())
          mask |= 1u << normalizedAxis(a, t.getRank());
        std::string kind = isa<ReduceSumOp>(op) ? "kSum" : isa<ReduceMeanOp>(op) ? "kMean" : "kMax";
        call("exec::reduce(exec::ReduceOp::" + kind + ", " + in(r.getInput()) + ", " +
             dims.shape(r.getInput()) + ", " + std::to_string(mask) + "u, " + ptr(res()) + ");");
        return llvm::Error::success();
      })
      .Case([&](KeyPaddingMaskOp k) {
        call("exec::keyPaddingMask(" + in(k.getTokens()) + ", " + dims.numel(k.getTokens()) + ", " +
             std::to_string(k.getPadId()) + ", " + ptr(res()) + ");");
        return llvm::Error::success();
      })
      .Case([&](CausalMaskOp m) {
        call("exec::causalMask(" + dims.index(m.getQueryLen()) + ", " + dims.index(m.getKeyLen()) +
             ", " + ptr(res()) + ");");
        return llvm::Error::success();
      })
      .Case([&](PositionalEncodingOp p) {
        std::string offset = p.getOffset() ? dims.index(p.getOffset()) : "0";
        call("exec::positionalEncoding(" + dims.index(p.getLength()) + ", " + offset + ", " +
             std::to_string(p.getType().getDimSize(1)) + ", " + ptr(res()) + ");");
        return llvm::Error::success();
      })
      .Default([&](Operation *) { return fail(op, "is not supported"); });
}

llvm::Error Emitter::emitLinear(Operation *op, Value x, Value w, bool transW, Value bias,
                                StringRef act, Value residual, Value result) {
  auto xt = cast<RankedTensorType>(x.getType()), wt = cast<RankedTensorType>(w.getType());
  auto rt = cast<RankedTensorType>(result.getType());
  if (wt.getRank() != 2)
    return fail(op, "a weight of rank " + llvm::Twine(wt.getRank()) + " is not supported");
  int64_t k = xt.getDimSize(xt.getRank() - 1), n = rt.getDimSize(rt.getRank() - 1);
  if (ShapedType::isDynamic(k) || ShapedType::isDynamic(n))
    return fail(op, "dynamic contraction or output sizes are not supported");
  if (residual && !dims.sameSizes(residual, result))
    return fail(op, "a residual that may broadcast is not supported");
  if (xt.getRank() == 0)
    return fail(op, "a rank-0 input is not supported");
  std::string m = dims.product(x, 0, xt.getRank() - 1);
  static const llvm::StringMap<std::string> acts = {{"none", "kNone"},
                                                    {"relu", "kRelu"},
                                                    {"gelu", "kGelu"},
                                                    {"gelu_tanh", "kGeluTanh"}};
  auto a = acts.find(act);
  if (a == acts.end())
    return fail(op, "activation '" + act + "' is not supported");
  std::string epi = "kernels::GemmEpilogue{" + (bias ? in(bias) : std::string("nullptr")) +
                    ", kernels::Activation::" + a->second + ", " +
                    (residual ? in(residual) : std::string("nullptr")) + ", 0}";
  std::string sizes = m + ", " + std::to_string(n) + ", " + std::to_string(k);
  if (auto p = rootOf(w).getDefiningOp<ParamOp>()) {
    int pack = tables.pack(tables.paramIndex.lookup(p.getName()), transW, k, n);
    call("kernels::gemm(" + sizes + ", " + in(x) + ", " + std::to_string(k) +
         ", false, *c.packed[" + std::to_string(pack) + "], " + ptr(result) + ", " +
         std::to_string(n) + ", " + epi + ", c.pool);");
  } else {
    call("kernels::gemm(" + sizes + ", " + in(x) + ", " + std::to_string(k) + ", false, " + in(w) +
         ", " + std::to_string(transW ? k : n) + ", " + (transW ? "true" : "false") + ", " +
         ptr(result) + ", " + std::to_string(n) + ", " + epi + ", c.pool);");
  }
  flops("2.0 * " + m + " * " + std::to_string(n * k));
  return llvm::Error::success();
}

llvm::Error Emitter::emitAttention(AttentionOp op) {
  if (op.getMask())
    return fail(op, "a boolean mask operand is not supported (causal and key_padding are)");
  if (op.getDropoutRate().convertToDouble() > 0.0)
    return fail(op, "attention dropout (training) is not supported");
  Value q = op.getQuery(), k = op.getKey();
  int64_t headDim = cast<RankedTensorType>(q.getType()).getDimSize(3);
  if (ShapedType::isDynamic(headDim) || headDim < 1 || headDim > 256)
    return fail(op, "the head size must be static, 1 to 256");
  if (cast<RankedTensorType>(op.getValue().getType()).getDimSize(3) != headDim ||
      cast<RankedTensorType>(k.getType()).getDimSize(3) != headDim)
    return fail(op, "query, key and value head sizes must be equal");
  std::string b = dims.dim(q, 0), h = dims.dim(q, 1), sq = dims.dim(q, 2), sk = dims.dim(k, 2);
  line("{");
  line("  kernels::AttentionArgs args;");
  line("  args.batch = " + b + "; args.heads = " + h + "; args.seqQ = " + sq +
       "; args.seqK = " + sk + "; args.headDim = " + std::to_string(headDim) + ";");
  line("  args.q = {" + attentionTensor(q) + "};");
  line("  args.k = {" + attentionTensor(k) + "};");
  line("  args.v = {" + attentionTensor(op.getValue()) + "};");
  line("  args.out = " + ptr(op.getResult()) + ";");
  if (auto it = aliases.find(op.getResult()); it != aliases.end()) {
    // Written as [B, S, H, D], the transpose that follows.
    std::string row = std::to_string(headDim) + " * " + h;
    line("  args.outBatchStride = " + sq + " * " + row + "; args.outHeadStride = " +
         std::to_string(headDim) + "; args.outRowStride = " + row + ";");
  }
  line("  args.scale = " + floatLit(op.getScale().convertToDouble()) + ";");
  if (op.getCausal())
    line("  args.causal = true;");
  if (Value kp = op.getKeyPadding())
    line("  args.keyMask = " + in(kp) + ";");
  if (Value bias = op.getBias()) {
    // [.., Sq, Sk] broadcast to [B, H, Sq, Sk]: stride 0 where broadcast.
    auto t = cast<RankedTensorType>(bias.getType());
    if (t.getRank() < 2 || (!t.isDynamicDim(t.getRank() - 1) && t.getDimSize(t.getRank() - 1) == 1))
      return fail(op, "the bias must hold one value per key (a last dimension of Sk)");
    dims.checks.push_back({"(" + dims.dim(bias, t.getRank() - 1) + " != " + sk + ")",
                           "an attention bias whose last dimension is not the key length"});
    std::string strides[3] = {"0", "0", "0"};
    std::string inner = dims.dim(bias, t.getRank() - 1);
    int64_t slot = 2;
    for (int64_t d = t.getRank() - 2; d >= 0 && slot >= 0; --d, --slot) {
      bool one = !t.isDynamicDim(d) && t.getDimSize(d) == 1;
      if (!one)
        strides[slot] = inner;
      inner = "(" + inner + " * " + dims.dim(bias, d) + ")";
    }
    line("  args.additive = " + in(bias) + ";");
    line("  args.additiveBatchStride = " + strides[0] + "; args.additiveHeadStride = " +
         strides[1] + "; args.additiveRowStride = " + strides[2] + ";");
  }
  line("  if (rt::Status s = kernels::attention(args, c.pool); !s.isOk()) return s;");
  ++kernelCalls;
  line("}");
  flops("4.0 * " + b + " * " + h + " * " + sq + " * " + sk + " * " + std::to_string(headDim));
  return llvm::Error::success();
}

/// The expression of one region op over the values `arg` names: Highway
/// vectors (`vector`) or scalars.
std::string regionExpr(Operation &inner, llvm::function_ref<std::string(unsigned)> arg,
                       bool vector) {
  auto splat = [&](double v) { return vector ? "hn::Set(d, " + floatLit(v) + ")" : floatLit(v); };
  auto bin = [&](const char *vop, const char *sop) {
    return vector ? std::string(vop) + "(" + arg(0) + ", " + arg(1) + ")"
                  : "(" + arg(0) + " " + sop + " " + arg(1) + ")";
  };
  if (auto c = dyn_cast<ConstantOp>(inner)) {
    auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!attr || !attr.isSplat() || !isa<FloatType>(attr.getElementType()))
      return "";
    return splat(attr.getSplatValue<APFloat>().convertToDouble());
  }
  if (isa<AddOp>(inner)) return bin("hn::Add", "+");
  if (isa<SubOp>(inner)) return bin("hn::Sub", "-");
  if (isa<MulOp>(inner)) return bin("hn::Mul", "*");
  if (isa<DivOp>(inner)) return bin("hn::Div", "/");
  if (auto s = dyn_cast<ScaleOp>(inner)) {
    std::string f = splat(s.getFactor().convertToDouble());
    return vector ? "hn::Mul(" + arg(0) + ", " + f + ")" : "(" + arg(0) + " * " + f + ")";
  }
  if (isa<ReluOp>(inner))
    return vector ? "hn::Max(" + arg(0) + ", hn::Zero(d))" : "std::max(" + arg(0) + ", 0.0f)";
  if (isa<ExpOp>(inner))
    return vector ? "hn::Exp(d, " + arg(0) + ")" : "std::exp(" + arg(0) + ")";
  if (isa<TanhOp>(inner))
    return vector ? "hn::Tanh(d, " + arg(0) + ")" : "std::tanh(" + arg(0) + ")";
  if (auto g = dyn_cast<GeluOp>(inner)) {
    bool tanhForm = g.getApproximate() == "tanh";
    if (vector)
      return std::string(tanhForm ? "tk::GeluTanh" : "tk::GeluErf") + "(d, " + arg(0) + ")";
    std::string x = arg(0);
    return tanhForm ? "(0.5f * " + x + " * (1.0f + std::tanh(0.7978845608f * (" + x +
                          " + 0.044715f * " + x + " * " + x + " * " + x + "))))"
                    : "(0.5f * " + x + " * (1.0f + std::erf(" + x + " * 0.70710678f)))";
  }
  if (isa<SelectOp>(inner) && !vector)
    return "(" + arg(0) + " ? " + arg(1) + " : " + arg(2) + ")";
  return "";
}

/// A fused_elementwise region becomes one generated function. When every
/// input is f32 and is the full shape, a trailing block of it repeated over
/// the leading rows ([S, D] into [B, S, D]) or one value, it is Highway code
/// over rows of the last dimension; otherwise a scalar loop over rows with
/// each input's broadcast strides (masks, selects, any broadcast).
llvm::Error Emitter::emitFused(FusedElementwiseOp op) {
  auto rt = op.getType();
  if (!rt.getElementType().isF32())
    return fail(op, "only f32 regions are supported");
  if (rt.getRank() == 0)
    return fail(op, "a rank-0 region is not supported");
  Block &body = op.getBody().front();
  int64_t rank = rt.getRank();
  std::string name = "fe" + std::to_string(counter++);
  std::string rows = dims.product(op.getResult(), 0, rank - 1);
  std::string width = dims.dim(op.getResult(), rank - 1);

  enum Kind { kFull, kTrailing, kSplat };
  llvm::SmallVector<Kind> kinds;
  bool vector = llvm::none_of(body.without_terminator(),
                              [](Operation &o) { return isa<SelectOp>(o); });
  for (Value input : op.getInputs()) {
    auto t = cast<RankedTensorType>(input.getType());
    bool trailing = t.getRank() <= rank && t.getRank() >= 1;
    for (int64_t d = 0; trailing && d < t.getRank(); ++d)
      trailing = dims.equal(input, d, op.getResult(), rank - t.getRank() + d);
    Kind k = t.hasStaticShape() && t.getNumElements() == 1 ? kSplat
             : dims.sameSizes(input, op.getResult())       ? kFull
                                                            : kTrailing;
    vector &= t.getElementType().isF32() && (k != kTrailing || trailing);
    kinds.push_back(k);
  }
  llvm::DenseMap<Value, std::string> names;
  for (auto [i, arg] : llvm::enumerate(body.getArguments()))
    names[arg] = "x" + std::to_string(i);
  std::string compute;
  int tmp = 0;
  for (Operation &inner : body.without_terminator()) {
    std::string e = regionExpr(
        inner, [&](unsigned i) { return names.lookup(inner.getOperand(i)); }, vector);
    if (e.empty())
      return fail(&inner, "is not supported in a fused region");
    std::string v = "t" + std::to_string(tmp++);
    compute += "      const auto " + v + " = " + e + ";\n";
    names[inner.getResult(0)] = v;
  }
  std::string y = names.lookup(cast<YieldOp>(body.getTerminator()).getValue());

  std::string ins;
  for (Value v : op.getInputs())
    ins += (ins.empty() ? "" : ", ") + std::string("static_cast<const void*>(") + in(v) + ")";
  line("{");
  line("  const void* ins[] = {" + ins + "};");
  line("  float* out = " + ptr(op.getResult()) + ";");
  if (vector) {
    std::string k = "void " + name +
                    "(const void* const* in, const int64_t* period, float* out, int64_t W, "
                    "int64_t r0, int64_t r1) {\n  const hn::ScalableTag<float> d;\n"
                    "  const int64_t N = (int64_t)hn::Lanes(d);\n  for (int64_t r = r0; r < r1; ++r) {\n";
    std::string loads, tailLoads, periods;
    for (auto [i, kind] : llvm::enumerate(kinds)) {
      std::string idx = std::to_string(i), x = "x" + idx;
      Value input = op.getInputs()[i];
      auto t = cast<RankedTensorType>(input.getType());
      if (kind == kSplat) {
        k += "    const auto " + x + "s = hn::Set(d, static_cast<const float*>(in[" + idx + "])[0]);\n";
        loads += "      const auto " + x + " = " + x + "s;\n";
        tailLoads += "      const auto " + x + " = " + x + "s;\n";
        periods += (periods.empty() ? "" : ", ") + std::string("1");
        continue;
      }
      k += "    const float* p" + idx + " = static_cast<const float*>(in[" + idx +
           "]) + (r % period[" + idx + "]) * W;\n";
      periods += (periods.empty() ? "" : ", ") +
                 (kind == kFull ? rows : dims.product(input, 0, t.getRank() - 1));
      loads += "      const auto " + x + " = hn::LoadU(d, p" + idx + " + j);\n";
      tailLoads += "      const auto " + x + " = tk::LoadTail(d, p" + idx + " + j, size_t(W - j), 0.0f);\n";
    }
    k += "    float* o = out + r * W;\n    int64_t j = 0;\n    for (; j + N <= W; j += N) {\n" +
         loads + compute + "      hn::StoreU(" + y + ", d, o + j);\n    }\n    if (j < W) {\n" +
         tailLoads + compute + "      tk::StoreTail(d, " + y + ", o + j, size_t(W - j));\n    }\n  }\n}\n";
    kernels += k;
    line("  const int64_t period[] = {" + periods + "};");
    call("  exec::parallelRows(c.pool, " + rows + ", [&](int64_t r0, int64_t r1) { "
         "HWY_DYNAMIC_DISPATCH(" + name + ")(ins, period, out, " + width + ", r0, r1); });");
  } else {
    // Scalar: element (row r, column j) of input k is at
    // offset_k(r) + j * stride_k[last], offset_k from the broadcast strides.
    std::string k = "void " + name + "(const void* const* in, const exec::Shape& os, "
                    "const exec::Strides* st, float* out) {\n"
                    "  const int64_t W = os[os.rank - 1], rows = os.numel() / std::max<int64_t>(W, 1);\n"
                    "  for (int64_t r = 0; r < rows; ++r) {\n";
    std::string strides;
    for (auto [i, input] : llvm::enumerate(op.getInputs())) {
      std::string idx = std::to_string(i);
      auto t = cast<RankedTensorType>(input.getType());
      std::string ct = cType(t.getElementType());
      k += "    const " + ct + "* p" + idx + " = static_cast<const " + ct + "*>(in[" + idx +
           "]) + st[" + idx + "].rowOffset(os, r);\n    const int64_t s" + idx + " = st[" + idx +
           "].step[os.rank - 1];\n";
      strides += (strides.empty() ? "" : ", ") + std::string("exec::Strides(") +
                 dims.shape(input) + ", os)";
    }
    k += "    for (int64_t j = 0; j < W; ++j) {\n";
    for (size_t i = 0; i < kinds.size(); ++i)
      k += "      const auto x" + std::to_string(i) + " = p" + std::to_string(i) + "[j * s" +
           std::to_string(i) + "];\n";
    k += compute + "      out[r * W + j] = " + y + ";\n    }\n  }\n}\n";
    scalarKernels += k;
    line("  const exec::Shape os = " + dims.shape(op.getResult()) + ";");
    line("  const exec::Strides st[] = {" + strides + "};");
    call("  " + name + "(ins, os, st, out);");
  }
  line("}");
  return llvm::Error::success();
}

/// C++ initializer of a TensorDesc.
std::string tensorDesc(const rt::TensorSpec &s) {
  std::string shape, max;
  for (size_t i = 0; i < s.shape.size(); ++i) {
    shape += (i ? ", " : "") + std::to_string(s.shape[i]);
    max += (i ? ", " : "") + std::to_string(s.maxShape[i]);
  }
  return "{" + quote(s.name) + ", " + std::to_string((int)s.dtype) + ", " +
         std::to_string(s.shape.size()) + ", {" + shape + "}, {" + max + "}}";
}

std::string stringArray(const std::string &name, const std::vector<std::string> &items) {
  std::string s = "const char* const " + name + "[] = {";
  for (const std::string &i : items)
    s += quote(i) + ", ";
  return s + "nullptr};\n";
}

} // namespace

llvm::Expected<std::string> mlir::transfuse::cpu::generateCpp(ModuleOp module,
                                                              const ModelInterface &mi,
                                                              StringRef fusion) {
  if (mi.entryPoints.size() > 64)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "too many entry points");
  ModelTables tables;
  // The param table: weights (the interface's order), then prepared params.
  std::string params;
  for (const rt::ParamSpec &p : mi.params) {
    tables.paramIndex[p.name] = (int)tables.paramIndex.size();
    std::string shape;
    for (size_t i = 0; i < p.shape.size(); ++i)
      shape += (i ? ", " : "") + std::to_string(p.shape[i]);
    params += "    {" + quote(p.name) + ", " + std::to_string(p.shape.size()) + ", {" + shape +
              "}, " + quote(rt::initKindName(p.init)) + ", " + std::to_string(p.fanIn) + ", " +
              std::to_string(p.fanOut) + ", " + (p.optional ? "true" : "false") + ", false},\n";
  }
  auto prepare = module.lookupSymbol<func::FuncOp>(kPrepareFunction);
  module.walk([&](ParamOp p) {
    if (!p.getPrepared() || tables.paramIndex.count(p.getName()))
      return;
    tables.paramIndex[p.getName()] = (int)tables.paramIndex.size();
    std::string shape;
    for (int64_t i = 0; i < p.getType().getRank(); ++i)
      shape += (i ? ", " : "") + std::to_string(p.getType().getDimSize(i));
    params += "    {" + quote(p.getName()) + ", " + std::to_string(p.getType().getRank()) +
              ", {" + shape + "}, \"zeros\", 0, 0, false, true},\n";
  });

  std::string kernels, constants, functions, entryTables, scalarKernels;
  int counter = 0;
  std::string entries, prepareDesc = "nullptr";
  for (const EntryPoint &ep : mi.entryPoints) {
    auto func = module.lookupSymbol<func::FuncOp>(ep.name);
    Emitter emitter(func, ep, tables, kernels, constants, counter);
    if (llvm::Error e = emitter.emit(functions))
      return std::move(e);
    scalarKernels += emitter.scalarKernels;
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
                       std::to_string(emitter.arenaBytes) + ", " +
                       std::to_string(emitter.kernelCalls) + ", run_" + ep.name + ", shapes_" +
                       ep.name + ", flops_" + ep.name + "}";
    if (prepare && func == prepare) {
      entryTables += "const exec::EntryDesc kPrepare = " + desc + ";\n";
      prepareDesc = "&kPrepare";
    } else {
      entries += "    " + desc + ",\n";
    }
  }
  std::string packs;
  for (auto [i, p] : llvm::enumerate(tables.packs))
    packs += "    {" + std::to_string(p.first) + ", " + std::to_string(tables.packShape[i][0]) +
             ", " + std::to_string(tables.packShape[i][1]) + ", " +
             (p.second ? "true" : "false") + "},\n";

  std::vector<std::string> aliases;
  for (const auto &[alias, canonical] : mi.rules.aliases) {
    aliases.push_back(alias);
    aliases.push_back(canonical);
  }

  std::string src;
  llvm::raw_string_ostream os(src);
  os << "// Generated by transfuse (cpu target, fusion " << fusion
     << "). Do not edit: recompile the model instead.\n"
        "// Calls runtime/kernels and runtime/exec/Ops.h; the C ABI (model.h) comes from\n"
        "// runtime/exec/ModelAbi.cpp over transfuse_generated_model().\n";
  bool hwy = !kernels.empty();
  if (hwy) {
    os << "#undef HWY_TARGET_INCLUDE\n#define HWY_TARGET_INCLUDE \"model.cpp\"\n"
          "#include <hwy/foreach_target.h>\n#include <hwy/highway.h>\n"
          "#include <hwy/contrib/math/math-inl.h>\n"
          "#include \"runtime/kernels/elementwise-inl.h\"\n\n"
          "HWY_BEFORE_NAMESPACE();\nnamespace transfuse_generated {\nnamespace HWY_NAMESPACE {\n"
          "namespace hn = hwy::HWY_NAMESPACE;\n"
          "namespace tk = transfuse::kernels::HWY_NAMESPACE;\n\n"
       << kernels
       << "}  // namespace HWY_NAMESPACE\n}  // namespace transfuse_generated\n"
          "HWY_AFTER_NAMESPACE();\n\n#if HWY_ONCE\n";
  }
  os << "#include \"runtime/exec/Generated.h\"\n#include \"runtime/exec/Ops.h\"\n"
        "#include \"runtime/kernels/Attention.h\"\n#include \"runtime/kernels/Gemm.h\"\n"
        "#include \"runtime/kernels/Norm.h\"\n\n#include <algorithm>\n#include <array>\n"
        "#include <cmath>\n#include <cstddef>\n#include <cstdint>\n#include <limits>\n\n"
        "namespace transfuse_generated {\nnamespace exec = transfuse::exec;\n"
        "namespace kernels = transfuse::kernels;\nnamespace rt = transfuse::rt;\n";
  if (hwy) {
    os << "\n";
    for (int i = 0; i < counter; ++i)
      if (kernels.find("void fe" + std::to_string(i) + "(") != std::string::npos)
        os << "HWY_EXPORT(fe" << i << ");\n";
  }
  os << "namespace {\n\n" << constants << "\n" << scalarKernels << functions << entryTables
     << "\nconst exec::ParamDesc kParams[] = {\n"
     << (params.empty() ? "    {\"\", 0, {}, \"zeros\", 0, 0, false, false},\n" : params)
     << "};\nconst exec::EntryDesc kEntries[] = {\n" << entries
     << "};\nconst exec::PackDesc kPacks[] = {\n"
     << (packs.empty() ? "    {0, 0, 0, false},\n" : packs) << "};\n"
     << stringArray("kAliases", aliases) << stringArray("kIgnored", mi.rules.ignored)
     << stringArray("kPrefixes", mi.rules.prefixes)
     << "\nconst exec::ModelDesc kModel = {\n    " << TF_ABI_VERSION << ", "
     << quote(fusion) << ",\n    " << quote(mi.configJson) << ",\n    kParams, "
     << tables.paramIndex.size() << ",\n    kAliases, " << mi.rules.aliases.size()
     << ", kIgnored, " << mi.rules.ignored.size() << ", kPrefixes, " << mi.rules.prefixes.size()
     << ",\n    " << prepareDesc << ", kEntries, "
     << (mi.entryPoints.size() - (prepareDesc == "nullptr" ? 0 : 1)) << ", kPacks, "
     << tables.packs.size() << "};\n\n}  // namespace\n}  // namespace transfuse_generated\n\n"
     << "extern \"C\" const transfuse::exec::ModelDesc* transfuse_generated_model(void) {\n"
        "  return &transfuse_generated::kModel;\n}\n";
  if (hwy)
    os << "#endif  // HWY_ONCE\n";
  return src;
}

//===----------------------------------------------------------------------===//
// Building the artifact
//===----------------------------------------------------------------------===//

std::string mlir::transfuse::cpu::defaultCompiler() {
  if (const char *env = std::getenv("TRANSFUSE_CXX"); env && *env)
    return env;
  return TRANSFUSE_DEFAULT_CXX;
}

static llvm::Error runCommand(llvm::ArrayRef<std::string> argv, StringRef log,
                              std::optional<StringRef> input = std::nullopt) {
  auto program = llvm::sys::findProgramByName(argv[0]);
  if (!program || !llvm::sys::fs::can_execute(*program))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "C++ compiler '" + argv[0] +
                                       "' not found (set --cxx or TRANSFUSE_CXX)");
  llvm::SmallVector<StringRef> args(argv.begin(), argv.end());
  std::optional<StringRef> redirects[] = {input, log, log};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*program, args, std::nullopt, redirects, 0, 0, &message);
  if (rc == 0)
    return llvm::Error::success();
  std::string text;
  if (auto buf = llvm::MemoryBuffer::getFile(log))
    text = (*buf)->getBuffer().take_back(4000).str();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "'" + llvm::join(argv, " ") + "' failed" +
                                     (message.empty() ? "" : " (" + message + ")") + ":\n" + text);
}

static llvm::Error writeFile(const llvm::Twine &path, StringRef text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path.str(), ec);
  if (ec)
    return llvm::createStringError(ec, "cannot write '%s': %s", path.str().c_str(),
                                   ec.message().c_str());
  os << text;
  return llvm::Error::success();
}

llvm::Error mlir::transfuse::cpu::writeSources(StringRef dir, StringRef source) {
  if (llvm::Error e = writeFile(dir + "/model.cpp", source))
    return e;
  auto header = llvm::MemoryBuffer::getFile(TRANSFUSE_CODEGEN_SOURCE_DIR "/runtime/exec/model.h");
  if (!header)
    return llvm::createStringError(header.getError(), "cannot read the runtime's model.h");
  return writeFile(dir + "/model.h", (*header)->getBuffer());
}

llvm::Error mlir::transfuse::cpu::buildArtifact(StringRef dir, StringRef source,
                                                const BuildOptions &options) {
  if (llvm::Error e = writeSources(dir, source))
    return e;
  std::string cxx = options.cxx.empty() ? defaultCompiler() : options.cxx;
  std::string log = (dir + "/build.log").str();
  std::string object = (dir + "/model.o").str();
  // The build's sanitizer flags (empty in a plain build) go to every compile
  // and link, so that generated code is checked like the runtime it links.
  llvm::SmallVector<StringRef> extraFlags;
  StringRef(TRANSFUSE_ARTIFACT_FLAGS).split(extraFlags, ' ', -1, /*KeepEmpty=*/false);
  std::vector<std::string> compile = {cxx, "-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden",
                                      "-I", TRANSFUSE_CODEGEN_SOURCE_DIR, "-I", dir.str(), "-c",
                                      (dir + "/model.cpp").str(), "-o", object};
  compile.insert(compile.begin() + 1, extraFlags.begin(), extraFlags.end());
  if (llvm::Error e = runCommand(compile, log))
    return e;
  std::vector<std::string> libs = {TRANSFUSE_EXEC_LIB, TRANSFUSE_KERNELS_LIB, TRANSFUSE_RUNTIME_LIB};
  std::vector<std::string> system = {"-lhwy", "-lhwy_contrib", "-lpthread", "-ldl"};
  system.insert(system.end(), extraFlags.begin(), extraFlags.end());
  llvm::Error result = llvm::Error::success();
  switch (options.kind) {
  case ArtifactKind::kShared: {
    std::vector<std::string> link = {cxx, "-shared", "-o", (dir + "/libmodel.so").str(), object,
                                     "-Wl,--version-script=" TRANSFUSE_CODEGEN_SOURCE_DIR "/runtime/exec/model.map",
                                     "-Wl,--whole-archive", TRANSFUSE_EXEC_LIB, "-Wl,--no-whole-archive",
                                     TRANSFUSE_KERNELS_LIB, TRANSFUSE_RUNTIME_LIB};
    link.insert(link.end(), system.begin(), system.end());
    result = runCommand(link, log);
    break;
  }
  case ArtifactKind::kExecutable: {
    std::vector<std::string> link = {cxx, "-o", (dir + "/model").str(), object,
                                     TRANSFUSE_ARTIFACT_MAIN_LIB, "-Wl,--whole-archive",
                                     TRANSFUSE_EXEC_LIB, "-Wl,--no-whole-archive",
                                     TRANSFUSE_KERNELS_LIB, TRANSFUSE_RUNTIME_LIB};
    link.insert(link.end(), system.begin(), system.end());
    result = runCommand(link, log);
    break;
  }
  case ArtifactKind::kStatic: {
    if (dir.find_first_of(" \t\n'\"") != StringRef::npos)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "--emit static needs a directory name without spaces or "
                                     "quotes (ar's MRI scripts cannot quote '" + dir + "')");
    // One archive with the model and every runtime object it needs, so an
    // app links libmodel.a (and Highway) alone: an MRI script merges them.
    std::string script = "create " + (dir + "/libmodel.a").str() + "\naddmod " + object + "\n";
    for (const std::string &lib : libs)
      script += "addlib " + lib + "\n";
    script += "save\nend\n";
    if (llvm::Error e = writeFile(dir + "/libmodel.mri", script))
      return e;
    std::string mri = (dir + "/libmodel.mri").str();
    llvm::sys::fs::remove(dir + "/libmodel.a");
    result = runCommand({TRANSFUSE_AR, "-M"}, log, StringRef(mri));
    llvm::sys::fs::remove(mri);
    break;
  }
  }
  llvm::sys::fs::remove(object);
  return result;
}
