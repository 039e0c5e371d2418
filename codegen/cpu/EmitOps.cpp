//===- EmitOps.cpp - one statement per kernel op --------------------------===//

#include "codegen/cpu/Emitter.h"

#include "codegen/lowering/OpMath.h"
#include "codegen/cpu/CppText.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::cpu;
namespace tfk = mlir::transfuse::kernel;

namespace {

/// The parameter a view is (through reshapes), or null.
tfk::ParamOp paramOf(Value v) {
  while (auto r = v.getDefiningOp<tfk::ReshapeOp>())
    v = r.getSource();
  return v.getDefiningOp<tfk::ParamOp>();
}

} // namespace

llvm::Error Emitter::emitOp(Operation *op) {
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
  if (target == Target::kCuda)
    return emitCudaOp(op);
  return llvm::TypeSwitch<Operation *, llvm::Error>(op)
      .Case([&](tfk::ConstantOp c) { return constant(c); })
      .Case([&](tfk::StateOp s) -> llvm::Error {
        // Held at its capacity by the tf_state (the ModelDesc's state table).
        if (!s.getType().hasStaticShape())
          return fail(s, "a state tensor's type must be its capacity (static sizes)");
        usesState = true;
        return llvm::Error::success();
      })
      .Case([&](tfk::ExecOp e) { return emitExec(e); })
      .Case([&](tfk::GemmOp g) { return emitGemm(g); })
      .Case([&](tfk::MatmulOp m) {
        Value lhs = m.getLhs(), rhs = m.getRhs(), out = m.getOut();
        std::string k = dims.dim(lhs, m.getTransposeLhs() ? rankOf(lhs) - 2 : rankOf(lhs) - 1);
        call("exec::matmul(" + ptr(lhs) + ", " + dims.shape(lhs) + ", " +
             (m.getTransposeLhs() ? "true" : "false") + ", " + ptr(rhs) + ", " + dims.shape(rhs) +
             ", " + (m.getTransposeRhs() ? "true" : "false") + ", " + ptr(out) + ", " +
             dims.shape(out) + ", c.pool);");
        flops("2.0 * " + dims.numel(out) + " * " + k);
        return llvm::Error::success();
      })
      .Case([&](tfk::AttentionOp a) { return emitAttention(a); })
      .Case([&](tfk::DecodeAttentionOp a) { return emitDecodeAttention(a); })
      .Case([&](tfk::StateWriteOp w) -> llvm::Error {
        Value in = w.getInput();
        auto state = w.getState().getDefiningOp<tfk::StateOp>();
        if (!state)
          return fail(w, "writes a buffer that is not a tfk.state");
        std::string end = "(" + dims.index(w.getPosition()) + " + " + dims.dim(in, 2) + ")";
        std::string index = std::to_string(tables.stateIndex.lookup(state.getName()));
        std::string extent = "c.stateExtents[" + index + "]";
        call("exec::stateWrite({" + attentionTensor(in) + "}, " + dims.dim(in, 0) + ", " +
             dims.dim(in, 2) + ", " + stateTensor(w.getState(), w.getKeys()) + ", " +
             dims.index(w.getPosition()) + ");");
        line(extent + " = std::max<int64_t>(" + extent + ", " + end + ");");
        line("exec::freshRowIds(c.stateRowIds[" + index + "], " + dims.dim(in, 0) +
             ", c.stateSerial);");
        return llvm::Error::success();
      })
      .Case([&](tfk::StateReadOp r) {
        Value out = r.getOut();
        call("exec::stateRead(" + stateTensor(r.getState(), r.getKeys()) + ", " +
             dims.dim(out, 0) + ", " + dims.dim(out, 2) + ", " + ptr(out) + ");");
        return llvm::Error::success();
      })
      .Case([&](tfk::AdvanceOp a) {
        line("*c.stateLength += " + dims.index(a.getCount()) + ";");
        return llvm::Error::success();
      })
      .Case([&](tfk::AddLayerNormOp l) { return emitAddLayerNorm(l); })
      .Case([&](tfk::LayerNormOp l) {
        Value x = l.getInput();
        int64_t axis = l.getAxis();
        call("kernels::layerNorm(" + ptr(x) + ", " + ptr(l.getGamma()) + ", " + ptr(l.getBeta()) +
             ", " + ptr(l.getOut()) + ", " + dims.product(x, 0, axis) + ", " +
             dims.product(x, axis, rankOf(x)) + ", " + floatLit(l.getEpsilon().convertToDouble()) +
             ", c.pool);");
        return llvm::Error::success();
      })
      .Case([&](tfk::ElementwiseOp e) { return emitElementwise(e); })
      .Default([&](Operation *) { return fail(op, "is not a kernel op the cpu printer knows"); });
}

