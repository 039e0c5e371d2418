//===- EmitOps.cpp - one statement per op ---------------------------------===//

#include "codegen/cpu/Emitter.h"

#include "codegen/lowering/OpMath.h"
#include "codegen/cpu/CppText.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::cpu;

llvm::Error Emitter::emitOp(Operation *op) {
  auto res = [&](unsigned i = 0) { return op->getResult(i); };
  if (elided.count(op))
    return llvm::Error::success();
  return llvm::TypeSwitch<Operation *, llvm::Error>(op)
      .Case<ParamOp, DimOp, ReshapeOp>([](auto) { return llvm::Error::success(); })
      .Case([&](ConstantOp c) -> llvm::Error {
        llvm::Error err = llvm::Error::success();
        std::string name = constant(c, err);
        if (err)
          return err;
        constNames[c.getResult()] = name;
        return llvm::Error::success();
      })
      .Case([&](GatherOp g) {
        auto table = g.getTable().getType();
        checked("exec::gather(" + in(g.getTable()) + ", " + std::to_string(table.getDimSize(0)) +
                ", " + std::to_string(table.getDimSize(1)) + ", " + in(g.getIds()) + ", " +
                dims.shape(g.getIds()) + ", " + quote(nameOf(g.getIds())) + ", " + ptr(res()) + ")");
        return llvm::Error::success();
      })
      .Case([&](MatmulOp m) -> llvm::Error {
        Value rhs = rootOf(m.getRhs());
        auto rt = m.getRhs().getType();
        if (rhs.getDefiningOp<ParamOp>() && rt.getRank() == 2 && !m.getTransposeLhs())
          return emitLinear(op, m.getLhs(), m.getRhs(), m.getTransposeRhs(), Value(),
                            Activation::None, Value(), res());
        auto lt = m.getLhs().getType();
        std::string kExpr = dims.dim(m.getLhs(), m.getTransposeLhs() ? lt.getRank() - 2 : lt.getRank() - 1);
        call("exec::matmul(" + in(m.getLhs()) + ", " + dims.shape(m.getLhs()) + ", " +
             (m.getTransposeLhs() ? "true" : "false") + ", " + in(m.getRhs()) + ", " +
             dims.shape(m.getRhs()) + ", " + (m.getTransposeRhs() ? "true" : "false") + ", " +
             ptr(res()) + ", " + dims.shape(res()) + ", c.pool);");
        flops("2.0 * " + dims.numel(res()) + " * " + kExpr);
        return llvm::Error::success();
      })
      .Case<AddOp, SubOp, MulOp, DivOp>([&](auto b) {
        std::string kind = math::info(*mathKindOf(op)).enumerator;
        call("exec::binary(exec::ElementwiseKind::" + kind + ", " + in(b.getLhs()) + ", " +
             dims.shape(b.getLhs()) + ", " + in(b.getRhs()) + ", " + dims.shape(b.getRhs()) +
             ", " + ptr(res()) + ", " + dims.shape(res()) + ", c.pool);");
        return llvm::Error::success();
      })
      .Case([&](ScaleOp s) {
        call("exec::scale(" + in(s.getInput()) + ", " + floatLit(s.getFactor().convertToDouble()) +
             ", " + ptr(res()) + ", " + dims.numel(res()) + ", c.pool);");
        return llvm::Error::success();
      })
      .Case<ReluOp, ExpOp, TanhOp, GeluOp>([&](auto u) {
        std::string kind = math::info(*mathKindOf(op)).enumerator;
        call("exec::unary(exec::ElementwiseKind::" + kind + ", " + in(u.getInput()) + ", " +
             ptr(res()) + ", " + dims.numel(res()) + ", c.pool);");
        return llvm::Error::success();
      })
      .Case([&](SelectOp s) {
        call("exec::select(" + in(s.getCond()) + ", " + dims.shape(s.getCond()) + ", " +
             in(s.getOnTrue()) + ", " + dims.shape(s.getOnTrue()) + ", " + in(s.getOnFalse()) +
             ", " + dims.shape(s.getOnFalse()) + ", " + ptr(res()) + ", " + dims.shape(res()) + ");");
        return llvm::Error::success();
      })
      .Case([&](SoftmaxOp s) {
        auto t = s.getInput().getType();
        call("exec::softmax(" + in(s.getInput()) + ", " + dims.shape(s.getInput()) + ", " +
             std::to_string(normalizedAxis(s.getAxis(), t.getRank())) + ", " + ptr(res()) +
             ", c.pool);");
        return llvm::Error::success();
      })
      .Case([&](LayerNormOp l) {
        auto t = l.getInput().getType();
        int64_t axis = normalizedAxis(l.getAxis(), t.getRank());
        call("kernels::layerNorm(" + in(l.getInput()) + ", " + in(l.getGamma()) + ", " +
             in(l.getBeta()) + ", " + ptr(res()) + ", " + dims.product(l.getInput(), 0, axis) +
             ", " + dims.product(l.getInput(), axis, t.getRank()) + ", " +
             floatLit(l.getEpsilon().convertToDouble()) + ", c.pool);");
        return llvm::Error::success();
      })
      .Case([&](AddLayerNormOp l) -> llvm::Error {
        // x + residual with one of them possibly a trailing block of the
        // other ([T, D] positions into [B, T, D] tokens): one call per block.
        Value x = l.getInput(), r = l.getResidual();
        auto t = cast<RankedTensorType>(l.getResult().getType());
        if (x.getType() != t)
          std::swap(x, r);
        auto rt = cast<RankedTensorType>(r.getType());
        bool trailing = dims.sameSizes(x, l.getResult()) && rt.getRank() >= 1 &&
                        rt.getRank() <= t.getRank() && t.getRank() >= 1;
        for (int64_t d = 0; trailing && d < rt.getRank(); ++d)
          trailing = dims.equal(r, d, l.getResult(), t.getRank() - rt.getRank() + d);
        if (!trailing)
          return fail(op, "this broadcast of the residual is not supported");
        std::string width = std::to_string(t.getDimSize(t.getRank() - 1));
        std::string blockRows = dims.product(r, 0, rt.getRank() - 1);
        std::string blocks = dims.product(l.getResult(), 0, t.getRank() - rt.getRank());
        std::string sum = l.getSum().use_empty() ? "nullptr" : ptr(l.getSum());
        std::string args = in(l.getGamma()) + ", " + in(l.getBeta()) + ", ";
        std::string eps = floatLit(l.getEpsilon().convertToDouble());
        if (dims.sameSizes(r, l.getResult())) {
          call("kernels::addLayerNorm(" + in(x) + ", " + in(r) + ", " + args + ptr(l.getResult()) +
               ", " + sum + ", " + blockRows + ", " + width + ", " + eps + ", c.pool);");
          return llvm::Error::success();
        }
        std::string block = "(" + blockRows + " * " + width + ")";
        line("for (int64_t b = 0, n = " + block + "; b < " + blocks + "; ++b)");
        call("  kernels::addLayerNorm(" + in(x) + " + b * n, " + in(r) + ", " + args +
             ptr(l.getResult()) + " + b * n, " +
             (sum == "nullptr" ? sum : sum + " + b * n") + ", " + blockRows + ", " + width +
             ", " + eps + ", c.pool);");
        return llvm::Error::success();
      })
      .Case([&](LinearOp l) {
        return emitLinear(op, l.getInput(), l.getWeight(), l.getTransposeWeight(), l.getBias(),
                          l.getActivation(), l.getResidual(), res());
      })
      .Case([&](AttentionOp a) { return emitAttention(a); })
      .Case([&](FusedElementwiseOp f) { return emitFused(f); })
      .Case([&](TransposeOp t) {
        std::string perm;
        for (int64_t p : t.getPermutation())
          perm += (perm.empty() ? "" : ", ") + std::to_string(p);
        call("exec::transpose(" + in(t.getInput()) + ", " + dims.shape(t.getInput()) +
             ", std::array<int64_t, " + std::to_string(t.getPermutation().size()) + ">{" + perm +
             "}.data(), " + ptr(res()) + ", " +
             std::to_string(elemSize(t.getType().getElementType())) + ");");
        return llvm::Error::success();
      })
      .Case([&](ConcatOp cc) {
        std::string ptrs, shapes;
        for (Value v : cc.getInputs()) {
          ptrs += (ptrs.empty() ? "" : ", ") + in(v);
          shapes += (shapes.empty() ? "" : ", ") + dims.shape(v);
        }
        auto t = cc.getType();
        line("{");
        line("  const void* ins[] = {" + ptrs + "};");
        line("  const exec::Shape shapes[] = {" + shapes + "};");
        call("  exec::concat(ins, shapes, " + std::to_string(cc.getInputs().size()) + ", " +
             std::to_string(normalizedAxis(cc.getAxis(), t.getRank())) + ", " + ptr(res()) + ", " +
             std::to_string(elemSize(t.getElementType())) + ");");
        line("}");
        return llvm::Error::success();
      })
      .Case([&](SplitOp s) {
        auto t = s.getInput().getType();
        int64_t axis = normalizedAxis(s.getAxis(), t.getRank()), start = 0;
        for (auto [r, size] : llvm::zip(s.getResults(), s.getSizes())) {
          if (!r.use_empty() && !aliases.count(r))
            call("exec::slice(" + in(s.getInput()) + ", " + dims.shape(s.getInput()) + ", " +
                 std::to_string(axis) + ", " + std::to_string(start) + ", " + std::to_string(size) +
                 ", " + ptr(r) + ", " + std::to_string(elemSize(t.getElementType())) + ");");
          start += size;
        }
        return llvm::Error::success();
      })
      .Case([&](SliceOp s) {
        auto t = s.getInput().getType();
        int64_t axis = normalizedAxis(s.getAxis(), t.getRank());
        if (s.getLength())
          dims.checks.push_back({"(" + std::to_string(s.getStart()) + " + " + dims.dim(res(), axis) +
                                     " > " + dims.dim(s.getInput(), axis) + ")",
                                 "a slice past the end of its axis (a length over the table?)"});
        call("exec::slice(" + in(s.getInput()) + ", " + dims.shape(s.getInput()) + ", " +
             std::to_string(axis) + ", " + std::to_string(s.getStart()) + ", " +
             dims.dim(res(), axis) + ", " + ptr(res()) + ", " +
             std::to_string(elemSize(t.getElementType())) + ");");
        return llvm::Error::success();
      })
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>([&](auto r) {
        auto t = r.getInput().getType();
        uint32_t mask = 0;
        for (int64_t a : r.getAxes())
          mask |= 1u << normalizedAxis(a, t.getRank());
        std::string kind = isa<ReduceSumOp>(op) ? "kSum" : isa<ReduceMeanOp>(op) ? "kMean" : "kMax";
        call("exec::reduce(exec::ReduceOp::" + kind + ", " + in(r.getInput()) + ", " +
             dims.shape(r.getInput()) + ", " + std::to_string(mask) + "u, " + ptr(res()) + ");");
        return llvm::Error::success();
      })
      .Case([&](KeyPaddingMaskOp k) {
        call("exec::keyPaddingMask(" + in(k.getTokens()) + ", " + dims.numel(k.getTokens()) + ", " +
             std::to_string(k.getPadId()) + ", " + ptr(res()) + ");");
        return llvm::Error::success();
      })
      .Case([&](CausalMaskOp m) {
        call("exec::causalMask(" + dims.index(m.getQueryLen()) + ", " + dims.index(m.getKeyLen()) +
             ", " + ptr(res()) + ");");
        return llvm::Error::success();
      })
      .Case([&](PositionalEncodingOp p) {
        std::string offset = p.getOffset() ? dims.index(p.getOffset()) : "0";
        call("exec::positionalEncoding(" + dims.index(p.getLength()) + ", " + offset + ", " +
             std::to_string(p.getType().getDimSize(1)) + ", " + ptr(res()) + ");");
        return llvm::Error::success();
      })
      .Default([&](Operation *) { return fail(op, "is not supported"); });
}

