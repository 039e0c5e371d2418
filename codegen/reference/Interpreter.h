//===- Interpreter.h - the reference backend ------------------------------===//
//
// Executes a function of the transfuse dialect in fp64 with plain loops: the
// correctness oracle of every pass and backend. Simple over fast: each op is
// a direct transcription of its definition in TransfuseOps.td.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_CODEGEN_REFERENCE_INTERPRETER_H
#define TRANSFUSE_CODEGEN_REFERENCE_INTERPRETER_H

#include "runtime/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <vector>

namespace mlir::transfuse::reference {

using TensorMap = std::map<std::string, ::transfuse::rt::Tensor>;

/// The decoding state of a model (ir/State.h) for the reference backend:
/// each state tensor at its capacity in the logical layout [rows, H,
/// positions, D] (`keys` changes nothing here), in fp64, and the length.
struct State {
  struct Tensor {
    std::vector<int64_t> shape;
    std::vector<double> data;
  };
  std::map<std::string, Tensor> tensors;
  int64_t length = 0;
};

/// A zero state with the capacities of `module`'s state tensors.
llvm::Expected<State> createState(ModuleOp module);

/// The run-time key of dropout draws (a train step's seed and step): a
/// dropout site draws philoxUniform(its seed + seed, its step + step,
/// its stream, index), so every backend given the same key drops the same
/// elements (runtime/Philox.h).
struct DropoutKey {
  uint64_t seed = 0, step = 0;
};

/// Runs `func` on named `inputs` (checked against the function's signature
/// and maxima) with the parameters in `weights` (F32, by parameter name).
/// Returns the named outputs in their declared dtypes. Run-time errors (a
/// token id outside the vocabulary, sizes that disagree) name the tensor or
/// the op's location. With `f64Outputs`, float outputs are written as F64
/// (what the computation held) instead of their declared dtype. An entry
/// point that uses state needs `state`, which it reads, writes and
/// advances only when the whole call succeeds. Dropout draws with `key`.
llvm::Expected<TensorMap> run(func::FuncOp func, const TensorMap &weights,
                              const TensorMap &inputs, bool f64Outputs = false,
                              State *state = nullptr, DropoutKey key = {});

} // namespace mlir::transfuse::reference

#endif // TRANSFUSE_CODEGEN_REFERENCE_INTERPRETER_H
