//===- CpuBackend.h - the cpu target: C++ over runtime/kernels ------------===//
//
// The kernel IR printed as one C++ translation unit: per entry point,
// straight-line calls into runtime/kernels (GEMM with epilogues, attention,
// norms) and runtime/exec/Ops.h (the generic primitives), and Highway code
// generated for each fused elementwise region; built with the C++ compiler
// found at build time (or --cxx / $TRANSFUSE_CXX). docs/codegen.md has the
// op-to-kernel table.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_CPU_CPUBACKEND_H
#define TRANSFUSE_CODEGEN_CPU_CPUBACKEND_H

#include "codegen/emit/Backend.h"

namespace mlir::transfuse::cpu {

const emit::Backend &backend();

} // namespace mlir::transfuse::cpu

#endif // TRANSFUSE_CODEGEN_CPU_CPUBACKEND_H
