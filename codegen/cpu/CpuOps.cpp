//===- CpuOps.cpp - one call of runtime/kernels or runtime/exec per op ----===//

#include "codegen/cpu/CpuPrinter.h"

#include "codegen/lowering/OpMath.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::cpu;
using namespace mlir::transfuse::emit;
namespace tfk = mlir::transfuse::kernel;

namespace {

/// The parameter a view is (through reshapes), or null.
tfk::ParamOp paramOf(Value v) {
  while (auto r = v.getDefiningOp<tfk::ReshapeOp>())
    v = r.getSource();
  return v.getDefiningOp<tfk::ParamOp>();
}

std::string boolLit(bool b) { return b ? "true" : "false"; }

} // namespace

void CpuPrinter::spell(Operation *, const emit::KernelCall &c, const std::string &indent) {
  // Where each shared call lives on the CPU: runtime/exec's generic ops run
  // on the calling thread, runtime/kernels' take the call's thread pool.
  static const llvm::StringMap<bool> kInKernels = {
      {"addLayerNorm", true},   {"addRmsNorm", true},          {"stateWrite", false},
      {"stateRead", false},
      {"keyPaddingMask", false}, {"causalMask", false},        {"positionalEncoding", false},
      {"pool", true},            {"poolGrad", true},           {"l2Normalize", true},
      {"l2NormalizeGrad", true}, {"unfold", false},           {"unfoldGrad", false},
      {"rotary", false}};
  auto where = kInKernels.find(c.callee);
  assert(where != kInKernels.end() && "a shared kernel call the cpu backend does not place");
  const bool kernels = where != kInKernels.end() && where->second;
  std::vector<std::string> args = c.args;
  if (kernels)
    args.push_back("c.pool");
  call(indent + (kernels ? "kernels::" : "exec::") + c.callee + "(" + llvm::join(args, ", ") +
       ");");
}

