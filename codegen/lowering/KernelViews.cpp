//===- KernelViews.cpp - --transfuse-kernel-views -------------------------===//
//
// Attention reads Q, K and V as column ranges of the projection GEMM's
// [B, S, N] output through batch, head and row strides, and writes its
// output in the [B, S, H, D] layout the next GEMM reads when a transpose
// back follows (docs/codegen.md). Here the copies that the graph spells out
// (a slice of the last axis, a reshape, a transpose {0,2,1,3}) become one
// tfk.heads view, and the copies and their buffers go. attention_grad takes
// the same views: Q, K and V (shared with the forward attention), dO, and
// dQ, dK and dV, which it writes straight into the fused projection's
// gradient when that is their concat. Attention whose K
// and V are read out of a decoding state becomes tfk.decode_attention,
// which reads the state in place, and the new K and V a step appends are
// written into the state from the projection's output directly.
//
//===----------------------------------------------------------------------===//

#include "codegen/lowering/Lowering.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::transfuse {
#define GEN_PASS_DEF_TRANSFUSEKERNELVIEWS
#include "codegen/lowering/KernelPasses.h.inc"
} // namespace mlir::transfuse

using namespace mlir;
using namespace mlir::transfuse::kernel;

namespace {

/// The call of kind `CallOp` that writes `buffer`, when it is one.
template <class CallOp> CallOp writerOf(Value buffer) {
  for (Operation *user : buffer.getUsers())
    if (auto e = dyn_cast<CallOp>(user); e && llvm::is_contained(e.getOuts(), buffer))
      return e;
  return CallOp();
}

bool isHeadTranspose(TransposeOp e) {
  return e && e.getPermutation() == ArrayRef<int64_t>{0, 2, 1, 3};
}

/// An alloc used exactly `n` times.
bool allocWithUses(Value v, unsigned n) {
  return v.getDefiningOp<AllocOp>() && llvm::hasNItems(v.getUses(), n);
}

/// The [B, H, S, D] view, of type `shape` and its `sizes`, of `source`
/// ([B, S, N] or [B, S, H', D]) at `column`.
Value heads(OpBuilder &b, Location loc, Value source, int64_t column, MemRefType shape,
            ValueRange sizes) {
  auto st = cast<MemRefType>(source.getType());
  int64_t n = st.getDimSize(2) * (st.getRank() == 4 ? st.getDimSize(3) : 1);
  int64_t seq = shape.getDimSize(2), d = shape.getDimSize(3);
  int64_t batchStride = ShapedType::isDynamic(seq) ? ShapedType::kDynamic : seq * n;
  auto layout = StridedLayoutAttr::get(b.getContext(), column, {batchStride, d, n, 1});
  auto type = MemRefType::get(shape.getShape(), shape.getElementType(), layout);
  return HeadsOp::create(b, loc, type, source, column, sizes);
}

/// The view of `source` at `column` with the sizes of `like` (a dense
/// [B, H, S, D] buffer).
Value heads(OpBuilder &b, Location loc, Value source, int64_t column, Value like) {
  return heads(b, loc, source, column, cast<MemRefType>(like.getType()), like.getDefiningOp<SizedOpInterface>().getSizes());
}

/// Whether `use` reads a [B, H, S, D] operand of any strides: attention's Q,
/// K and V, decode attention's Q, a state write's input, attention_grad's Q,
/// K, V and dO.
bool readsHeads(OpOperand &use) {
  Operation *op = use.getOwner();
  unsigned i = use.getOperandNumber();
  if (isa<AttentionOp>(op))
    return i < 3;
  if (isa<DecodeAttentionOp, StateWriteOp>(op))
    return i == 0;
  return isa<AttentionGradOp>(op) && i < 4;
}

/// `q` [B, H, S, D] = transpose{0,2,1,3}(reshape [B,S,N] -> [B,S,H,D] (x)),
/// x a slice of the last axis of a [B,S,N] buffer or that buffer, read only
/// by kernels that take strided heads (readsHeads): they read a view of it
/// instead, and the copies and their buffers go.
void viewHeads(Value q) {
  if (!q.getDefiningOp<AllocOp>())
    return;
  auto transpose = writerOf<TransposeOp>(q);
  if (!isHeadTranspose(transpose))
    return;
  for (OpOperand &use : q.getUses())
    if (use.getOwner() != transpose && !readsHeads(use))
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
  SliceOp slice;
  if (x.getDefiningOp<AllocOp>() && (slice = writerOf<SliceOp>(x))) {
    auto in = cast<MemRefType>(slice.getIns()[0].getType());
    if (!allocWithUses(x, 2) || slice.getAxis() != 2 || in.isDynamicDim(2) ||
        slice.getIns().size() > 1)
      return;
    storage = slice.getIns()[0];
    column = slice.getStart();
  } else if (xt.isDynamicDim(2)) {
    return;
  }
  OpBuilder b(transpose);
  Value view = heads(b, transpose.getLoc(), storage, column, q);
  transpose.erase();
  q.replaceAllUsesWith(view);
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
  TransposeOp transpose;
  for (Operation *user : o.getUsers())
    if (auto e = dyn_cast<TransposeOp>(user); e && e.getIns()[0] == o)
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

/// Whether `view` is written by one kernel and read by none.
bool writtenOnly(Value view) {
  if (!view.hasOneUse())
    return false;
  OpOperand &use = *view.getUses().begin();
  if (auto e = dyn_cast<KernelCallInterface>(use.getOwner()))
    return use.getOperandNumber() >= e.getIns().size();
  if (auto a = dyn_cast<AttentionOp>(use.getOwner()))
    return a.getOut() == view;
  return false;
}

/// A concat along the last axis of buffers [B, S, H·D] that kernels wrote
/// through head views (attention_grad's dQ, dK and dV, transposed back by
/// viewOutput): the kernels write into the concat's output at each input's
/// column instead, and the concat and the buffers go (the fused Q/K/V
/// projection's gradient is assembled in place).
void concatInPlace(ConcatOp concat) {
  Value c = concat.getOuts()[0];
  auto ct = cast<MemRefType>(c.getType());
  Operation *cdef = c.getDefiningOp();
  if (!cdef || !isa<AllocOp, OutputOp>(cdef) || ct.getRank() != 3 || ct.isDynamicDim(2) ||
      concat.getAxis() != 2)
    return;
  struct Part {
    ReshapeOp reshape;
    HeadsOp view;
    int64_t column;
  };
  SmallVector<Part> parts;
  int64_t column = 0;
  Operation *first = nullptr;
  for (Value in : concat.getIns()) {
    auto r = in.getDefiningOp<ReshapeOp>();
    if (!r || !in.hasOneUse())
      return;
    Value t = r.getSource();
    auto tt = cast<MemRefType>(t.getType());
    if (!allocWithUses(t, 2) || tt.getRank() != 4 || !sameSize(t, 0, c, 0) || !sameSize(t, 1, c, 1))
      return;
    HeadsOp view;
    for (Operation *user : t.getUsers())
      if (auto h = dyn_cast<HeadsOp>(user))
        view = h;
    if (!view || view.getColumn() != 0 || !writtenOnly(view.getView()))
      return;
    parts.push_back({r, view, column});
    column += tt.getDimSize(2) * tt.getDimSize(3);
    if (!first || view->isBeforeInBlock(first))
      first = view;
  }
  if (column != ct.getDimSize(2) || first->getBlock() != cdef->getBlock())
    return;
  // The output's sizes must be known where the first view is made.
  for (Value size : cdef->getOperands())
    if (Operation *d = size.getDefiningOp(); d && !d->isBeforeInBlock(first))
      return;
  if (first->isBeforeInBlock(cdef))
    cdef->moveBefore(first);
  for (Part &p : parts) {
    Value old = p.view.getView();
    OpBuilder b(p.view);
    old.replaceAllUsesWith(heads(b, p.view.getLoc(), c, p.column,
                                 cast<MemRefType>(old.getType()), p.view.getSizes()));
    p.view.erase();
  }
  concat.erase();
  for (Part &p : parts) {
    Operation *t = p.reshape.getSource().getDefiningOp();
    p.reshape.erase();
    t->erase();
  }
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
    getOperation().walk([&](AttentionOp a) { attentions.push_back(a); });
    for (AttentionOp a : attentions)
      decodeInPlace(a);
    // Heads read in place (each buffer once: Q, K and V may also be read
    // by attention_grad), then outputs written in place, then the fused
    // projection's gradient assembled in place.
    llvm::SetVector<Value> read;
    SmallVector<OpOperand *> written;
    SmallVector<ConcatOp> concats;
    getOperation().walk([&](Operation *op) {
      for (OpOperand &use : op->getOpOperands())
        if (readsHeads(use))
          read.insert(use.get());
      if (auto a = dyn_cast<AttentionOp>(op))
        written.push_back(&a.getOutMutable());
      if (auto d = dyn_cast<DecodeAttentionOp>(op))
        written.push_back(&d.getOutMutable());
      if (auto g = dyn_cast<AttentionGradOp>(op))
        for (OpOperand &out : g.getOutsMutable())
          written.push_back(&out);
      if (auto c = dyn_cast<ConcatOp>(op))
        concats.push_back(c);
    });
    for (Value q : read)
      viewHeads(q);
    for (OpOperand *out : written)
      viewOutput(out->getOwner(), *out);
    for (ConcatOp c : concats)
      concatInPlace(c);
  }
};

} // namespace
