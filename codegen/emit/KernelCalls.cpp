//===- KernelCalls.cpp - the kernel calls every backend describes alike ---===//
//
// The core's part of printing an entry's kernel ops: the dispatch (storage,
// views and sizes print where they are used, checks at the start of the
// run), the calls whose arguments both kinds of device take alike
// (spelled by the backend: EntryPrinter::spell), and the argument lists of
// the attention kernels and the KV cache that the backends' own calls use.
//
//===----------------------------------------------------------------------===//

#include "codegen/emit/EntryPrinter.h"

#include "codegen/lowering/OpMath.h"
#include "runtime/kernels/GemmPairs.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::emit;
namespace tfk = mlir::transfuse::kernel;

llvm::Error EntryPrinter::printOp(Operation *op) {
  // Storage, views and sizes print where they are used; checks at the start.
  if (isa<tfk::InputOp, tfk::OutputOp, tfk::ParamOp, tfk::AllocOp, tfk::ReshapeOp, tfk::HeadsOp,
          tfk::InputDimOp, tfk::BroadcastDimOp, tfk::StateLengthOp, arith::ConstantOp,
          arith::AddIOp>(op))
    return llvm::Error::success();
  if (auto c = dyn_cast<tfk::CheckOp>(op)) {
    const char *fails = c.getPredicate() == "le" ? " > " : " != ";
    dims.checks.push_back({"(" + dims.index(c.getLhs()) + fails + dims.index(c.getRhs()) + ")",
                           c.getMessage().str()});
    return llvm::Error::success();
  }
  if (auto c = dyn_cast<tfk::ConstantOp>(op))
    return printConstant(c);
  if (std::optional<llvm::Error> e = printShared(op))
    return std::move(*e);
  return printKernel(op);
}