llvm::Error Emitter::emitLinear(Operation *op, Value x, Value w, bool transW, Value bias,
                                Activation act, Value residual, Value result) {
  auto xt = cast<RankedTensorType>(x.getType()), wt = cast<RankedTensorType>(w.getType());
  auto rt = cast<RankedTensorType>(result.getType());
  if (wt.getRank() != 2)
    return fail(op, "a weight of rank " + llvm::Twine(wt.getRank()) + " is not supported");
  int64_t k = xt.getDimSize(xt.getRank() - 1), n = rt.getDimSize(rt.getRank() - 1);
  if (ShapedType::isDynamic(k) || ShapedType::isDynamic(n))
    return fail(op, "dynamic contraction or output sizes are not supported");
  if (residual && !dims.sameSizes(residual, result))
    return fail(op, "a residual that may broadcast is not supported");
  if (xt.getRank() == 0)
    return fail(op, "a rank-0 input is not supported");
  std::string m = dims.product(x, 0, xt.getRank() - 1);
  std::optional<math::Kind> kind = activationKind(act);
  std::string activation = kind ? math::info(*kind).enumerator : "kNone";
  std::string epi = "kernels::GemmEpilogue{" + (bias ? in(bias) : std::string("nullptr")) +
                    ", kernels::Activation::" + activation + ", " +
                    (residual ? in(residual) : std::string("nullptr")) + ", 0}";
  std::string sizes = m + ", " + std::to_string(n) + ", " + std::to_string(k);
  if (auto p = rootOf(w).getDefiningOp<ParamOp>()) {
    int pack = tables.pack(tables.paramIndex.lookup(p.getName()), transW, k, n);
    call("kernels::gemm(" + sizes + ", " + in(x) + ", " + std::to_string(k) +
         ", false, *c.packed[" + std::to_string(pack) + "], " + ptr(result) + ", " +
         std::to_string(n) + ", " + epi + ", c.pool);");
  } else {
    call("kernels::gemm(" + sizes + ", " + in(x) + ", " + std::to_string(k) + ", false, " + in(w) +
         ", " + std::to_string(transW ? k : n) + ", " + (transW ? "true" : "false") + ", " +
         ptr(result) + ", " + std::to_string(n) + ", " + epi + ", c.pool);");
  }
  flops("2.0 * " + m + " * " + std::to_string(n * k));
  return llvm::Error::success();
}