llvm::Error CpuPrinter::printKernel(Operation *op) {
  auto done = [] { return llvm::Error::success(); };
  return llvm::TypeSwitch<Operation *, llvm::Error>(op)
      .Case([&](tfk::GemmOp g) { return printGemm(g); })
      .Case([&](tfk::MatmulOp m) {
        Value lhs = m.getLhs(), rhs = m.getRhs(), out = m.getOut();
        std::string k = dims.dim(lhs, m.getTransposeLhs() ? rankOf(lhs) - 2 : rankOf(lhs) - 1);
        call("exec::matmul(" + ptr(lhs) + ", " + dims.shape(lhs) + ", " +
             boolLit(m.getTransposeLhs()) + ", " + ptr(rhs) + ", " + dims.shape(rhs) + ", " +
             boolLit(m.getTransposeRhs()) + ", " + ptr(out) + ", " + dims.shape(out) +
             ", c.pool" + (module.bf16Products ? ", true" : "") + ");");
        flops("2.0 * " + dims.numel(out) + " * " + k);
        return done();
      })
      .Case([&](tfk::AttentionOp a) { return printAttention(a); })
      .Case([&](tfk::DecodeAttentionOp a) { return printDecodeAttention(a); })
      .Case([&](tfk::LayerNormOp l) {
        Value x = l.getInput();
        int64_t axis = l.getAxis();
        call(std::string(l.getRms() ? "kernels::rmsNorm(" : "kernels::layerNorm(") + ptr(x) + ", " + ptr(l.getGamma()) + ", " + ptr(l.getBeta()) +
             ", " + ptr(l.getOut()) + ", " + dims.product(x, 0, axis) + ", " +
             dims.product(x, axis, rankOf(x)) + ", " + floatLit(l.getEpsilon().convertToDouble()) +
             ", c.pool);");
        return done();
      })
      .Case([&](tfk::ElementwiseOp e) { return printElementwise(e); })
      .Case([&](tfk::GatherOp e) {
        Value table = e.getIns()[0], ids = e.getIns()[1];
        auto t = cast<MemRefType>(table.getType());
        checked("exec::gather(" + ptr(table) + ", " + std::to_string(t.getDimSize(0)) + ", " +
                std::to_string(t.getDimSize(1)) + ", " + ptr(ids) + ", " + dims.shape(ids) + ", " +
                quote(e.getWhat()) + ", " + ptr(e.getOuts()[0]) + ")");
        return done();
      })
      .Case<tfk::CrossEntropyOp, tfk::CrossEntropyGradOp>([&](auto e) {
        constexpr bool grad = std::is_same_v<decltype(e), tfk::CrossEntropyGradOp>;
        Value logits = e.getIns()[0], labels = e.getIns()[1];
        labelsPerRow(logits, labels, e.getWhat());
        auto t = cast<MemRefType>(logits.getType());
        checked(std::string(grad ? "exec::crossEntropyGrad(" : "exec::crossEntropyMean(") +
                ptr(logits) + ", " + ptr(labels) + ", " + dims.numel(labels) + ", " +
                std::to_string(t.getDimSize(t.getRank() - 1)) + ", " +
                floatLit(e.getLabelSmoothing().convertToDouble()) + ", " +
                std::to_string(e.getIgnoreIndex()) + ", " + quote(e.getWhat()) + ", " +
                (grad ? ptr(e.getIns()[2]) + ", " : "") + ptr(e.getOuts()[0]) + ", c.pool)");
        return done();
      })
      .Case([&](tfk::EmbeddingGradOp e) {
        auto table = cast<MemRefType>(e.getOuts()[0].getType());
        checked("exec::embeddingGrad(" + ptr(e.getIns()[0]) + ", " + dims.numel(e.getIns()[0]) +
                ", " + ptr(e.getIns()[1]) + ", " + std::to_string(table.getDimSize(0)) + ", " +
                std::to_string(table.getDimSize(1)) + ", " + quote(e.getWhat()) + ", " +
                ptr(e.getOuts()[0]) + ")");
        return done();
      })
      .Case([&](tfk::ActivationGradOp e) {
        // The verifier refuses activation none.
        const std::optional<math::Kind> kind = activationKind(e.getActivation());
        Value out = e.getOuts()[0];
        call("exec::activationGrad(exec::ElementwiseKind::" +
             std::string(math::info(*kind).enumerator) + ", " + ptr(e.getIns()[0]) + ", " +
             ptr(e.getIns()[1]) + ", " + ptr(out) + ", " + dims.numel(out) + ", c.pool);");
        return done();
      })
      .Case([&](tfk::LayerNormGradOp e) {
        Value x = e.getIns()[0];
        int64_t axis = e.getAxis();
        call(std::string(e.getRms() ? "kernels::rmsNormGrad(" : "kernels::layerNormGrad(") + ptr(x) + ", " + ptr(e.getIns()[1]) + ", " +
             ptr(e.getIns()[2]) + ", " + ptr(e.getOuts()[0]) + ", " + ptr(e.getOuts()[1]) + ", " +
             ptr(e.getOuts()[2]) + ", " + dims.product(x, 0, axis) + ", " +
             dims.product(x, axis, rankOf(x)) + ", " +
             floatLit(e.getEpsilon().convertToDouble()) + ", c.pool);");
        return done();
      })
      .Case([&](tfk::AttentionGradOp e) {
        attentionGradArgs(e, "kernels::AttentionGradArgs");
        if (module.bf16Products)
          line("  args.forward.bf16 = true;");
        call("  if (rt::Status s = kernels::attentionBackward(args, c.pool); !s.isOk()) return s;");
        line("}");
        return done();
      })
      .Case([&](tfk::DropoutOp e) {
        Value out = e.getOuts()[0];
        call("exec::dropout(" + ptr(e.getIns()[0]) + ", " + ptr(out) + ", " + dims.numel(out) +
             ", " + floatLit(e.getRate().convertToDouble()) + ", " + std::to_string(e.getSeed()) +
             "ull + c.seed, " + dropoutStep(e) + ", " + std::to_string(e.getStream()) +
             ", c.pool);");
        return done();
      })
      .Case([&](tfk::ExpandOp e) {
        call("exec::expand(" + ptr(e.getIns()[0]) + ", " + dims.shape(e.getIns()[0]) + ", " +
             ptr(e.getOuts()[0]) + ", " + dims.shape(e.getOuts()[0]) + ");");
        return done();
      })
      .Case([&](tfk::WeightGradOp e) {
        Value x = e.getIns()[0], g = e.getIns()[1];
        call("exec::weightGrad(" + ptr(x) + ", " + dims.shape(x) + ", " + ptr(g) + ", " +
             dims.shape(g) + ", " + ptr(e.getOuts()[0]) + ", c.pool" +
             (module.bf16Products ? ", true" : "") + ");");
        flops("2.0 * " + dims.numel(x) + " * " + dims.dim(g, rankOf(x) - 1));
        return done();
      })
      .Case([&](tfk::SliceGradOp e) {
        Value g = e.getIns()[0], out = e.getOuts()[0];
        call("exec::sliceGrad(" + ptr(g) + ", " + dims.shape(g) + ", " +
             std::to_string(e.getAxis()) + ", " + sliceStart(e, e.getStart()) + ", " + ptr(out) +
             ", " + dims.shape(out) + ");");
        return done();
      })
      .Case([&](tfk::BinaryOp e) {
        Value a = e.getIns()[0], b = e.getIns()[1], out = e.getOuts()[0];
        call("exec::binary(exec::ElementwiseKind::" + e.getKind().str() + ", " + ptr(a) + ", " +
             dims.shape(a) + ", " + ptr(b) + ", " + dims.shape(b) + ", " + ptr(out) + ", " +
             dims.shape(out) + ", c.pool);");
        return done();
      })
      .Case([&](tfk::UnaryOp e) {
        Value out = e.getOuts()[0];
        call("exec::unary(exec::ElementwiseKind::" + e.getKind().str() + ", " +
             ptr(e.getIns()[0]) + ", " + ptr(out) + ", " + dims.numel(out) + ", c.pool);");
        return done();
      })
      .Case([&](tfk::ScaleOp e) {
        Value out = e.getOuts()[0];
        call("exec::scale(" + ptr(e.getIns()[0]) + ", " +
             floatLit(e.getFactor().convertToDouble()) + ", " + ptr(out) + ", " +
             dims.numel(out) + ", c.pool);");
        return done();
      })
      .Case([&](tfk::SelectOp e) {
        ValueRange ins = e.getIns();
        Value out = e.getOuts()[0];
        call("exec::select(" + ptr(ins[0]) + ", " + dims.shape(ins[0]) + ", " + ptr(ins[1]) +
             ", " + dims.shape(ins[1]) + ", " + ptr(ins[2]) + ", " + dims.shape(ins[2]) + ", " +
             ptr(out) + ", " + dims.shape(out) + ");");
        return done();
      })
      .Case([&](tfk::SoftmaxOp e) {
        Value x = e.getIns()[0];
        call("exec::softmax(" + ptr(x) + ", " + dims.shape(x) + ", " +
             std::to_string(e.getAxis()) + ", " + ptr(e.getOuts()[0]) + ", c.pool);");
        return done();
      })
      .Case([&](tfk::TransposeOp e) {
        std::string perm;
        for (int64_t i : e.getPermutation())
          perm += (perm.empty() ? "" : ", ") + std::to_string(i);
        Value x = e.getIns()[0], out = e.getOuts()[0];
        call("exec::transpose(" + ptr(x) + ", " + dims.shape(x) + ", std::array<int64_t, " +
             std::to_string(e.getPermutation().size()) + ">{" + perm + "}.data(), " + ptr(out) +
             ", " + elemBytes(out) + ");");
        return done();
      })
      .Case([&](tfk::ConcatOp e) {
        std::string ptrs, shapes;
        for (Value v : e.getIns()) {
          ptrs += (ptrs.empty() ? "" : ", ") + ptr(v);
          shapes += (shapes.empty() ? "" : ", ") + dims.shape(v);
        }
        Value out = e.getOuts()[0];
        line("{");
        line("  const void* ins[] = {" + ptrs + "};");
        line("  const exec::Shape shapes[] = {" + shapes + "};");
        call("  exec::concat(ins, shapes, " + std::to_string(e.getIns().size()) + ", " +
             std::to_string(e.getAxis()) + ", " + ptr(out) + ", " + elemBytes(out) + ");");
        line("}");
        return done();
      })
      .Case([&](tfk::SliceOp e) {
        Value x = e.getIns()[0], out = e.getOuts()[0];
        int64_t axis = e.getAxis();
        call("exec::slice(" + ptr(x) + ", " + dims.shape(x) + ", " + std::to_string(axis) + ", " +
             sliceStart(e, e.getStart()) + ", " + dims.dim(out, axis) + ", " + ptr(out) + ", " +
             elemBytes(out) + ");");
        return done();
      })
      .Case([&](tfk::ReduceOp e) {
        Value x = e.getIns()[0];
        call("exec::reduce(exec::ReduceOp::" + e.getKind().str() + ", " + ptr(x) + ", " +
             dims.shape(x) + ", " + std::to_string(e.getAxesMask()) + "u, " + ptr(e.getOuts()[0]) +
             ", c.pool);");
        return done();
      })
      .Case([&](tfk::CopyOp e) {
        Value out = e.getOuts()[0];
        call("exec::copyBytes(" + ptr(e.getIns()[0]) + ", " + ptr(out) + ", " +
             dims.numel(e.getIns()[0]) + " * " + elemBytes(out) + ");");
        return done();
      })
      .Default([&](Operation *) { return fail(op, "is not a kernel op the cpu printer knows"); });
}