llvm::Error Emitter::emitExec(tfk::ExecOp e) {
  StringRef k = e.getKernel();
  ValueRange ins = e.getIns();
  Value out = e.getOuts()[0];
  auto kind = [&] { return e->getAttrOfType<StringAttr>("kind").str(); };
  if (k == "gather") {
    auto table = cast<MemRefType>(ins[0].getType());
    auto what = e->getAttrOfType<StringAttr>("what");
    checked("exec::gather(" + ptr(ins[0]) + ", " + std::to_string(table.getDimSize(0)) + ", " +
            std::to_string(table.getDimSize(1)) + ", " + ptr(ins[1]) + ", " + dims.shape(ins[1]) +
            ", " + quote(what ? what.getValue() : "an operand") + ", " + ptr(out) + ")");
  } else if (k == "cross_entropy") {
    labelsPerRow(e);
    auto logits = cast<MemRefType>(ins[0].getType());
    double smoothing = e->getAttrOfType<FloatAttr>("label_smoothing").getValueAsDouble();
    checked("exec::crossEntropyMean(" + ptr(ins[0]) + ", " + ptr(ins[1]) + ", " + dims.numel(ins[1]) +
            ", " + std::to_string(logits.getDimSize(logits.getRank() - 1)) + ", " +
            floatLit(smoothing) + ", " + std::to_string(intAttr(e, "ignore_index")) + ", " +
            quote(e->getAttrOfType<StringAttr>("what").getValue()) + ", " + ptr(out) + ", c.pool)");
  } else if (k == "cross_entropy_grad") {
    labelsPerRow(e);
    auto logits = cast<MemRefType>(ins[0].getType());
    double smoothing = e->getAttrOfType<FloatAttr>("label_smoothing").getValueAsDouble();
    checked("exec::crossEntropyGrad(" + ptr(ins[0]) + ", " + ptr(ins[1]) + ", " + dims.numel(ins[1]) +
            ", " + std::to_string(logits.getDimSize(logits.getRank() - 1)) + ", " +
            floatLit(smoothing) + ", " + std::to_string(intAttr(e, "ignore_index")) + ", " +
            quote(e->getAttrOfType<StringAttr>("what").getValue()) + ", " + ptr(ins[2]) + ", " +
            ptr(out) + ", c.pool)");
  } else if (k == "embedding_grad") {
    auto table = cast<MemRefType>(out.getType());
    checked("exec::embeddingGrad(" + ptr(ins[0]) + ", " + dims.numel(ins[0]) + ", " + ptr(ins[1]) +
            ", " + std::to_string(table.getDimSize(0)) + ", " + std::to_string(table.getDimSize(1)) +
            ", " + quote(e->getAttrOfType<StringAttr>("what").getValue()) + ", " + ptr(out) + ")");
  } else if (k == "activation_grad") {
    call("exec::activationGrad(exec::ElementwiseKind::" + kind() + ", " + ptr(ins[0]) + ", " +
         ptr(ins[1]) + ", " + ptr(out) + ", " + dims.numel(out) + ", c.pool);");
  } else if (k == "layer_norm_grad") {
    int64_t axis = intAttr(e, "axis");
    double eps = e->getAttrOfType<FloatAttr>("epsilon").getValueAsDouble();
    call("kernels::layerNormGrad(" + ptr(ins[0]) + ", " + ptr(ins[1]) + ", " + ptr(ins[2]) + ", " +
         ptr(out) + ", " + ptr(e.getOuts()[1]) + ", " + ptr(e.getOuts()[2]) + ", " +
         dims.product(ins[0], 0, axis) + ", " +
         dims.product(ins[0], axis, cast<MemRefType>(ins[0].getType()).getRank()) + ", " +
         floatLit(eps) + ", c.pool);");
  } else if (k == "attention_grad") {
    attentionGradArgs(e, "kernels::AttentionGradArgs");
    line("  if (rt::Status s = kernels::attentionBackward(args, c.pool); !s.isOk()) return s;");
    ++kernelCalls;
    line("}");
  } else if (k == "dropout") {
    std::string step = ins.size() > 1 ? "uint64_t(" + dims.index(ins[1]) + ") + c.step" : "c.step";
    call("exec::dropout(" + ptr(ins[0]) + ", " + ptr(out) + ", " + dims.numel(out) + ", " +
         floatLit(e->getAttrOfType<FloatAttr>("rate").getValueAsDouble()) + ", " +
         std::to_string(intAttr(e, "seed")) + "ull + c.seed, " + step + ", " +
         std::to_string(intAttr(e, "stream")) + ", c.pool);");
  } else if (k == "expand") {
    call("exec::expand(" + ptr(ins[0]) + ", " + dims.shape(ins[0]) + ", " + ptr(out) + ", " +
         dims.shape(out) + ");");
  } else if (k == "weight_grad") {
    const int64_t rank = rankOf(ins[0]);
    call("exec::weightGrad(" + ptr(ins[0]) + ", " + dims.shape(ins[0]) + ", " + ptr(ins[1]) + ", " +
         dims.shape(ins[1]) + ", " + ptr(out) + ", c.pool);");
    flops("2.0 * " + dims.numel(ins[0]) + " * " + dims.dim(ins[1], rank - 1));
  } else if (k == "slice_grad") {
    int64_t axis = intAttr(e, "axis");
    std::string start = std::to_string(intAttr(e, "start"));
    if (ins.size() > 1)
      start = "(" + start + " + " + dims.index(ins[1]) + ")";
    call("exec::sliceGrad(" + ptr(ins[0]) + ", " + dims.shape(ins[0]) + ", " + std::to_string(axis) +
         ", " + start + ", " + ptr(out) + ", " + dims.shape(out) + ");");
  } else if (k == "binary") {
    call("exec::binary(exec::ElementwiseKind::" + kind() + ", " + ptr(ins[0]) + ", " +
         dims.shape(ins[0]) + ", " + ptr(ins[1]) + ", " + dims.shape(ins[1]) + ", " + ptr(out) +
         ", " + dims.shape(out) + ", c.pool);");
  } else if (k == "unary") {
    call("exec::unary(exec::ElementwiseKind::" + kind() + ", " + ptr(ins[0]) + ", " + ptr(out) +
         ", " + dims.numel(out) + ", c.pool);");
  } else if (k == "scale") {
    double factor = e->getAttrOfType<FloatAttr>("factor").getValueAsDouble();
    call("exec::scale(" + ptr(ins[0]) + ", " + floatLit(factor) + ", " + ptr(out) + ", " +
         dims.numel(out) + ", c.pool);");
  } else if (k == "select") {
    call("exec::select(" + ptr(ins[0]) + ", " + dims.shape(ins[0]) + ", " + ptr(ins[1]) + ", " +
         dims.shape(ins[1]) + ", " + ptr(ins[2]) + ", " + dims.shape(ins[2]) + ", " + ptr(out) +
         ", " + dims.shape(out) + ");");
  } else if (k == "softmax") {
    call("exec::softmax(" + ptr(ins[0]) + ", " + dims.shape(ins[0]) + ", " +
         std::to_string(intAttr(e, "axis")) + ", " + ptr(out) + ", c.pool);");
  } else if (k == "transpose") {
    std::string perm;
    auto p = e->getAttrOfType<DenseI64ArrayAttr>("permutation").asArrayRef();
    for (int64_t i : p)
      perm += (perm.empty() ? "" : ", ") + std::to_string(i);
    call("exec::transpose(" + ptr(ins[0]) + ", " + dims.shape(ins[0]) + ", std::array<int64_t, " +
         std::to_string(p.size()) + ">{" + perm + "}.data(), " + ptr(out) + ", " + elemBytes(out) +
         ");");
  } else if (k == "concat") {
    std::string ptrs, shapes;
    for (Value v : ins) {
      ptrs += (ptrs.empty() ? "" : ", ") + ptr(v);
      shapes += (shapes.empty() ? "" : ", ") + dims.shape(v);
    }
    line("{");
    line("  const void* ins[] = {" + ptrs + "};");
    line("  const exec::Shape shapes[] = {" + shapes + "};");
    call("  exec::concat(ins, shapes, " + std::to_string(ins.size()) + ", " +
         std::to_string(intAttr(e, "axis")) + ", " + ptr(out) + ", " + elemBytes(out) + ");");
    line("}");
  } else if (k == "slice") {
    int64_t axis = intAttr(e, "axis");
    std::string start = std::to_string(intAttr(e, "start"));
    if (ins.size() > 1) // an offset: a decode step's positions, the last row
      start = "(" + start + " + " + dims.index(ins[1]) + ")";
    call("exec::slice(" + ptr(ins[0]) + ", " + dims.shape(ins[0]) + ", " + std::to_string(axis) +
         ", " + start + ", " + dims.dim(out, axis) + ", " +
         ptr(out) + ", " + elemBytes(out) + ");");
  } else if (k == "reduce") {
    call("exec::reduce(exec::ReduceOp::" + kind() + ", " + ptr(ins[0]) + ", " +
         dims.shape(ins[0]) + ", " + std::to_string(intAttr(e, "axes_mask")) + "u, " + ptr(out) +
         ", c.pool);");
  } else if (k == "key_padding_mask") {
    call("exec::keyPaddingMask(" + ptr(ins[0]) + ", " + dims.numel(ins[0]) + ", " +
         std::to_string(intAttr(e, "pad_id")) + ", " + ptr(out) + ");");
  } else if (k == "causal_mask") {
    call("exec::causalMask(" + dims.index(ins[0]) + ", " + dims.index(ins[1]) + ", " + ptr(out) +
         ");");
  } else if (k == "positional_encoding") {
    std::string offset = ins.size() > 1 ? dims.index(ins[1]) : "0";
    call("exec::positionalEncoding(" + dims.index(ins[0]) + ", " + offset + ", " +
         dims.dim(out, 1) + ", " + ptr(out) + ");");
  } else if (k == "copy") {
    call("exec::copyBytes(" + ptr(ins[0]) + ", " + ptr(out) + ", " + dims.numel(ins[0]) + " * " +
         elemBytes(out) + ");");
  } else {
    return fail(e, "kernel '" + k + "' has no cpu form");
  }
  return llvm::Error::success();
}

