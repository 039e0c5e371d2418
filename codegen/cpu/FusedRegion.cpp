//===- FusedRegion.cpp - tfk.elementwise as generated loops ---------------===//

#include "codegen/cpu/Emitter.h"

#include "codegen/lowering/OpMath.h"
#include "codegen/cpu/CppText.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::cpu;
namespace tfk = mlir::transfuse::kernel;

/// The formulas are the table's (runtime/kernels/ElementwiseMath.h); only
/// their names are printed here.
std::string mlir::transfuse::cpu::regionExpr(Operation &inner,
                                             llvm::function_ref<std::string(unsigned)> arg,
                                             bool vector) {
  auto splat = [&](double v) { return vector ? "hn::Set(d, " + floatLit(v) + ")" : floatLit(v); };
  if (auto c = dyn_cast<ConstantOp>(inner)) {
    auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!attr || !attr.isSplat() || !isa<FloatType>(attr.getElementType()))
      return "";
    return splat(attr.getSplatValue<APFloat>().convertToDouble());
  }
  auto call = [&](math::Kind kind, llvm::ArrayRef<std::string> args) {
    const math::KindInfo &f = math::info(kind);
    std::string s = vector ? std::string(f.vector) + "(" + (f.vectorTakesTag ? "d, " : "")
                           : "tm::" + std::string(f.scalar) + "(";
    for (size_t i = 0; i < args.size(); ++i)
      s += (i ? ", " : "") + args[i];
    return s + ")";
  };
  if (auto s = dyn_cast<ScaleOp>(inner)) // x · factor
    return call(math::Kind::kMul, {arg(0), splat(s.getFactor().convertToDouble())});
  if (std::optional<math::Kind> kind = mathKindOf(&inner)) {
    std::vector<std::string> args;
    for (int i = 0; i < math::info(*kind).arity; ++i)
      args.push_back(arg(i));
    return call(*kind, args);
  }
  if (isa<SelectOp>(inner) && !vector)
    return "(" + arg(0) + " ? " + arg(1) + " : " + arg(2) + ")";
  return "";
}

/// A tfk.elementwise region becomes one generated function: with `vector`,
/// Highway code over rows of the last dimension, each input read whole
/// (`full`), as a trailing block repeated over the leading rows
/// ([S, D] into [B, S, D]) or as one value (`splat`); otherwise a scalar
/// loop over rows with each input's broadcast strides (masks, selects, any
/// broadcast).

llvm::Error Emitter::regionBody(tfk::ElementwiseOp op, bool vector, StringRef indent,
                                std::string &compute, std::string &result) {
  Block &body = op.getBody().front();
  llvm::DenseMap<Value, std::string> names;
  for (auto [i, arg] : llvm::enumerate(body.getArguments()))
    names[arg] = "x" + std::to_string(i);
  int tmp = 0;
  for (Operation &inner : body.without_terminator()) {
    std::string e = regionExpr(
        inner, [&](unsigned i) { return names.lookup(inner.getOperand(i)); }, vector);
    if (e.empty())
      return fail(&inner, "is not supported in a fused region");
    std::string v = "t" + std::to_string(tmp++);
    compute += indent.str() + "const auto " + v + " = " + e + ";\n";
    names[inner.getResult(0)] = v;
  }
  result = names.lookup(cast<tfk::YieldOp>(body.getTerminator()).getValue());
  return llvm::Error::success();
}

llvm::Error Emitter::emitElementwise(tfk::ElementwiseOp op) {
  Value result = op.getOut();
  int64_t rank = cast<MemRefType>(result.getType()).getRank();
  std::string name = "fe" + std::to_string(counter++);
  std::string rows = dims.product(result, 0, rank - 1);
  std::string width = dims.dim(result, rank - 1);
  bool vector = op.getVector();
  SmallVector<StringRef> kinds;
  for (Attribute k : op.getKinds())
    kinds.push_back(cast<StringAttr>(k).getValue());
  std::string compute, y;
  if (llvm::Error e = regionBody(op, vector, "      ", compute, y))
    return e;

  std::string ins;
  for (Value v : op.getInputs())
    ins += (ins.empty() ? "" : ", ") + std::string("static_cast<const void*>(") + ptr(v) + ")";
  line("{");
  line("  const void* ins[] = {" + ins + "};");
  line("  float* out = " + ptr(result) + ";");
  if (vector) {
    std::string k = "void " + name +
                    "(const void* const* in, const int64_t* period, float* out, int64_t W, "
                    "int64_t r0, int64_t r1) {\n  const hn::ScalableTag<float> d;\n"
                    "  const int64_t N = (int64_t)hn::Lanes(d);\n  for (int64_t r = r0; r < r1; ++r) {\n";
    std::string loads, tailLoads, periods;
    for (auto [i, kind] : llvm::enumerate(kinds)) {
      std::string idx = std::to_string(i), x = "x" + idx;
      Value input = op.getInputs()[i];
      auto t = cast<MemRefType>(input.getType());
      if (kind == "splat") {
        k += "    const auto " + x + "s = hn::Set(d, static_cast<const float*>(in[" + idx + "])[0]);\n";
        loads += "      const auto " + x + " = " + x + "s;\n";
        tailLoads += "      const auto " + x + " = " + x + "s;\n";
        periods += (periods.empty() ? "" : ", ") + std::string("1");
        continue;
      }
      k += "    const float* p" + idx + " = static_cast<const float*>(in[" + idx +
           "]) + (r % period[" + idx + "]) * W;\n";
      periods += (periods.empty() ? "" : ", ") +
                 (kind == "full" ? rows : dims.product(input, 0, t.getRank() - 1));
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
      auto t = cast<MemRefType>(input.getType());
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
    line("  const exec::Shape os = " + dims.shape(result) + ";");
    line("  const exec::Strides st[] = {" + strides + "};");
    call("  " + name + "(ins, os, st, out);");
  }
  line("}");
  return llvm::Error::success();
}