llvm::Error Emitter::emitAttention(AttentionOp op) {
  if (op.getMask())
    return fail(op, "a boolean mask operand is not supported (causal and key_padding are)");
  if (op.getDropoutRate().convertToDouble() > 0.0)
    return fail(op, "attention dropout (training) is not supported");
  Value q = op.getQuery(), k = op.getKey();
  int64_t headDim = cast<RankedTensorType>(q.getType()).getDimSize(3);
  if (ShapedType::isDynamic(headDim) || headDim < 1 || headDim > 256)
    return fail(op, "the head size must be static, 1 to 256");
  if (cast<RankedTensorType>(op.getValue().getType()).getDimSize(3) != headDim ||
      cast<RankedTensorType>(k.getType()).getDimSize(3) != headDim)
    return fail(op, "query, key and value head sizes must be equal");
  std::string b = dims.dim(q, 0), h = dims.dim(q, 1), sq = dims.dim(q, 2), sk = dims.dim(k, 2);
  line("{");
  line("  kernels::AttentionArgs args;");
  line("  args.batch = " + b + "; args.heads = " + h + "; args.seqQ = " + sq +
       "; args.seqK = " + sk + "; args.headDim = " + std::to_string(headDim) + ";");
  line("  args.q = {" + attentionTensor(q) + "};");
  line("  args.k = {" + attentionTensor(k) + "};");
  line("  args.v = {" + attentionTensor(op.getValue()) + "};");
  line("  args.out = " + ptr(op.getResult()) + ";");
  if (auto it = aliases.find(op.getResult()); it != aliases.end()) {
    // Written as [B, S, H, D], the transpose that follows.
    std::string row = std::to_string(headDim) + " * " + h;
    line("  args.outBatchStride = " + sq + " * " + row + "; args.outHeadStride = " +
         std::to_string(headDim) + "; args.outRowStride = " + row + ";");
  }
  line("  args.scale = " + floatLit(op.getScale().convertToDouble()) + ";");
  if (op.getCausal())
    line("  args.causal = true;");
  if (Value kp = op.getKeyPadding())
    line("  args.keyMask = " + in(kp) + ";");
  if (Value bias = op.getBias()) {
    // [.., Sq, Sk] broadcast to [B, H, Sq, Sk]: stride 0 where broadcast.
    auto t = cast<RankedTensorType>(bias.getType());
    if (t.getRank() < 2 || (!t.isDynamicDim(t.getRank() - 1) && t.getDimSize(t.getRank() - 1) == 1))
      return fail(op, "the bias must hold one value per key (a last dimension of Sk)");
    dims.checks.push_back({"(" + dims.dim(bias, t.getRank() - 1) + " != " + sk + ")",
                           "an attention bias whose last dimension is not the key length"});
    std::string strides[3] = {"0", "0", "0"};
    std::string inner = dims.dim(bias, t.getRank() - 1);
    int64_t slot = 2;
    for (int64_t d = t.getRank() - 2; d >= 0 && slot >= 0; --d, --slot) {
      bool one = !t.isDynamicDim(d) && t.getDimSize(d) == 1;
      if (!one)
        strides[slot] = inner;
      inner = "(" + inner + " * " + dims.dim(bias, d) + ")";
    }
    line("  args.additive = " + in(bias) + ";");
    line("  args.additiveBatchStride = " + strides[0] + "; args.additiveHeadStride = " +
         strides[1] + "; args.additiveRowStride = " + strides[2] + ";");
  }
  line("  if (rt::Status s = kernels::attention(args, c.pool); !s.isOk()) return s;");
  ++kernelCalls;
  line("}");
  flops("4.0 * " + b + " * " + h + " * " + sq + " * " + sk + " * " + std::to_string(headDim));
  return llvm::Error::success();
}
