//===- CpuBackend.cpp - the cpu target's Backend --------------------------===//
//
// The translation unit: Highway's per-target block of the fused regions'
// vector code (foreach_target re-includes model.cpp once per target, so
// everything else stands inside HWY_ONCE), the includes of runtime/kernels
// and runtime/exec, and HWY_EXPORT of each vector region for the dynamic
// dispatch the entries call.
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/CpuBackend.h"

#include "codegen/cpu/CpuPrinter.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::emit;

namespace {

class CpuBackend : public Backend {
public:
  StringRef name() const override { return "cpu"; }
  StringRef sourceFile() const override { return "model.cpp"; }
  // bf16 products, fp32 storage (docs/bf16.md).
  bool takesBf16() const override { return true; }
  bool storesBf16() const override { return false; }

  std::unique_ptr<EntryPrinter> entryPrinter(func::FuncOp func,
                                             ModuleState &module) const override {
    return std::make_unique<cpu::CpuPrinter>(func, module, *this);
  }

  std::string prologue(const ModuleState &module, StringRef fusion) const override {
    std::string s = generatedHeader("cpu", fusion, "Calls runtime/kernels and runtime/exec/Ops.h");
    const bool hwy = !module.vectorCode.empty();
    if (hwy)
      s += "#undef HWY_TARGET_INCLUDE\n#define HWY_TARGET_INCLUDE \"model.cpp\"\n"
           "#include <hwy/foreach_target.h>\n#include <hwy/highway.h>\n"
           "#include <hwy/contrib/math/math-inl.h>\n"
           "#include \"runtime/kernels/elementwise-inl.h\"\n\n"
           "HWY_BEFORE_NAMESPACE();\nnamespace transfuse_generated {\nnamespace HWY_NAMESPACE {\n"
           "namespace hn = hwy::HWY_NAMESPACE;\n"
           "namespace tk = transfuse::kernels::HWY_NAMESPACE;\n\n" +
           module.vectorCode +
           "}  // namespace HWY_NAMESPACE\n}  // namespace transfuse_generated\n"
           "HWY_AFTER_NAMESPACE();\n\n#if HWY_ONCE\n";
    s += "#include \"runtime/exec/ModelDesc.h\"\n#include \"runtime/exec/Ops.h\"\n"
         "#include \"runtime/kernels/Attention.h\"\n#include \"runtime/kernels/DecodeAttention.h\"\n"
         "#include \"runtime/kernels/Gemm.h\"\n"
         "#include \"runtime/kernels/Bf16Gemm.h\"\n"
         "#include \"runtime/kernels/Int8Gemm.h\"\n"
         "#include \"runtime/kernels/ElementwiseMath.h\"\n#include \"runtime/kernels/Norm.h\"\n\n"
         "#include <algorithm>\n#include <array>\n"
         "#include <cmath>\n#include <cstddef>\n#include <cstdint>\n#include <limits>\n\n"
         "namespace transfuse_generated {\nnamespace exec = transfuse::exec;\n"
         "namespace kernels = transfuse::kernels;\nnamespace rt = transfuse::rt;\n"
         "namespace tm = transfuse::kernels::math;\n";
    if (hwy) {
      s += "\n";
      for (int i = 0; i < module.counter; ++i)
        if (module.vectorCode.find("void fe" + std::to_string(i) + "(") != std::string::npos)
          s += "HWY_EXPORT(fe" + std::to_string(i) + ");\n";
    }
    return s;
  }

  std::string epilogue(const ModuleState &module) const override {
    return module.vectorCode.empty() ? "" : "#endif  // HWY_ONCE\n";
  }

  std::vector<std::string> compileCommand(const std::string &cxx,
                                          ArrayRef<std::string> extraFlags) const override {
    std::vector<std::string> c = {cxx, "-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden"};
    c.insert(c.end(), extraFlags.begin(), extraFlags.end());
    return c;
  }
};

} // namespace

const Backend &mlir::transfuse::cpu::backend() {
  static const CpuBackend b;
  return b;
}
