//===- KernelViews.cpp - --transfuse-kernel-views -------------------------===//
//
// Attention reads Q, K and V as column ranges of the projection GEMM's
// [B, S, N] output through batch, head and row strides, and writes its
// output in the [B, S, H, D] layout the next GEMM reads when a transpose
// back follows (docs/codegen.md). Here the copies that the graph spells out
// (a slice of the last axis, a reshape, a transpose {0,2,1,3}) become one
// tfk.heads view, and the copies and their buffers go. Attention whose K
// and V are read out of a decoding state becomes tfk.decode_attention,
// which reads the state in place, and the new K and V a step appends are
// written into the state from the projection's output directly.
//
//===----------------------------------------------------------------------===//

#include "codegen/lowering/Lowering.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::transfuse {
#define GEN_PASS_DEF_TRANSFUSEKERNELVIEWS
#include "codegen/lowering/KernelPasses.h.inc"
} // namespace mlir::transfuse

using namespace mlir;
using namespace mlir::transfuse::kernel;

namespace {

/// The tfk.exec `kernel` that writes `buffer`, when it is one.
ExecOp writerOf(Value buffer, StringRef kernel) {
  for (Operation *user : buffer.getUsers())
    if (auto e = dyn_cast<ExecOp>(user); e && e.getKernel() == kernel &&
                                         llvm::is_contained(e.getOuts(), buffer))
      return e;
  return ExecOp();
}

bool isHeadTranspose(ExecOp e) {
  auto perm = e ? e->getAttrOfType<DenseI64ArrayAttr>("permutation") : DenseI64ArrayAttr();
  return perm && perm.asArrayRef() == ArrayRef<int64_t>{0, 2, 1, 3};
}

/// An alloc used exactly `n` times.
bool allocWithUses(Value v, unsigned n) {
  return v.getDefiningOp<AllocOp>() && llvm::hasNItems(v.getUses(), n);
}

/// The [B, H, S, D] view of `source` ([B, S, N] or [B, S, H', D]) at
/// `column`, with the sizes of `like` (a dense [B, H, S, D] buffer).
Value heads(OpBuilder &b, Location loc, Value source, int64_t column, Value like) {
  auto st = cast<MemRefType>(source.getType());
  auto lt = cast<MemRefType>(like.getType());
  int64_t n = st.getDimSize(2) * (st.getRank() == 4 ? st.getDimSize(3) : 1);
  int64_t seq = lt.getDimSize(2), d = lt.getDimSize(3);
  int64_t batchStride = ShapedType::isDynamic(seq) ? ShapedType::kDynamic : seq * n;
  auto layout = StridedLayoutAttr::get(b.getContext(), column, {batchStride, d, n, 1});
  auto type = MemRefType::get(lt.getShape(), lt.getElementType(), layout);
  return HeadsOp::create(b, loc, type, source, column, like.getDefiningOp<SizedOpInterface>().getSizes());
}

/// Operand `index` of `a` (attention's Q, K or V, the heads a state write
/// copies): transpose{0,2,1,3}(reshape [B,S,N] -> [B,S,H,D] (x)), x a slice
/// of the last axis of a [B,S,N] buffer or that buffer, becomes a view of it.
void viewOperand(Operation *a, unsigned index) {
  Value q = a->getOperand(index);
  if (!allocWithUses(q, 2))
    return;
  ExecOp transpose = writerOf(q, "transpose");
  if (!isHeadTranspose(transpose))
    return;
  auto reshape = transpose.getIns()[0].getDefiningOp<ReshapeOp>();
  if (!reshape || !reshape.getView().hasOneUse())
    return;
  Value x = reshape.getSource(), r = reshape.getView();
  auto xt = cast<MemRefType>(x.getType());
  if (xt.getRank() != 3 || !sameSize(x, 0, r, 0) || !sameSize(x, 1, r, 1))
    return;
  Value storage = x;
  int64_t column = 0;
  ExecOp slice;
  if (x.getDefiningOp<AllocOp>() && (slice = writerOf(x, "slice"))) {
    auto in = cast<MemRefType>(slice.getIns()[0].getType());
    if (!allocWithUses(x, 2) || slice->getAttrOfType<IntegerAttr>("axis").getInt() != 2 ||
        in.isDynamicDim(2) || slice.getIns().size() > 1)
      return;
    storage = slice.getIns()[0];
    column = slice->getAttrOfType<IntegerAttr>("start").getInt();
  } else if (xt.isDynamicDim(2)) {
    return;
  }
  OpBuilder b(a);
  a->setOperand(index, heads(b, a->getLoc(), storage, column, q));
  transpose.erase();
  q.getDefiningOp()->erase();
  reshape.erase();
  if (slice) {
    slice.erase();
    x.getDefiningOp()->erase();
  }
}

/// The output `out` of `a`, transposed back to [B, S, H, D]: written there
/// directly.
void viewOutput(Operation *a, OpOperand &out) {
  Value o = out.get();
  if (!allocWithUses(o, 2))
    return;
  ExecOp transpose;
  for (Operation *user : o.getUsers())
    if (auto e = dyn_cast<ExecOp>(user); e && e.getKernel() == "transpose" && e.getIns()[0] == o)
      transpose = e;
  if (!isHeadTranspose(transpose))
    return;
  Value t = transpose.getOuts()[0];
  Operation *def = t.getDefiningOp();
  if (!def || !isa<AllocOp, OutputOp>(def))
    return;
  def->moveBefore(a);
  OpBuilder b(a);
  out.assign(heads(b, a->getLoc(), t, 0, o));
  transpose.erase();
  o.getDefiningOp()->erase();
}

/// The tfk.state_read that fills `buffer` (an alloc nothing else reads but
/// `reader`), when it is one.
StateReadOp stateReadOf(Value buffer) {
  if (!allocWithUses(buffer, 2))
    return StateReadOp();
  for (Operation *user : buffer.getUsers())
    if (auto r = dyn_cast<StateReadOp>(user); r && r.getOut() == buffer)
      return r;
  return StateReadOp();
}

/// Attention over K and V copied out of a decoding state (K stored
/// transposed) reads the state in place: tfk.decode_attention.
Operation *decodeInPlace(AttentionOp a) {
  StateReadOp k = stateReadOf(a.getKey()), v = stateReadOf(a.getValue());
  if (!k || !v || !k.getKeys() || v.getKeys() || a.getBias() ||
      a.getDropoutRate().convertToDouble() > 0.0)
    return a;
  auto keyLen = dyn_cast<Value>(dimSize(a.getKey(), 2));
  if (!keyLen)
    return a;
  OpBuilder b(a);
  auto d = DecodeAttentionOp::create(b, a.getLoc(), a.getQuery(), k.getState(), v.getState(),
                                     a.getKeyPadding(), keyLen, a.getOut(), a.getScale(),
                                     a.getCausal());
  a.erase();
  for (StateReadOp r : {k, v}) {
    Operation *buffer = r.getOut().getDefiningOp();
    r.erase();
    buffer->erase();
  }
  return d;
}

struct KernelViewsPass : transfuse::impl::TransfuseKernelViewsBase<KernelViewsPass> {
  void runOnOperation() override {
    SmallVector<AttentionOp> attentions;
    SmallVector<StateWriteOp> writes;
    getOperation().walk([&](Operation *op) {
      if (auto a = dyn_cast<AttentionOp>(op))
        attentions.push_back(a);
      if (auto w = dyn_cast<StateWriteOp>(op))
        writes.push_back(w);
    });
    for (AttentionOp a : attentions) {
      Operation *op = decodeInPlace(a);
      if (auto d = dyn_cast<DecodeAttentionOp>(op)) {
        viewOperand(d, 0);
        viewOutput(d, d.getOutMutable());
        continue;
      }
      for (unsigned i = 0; i < 3; ++i)
        viewOperand(a, i);
      viewOutput(a, a.getOutMutable());
    }
    for (StateWriteOp w : writes)
      viewOperand(w, 0);
  }
};

} // namespace