std::optional<llvm::Error> EntryPrinter::printShared(Operation *op) {
  auto ok = [] { return std::optional<llvm::Error>(llvm::Error::success()); };
  auto spelled = [&](KernelCall c, const std::string &indent = "") {
    spell(op, c, indent);
    return ok();
  };
  if (auto s = dyn_cast<tfk::StateOp>(op)) {
    // Held at its capacity by the tf_state (the ModelDesc's state table).
    if (!s.getType().hasStaticShape())
      return fail(s, "a state tensor's type must be its capacity (static sizes)");
    usesState = true;
    return ok();
  }
  if (auto w = dyn_cast<tfk::StateWriteOp>(op)) {
    // The cache where the target keeps it; its extents and row ids on the host.
    Value in = w.getInput();
    auto state = w.getState().getDefiningOp<tfk::StateOp>();
    if (!state)
      return fail(w, "writes a buffer that is not a tfk.state");
    std::string position = dims.index(w.getPosition()), n = dims.dim(in, 2);
    std::string index = std::to_string(module.stateIndex.lookup(state.getName()));
    std::string extent = "c.stateExtents[" + index + "]";
    spell(op, {"stateWrite",
               {"{" + attentionTensor(in) + "}", dims.dim(in, 0), n,
                stateTensor(w.getState(), w.getKeys(), stateTensorType()), position}});
    hostStatement(extent + " = std::max<int64_t>(" + extent + ", " + position + " + " + n + ");");
    hostStatement("exec::freshRowIds(c.stateRowIds[" + index + "], " + dims.dim(in, 0) +
                  ", c.stateSerial);");
    return ok();
  }
  if (auto r = dyn_cast<tfk::StateReadOp>(op)) {
    Value out = r.getOut();
    return spelled({"stateRead",
                    {stateTensor(r.getState(), r.getKeys(), stateTensorType()), dims.dim(out, 0),
                     dims.dim(out, 2), ptr(out)}});
  }
  if (auto a = dyn_cast<tfk::AdvanceOp>(op)) {
    hostStatement("*c.stateLength += " + dims.index(a.getCount()) + ";");
    return ok();
  }
  if (auto l = dyn_cast<tfk::AddLayerNormOp>(op)) {
    // input + residual with the residual possibly a trailing block of the
    // output ([T, D] positions into [B, T, D] tokens): one call per block.
    Value x = l.getInput(), r = l.getResidual(), out = l.getOut();
    int64_t rank = rankOf(out), rr = rankOf(r);
    bool same = rr == rank;
    for (int64_t d = 0; same && d < rank; ++d)
      same = tfk::sameSize(r, d, out, d);
    std::string width = std::to_string(cast<MemRefType>(out.getType()).getDimSize(rank - 1));
    std::string rows = dims.product(r, 0, rr - 1);
    std::string sum = l.getSum() ? ptr(l.getSum()) : "nullptr";
    std::string block = same ? "" : " + b * n";
    KernelCall c{l.getRms() ? "addRmsNorm" : "addLayerNorm",
                 {ptr(x) + block, ptr(r), ptr(l.getGamma()), ptr(l.getBeta()), ptr(out) + block,
                  sum == "nullptr" ? sum : sum + block, rows, width,
                  floatLit(l.getEpsilon().convertToDouble())}};
    if (same)
      return spelled(c);
    line("for (int64_t b = 0, n = (" + rows + " * " + width + "); b < " +
         dims.product(out, 0, rank - rr) + "; ++b)");
    return spelled(c, "  ");
  }
  if (auto p = dyn_cast<tfk::PoolOp>(op)) {
    Value x = p.getIns()[0];
    return spelled({"pool", {ptr(x), ptr(p.getIns()[1]), ptr(p.getOuts()[0]), dims.dim(x, 0),
                             dims.dim(x, 1), dims.dim(x, 2),
                             std::to_string(static_cast<int>(p.getMode()))}});
  }
  if (auto p = dyn_cast<tfk::PoolGradOp>(op)) {
    Value x = p.getIns()[0];
    return spelled({"poolGrad", {ptr(x), ptr(p.getIns()[1]), ptr(p.getIns()[2]),
                                 ptr(p.getOuts()[0]), dims.dim(x, 0), dims.dim(x, 1),
                                 dims.dim(x, 2), std::to_string(static_cast<int>(p.getMode()))}});
  }
  if (isa<tfk::UnfoldOp, tfk::UnfoldGradOp>(op)) {
    // The image's sizes: the input of unfold, the output of its gradient.
    auto call = cast<tfk::KernelCallInterface>(op);
    const bool grad = isa<tfk::UnfoldGradOp>(op);
    Value image = grad ? call.getOuts()[0] : call.getIns()[0];
    ArrayRef<int64_t> patch = grad ? cast<tfk::UnfoldGradOp>(op).getPatch()
                                   : cast<tfk::UnfoldOp>(op).getPatch();
    return spelled({grad ? "unfoldGrad" : "unfold",
                    {ptr(call.getIns()[0]), ptr(call.getOuts()[0]), dims.dim(image, 0),
                     dims.dim(image, 1), dims.dim(image, 2), dims.dim(image, 3),
                     std::to_string(patch[0]), std::to_string(patch[1])}});
  }
  if (auto l = dyn_cast<tfk::L2NormalizeOp>(op)) {
    Value x = l.getIns()[0];
    return spelled({"l2Normalize", {ptr(x), ptr(l.getOuts()[0]), dims.product(x, 0, rankOf(x) - 1),
                                    dims.dim(x, rankOf(x) - 1),
                                    floatLit(l.getEpsilon().convertToDouble())}});
  }
  if (auto l = dyn_cast<tfk::L2NormalizeGradOp>(op)) {
    Value x = l.getIns()[0];
    return spelled({"l2NormalizeGrad",
                    {ptr(x), ptr(l.getIns()[1]), ptr(l.getOuts()[0]),
                     dims.product(x, 0, rankOf(x) - 1), dims.dim(x, rankOf(x) - 1),
                     floatLit(l.getEpsilon().convertToDouble())}});
  }
  if (auto k = dyn_cast<tfk::KeyPaddingMaskOp>(op))
    return spelled({"keyPaddingMask",
                    {ptr(k.getIns()[0]), dims.numel(k.getIns()[0]), std::to_string(k.getPadId()),
                     ptr(k.getOuts()[0])}});
  if (auto m = dyn_cast<tfk::CausalMaskOp>(op))
    return spelled({"causalMask",
                    {dims.index(m.getIns()[0]), dims.index(m.getIns()[1]), ptr(m.getOuts()[0])}});
  if (auto r = dyn_cast<tfk::RotaryOp>(op)) {
    // x [..., S, N]: rows of S positions, each of N / head_dim heads.
    Value x = r.getIns()[0], freq = r.getIns()[1];
    int64_t rank = rankOf(x);
    return spelled({"rotary",
                    {ptr(x), ptr(r.getOuts()[0]), dims.product(x, 0, rank - 2), dims.dim(x, rank - 2),
                     std::to_string(cast<MemRefType>(x.getType()).getDimSize(rank - 1)),
                     std::to_string(r.getHeadDim()), ptr(freq),
                     std::to_string(cast<MemRefType>(freq.getType()).getDimSize(0)),
                     r.getIns().size() > 2 ? dims.index(r.getIns()[2]) : "0",
                     r.getInverse() ? "true" : "false"}});
  }
  if (auto p = dyn_cast<tfk::PositionalEncodingOp>(op)) {
    Value out = p.getOuts()[0];
    return spelled({"positionalEncoding",
                    {dims.index(p.getIns()[0]), p.getIns().size() > 1 ? dims.index(p.getIns()[1]) : "0",
                     dims.dim(out, 1), p.getHalves() ? "true" : "false", ptr(out)}});
  }
  return std::nullopt;
}

