//===- FusedRegion.cpp - tfk.elementwise as generated loops ---------------===//

#include "codegen/cpu/CpuPrinter.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::cpu;
using namespace mlir::transfuse::emit;
namespace tfk = mlir::transfuse::kernel;

/// A tfk.elementwise region becomes one generated function: with `vector`,
/// Highway code over rows of the last dimension, each input read whole
/// (`full`), as a trailing block repeated over the leading rows
/// ([S, D] into [B, S, D]) or as one value (`splat`); otherwise a scalar
/// loop over rows with each input's broadcast strides (masks, selects, any
/// broadcast).
llvm::Error CpuPrinter::printElementwise(tfk::ElementwiseOp op) {
  Value result = op.getOut();
  int64_t rank = cast<MemRefType>(result.getType()).getRank();
  std::string name = "fe" + std::to_string(module.counter++);
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
    module.vectorCode += k;
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
    module.code += k;
    line("  const exec::Shape os = " + dims.shape(result) + ";");
    line("  const exec::Strides st[] = {" + strides + "};");
    call("  " + name + "(ins, os, st, out);");
  }
  line("}");
  return llvm::Error::success();
}
