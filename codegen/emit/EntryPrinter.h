//===- EntryPrinter.h - one entry point of the kernel IR as generated code ===//
//
// An EntryPrinter walks one tfk function (docs/codegen.md) in order and
// prints one statement per kernel op. The core prints what every backend
// prints the same way: storage ops as pointers (the caller's inputs and
// outputs, the parameter table, constant arrays, arena slots at their
// planned offsets), views as pointer arithmetic and strides, index values
// as size expressions (Sizes), the checks at the start of a run, the
// run/shapes/flops functions, and the kernel calls whose description both
// kinds of device share (KernelCalls.cpp: norms, masks, positions, the KV
// cache's state ops), which a backend only spells (spell). Each backend
// subclasses it for the rest (printKernel): GEMMs, attention, the generic
// primitives, fused elementwise regions.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_EMIT_ENTRYPRINTER_H
#define TRANSFUSE_CODEGEN_EMIT_ENTRYPRINTER_H

#include "codegen/emit/Backend.h"
#include "codegen/emit/Sizes.h"
#include "codegen/emit/Text.h"
#include "ir/KernelDialect.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlir::transfuse::emit {

/// What the entry points of one module share while they are printed.
struct ModuleState {
  llvm::StringMap<int> paramIndex;               // name -> param table index
  llvm::StringMap<int> stateIndex;               // name -> state table index (ABI 2)
  /// A weight packed at load (exec::PackDesc): its parameter, layout, shape
  /// and column pairs (kernels::GemmPairs: Kind as an integer, head size,
  /// rotated columns).
  struct Pack {
    int param;
    bool transB;
    int64_t k, n;
    int pairKind = 0;
    int64_t headDim = 0, pairColumns = 0;
    bool int8 = false;  // quantized for kernels::gemmInt8 instead of packed
    bool bf16 = false;  // rounded to bf16 for kernels::gemmBf16 instead
    bool operator==(const Pack &o) const {
      return param == o.param && transB == o.transB && k == o.k && n == o.n &&
             pairKind == o.pairKind && headDim == o.headDim && pairColumns == o.pairColumns &&
             int8 == o.int8 && bf16 == o.bf16;
    }
  };
  std::vector<Pack> packs;
  std::string constants;   // constant arrays, inside the anonymous namespace
  std::string code;        // functions the entries call, before them (scalar
                           // regions, __global__ kernels)
  std::string vectorCode;  // per-target code (the cpu backend's Highway regions)
  int counter = 0;         // names of constants and generated functions
  bool bf16 = false;       // f32 tensors stored as bf16 (--dtype bf16 on a storing target)
  // --dtype bf16 on a target whose products alone take bf16 (cpu): the
  // GEMMs and matmuls on bf16 operands (kernels::gemmBf16), fp32 elsewhere.
  bool bf16Products = false;
  bool int8 = false;       // packed GEMMs on int8 weights (--dtype int8)

  /// The index of the packed panels `p` (one per distinct packing).
  int pack(const Pack &p);
};

/// A kernel call whose arguments every backend passes alike: `callee` is
/// the function's name in every kernel library (runtime/exec or
/// runtime/kernels on the CPU, runtime/kernels/cuda on a GPU); the backend
/// adds its namespace and its own last arguments (a thread pool, a stream).
struct KernelCall {
  std::string callee;
  std::vector<std::string> args;
};

class EntryPrinter {
public:
  EntryPrinter(func::FuncOp func, ModuleState &module, const Backend &backend)
      : func(func), module(module), backend(backend) {}
  virtual ~EntryPrinter() = default;

  /// Appends the entry's functions (run_, shapes_, flops_ and the
  /// backend's) to `out`.
  llvm::Error print(std::string &out);
  /// Fields after the standard ones of the entry's EntryDesc initializer.
  virtual std::string entryDescTail() const { return usesState ? ", true" : ""; }

  int64_t arenaBytes = 0, kernelCalls = 0;
  bool usesState = false; // the entry reads or writes tfk.state

protected:
  //===--- What a backend prints ---------------------------------------===//
  /// A kernel op the core does not print.
  virtual llvm::Error printKernel(Operation *op) = 0;
  /// `call` as a statement of the run (with its error check, where the
  /// target checks launches); `indent` before it.
  virtual void spell(Operation *op, const KernelCall &call, const std::string &indent = "") = 0;
  /// The type of the kernels' StateTensor ("exec::StateTensor").
  virtual std::string stateTensorType() const = 0;
  /// Declares the constant array `name` of `attr` (dense f32, i32 or i1) in
  /// `module.constants`; returns how ptr() names its first element.
  virtual std::string constantArray(const std::string &name, DenseElementsAttr attr);
  /// The initializer of a constant array of f32, i32 or i1 values (i1 as
  /// bytes), eight or sixteen to a line.
  static std::string constantValues(DenseElementsAttr attr);
  /// Functions of the entry printed before its run_ function.
  virtual std::string entryFunctions(const std::string &declarations) const { return ""; }
  /// A host statement of the run that is not a kernel call (the state's
  /// extents, row ids, length).
  virtual void hostStatement(const std::string &s) { line(s); }
  /// The C++ type an element of type `t` is stored as: cType's, or the
  /// target's bf16 type for f32 under --dtype bf16.
  virtual std::string storageType(Type t) const;