llvm::Error CpuPrinter::printGemm(tfk::GemmOp g) {
  Value x = g.getInput(), w = g.getWeight(), result = g.getOut();
  const GemmShape s = gemmShape(g);
  const std::string &m = s.m;
  const int64_t n = s.n, k = s.k;
  const bool transW = s.transW;
  // bias, activation, residual, ldr: GemmEpilogue's first fields, and
  // Int8Epilogue's.
  const std::string linear = (g.getBias() ? ptr(g.getBias()) : "nullptr") +
                             ", kernels::Activation::" + s.activation + ", " +
                             (g.getResidual() ? ptr(g.getResidual()) : "nullptr") + ", 0";
  std::string epi = "kernels::GemmEpilogue{" + linear;
  if (g.getDerivative() != Activation::None) {
    if (!cast<MemRefType>(g.getPre().getType()).getLayout().isIdentity())
      return fail(g, "reads its derivative's input through a strided view (rows of N are expected)");
    epi += ", kernels::Activation::" + activationEnumerator(g.getDerivative()) + ", " +
           ptr(g.getPre()) + ", 0, " + floatLit(g.getScale().convertToDouble());
  } else if (g.getInvFreq()) {  // the fields up to the rotary's, then its own
    epi += ", kernels::Activation::kNone, nullptr, 0, 1.0f, " + ptr(g.getInvFreq()) +
           ", size_t(" + s.seqLen + "), size_t(" + s.positionOffset + ")";
  }
  epi += "}";
  std::string sizes = m + ", " + std::to_string(n) + ", " + std::to_string(k);
  // C's row length: the result's (half the product's when gated).
  const std::string ldc = std::to_string(g.getGated() ? n / 2 : n);
  const std::string pairs = "kernels::GemmPairs{kernels::GemmPairs::Kind(" +
                            std::to_string(s.pairKind) + "), " + std::to_string(s.headDim) + ", " +
                            std::to_string(s.pairColumns) + "}";
  if (g.getPacked()) {
    tfk::ParamOp p = paramOf(w);
    if (!p)
      return fail(g, "a packed weight that is not a parameter");
    // --dtype int8: a linear layer's product (its column pairs included;
    // not the backward's derivative) on int8 weights quantized at load.
    const bool int8 = module.int8 && g.getDerivative() == Activation::None;
    // --dtype bf16 (cpu): every product, the backward's too, on weights
    // rounded to bf16 when packed.
    const bool bf16 = module.bf16Products;
    int pack = module.pack({module.paramIndex.lookup(p.getName()), transW, k, n, s.pairKind,
                            s.headDim, s.pairColumns, int8, bf16});
    if (bf16) {
      call("kernels::gemmBf16(" + m + ", " + ptr(x) + ", " + std::to_string(k) +
           ", *c.bf16Packed[" + std::to_string(pack) + "], " + epi + ", " + ptr(result) + ", " +
           ldc + ", c.pool);");
      return llvm::Error::success();
    }
    if (int8) {
      std::string int8Epi = "kernels::Int8Epilogue{" + linear;
      if (g.getInvFreq())
        int8Epi += ", " + ptr(g.getInvFreq()) + ", int64_t(" + s.seqLen + "), int64_t(" +
                   s.positionOffset + ")";
      call("kernels::gemmInt8(" + m + ", " + ptr(x) + ", " + std::to_string(k) +
           ", *c.quantized[" + std::to_string(pack) + "], " + int8Epi + "}, " + ptr(result) +
           ", " + ldc + ", c.pool);");
      return llvm::Error::success();
    }
    call("kernels::gemm(" + sizes + ", " + ptr(x) + ", " + std::to_string(k) +
         ", false, *c.packed[" + std::to_string(pack) + "], " + ptr(result) + ", " + ldc + ", " +
         epi + ", c.pool);");
  } else {
    call(std::string(module.bf16Products ? "kernels::gemmBf16(" : "kernels::gemm(") + sizes +
         ", " + ptr(x) + ", " + std::to_string(k) + ", false, " +
         ptr(w) + ", " + std::to_string(transW ? k : n) + ", " + boolLit(transW) + ", " +
         ptr(result) + ", " + ldc + ", " + epi + ", c.pool" +
         (s.pairKind ? ", " + pairs : std::string()) + ");");
  }
  return llvm::Error::success();
}