Emitter::GemmShape Emitter::gemmShape(tfk::GemmOp g) {
  Value x = g.getInput(), result = g.getOut();
  GemmShape s;
  s.k = cast<MemRefType>(x.getType()).getDimSize(rankOf(x) - 1);
  s.n = cast<MemRefType>(result.getType()).getDimSize(rankOf(result) - 1);
  s.m = dims.product(x, 0, rankOf(x) - 1);
  s.transW = g.getTransposeWeight();
  std::optional<math::Kind> kind = activationKind(g.getActivation());
  s.activation = kind ? math::info(*kind).enumerator : "kNone";
  flops("2.0 * " + s.m + " * " + std::to_string(s.n * s.k));
  return s;
}

llvm::Error Emitter::emitGemm(tfk::GemmOp g) {
  Value x = g.getInput(), w = g.getWeight(), result = g.getOut();
  const auto [m, n, k, transW, activation] = gemmShape(g);
  std::string epi = "kernels::GemmEpilogue{" + (g.getBias() ? ptr(g.getBias()) : "nullptr") +
                    ", kernels::Activation::" + activation + ", " +
                    (g.getResidual() ? ptr(g.getResidual()) : "nullptr") + ", 0";
  if (std::optional<math::Kind> d = activationKind(g.getDerivative())) {
    if (!cast<MemRefType>(g.getPre().getType()).getLayout().isIdentity())
      return fail(g, "reads its derivative's input through a strided view (rows of N are expected)");
    epi += ", kernels::Activation::" + std::string(math::info(*d).enumerator) + ", " +
           ptr(g.getPre()) + ", 0, " + floatLit(g.getScale().convertToDouble());
  }
  epi += "}";
  std::string sizes = m + ", " + std::to_string(n) + ", " + std::to_string(k);
  if (g.getPacked()) {
    tfk::ParamOp p = paramOf(w);
    if (!p)
      return fail(g, "a packed weight that is not a parameter");
    int pack = tables.pack(tables.paramIndex.lookup(p.getName()), transW, k, n);
    call("kernels::gemm(" + sizes + ", " + ptr(x) + ", " + std::to_string(k) +
         ", false, *c.packed[" + std::to_string(pack) + "], " + ptr(result) + ", " +
         std::to_string(n) + ", " + epi + ", c.pool);");
  } else {
    call("kernels::gemm(" + sizes + ", " + ptr(x) + ", " + std::to_string(k) + ", false, " +
         ptr(w) + ", " + std::to_string(transW ? k : n) + ", " + (transW ? "true" : "false") +
         ", " + ptr(result) + ", " + std::to_string(n) + ", " + epi + ", c.pool);");
  }
  return llvm::Error::success();
}

