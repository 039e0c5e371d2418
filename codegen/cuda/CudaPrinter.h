//===- CudaPrinter.h - one entry point as launches of runtime/kernels/cuda ===//
//
// The cuda backend's EntryPrinter (CudaOps.cpp): one launch per kernel op on
// the calling thread's stream, each followed by its launch check;
// tfk.elementwise regions and lone pointwise ops as generated __global__
// kernels. Kernels that check ids or labels against a vocabulary lower a
// check word on the device, which the runtime reads after the run (or its
// CUDA graph's replay) and turns into the error checks_<entry> names; the
// run's host statements stand again in host_<entry>, which a replay runs
// instead of the run.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_CUDA_CUDAPRINTER_H
#define TRANSFUSE_CODEGEN_CUDA_CUDAPRINTER_H

#include "codegen/emit/EntryPrinter.h"

namespace mlir::transfuse::cuda {

class CudaPrinter : public emit::EntryPrinter {
public:
  using EntryPrinter::EntryPrinter;
  std::string entryDescTail() const override;

protected:
  llvm::Error printKernel(Operation *op) override;
  void spell(Operation *op, const emit::KernelCall &call, const std::string &indent) override;
  std::string stateTensorType() const override { return cudaArgs("StateTensor"); }
  std::string constantArray(const std::string &name, DenseElementsAttr attr) override;
  std::string entryFunctions(const std::string &declarations) const override;
  void hostStatement(const std::string &s) override {
    line(s);
    hostStatements += "  " + s + "\n";
  }
  std::string storageType(Type t) const override;

private:
  /// The backward's kernels (training graphs); none for other ops.
  std::optional<llvm::Error> printTrainKernel(Operation *op);
  llvm::Error printGemm(kernel::GemmOp op);
  llvm::Error printMatmul(kernel::MatmulOp op);
  llvm::Error printAttention(kernel::AttentionOp op);
  llvm::Error printDecodeAttention(kernel::DecodeAttentionOp op);
  llvm::Error printElementwise(kernel::ElementwiseOp op);
  /// A statement that checks the cudaError_t of `launch` (a call of
  /// runtime/kernels/cuda), naming `kernel` and the op's location.
  void launch(Operation *op, const std::string &kernel, const std::string &launch,
              const std::string &indent = "");
  /// A new check word for a kernel that checks ids or labels against
  /// [0, vocab): "c.deviceChecks + N", its message "WHAT: ITEM N is outside
  /// the vocabulary [0, VOCAB)" (`what` a C++ expression); empty when the
  /// words are used up.
  std::string deviceCheck(const std::string &what, const std::string &item,
                          const std::string &vocab);
  /// A generated __global__ kernel writing `out` element by element from
  /// `inputs`, each read as `forms` says ("full", "trailing", "splat", or
  /// "strided": NumPy broadcasting), through `compute` (lines defining `y`
  /// from x0, x1, ...).
  llvm::Error pointwise(Operation *op, ValueRange inputs, ArrayRef<std::string> forms,
                        const std::string &compute, const std::string &y, Value out);
  /// How `input` is read for each element of `out`: "full", "trailing",
  /// "splat", or "strided" for other broadcasts.
  std::string readForm(Value input, Value out);
  /// A runtime/kernels/cuda args struct for this storage: "tc::GemmArgs",
  /// or "tc::GemmArgsOf<tc::bf16>" under --dtype bf16.
  std::string cudaArgs(llvm::StringRef name) const {
    return module.bf16 ? "tc::" + name.str() + "Of<tc::bf16>" : "tc::" + name.str();
  }

  /// Messages of the check words the entry's kernels set.
  std::vector<std::string> deviceChecks;
  std::string hostStatements;
};

} // namespace mlir::transfuse::cuda

#endif // TRANSFUSE_CODEGEN_CUDA_CUDAPRINTER_H
