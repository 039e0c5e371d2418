//===- KernelInterfaces.td - interfaces of the tfk dialect ----*- tablegen -*-===//
#ifndef TRANSFUSE_KERNEL_INTERFACES_TD
#define TRANSFUSE_KERNEL_INTERFACES_TD

include "mlir/IR/OpBase.td"

def TFK_SizedInterface : OpInterface<"SizedOpInterface"> {
  let cppNamespace = "::mlir::transfuse::kernel";
  let description = [{
    An op whose memref result has dynamic dimensions: `getSizes()` holds one
    index value per `?` of the result type, in order.
  }];
  let methods = [
    InterfaceMethod<"The sizes of the result's dynamic dimensions, in order",
                    "::mlir::OperandRange", "getSizes">
  ];
}

#endif // TRANSFUSE_KERNEL_INTERFACES_TD