std::string Emitter::stateTensor(Value state, bool keys) {
  auto t = cast<MemRefType>(state.getType()); // [R, H, T, D] or keys [R, H, D, T]
  int64_t positions = t.getDimSize(keys ? 3 : 2), headDim = t.getDimSize(keys ? 2 : 3);
  return (target == Target::kCuda ? cudaArgs("StateTensor") + "{" : "exec::StateTensor{") + ptr(state) + ", " + std::to_string(t.getDimSize(1)) + ", " +
         std::to_string(positions) + ", " + std::to_string(headDim) + ", " +
         (keys ? "true" : "false") + "}";
}

void Emitter::attentionOutput(Value out) {
  line("  args.out = " + ptr(out) + ";");
  if (std::optional<std::array<std::string, 3>> s = headStrides(out))
    line("  args.outBatchStride = " + (*s)[0] + "; args.outHeadStride = " + (*s)[1] +
         "; args.outRowStride = " + (*s)[2] + ";");
}

llvm::Error Emitter::decodeAttentionArgs(tfk::DecodeAttentionOp op, StringRef type) {
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
  line("  args.k = {" + ptr(op.getKey()) + ", " + h + " * " + plane + ", " + plane + ", " + t + "};");
  line("  args.v = {" + ptr(op.getValue()) + ", " + h + " * " + plane + ", " + plane + ", " + d + "};");
  attentionOutput(out);
  line("  args.scale = " + floatLit(op.getScale().convertToDouble()) + ";");
  if (op.getCausal())
    line("  args.causal = true;");
  if (Value kp = op.getKeyPadding())
    line("  args.keyMask = " + ptr(kp) + ";");
  flops("4.0 * " + b + " * " + h + " * " + sq + " * " + sk + " * " + d);
  return llvm::Error::success();
}