  //===--- What backends print with ------------------------------------===//
  llvm::Error fail(Operation *op, const llvm::Twine &message) const;
  /// A typed pointer expression to the first element of the view `v`.
  /// "nullptr" for a null value (an optional operand left out).
  std::string ptr(Value v);
  /// The bytes an element of `v` is stored in, as text.
  std::string storageBytes(Value v) const;
  void line(const std::string &s) { body += "  " + s + "\n"; }
  /// A statement that is one kernel call.
  void call(const std::string &s) {
    line(s);
    ++kernelCalls;
  }
  void flops(const std::string &e) { flopTerms += "  f += " + e + ";\n"; }

  // The argument lists both kinds of device share (KernelCalls.cpp).
  /// A tfk.gemm's sizes: rows (an expression), columns, depth, whether the
  /// weight is [N, K], and the activation's enumerator (activationEnumerator);
  /// counts its FLOPs.
  struct GemmShape {
    std::string m;
    int64_t n, k; // the product's (n is twice the result's when gated)
    bool transW;
    std::string activation;
    // Rotary pairs: rows per sequence (the result's dimension -2) and the
    // first row's position.
    std::string seqLen, positionOffset;
    /// kernels::GemmPairs of the op, as the ModuleState::Pack fields.
    int pairKind = 0;
    int64_t headDim = 0, pairColumns = 0;
  };
  GemmShape gemmShape(kernel::GemmOp op);
  /// "{" and the args struct `type` of an attention call with the fields
  /// every target's kernel has (sizes, Q/K/V, output, scale, causal, key
  /// mask); the call's FLOPs. The caller adds its own fields, the call, "}".
  void attentionArgs(kernel::AttentionOp op, llvm::StringRef type);
  llvm::Error decodeAttentionArgs(kernel::DecodeAttentionOp op, llvm::StringRef type);
  /// "{" and the args struct `type` of an attention_grad call (the forward's
  /// fields, dO, dQ, dK, dV, dropout); its FLOPs. The caller adds the call
  /// and "}".
  void attentionGradArgs(kernel::AttentionGradOp op, llvm::StringRef type);
  /// The `args.out` lines of an attention kernel writing `out`.
  void attentionOutput(Value out);
  /// The scale, causal and key-mask lines of an attention call; its FLOPs
  /// (4·B·H·Sq·Sk·D, `product` = B·H·Sq·Sk·D as text).
  /// `args.kvHeads = Hkv;` where K has fewer heads than Q.
  void kvHeadsArg(const std::string &args, Value q, Value key);
  void attentionTail(double scale, bool causal, Value keyPadding, const std::string &product);
  /// "data, batch stride, head stride, row stride" of an attention operand
  /// (strides 0: dense [B, H, S, D]).
  std::string attentionTensor(Value v);
  /// The batch, head and row strides of a tfk.heads view; none for a dense
  /// [B, H, S, D] buffer.
  std::optional<std::array<std::string, 3>> headStrides(Value v);
  /// Sets the dropout fields of the attention args `args` (nothing for a
  /// rate of 0).
  void dropoutArgs(const std::string &args, double rate, int64_t seed, int64_t stream);
  /// "{data, heads, positions, headDim, keys}": a tfk.state as the kernels'
  /// StateTensor (of the target's `type`).
  std::string stateTensor(Value state, bool keys, llvm::StringRef type);
  /// The run's check that a cross_entropy(_grad) has a label per row.
  void labelsPerRow(Value logits, Value labels, llvm::StringRef what);
  /// The step of a dropout call: the call's, plus the op's index operand.
  std::string dropoutStep(kernel::DropoutOp op);
  /// `start` of a slice or slice_grad, plus its index operand.
  std::string sliceStart(Operation *op, int64_t start);
  /// The lines of a tfk.elementwise region's ops, each a `const auto tN` at
  /// `indent`, over inputs x0, x1, ...; `result` names the yielded value.
  /// `vector`: Highway vectors (ElementwiseMath.h's vector names).
  llvm::Error regionBody(kernel::ElementwiseOp op, bool vector, llvm::StringRef indent,
                         std::string &compute, std::string &result);

  func::FuncOp func;
  ModuleState &module;
  const Backend &backend;
  Sizes dims;
  llvm::DenseMap<Value, std::string> constNames;

private:
  llvm::Error printOp(Operation *op);
  /// A tfk.constant: an array of the generated code (constantArray).
  llvm::Error printConstant(kernel::ConstantOp op);
  /// The kernel calls the core describes (KernelCalls.cpp); none for others.
  std::optional<llvm::Error> printShared(Operation *op);

  std::string body, flopTerms, storageError;
};

/// The enumerator of the kernels' Activation that generated code names
/// `activation` by ("kGeluTanh", runtime/kernels/Activation.h).
std::string activationEnumerator(Activation activation);

/// The expression of one op of a tfk.elementwise region over the values
/// `arg` names: Highway vectors (`vector`) or scalars (C++ or CUDA, through
/// ElementwiseMath.h's templates); empty for an op regions cannot hold.
std::string regionExpr(Operation &inner, llvm::function_ref<std::string(unsigned)> arg,
                       bool vector);

} // namespace mlir::transfuse::emit

#endif // TRANSFUSE_CODEGEN_EMIT_ENTRYPRINTER_H