std::string mlir::transfuse::emit::activationEnumerator(Activation activation) {
  return ::transfuse::kernels::activationInfo(toKernels(activation)).enumerator;
}

EntryPrinter::GemmShape EntryPrinter::gemmShape(tfk::GemmOp g) {
  Value x = g.getInput(), result = g.getOut();
  GemmShape s;
  s.k = cast<MemRefType>(x.getType()).getDimSize(rankOf(x) - 1);
  s.transW = g.getTransposeWeight();
  // The product's N (twice the result's when gated).
  s.n = cast<MemRefType>(result.getType()).getDimSize(rankOf(result) - 1) * (g.getGated() ? 2 : 1);
  s.m = dims.product(x, 0, rankOf(x) - 1);
  if (g.getInvFreq()) {
    s.seqLen = dims.dim(result, rankOf(result) - 2);
    s.positionOffset = g.getOffset() ? dims.index(g.getOffset()) : "0";
    s.pairKind = static_cast<int>(::transfuse::kernels::GemmPairs::Kind::kRotary);
    s.headDim = g.getHeadDim();
    s.pairColumns = g.getRotaryColumns();
  } else if (g.getGated()) {
    s.pairKind = static_cast<int>(::transfuse::kernels::GemmPairs::Kind::kGated);
  }
  s.activation = activationEnumerator(g.getActivation());
  flops("2.0 * " + s.m + " * " + std::to_string(s.n * s.k));
  return s;
}

std::string EntryPrinter::dropoutStep(tfk::DropoutOp op) {
  return op.getIns().size() > 1 ? "uint64_t(" + dims.index(op.getIns()[1]) + ") + c.step"
                                : "c.step";
}

std::string EntryPrinter::sliceStart(Operation *op, int64_t start) {
  // An offset: a decode step's positions, the last row.
  auto call = cast<tfk::KernelCallInterface>(op);
  if (call.getIns().size() < 2)
    return std::to_string(start);
  return "(" + std::to_string(start) + " + " + dims.index(call.getIns()[1]) + ")";
}

std::string EntryPrinter::stateTensor(Value state, bool keys, StringRef type) {
  auto t = cast<MemRefType>(state.getType()); // [R, H, T, D] or keys [R, H, D, T]
  int64_t positions = t.getDimSize(keys ? 3 : 2), headDim = t.getDimSize(keys ? 2 : 3);
  return type.str() + "{" + ptr(state) + ", " + std::to_string(t.getDimSize(1)) + ", " +
         std::to_string(positions) + ", " + std::to_string(headDim) + ", " +
         (keys ? "true" : "false") + "}";
}