llvm::Error Emitter::emitDecodeAttention(tfk::DecodeAttentionOp op) {
  if (llvm::Error e = decodeAttentionArgs(op, "kernels::DecodeAttentionArgs"))
    return e;
  // Rows of equal ids share their cache (beams over one source).
  auto keyState = op.getKey().getDefiningOp<tfk::StateOp>();
  auto valueState = op.getValue().getDefiningOp<tfk::StateOp>();
  if (keyState && valueState)
    line("  args.keyRowIds = c.stateRowIds[" +
         std::to_string(tables.stateIndex.lookup(keyState.getName())) +
         "]; args.valueRowIds = c.stateRowIds[" +
         std::to_string(tables.stateIndex.lookup(valueState.getName())) + "];");
  line("  if (rt::Status s = kernels::decodeAttention(args, c.pool); !s.isOk()) return s;");
  ++kernelCalls;
  line("}");
  return llvm::Error::success();
}

void Emitter::labelsPerRow(tfk::ExecOp e) {
  // The labels' and the logits' sizes are separate inputs' dimensions.
  Value logits = e.getIns()[0], labels = e.getIns()[1];
  dims.checks.push_back({"(" + dims.product(logits, 0, rankOf(logits) - 1) + " != " +
                             dims.numel(labels) + ")",
                         e->getAttrOfType<StringAttr>("what").str() +
                             " does not hold one label per row of the logits"});
}

