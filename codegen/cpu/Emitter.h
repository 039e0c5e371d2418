//===- Emitter.h - one entry point of the kernel IR printed as C++ --------===//
//
// One Emitter per entry point walks the tfk function (docs/codegen.md) in
// order and prints one statement per kernel op: a call into
// runtime/kernels or runtime/exec/Ops.h. Storage ops print as pointers
// (the caller's inputs and outputs, the parameter table, constant arrays,
// arena slots at their planned offsets), views as pointer arithmetic and
// strides, index values as size expressions (CppSizes), computed once per
// call. The files of this backend, one concern each:
//   Emitter.cpp      the entry point: storage, checks, the run/shapes/flops
//                    functions
//   EmitOps.cpp      one statement per kernel op (GEMM, attention, norms,
//                    exec::)
//   FusedRegion.cpp  Highway (or scalar) code for tfk.elementwise
//   CpuCodegen.cpp   the translation unit: ABI tables, includes, dispatch
//   Toolchain.cpp    building libmodel.so / .a / the executable
// The CUDA backend prints the same entry points: storage, sizes, checks and
// the tables are this printer's; its kernel ops print as launches
// (codegen/cuda/EmitCudaOps.cpp) and its regions as __global__ kernels, in
// host C++ that nvcc compiles.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_CPU_EMITTER_H
#define TRANSFUSE_CODEGEN_CPU_EMITTER_H

#include "codegen/Interface.h"
#include "codegen/cpu/CppSizes.h"
#include "codegen/cpu/CpuCodegen.h"
#include "codegen/cpu/CppText.h"
#include "ir/KernelDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlir::transfuse::cpu {

/// What one entry point needs from the rest of the model.
struct ModelTables {
  llvm::StringMap<int> paramIndex;               // name -> param table index
  llvm::StringMap<int> stateIndex;               // name -> state table index (ABI 2)
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

/// Prints one entry point: its run, output-shape and FLOP functions.
class Emitter {
public:
  /// `bf16`: the cuda target stores f32 tensors as bf16 (--dtype bf16).
  Emitter(func::FuncOp func, ModelTables &tables, std::string &kernels, std::string &constants,
          int &counter, Target target = Target::kCpu, bool bf16 = false)
      : func(func), tables(tables), kernels(kernels), constants(constants), counter(counter),
        target(target), bf16(bf16) {}

  llvm::Error emit(std::string &out);
  int64_t arenaBytes = 0, kernelCalls = 0;
  bool usesState = false;    // the entry reads or writes tfk.state
  size_t numDeviceChecks() const { return deviceChecks.size(); }
  std::string scalarKernels; // region functions without Highway (cuda: __global__ kernels)

private:
  llvm::Error fail(Operation *op, const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   locOf(op) + ": '" + op->getName().getStringRef().str() +
                                       "': " + message.str() + " (" + targetName(target) +
                                       " target)");
  }
  /// A typed pointer expression to the first element of the view `v`.
  std::string ptr(Value v);
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
  /// A host statement of the run that is not a launch (the state's
  /// extents, row ids, length): in the run, and again in the cuda
  /// target's host_<fn>, which a CUDA graph's replay runs instead.
  void hostStatement(const std::string &s) {
    line(s);
    hostStatements += "  " + s + "\n";
  }
  llvm::Error emitOp(Operation *op);
  llvm::Error emitExec(kernel::ExecOp op);
  llvm::Error emitGemm(kernel::GemmOp op);
  /// A tfk.gemm's sizes: rows (an expression), columns, depth, whether the
  /// weight is [N, K], and the activation's enumerator (kNone, kRelu, ...,
  /// as kernels::Activation and cuda::Activation name them); counts its FLOPs.
  struct GemmShape {
    std::string m;
    int64_t n, k;
    bool transW;
    std::string activation;
  };
  GemmShape gemmShape(kernel::GemmOp op);
  llvm::Error emitAttention(kernel::AttentionOp op);
  llvm::Error emitDecodeAttention(kernel::DecodeAttentionOp op);
  /// "{" and the args struct `type` of an attention call with the fields
  /// every target's kernel has (sizes, Q/K/V, output, scale, causal, key
  /// mask); the call's FLOPs. The caller adds its own fields, the call, "}".
  void attentionArgs(kernel::AttentionOp op, llvm::StringRef type);
  llvm::Error decodeAttentionArgs(kernel::DecodeAttentionOp op, llvm::StringRef type);
  /// The run's check that a cross_entropy(_grad) has a label per row.
  void labelsPerRow(kernel::ExecOp op);
  /// "{" and the args struct `type` of an attention_grad call (the forward's
  /// fields, dO, dQ, dK, dV, dropout); its FLOPs. The caller adds the call
  /// and "}".
  void attentionGradArgs(kernel::ExecOp op, llvm::StringRef type);
  /// The `args.out` lines of an attention kernel writing `out`.
  void attentionOutput(Value out);
  /// "exec::StateTensor{...}" of a tfk.state (cuda: tc::StateTensor, the
  /// same fields).
  std::string stateTensor(Value state, bool keys);
  llvm::Error emitAddLayerNorm(kernel::AddLayerNormOp op);
  llvm::Error emitElementwise(kernel::ElementwiseOp op);
  /// The lines of a tfk.elementwise region's ops (regionExpr), each a
  /// `const auto tN` at `indent`, over inputs x0, x1, ...; `result` names
  /// the yielded value.
  llvm::Error regionBody(kernel::ElementwiseOp op, bool vector, llvm::StringRef indent,
                         std::string &compute, std::string &result);
  llvm::Error constant(kernel::ConstantOp op);

