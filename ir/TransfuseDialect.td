//===- TransfuseDialect.td - the transfuse dialect ------------*- tablegen -*-===//
//
// The transfuse dialect: a dataflow graph of Transformer primitives on ranked
// tensors. Batch and sequence dimensions may be dynamic (`?`); their maxima
// live on the function as `transfuse.max_batch` / `transfuse.max_seq_len`.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_DIALECT_TD
#define TRANSFUSE_DIALECT_TD

include "mlir/IR/OpBase.td"

def Transfuse_Dialect : Dialect {
  let name = "transfuse";
  let cppNamespace = "::mlir::transfuse";
  let summary = "Transformer graphs: primitives and (later) fused ops";
  let description = [{
    Ops on ranked tensors at the level of a Transformer's primitives: embedding
    gathers, (batched) matmuls, broadcasting elementwise math, softmax, layer
    norm, shape ops, masks, dropout and positional encodings. Weights are named
    `transfuse.param` ops bound to a safetensors file at load time.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
}

#endif // TRANSFUSE_DIALECT_TD