void Emitter::attentionGradArgs(tfk::ExecOp e, StringRef type) {
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
  line("  args.forward.q = {" + attentionTensor(q) + "};");
  line("  args.forward.k = {" + attentionTensor(key) + "};");
  line("  args.forward.v = {" + attentionTensor(ins[2]) + "};");
  line("  args.forward.scale = " + floatLit(e->getAttrOfType<FloatAttr>("scale").getValueAsDouble()) +
       ";");
  if (e->hasAttr("causal"))
    line("  args.forward.causal = true;");
  if (ins.size() > 4)
    line("  args.forward.keyMask = " + ptr(ins[4]) + ";");
  line("  args.grad = {" + attentionTensor(ins[3]) + "};");
  line("  args.dq = {" + attentionTensor(e.getOuts()[0]) + "};");
  line("  args.dk = {" + attentionTensor(e.getOuts()[1]) + "};");
  line("  args.dv = {" + attentionTensor(e.getOuts()[2]) + "};");
  dropoutArgs("args.forward", e->getAttrOfType<FloatAttr>("dropout_rate").getValueAsDouble(),
              intAttr(e, "dropout_seed"), intAttr(e, "dropout_stream"));
  flops("10.0 * " + b + " * " + h + " * " + sq + " * " + sk + " * " + std::to_string(headDim));
}

void Emitter::dropoutArgs(const std::string &args, double rate, int64_t seed, int64_t stream) {
  if (rate <= 0.0)
    return;
  // Keyed by the call's seed and step (Call::seed, Call::step: a train step's).
  line("  " + args + ".dropoutRate = " + floatLit(rate) + "; " + args + ".dropoutSeed = " +
       std::to_string(seed) + "ull + c.seed; " + args + ".dropoutStep = c.step; " + args +
       ".dropoutStream = " + std::to_string(stream) + ";");
}

std::optional<std::array<std::string, 3>> Emitter::headStrides(Value v) {
  auto h = v.getDefiningOp<tfk::HeadsOp>();
  if (!h)
    return std::nullopt;
  auto st = cast<MemRefType>(h.getSource().getType());
  std::string n = std::to_string(st.getDimSize(2) * (st.getRank() == 4 ? st.getDimSize(3) : 1));
  std::string headDim = std::to_string(cast<MemRefType>(v.getType()).getDimSize(3));
  return std::array<std::string, 3>{"size_t(" + dims.dim(h.getSource(), 1) + " * " + n + ")",
                                    headDim, n};
}

std::string Emitter::attentionTensor(Value v) {
  std::optional<std::array<std::string, 3>> s = headStrides(v);
  if (!s)
    return ptr(v) + ", 0, 0, 0"; // dense [B, H, S, D]
  return ptr(v) + ", " + (*s)[0] + ", " + (*s)[1] + ", " + (*s)[2];
}