  // The cuda target (codegen/cuda/EmitCudaOps.cpp): one launch per kernel op.
  llvm::Error emitCudaOp(Operation *op);
  llvm::Error emitCudaExec(kernel::ExecOp op);
  /// The backward's exec kernels (training graphs).
  llvm::Error emitCudaTrainExec(kernel::ExecOp op);
  /// A new check word for a kernel that checks ids or labels against
  /// [0, vocab): "c.deviceChecks + N", its message "WHAT: ITEM N is outside
  /// the vocabulary [0, VOCAB)" (`what` a C++ expression); empty when the
  /// words are used up.
  std::string deviceCheck(const std::string &what, const std::string &item,
                          const std::string &vocab);
  llvm::Error emitCudaGemm(kernel::GemmOp op);
  llvm::Error emitCudaAttention(kernel::AttentionOp op);
  llvm::Error emitCudaDecodeAttention(kernel::DecodeAttentionOp op);
  llvm::Error emitCudaMatmul(kernel::MatmulOp op);
  llvm::Error emitCudaElementwise(kernel::ElementwiseOp op);
  /// A generated __global__ kernel writing `out` element by element from
  /// `inputs`, each read as `forms` says ("full", "trailing", "splat", or
  /// "strided": NumPy broadcasting), through `compute` (lines defining `y`
  /// from x0, x1, ...).
  llvm::Error cudaPointwise(Operation *op, ValueRange inputs, ArrayRef<std::string> forms,
                            const std::string &compute, const std::string &y, Value out);
  /// How `input` is read for each element of `out`: "full", "trailing",
  /// "splat", or "strided" for other broadcasts.
  std::string cudaReadForm(Value input, Value out);
  /// A statement that checks the cudaError_t of `launch` (a call of
  /// runtime/kernels/cuda), naming `kernel` and the op's location.
  void launch(Operation *op, const std::string &kernel, const std::string &launch,
              const std::string &indent = "");
  /// Messages of the check words the entry's kernels set (a gather's first
  /// id out of range), read back by the runtime after the run and turned
  /// into its error by checks_<fn>.
  std::vector<std::string> deviceChecks;
  /// "data, batch stride, head stride, row stride" of an attention operand
  /// (strides 0: dense [B, H, S, D]).
  std::string attentionTensor(Value v);
  /// The batch, head and row strides of a tfk.heads view; none for a dense
  /// [B, H, S, D] buffer.
  std::optional<std::array<std::string, 3>> headStrides(Value v);
  /// Sets the dropout fields of kernels::AttentionArgs `args` (nothing for a rate of 0).
  void dropoutArgs(const std::string &args, double rate, int64_t seed, int64_t stream);

  /// The C++ type an element of type `t` is stored as: cType's, but
  /// tc::bf16 for f32 under --dtype bf16; and its size in bytes.
  std::string storageType(Type t) const;
  std::string storageBytes(Value v) const;
  /// A runtime/kernels/cuda args struct for this storage: "tc::GemmArgs",
  /// or "tc::GemmArgsOf<tc::bf16>" under --dtype bf16.
  std::string cudaArgs(llvm::StringRef name) const {
    return bf16 ? "tc::" + name.str() + "Of<tc::bf16>" : "tc::" + name.str();
  }

  func::FuncOp func;
  ModelTables &tables;
  CppSizes dims;
  std::string &kernels, &constants;
  int &counter;
  llvm::DenseMap<Value, std::string> constNames;
  std::string body, flopTerms, storageError, hostStatements;
  Target target;
  bool bf16;
};

/// The expression of one op of a tfk.elementwise region over the values
/// `arg` names: Highway vectors (`vector`) or scalars (C++ or CUDA, through
/// ElementwiseMath.h's templates); empty for an op regions cannot hold.
std::string regionExpr(Operation &inner, llvm::function_ref<std::string(unsigned)> arg,
                       bool vector);

} // namespace mlir::transfuse::cpu

#endif // TRANSFUSE_CODEGEN_CPU_EMITTER_H
