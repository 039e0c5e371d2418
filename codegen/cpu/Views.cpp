//===- Views.cpp - strided views around attention -------------------------===//
//
// Attention reads Q, K and V as column ranges of the projection GEMM's
// [B, S, N] output through batch, head and row strides (the split, reshape
// and transpose {0,2,1,3} between them emit nothing), and writes its output
// in the [B, S, H, D] layout the next GEMM reads when a transpose back
// follows. The views are told to the memory plan as storage aliases.
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/Emitter.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::cpu;

static bool isHeadTranspose(TransposeOp t) {
  return t && t.getPermutation() == ArrayRef<int64_t>{0, 2, 1, 3};
}

void Emitter::findViews() {
  func.walk([&](AttentionOp a) {
    for (Value operand : {a.getQuery(), a.getKey(), a.getValue()}) {
      // transpose{0,2,1,3}(reshape [B,S,H·D] -> [B,S,H,D] (x)), x a column
      // range (split on the last axis) of a [B,S,N] value or that value.
      auto t = operand.getDefiningOp<TransposeOp>();
      if (!isHeadTranspose(t) || !operand.hasOneUse() || headViews.count(operand))
        continue;
      auto r = t.getInput().getDefiningOp<ReshapeOp>();
      if (!r || !r.getResult().hasOneUse() || r.getInput().getType().getRank() != 3 ||
          !dims.equal(r.getInput(), 0, r.getResult(), 0) ||
          !dims.equal(r.getInput(), 1, r.getResult(), 1))
        continue;
      Value x = r.getInput();
      HeadView view{x, 0};
      if (auto split = x.getDefiningOp<SplitOp>()) {
        auto in = split.getInput().getType();
        if (!x.hasOneUse() || normalizedAxis(split.getAxis(), in.getRank()) != 2 ||
            in.isDynamicDim(2))
          continue;
        unsigned i = cast<OpResult>(x).getResultNumber();
        for (unsigned j = 0; j < i; ++j)
          view.column += split.getSizes()[j];
        view.storage = split.getInput();
        aliases[x] = view.storage;
      } else if (cast<RankedTensorType>(x.getType()).isDynamicDim(2)) {
        continue;
      }
      headViews[operand] = view;
      aliases[operand] = r.getResult();
      elided.insert(t);
    }
    // The output, transposed back to [B, S, H, D]: written there directly.
    Value out = a.getResult();
    if (out.hasOneUse())
      if (auto t = dyn_cast<TransposeOp>(*out.getUsers().begin()); isHeadTranspose(t)) {
        aliases[out] = t.getResult();
        elided.insert(t);
      }
  });
}

std::string Emitter::attentionTensor(Value v) {
  auto it = headViews.find(v);
  if (it == headViews.end())
    return in(v) + ", 0, 0, 0"; // dense [B, H, S, D]
  auto type = cast<RankedTensorType>(it->second.storage.getType());
  std::string n = std::to_string(type.getDimSize(2));
  std::string seq = dims.dim(it->second.storage, 1);
  std::string headDim = std::to_string(cast<RankedTensorType>(v.getType()).getDimSize(3));
  return in(it->second.storage) + " + " + std::to_string(it->second.column) + ", size_t(" + seq +
         " * " + n + "), " + headDim + ", " + n;
}
