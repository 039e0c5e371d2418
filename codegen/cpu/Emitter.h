//===- Emitter.h - one entry point of the fused IR written as C++ ---------===//
//
// One Emitter per entry point walks the body in order and writes one
// statement per op into runtime/kernels and runtime/exec/Ops.h. Values live
// in the caller's inputs and outputs, in the parameter table, in constant
// arrays, or at their arena offsets (passes/MemoryPlan.h); a reshape is a
// view, and so are the strided head views around attention (Views.cpp).
// Every dynamic size is an expression over the inputs' dynamic dimensions
// (CppSizes), so shapes, strides and FLOP counts are computed once per call.
// The files of this backend, one concern each:
//   Emitter.cpp      the entry point: storage, arena plan, checks, the
//                    run/shapes/flops functions
//   EmitOps.cpp      one statement per op (GEMM, attention, norms, exec::)
//   Views.cpp        the strided views of Q, K, V and attention outputs
//   FusedRegion.cpp  Highway (or scalar) code for fused_elementwise regions
//   CpuCodegen.cpp   the translation unit: ABI tables, includes, dispatch
//   Toolchain.cpp    building libmodel.so / .a / the executable
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_CPU_EMITTER_H
#define TRANSFUSE_CODEGEN_CPU_EMITTER_H

#include "codegen/Interface.h"
#include "codegen/cpu/CppSizes.h"
#include "codegen/cpu/CppText.h"
#include "ir/TransfuseDialect.h"
#include "passes/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <array>
#include <string>
#include <utility>
#include <vector>

namespace mlir::transfuse::cpu {

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
      : func(func), ep(ep), tables(tables), kernels(kernels),
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
                         Activation act, Value residual, Value result);
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
Value rootOf(Value v);

} // namespace mlir::transfuse::cpu

#endif // TRANSFUSE_CODEGEN_CPU_EMITTER_H
