// TensorSpec: the declared name, dtype and shape of an entry point's input or
// output, with dynamic dimensions (-1) bounded by maxima, and the check of
// caller-supplied tensors against a list of specs. Convention: a dynamic
// dimension 0 is the batch (bounded by max_batch); any other dynamic
// dimension is a sequence length (bounded by max_seq_len). Every dynamic
// dimension 0 of one call's inputs must agree, and an input with `sizesOf`
// has every dynamic size of that earlier input (attention_mask beside
// input_ids).
#ifndef TRANSFUSE_RUNTIME_TENSORSPEC_H
#define TRANSFUSE_RUNTIME_TENSORSPEC_H

#include "runtime/Status.h"
#include "runtime/Tensor.h"

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace transfuse::rt {

struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;    // -1 marks a dynamic dimension
  std::vector<int64_t> maxShape; // the bound of every dimension
  int32_t sizesOf = -1;          // inputs: the earlier input whose sizes it has
};

// Checks `inputs` against `specs`: no unknown or missing name, the dtype (an
// I32 input, token ids, also takes I64, as PyTorch and Hugging Face pass
// them: see narrowIds), the rank, static sizes equal, dynamic sizes in
// [1, max], one batch size, the sizes of `sizesOf`. The
// first problem is returned as an error naming the tensor.
Status validateInputs(const std::vector<TensorSpec>& specs,
                      const std::map<std::string, Tensor>& inputs);

// `count` I64 ids of input `name` as I32 into `out`; an id outside int32 is
// an error naming the input and the element.
Status narrowIds(std::string_view name, const int64_t* ids, int64_t count, int32_t* out);

// A caller's tensor as validation sees it: a name, a dtype and a shape of
// `rank` dimensions (borrowed; no data). The C ABI (runtime/exec) validates
// tf_tensor arrays through it.
struct TensorRef {
  std::string_view name;
  DType dtype = DType::F32;
  const int64_t* shape = nullptr;
  size_t rank = 0;
};

// The same checks (and messages) on `numInputs` borrowed tensors, where a name
// may also appear twice (an error: "input 'x' is given twice"). On success,
// when `order` is non-null, (*order)[i] is the index in `inputs` of specs[i].
// The map form above is this function on the map's entries in key order.
Status validateInputs(const std::vector<TensorSpec>& specs, const TensorRef* inputs,
                      size_t numInputs, std::vector<size_t>* order = nullptr);

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_TENSORSPEC_H
