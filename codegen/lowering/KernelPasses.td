//===- KernelPasses.td - passes to and over the kernel IR -----*- tablegen -*-===//
//
// The lowering every backend shares (docs/codegen.md): the fused graph to
// the tfk kernel IR, its strided views, its memory plan. One pass, one file
// (codegen/lowering/<Name>.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_KERNEL_PASSES_TD
#define TRANSFUSE_KERNEL_PASSES_TD

include "mlir/Pass/PassBase.td"

def TransfuseLowerToKernels : Pass<"transfuse-lower-to-kernels", "mlir::ModuleOp"> {
  let summary = "Convert the fused transfuse graph to tfk kernel calls on memref storage";
  let description = [{
    Every entry point becomes a function with no arguments and no results:
    its sizes are index values at the top (one per distinct size rule
    result, ir/Sizes.h), its inputs `tfk.input`, and every op one kernel op
    writing into a destination: the caller's output buffer when the value is
    returned (`tfk.output`), else a `tfk.alloc`. Unsupported ops, types and
    shapes are one error naming the op.

    Before:
      func.func @forward(%x: tensor<?x512xf32>) -> tensor<?x512xf32> {
        %w = transfuse.param "w" ... : tensor<512x512xf32>
        %y = transfuse.linear %x, %w {activation = #transfuse.activation<relu>} ...
        return %y : tensor<?x512xf32>
      }
    After:
      func.func @forward() {
        %0 = tfk.input_dim 0, 0
        %1 = tfk.input 0 [%0] : memref<?x512xf32>
        %2 = tfk.param "w" : memref<512x512xf32>
        %3 = tfk.output 0 [%0] : memref<?x512xf32>
        tfk.gemm %1, %2 into %3 {activation = #transfuse.activation<relu>, packed} ...
        return
      }
  }];
  let dependentDialects = ["mlir::transfuse::kernel::TFKDialect", "mlir::arith::ArithDialect"];
}

def TransfuseKernelViews : Pass<"transfuse-kernel-views", "mlir::ModuleOp"> {
  let summary = "Read attention's Q, K, V and write its output through strided views, not copies";
  let description = [{
    A slice of the projection GEMM's [B, S, N] output, reshaped to
    [B, S, H, D] and transposed to [B, H, S, D] for attention, becomes a
    `tfk.heads` view of the GEMM output (the slice and transpose copies and
    their buffers go); an attention output transposed back to [B, S, H, D]
    is written there directly.

    Before:
      tfk.slice (%qkv : ...) into (%q2 : memref<?x?x512xf32>) {axis = 2, start = 0, size = 512}
      %r = tfk.reshape %q2 [%b, %s] : ... to memref<?x?x8x64xf32>
      tfk.transpose (%r : ...) into (%q : memref<?x8x?x64xf32>) {permutation = [0, 2, 1, 3]}
      tfk.attention %q, ...
    After:
      %q = tfk.heads %qkv column 0 [%b, %s] : ... to memref<?x8x?x64xf32, strided<[?, 64, 1536, 1]>>
      tfk.attention %q, ...
  }];
  let dependentDialects = ["mlir::transfuse::kernel::TFKDialect"];
}

def TransfusePlanMemory : Pass<"transfuse-plan-memory", "mlir::ModuleOp"> {
  let summary = "Give every tfk.alloc its offset and room in the call's arena";
  let description = [{
    Sizes at the compiled maxima (the function's transfuse.max_batch for
    input dimension 0, transfuse.max_seq_len for the others); live from the
    first kernel that touches the buffer or a view of it to the last; placed
    greedily by size at the lowest free offset (passes/MemoryPlan.h). The
    function gets `tfk.arena_bytes`.

    Before:
      %a = tfk.alloc [%0] : memref<?x512xf32>
    After:
      %a = tfk.alloc [%0] {bytes = 32768 : i64, offset = 0 : i64} : memref<?x512xf32>
  }];
  let dependentDialects = ["mlir::transfuse::kernel::TFKDialect"];
}

#endif // TRANSFUSE_KERNEL_PASSES_TD
