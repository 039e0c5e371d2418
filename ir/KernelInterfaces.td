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

def TFK_CallInterface : OpInterface<"KernelCallInterface"> {
  let cppNamespace = "::mlir::transfuse::kernel";
  let description = [{
    A call of one runtime function (TFK_CallOp in KernelOps.td): `ins` are
    read, `outs` written; passes over views and storage treat every call
    alike through it.
  }];
  let methods = [
    InterfaceMethod<"The operands the call reads", "::mlir::OperandRange", "getIns">,
    InterfaceMethod<"The buffers the call writes", "::mlir::OperandRange", "getOuts">,
    InterfaceMethod<"The buffers the call writes, to redirect them",
                    "::mlir::MutableOperandRange", "getOutsMutable">
  ];
}

#endif // TRANSFUSE_KERNEL_INTERFACES_TD