llvm::Error CpuPrinter::printDecodeAttention(tfk::DecodeAttentionOp op) {
  if (llvm::Error e = decodeAttentionArgs(op, "kernels::DecodeAttentionArgs"))
    return e;
  // Rows of equal ids share their cache (beams over one source).
  auto keyState = op.getKey().getDefiningOp<tfk::StateOp>();
  auto valueState = op.getValue().getDefiningOp<tfk::StateOp>();
  if (keyState && valueState)
    line("  args.keyRowIds = c.stateRowIds[" +
         std::to_string(module.stateIndex.lookup(keyState.getName())) +
         "]; args.valueRowIds = c.stateRowIds[" +
         std::to_string(module.stateIndex.lookup(valueState.getName())) + "];");
  call("  if (rt::Status s = kernels::decodeAttention(args, c.pool); !s.isOk()) return s;");
  line("}");
  return llvm::Error::success();
}

llvm::Error CpuPrinter::printAttention(tfk::AttentionOp op) {
  attentionArgs(op, "kernels::AttentionArgs");
  if (module.bf16Products)  // the two products on bf16 operands (docs/bf16.md)
    line("  args.bf16 = true;");
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
  call("  if (rt::Status s = kernels::attention(args, c.pool); !s.isOk()) return s;");
  line("}");
  return llvm::Error::success();
}