void EntryPrinter::attentionOutput(Value out) {
  line("  args.out = " + ptr(out) + ";");
  if (std::optional<std::array<std::string, 3>> s = headStrides(out))
    line("  args.outBatchStride = " + (*s)[0] + "; args.outHeadStride = " + (*s)[1] +
         "; args.outRowStride = " + (*s)[2] + ";");
}

llvm::Error EntryPrinter::decodeAttentionArgs(tfk::DecodeAttentionOp op, StringRef type) {
  Value q = op.getQuery(), out = op.getOut();
  auto k = cast<MemRefType>(op.getKey().getType()); // [R, H, D, T]
  auto v = cast<MemRefType>(op.getValue().getType()); // [R, H, T, D]
  int64_t headDim = cast<MemRefType>(q.getType()).getDimSize(3);
  if (k.getDimSize(2) != headDim || v.getDimSize(3) != headDim || k.getDimSize(3) != v.getDimSize(2))
    return fail(op, "the key and value states do not match the query's heads");
  if (headDim > 256)
    return fail(op, "the decode attention kernels take head dimensions up to 256");
  std::string b = dims.dim(q, 0), h = dims.dim(q, 1), sq = dims.dim(q, 2);
  std::string sk = dims.index(op.getKeyLen()), t = std::to_string(k.getDimSize(3));
  std::string d = std::to_string(headDim), plane = std::to_string(k.getDimSize(3) * headDim);
  line("{");
  line("  " + type.str() + " args;");
  line("  args.batch = " + b + "; args.heads = " + h + "; args.seqQ = " + sq +
       "; args.seqK = " + sk + "; args.headDim = " + d + ";");
  line("  args.q = {" + attentionTensor(q) + "};");
  // The state's heads: the query's, or fewer (grouped-query attention).
  std::string kvHeads = std::to_string(k.getDimSize(1));
  kvHeadsArg("args", q, op.getKey());
  line("  args.k = {" + ptr(op.getKey()) + ", " + kvHeads + " * " + plane + ", " + plane + ", " +
       t + "};");
  line("  args.v = {" + ptr(op.getValue()) + ", " + kvHeads + " * " + plane + ", " + plane + ", " +
       d + "};");
  attentionOutput(out);
  attentionTail(op.getScale().convertToDouble(), op.getCausal(), op.getKeyPadding(),
                b + " * " + h + " * " + sq + " * " + sk + " * " + d);
  return llvm::Error::success();
}

void EntryPrinter::labelsPerRow(Value logits, Value labels, StringRef what) {
  // The labels' and the logits' sizes are separate inputs' dimensions.
  dims.checks.push_back({"(" + dims.product(logits, 0, rankOf(logits) - 1) + " != " +
                             dims.numel(labels) + ")",
                         what.str() + " does not hold one label per row of the logits"});
}

void EntryPrinter::attentionGradArgs(tfk::AttentionGradOp e, StringRef type) {
  // Q, K, V, dO, dQ, dK, dV [B, H, S, D], dense or tfk.heads views; the key
  // padding a byte mask [B, Sk].
  ValueRange ins = e.getIns();
  Value q = ins[0], key = ins[1];
  int64_t headDim = cast<MemRefType>(q.getType()).getDimSize(3);
  std::string b = dims.dim(q, 0), h = dims.dim(q, 1), sq = dims.dim(q, 2), sk = dims.dim(key, 2);
  line("{");
  line("  " + type.str() + " args;");
  line("  args.forward.batch = " + b + "; args.forward.heads = " + h + "; args.forward.seqQ = " +
       sq + "; args.forward.seqK = " + sk + "; args.forward.headDim = " +
       std::to_string(headDim) + ";");
  kvHeadsArg("args.forward", q, key);
  line("  args.forward.q = {" + attentionTensor(q) + "};");
  line("  args.forward.k = {" + attentionTensor(key) + "};");
  line("  args.forward.v = {" + attentionTensor(ins[2]) + "};");
  line("  args.forward.scale = " + floatLit(e.getScale().convertToDouble()) + ";");
  if (e.getCausal())
    line("  args.forward.causal = true;");
  if (ins.size() > 4)
    line("  args.forward.keyMask = " + ptr(ins[4]) + ";");
  line("  args.grad = {" + attentionTensor(ins[3]) + "};");
  line("  args.dq = {" + attentionTensor(e.getOuts()[0]) + "};");
  line("  args.dk = {" + attentionTensor(e.getOuts()[1]) + "};");
  line("  args.dv = {" + attentionTensor(e.getOuts()[2]) + "};");
  dropoutArgs("args.forward", e.getDropoutRate().convertToDouble(), e.getDropoutSeed(),
              e.getDropoutStream());
  flops("10.0 * " + b + " * " + h + " * " + sq + " * " + sk + " * " + std::to_string(headDim));
}

