//===- CpuPrinter.h - one entry point as C++ over runtime/kernels ---------===//
//
// The cpu backend's EntryPrinter: each kernel op is one call of
// runtime/kernels or runtime/exec/Ops.h on the call's thread pool
// (CpuOps.cpp), each tfk.elementwise region one generated function,
// Highway code over rows or a scalar loop (FusedRegion.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_CPU_CPUPRINTER_H
#define TRANSFUSE_CODEGEN_CPU_CPUPRINTER_H

#include "codegen/emit/EntryPrinter.h"

namespace mlir::transfuse::cpu {

class CpuPrinter : public emit::EntryPrinter {
public:
  using EntryPrinter::EntryPrinter;

protected:
  llvm::Error printKernel(Operation *op) override;
  void spell(Operation *op, const emit::KernelCall &call, const std::string &indent) override;
  std::string stateTensorType() const override { return "exec::StateTensor"; }

private:
  /// `s`, a call that returns an rt::Status, returning it when it fails.
  void checked(const std::string &s) { call("if (rt::Status s = " + s + "; !s.isOk()) return s;"); }
  llvm::Error printGemm(kernel::GemmOp op);
  llvm::Error printAttention(kernel::AttentionOp op);
  llvm::Error printDecodeAttention(kernel::DecodeAttentionOp op);
  llvm::Error printElementwise(kernel::ElementwiseOp op);
};

} // namespace mlir::transfuse::cpu

#endif // TRANSFUSE_CODEGEN_CPU_CPUPRINTER_H