void Emitter::attentionArgs(tfk::AttentionOp op, StringRef type) {
  Value q = op.getQuery(), k = op.getKey(), out = op.getOut();
  int64_t headDim = cast<MemRefType>(q.getType()).getDimSize(3);
  std::string b = dims.dim(q, 0), h = dims.dim(q, 1), sq = dims.dim(q, 2), sk = dims.dim(k, 2);
  line("{");
  line("  " + type.str() + " args;");
  line("  args.batch = " + b + "; args.heads = " + h + "; args.seqQ = " + sq +
       "; args.seqK = " + sk + "; args.headDim = " + std::to_string(headDim) + ";");
  line("  args.q = {" + attentionTensor(q) + "};");
  line("  args.k = {" + attentionTensor(k) + "};");
  line("  args.v = {" + attentionTensor(op.getValue()) + "};");
  attentionOutput(out);
  line("  args.scale = " + floatLit(op.getScale().convertToDouble()) + ";");
  if (op.getCausal())
    line("  args.causal = true;");
  if (Value kp = op.getKeyPadding())
    line("  args.keyMask = " + ptr(kp) + ";");
  flops("4.0 * " + b + " * " + h + " * " + sq + " * " + sk + " * " + std::to_string(headDim));
}

llvm::Error Emitter::emitAttention(tfk::AttentionOp op) {
  attentionArgs(op, "kernels::AttentionArgs");
  if (Value bias = op.getBias()) {
    // [.., Sq, Sk] broadcast to [B, H, Sq, Sk]: stride 0 where broadcast.
    auto t = cast<MemRefType>(bias.getType());
    std::string strides[3] = {"0", "0", "0"};
    std::string inner = dims.dim(bias, t.getRank() - 1);
    int64_t slot = 2;
    for (int64_t d = t.getRank() - 2; d >= 0 && slot >= 0; --d, --slot) {
      bool one = !t.isDynamicDim(d) && t.getDimSize(d) == 1;
      if (!one)
        strides[slot] = inner;
      inner = "(" + inner + " * " + dims.dim(bias, d) + ")";
    }
    line("  args.additive = " + ptr(bias) + ";");
    line("  args.additiveBatchStride = " + strides[0] + "; args.additiveHeadStride = " +
         strides[1] + "; args.additiveRowStride = " + strides[2] + ";");
  }
  dropoutArgs("args", op.getDropoutRate().convertToDouble(), op.getDropoutSeed(),
              op.getDropoutStream());
  line("  if (rt::Status s = kernels::attention(args, c.pool); !s.isOk()) return s;");
  ++kernelCalls;
  line("}");
  return llvm::Error::success();
}

llvm::Error Emitter::emitAddLayerNorm(tfk::AddLayerNormOp l) {
  // input + residual with the residual possibly a trailing block of the
  // output ([T, D] positions into [B, T, D] tokens): one call per block.
  Value x = l.getInput(), r = l.getResidual(), out = l.getOut();
  int64_t rank = rankOf(out), rr = rankOf(r);
  bool same = rr == rank;
  for (int64_t d = 0; same && d < rank; ++d)
    same = tfk::sameSize(r, d, out, d);
  std::string width = std::to_string(cast<MemRefType>(out.getType()).getDimSize(rank - 1));
  std::string blockRows = dims.product(r, 0, rr - 1);
  std::string blocks = dims.product(out, 0, rank - rr);
  std::string sum = l.getSum() ? ptr(l.getSum()) : "nullptr";
  std::string args = ptr(l.getGamma()) + ", " + ptr(l.getBeta()) + ", ";
  std::string eps = floatLit(l.getEpsilon().convertToDouble());
  if (same) {
    call("kernels::addLayerNorm(" + ptr(x) + ", " + ptr(r) + ", " + args + ptr(out) + ", " + sum +
         ", " + blockRows + ", " + width + ", " + eps + ", c.pool);");
    return llvm::Error::success();
  }
  std::string block = "(" + blockRows + " * " + width + ")";
  line("for (int64_t b = 0, n = " + block + "; b < " + blocks + "; ++b)");
  call("  kernels::addLayerNorm(" + ptr(x) + " + b * n, " + ptr(r) + ", " + args + ptr(out) +
       " + b * n, " + (sum == "nullptr" ? sum : sum + " + b * n") + ", " + blockRows + ", " +
       width + ", " + eps + ", c.pool);");
  return llvm::Error::success();
}