void EntryPrinter::dropoutArgs(const std::string &args, double rate, int64_t seed, int64_t stream) {
  if (rate <= 0.0)
    return;
  // Keyed by the call's seed and step (Call::seed, Call::step: a train step's).
  line("  " + args + ".dropoutRate = " + floatLit(rate) + "; " + args + ".dropoutSeed = " +
       std::to_string(seed) + "ull + c.seed; " + args + ".dropoutStep = c.step; " + args +
       ".dropoutStream = " + std::to_string(stream) + ";");
}

std::optional<std::array<std::string, 3>> EntryPrinter::headStrides(Value v) {
  auto h = v.getDefiningOp<tfk::HeadsOp>();
  if (!h)
    return std::nullopt;
  auto st = cast<MemRefType>(h.getSource().getType());
  std::string n = std::to_string(st.getDimSize(2) * (st.getRank() == 4 ? st.getDimSize(3) : 1));
  std::string headDim = std::to_string(cast<MemRefType>(v.getType()).getDimSize(3));
  return std::array<std::string, 3>{"size_t(" + dims.dim(h.getSource(), 1) + " * " + n + ")",
                                    headDim, n};
}

std::string EntryPrinter::attentionTensor(Value v) {
  std::optional<std::array<std::string, 3>> s = headStrides(v);
  if (!s)
    return ptr(v) + ", 0, 0, 0"; // dense [B, H, S, D]
  return ptr(v) + ", " + (*s)[0] + ", " + (*s)[1] + ", " + (*s)[2];
}

void EntryPrinter::attentionArgs(tfk::AttentionOp op, StringRef type) {
  Value q = op.getQuery(), k = op.getKey(), out = op.getOut();
  int64_t headDim = cast<MemRefType>(q.getType()).getDimSize(3);
  std::string b = dims.dim(q, 0), h = dims.dim(q, 1), sq = dims.dim(q, 2), sk = dims.dim(k, 2);
  line("{");
  line("  " + type.str() + " args;");
  line("  args.batch = " + b + "; args.heads = " + h + "; args.seqQ = " + sq +
       "; args.seqK = " + sk + "; args.headDim = " + std::to_string(headDim) + ";");
  kvHeadsArg("args", q, k);
  line("  args.q = {" + attentionTensor(q) + "};");
  line("  args.k = {" + attentionTensor(k) + "};");
  line("  args.v = {" + attentionTensor(op.getValue()) + "};");
  attentionOutput(out);
  attentionTail(op.getScale().convertToDouble(), op.getCausal(), op.getKeyPadding(),
                b + " * " + h + " * " + sq + " * " + sk + " * " + std::to_string(headDim));
}

void EntryPrinter::kvHeadsArg(const std::string &args, Value q, Value key) {
  // K's heads ([B, Hkv, S, D], or a state's [R, Hkv, D, T]) where they are
  // fewer than Q's: grouped-query attention.
  int64_t heads = cast<MemRefType>(q.getType()).getDimSize(1);
  int64_t kvHeads = cast<MemRefType>(key.getType()).getDimSize(1);
  if (kvHeads != heads)
    line("  " + args + ".kvHeads = " + std::to_string(kvHeads) + ";");
}

void EntryPrinter::attentionTail(double scale, bool causal, Value keyPadding,
                                 const std::string &product) {
  line("  args.scale = " + floatLit(scale) + ";");
  if (causal)
    line("  args.causal = true;");
  if (keyPadding)
    line("  args.keyMask = " + ptr(keyPadding) + ";");
  flops("4.0 * " + product);
}
