//===- CudaOps.cpp - the cuda target: one launch per kernel op ------------===//
//
// It prints the graphs of every fusion strategy: GEMMs with epilogues and
// batched matmuls, attention, norms, softmax, embeddings, masks, positional
// tables, transposes and copies, constants, the decoding entries (the KV
// cache in device memory: state writes and reads, decode attention) and the
// train step's backward (Train.cuh, the attention backward, GEMMs with A
// transposed or the derivative epilogue).
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/CudaPrinter.h"

#include "codegen/lowering/OpMath.h"
#include "runtime/exec/ModelDesc.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::cuda;
using namespace mlir::transfuse::emit;
namespace tfk = mlir::transfuse::kernel;

std::string CudaPrinter::storageType(Type t) const {
  if (module.bf16 && t.isF32())
    return "tc::bf16";
  return EntryPrinter::storageType(t);
}

std::string CudaPrinter::entryDescTail() const {
  std::string fn = func::FuncOp(func).getName().str(); // an op handle: a copy
  return std::string(", ") + (usesState ? "true" : "false") + ", " +
         std::to_string(deviceChecks.size()) + ", checks_" + fn + ", host_" + fn;
}

std::string CudaPrinter::entryFunctions(const std::string &declarations) const {
  // The kernels' check words are read by the runtime after the run (or its
  // CUDA graph's replay) and turned into the error here; a replay skips the
  // run's host statements, so they stand again in host_<fn>.
  std::string fn = func::FuncOp(func).getName().str(), messages;
  for (auto [i, message] : llvm::enumerate(deviceChecks))
    messages += "  if (checks[" + std::to_string(i) + "] != 0xffffffffu)\n    return " + message +
                ";\n";
  return "rt::Status checks_" + fn + "([[maybe_unused]] const uint32_t* checks) {\n" + messages +
         "  return rt::Status::ok();\n}\n\n" + "void host_" + fn +
         "([[maybe_unused]] const exec::Call& c) {\n" + declarations + hostStatements + "}\n\n";
}

std::string CudaPrinter::constantArray(const std::string &name, DenseElementsAttr attr) {
  // In device memory, its address looked up where it is used.
  Type e = attr.getElementType();
  if (module.bf16 && e.isF32()) {
    // bf16 bits (rounded to nearest even), as raw words: a __device__
    // array needs constant initializers.
    std::string s = "__device__ const __nv_bfloat16_raw " + name + "[] = {";
    int64_t i = 0;
    for (const APFloat &v : attr.getValues<APFloat>()) {
      APFloat b = v;
      bool lost = false;
      b.convert(APFloat::BFloat(), APFloat::rmNearestTiesToEven, &lost);
      s += (i++ % 8 ? ", " : "\n    ") + std::string("{") +
           std::to_string(b.bitcastToAPInt().getZExtValue()) + "}";
    }
    module.constants += s + "};\n";
    return "reinterpret_cast<const tc::bf16*>(tx::deviceArray(" + name + "))";
  }
  module.constants += "__device__ const " + std::string(cType(e)) + " " + name + "[] = {" +
                      constantValues(attr) + "};\n";
  return "tx::deviceArray(" + name + ")";
}

void CudaPrinter::launch(Operation *op, const std::string &kernel, const std::string &launch,
                     const std::string &indent) {
  line(indent + "if (rt::Status s = tx::launched(" + launch + ", " + quote(kernel) + ", " +
       quote(locOf(op)) + "); !s) return s;");
  ++kernelCalls;
}

void CudaPrinter::spell(Operation *op, const KernelCall &c, const std::string &indent) {
  std::vector<std::string> args = c.args;
  args.push_back("tx::stream()");
  launch(op, op->getName().stripDialect().str(), "tc::" + c.callee + "(" + llvm::join(args, ", ") + ")",
         indent);
}

llvm::Error CudaPrinter::printKernel(Operation *op) {
  if (std::optional<llvm::Error> e = printTrainKernel(op))
    return std::move(*e);
  auto done = [] { return llvm::Error::success(); };
  return llvm::TypeSwitch<Operation *, llvm::Error>(op)
      .Case([&](tfk::GemmOp g) { return printGemm(g); })
      .Case([&](tfk::MatmulOp m) { return printMatmul(m); })
      .Case([&](tfk::AttentionOp a) { return printAttention(a); })
      .Case([&](tfk::DecodeAttentionOp a) { return printDecodeAttention(a); })
      .Case([&](tfk::LayerNormOp l) {
        Value x = l.getInput();
        int64_t axis = l.getAxis();
        launch(l, "layer_norm",
               std::string(l.getRms() ? "tc::addRmsNorm(" : "tc::addLayerNorm(") + ptr(x) +
                   ", nullptr, " + ptr(l.getGamma()) + ", " +
                   ptr(l.getBeta()) + ", " + ptr(l.getOut()) + ", nullptr, " +
                   dims.product(x, 0, axis) + ", " + dims.product(x, axis, rankOf(x)) + ", " +
                   floatLit(l.getEpsilon().convertToDouble()) + ", tx::stream())");
        return done();
      })
      .Case([&](tfk::ElementwiseOp e) { return printElementwise(e); })
      .Case([&](tfk::GatherOp e) -> llvm::Error {
        // An id out of range lowers its check word to the first bad position.
        Value table = e.getIns()[0], ids = e.getIns()[1];
        auto t = cast<MemRefType>(table.getType());
        std::string vocab = std::to_string(t.getDimSize(0));
        std::string word = deviceCheck(quote(e.getWhat()), "the token id at flat position", vocab);
        if (word.empty())
          return fail(e, "more checked kernels than the device's check words");
        launch(e, "gather",
               "tc::gather(" + ptr(table) + ", " + vocab + ", " + std::to_string(t.getDimSize(1)) +
                   ", " + ptr(ids) + ", " + dims.numel(ids) + ", " + ptr(e.getOuts()[0]) + ", " +
                   word + ", tx::stream())");
        return done();
      })
      .Case([&](tfk::CopyOp e) {
        Value out = e.getOuts()[0];
        launch(e, "copy",
               "cudaMemcpyAsync(" + ptr(out) + ", " + ptr(e.getIns()[0]) + ", " +
                   dims.numel(e.getIns()[0]) + " * " + storageBytes(out) +
                   ", cudaMemcpyDeviceToDevice, tx::stream())");
        return done();
      })
      .Case([&](tfk::SliceOp e) {
        // Row-major copies of blocks: `rows` = the product of the dimensions
        // before the axis, a row of each block its extent from the axis on.
        Value x = e.getIns()[0], out = e.getOuts()[0];
        int64_t axis = e.getAxis();
        std::string rows = dims.product(out, 0, axis), size = storageBytes(out);
        std::string outRow = "(" + dims.product(out, axis, rankOf(out)) + " * " + size + ")";
        std::string inner = dims.product(x, axis + 1, rankOf(out));
        std::string inRow = "(" + dims.product(x, axis, rankOf(out)) + " * " + size + ")";
        launch(e, "slice",
               "cudaMemcpy2DAsync(" + ptr(out) + ", " + outRow + ", reinterpret_cast<const char*>(" +
                   ptr(x) + ") + " + sliceStart(e, e.getStart()) + " * " + inner + " * " + size +
                   ", " + inRow + ", " + outRow + ", " + rows +
                   ", cudaMemcpyDeviceToDevice, tx::stream())");
        return done();
      })
      .Case([&](tfk::ConcatOp e) {
        // Each input's rows into its columns of the output's rows.
        Value out = e.getOuts()[0];
        int64_t axis = e.getAxis();
        std::string rows = dims.product(out, 0, axis), size = storageBytes(out);
        std::string outRow = "(" + dims.product(out, axis, rankOf(out)) + " * " + size + ")";
        std::string offset = "0";
        for (Value v : e.getIns()) {
          std::string inRow = "(" + dims.product(v, axis, rankOf(v)) + " * " + size + ")";
          launch(e, "concat",
                 "cudaMemcpy2DAsync(reinterpret_cast<char*>(" + ptr(out) + ") + " + offset + ", " +
                     outRow + ", " + ptr(v) + ", " + inRow + ", " + inRow + ", " + rows +
                     ", cudaMemcpyDeviceToDevice, tx::stream())");
          offset += " + " + inRow;
        }
        return done();
      })
      .Case([&](tfk::SelectOp e) {
        std::vector<std::string> forms;
        for (Value v : e.getIns())
          forms.push_back(readForm(v, e.getOuts()[0]));
        return pointwise(e, e.getIns(), forms, "    const float t0 = x0 ? x1 : x2;\n", "t0",
                         e.getOuts()[0]);
      })
      .Case([&](tfk::SoftmaxOp e) -> llvm::Error {
        Value x = e.getIns()[0];
        int64_t axis = e.getAxis();
        if (axis != rankOf(x) - 1)
          return fail(e, "a softmax over an axis other than the last has no cuda form yet");
        launch(e, "softmax",
               "tc::softmax(" + ptr(x) + ", " + ptr(e.getOuts()[0]) + ", " +
                   dims.product(x, 0, axis) + ", " + dims.dim(x, axis) + ", tx::stream())");
        return done();
      })
      .Case([&](tfk::TransposeOp e) {
        std::string perm;
        for (int64_t i : e.getPermutation())
          perm += (perm.empty() ? "" : ", ") + std::to_string(i);
        Value out = e.getOuts()[0];
        line("{");
        line("  const exec::Shape xs = " + dims.shape(e.getIns()[0]) + ";");
        line("  const int64_t perm[] = {" + perm + "};");
        launch(e, "transpose",
               "tc::transpose(" + ptr(e.getIns()[0]) + ", xs.dims, xs.rank, perm, " + ptr(out) +
                   ", " + storageBytes(out) + ", tx::stream())",
               "  ");
        line("}");
        return done();
      })
      .Case<tfk::BinaryOp, tfk::UnaryOp, tfk::ScaleOp>([&](auto e) -> llvm::Error {
        // One formula of ElementwiseMath.h, the inputs broadcast as NumPy does.
        Value out = e.getOuts()[0];
        std::vector<std::string> forms, args;
        for (auto [i, v] : llvm::enumerate(e.getIns())) {
          forms.push_back(readForm(v, out));
          args.push_back("x" + std::to_string(i));
        }
        std::string expr;
        if constexpr (std::is_same_v<decltype(e), tfk::ScaleOp>) {
          expr = "tm::mul(x0, " + floatLit(e.getFactor().convertToDouble()) + ")";
        } else {
          // The verifier ensures the kind names a formula of its arity.
          const math::Kind named = *math::kindNamed(e.getKind().str());
          expr = "tm::" + std::string(math::info(named).scalar) + "(" + llvm::join(args, ", ") + ")";
        }
        return pointwise(e, e.getIns(), forms, "    const float t0 = " + expr + ";\n", "t0", out);
      })
      .Default([&](Operation *) {
        return fail(op, "has no cuda form yet (the cuda target prints inference graphs)");
      });
}

std::string CudaPrinter::deviceCheck(const std::string &what, const std::string &item,
                                 const std::string &vocab) {
  if (deviceChecks.size() >= (size_t)::transfuse::exec::kDeviceCheckWords)
    return "";
  std::string word = std::to_string(deviceChecks.size());
  deviceChecks.push_back("rt::Status::error(std::string(" + what + ") + \": " + item +
                         " \" + std::to_string(checks[" + word +
                         "]) + \" is outside the vocabulary [0, " + vocab + ")\")");
  return "c.deviceChecks + " + word;
}

std::optional<llvm::Error> CudaPrinter::printTrainKernel(Operation *op) {
  // The backward's kernels (runtime/kernels/cuda/Train.cuh, Attention.cuh);
  // those with scratch take it from tx::Scratch for the launch.
  auto scratch = [&](const std::string &bytes, const std::string &kernel) {
    line("  tx::Scratch work;");
    line("  if (rt::Status s = work.allocate(" + bytes + ", " + quote(kernel) +
         "); !s) return s;");
  };
  using Result = std::optional<llvm::Error>;
  auto done = [] { return Result(llvm::Error::success()); };
  return llvm::TypeSwitch<Operation *, Result>(op)
      .Case<tfk::CrossEntropyOp, tfk::CrossEntropyGradOp>([&](auto e) -> Result {
        // Labels out of range lower a check word to their row; nothing is written.
        constexpr bool grad = std::is_same_v<decltype(e), tfk::CrossEntropyGradOp>;
        std::string k = grad ? "cross_entropy_grad" : "cross_entropy";
        Value logits = e.getIns()[0], labels = e.getIns()[1], out = e.getOuts()[0];
        labelsPerRow(logits, labels, e.getWhat());
        auto t = cast<MemRefType>(logits.getType());
        std::string vocab = std::to_string(t.getDimSize(t.getRank() - 1));
        std::string word = deviceCheck(quote(e.getWhat()), "the label at row", vocab);
        if (word.empty())
          return fail(e, "more checked kernels than the device's check words");
        std::string rows = dims.numel(labels);
        std::string args = ptr(logits) + ", " + ptr(labels) + ", " + rows + ", " + vocab + ", " +
                           floatLit(e.getLabelSmoothing().convertToDouble()) + ", " +
                           std::to_string(e.getIgnoreIndex()) + ", ";
        line("{");
        scratch(grad ? "sizeof(uint32_t)" : "(" + rows + " + 1) * sizeof(float)", k);
        launch(e, k,
               grad ? "tc::crossEntropyGrad(" + args + ptr(e.getIns()[2]) + ", " + ptr(out) +
                          ", " + word + ", work.as<void>(), tx::stream())"
                    : "tc::crossEntropyMean(" + args + ptr(out) + ", " + word +
                          ", work.as<void>(), tx::stream())",
               "  ");
        line("}");
        return done();
      })
      .Case([&](tfk::EmbeddingGradOp e) -> Result {
        Value out = e.getOuts()[0];
        auto table = cast<MemRefType>(out.getType());
        std::string vocab = std::to_string(table.getDimSize(0));
        std::string word = deviceCheck(quote(e.getWhat()), "the token id at flat position", vocab);
        if (word.empty())
          return fail(e, "more checked kernels than the device's check words");
        launch(e, "embedding_grad",
               "tc::embeddingGrad(" + ptr(e.getIns()[0]) + ", " + dims.numel(e.getIns()[0]) +
                   ", " + ptr(e.getIns()[1]) + ", " + vocab + ", " +
                   std::to_string(table.getDimSize(1)) + ", " + ptr(out) + ", " + word +
                   ", tx::stream())");
        return done();
      })
      .Case([&](tfk::ActivationGradOp e) -> Result {
        // out = g · f'(x), ElementwiseMath.h's derivative.
        // The verifier refuses activation none.
        const char *derivative = math::derivativeName(*activationKind(e.getActivation()));
        return pointwise(e, e.getIns(), {"full", "full"},
                         "    const float t0 = tm::mul(x1, tm::" + std::string(derivative) +
                             "(x0));\n",
                         "t0", e.getOuts()[0]);
      })
      .Case([&](tfk::ExpandOp e) -> Result {
        return pointwise(e, e.getIns(), {"strided"}, "    const float t0 = x0;\n", "t0",
                         e.getOuts()[0]);
      })
      .Case([&](tfk::LayerNormGradOp e) -> Result {
        Value x = e.getIns()[0];
        int64_t axis = e.getAxis();
        std::string rows = dims.product(x, 0, axis);
        line("{");
        scratch("2 * " + rows + " * sizeof(float)", "layer_norm_grad");
        launch(e, "layer_norm_grad",
               std::string(e.getRms() ? "tc::rmsNormGrad(" : "tc::layerNormGrad(") + ptr(x) +
                   ", " + ptr(e.getIns()[1]) + ", " +
                   ptr(e.getIns()[2]) + ", " + ptr(e.getOuts()[0]) + ", " + ptr(e.getOuts()[1]) +
                   ", " + ptr(e.getOuts()[2]) + ", " + rows + ", " +
                   dims.product(x, axis, rankOf(x)) + ", " +
                   floatLit(e.getEpsilon().convertToDouble()) + ", work.as<float>(), tx::stream())",
               "  ");
        line("}");
        return done();
      })
      .Case([&](tfk::AttentionGradOp e) -> Result {
        Value q = e.getIns()[0];
        if (cast<MemRefType>(q.getType()).getDimSize(3) > 256)
          return fail(e, "the cuda attention kernels take head dimensions up to 256");
        attentionGradArgs(e, "tc::AttentionGradArgs");
        scratch("2 * " + dims.dim(q, 0) + " * " + dims.dim(q, 1) + " * " + dims.dim(q, 2) +
                    " * sizeof(float)",
                "attention_grad");
        launch(e, "attention_grad", "tc::attentionBackward(args, work.as<float>(), tx::stream())",
               "  ");
        line("}");
        return done();
      })
      .Case([&](tfk::DropoutOp e) -> Result {
        Value out = e.getOuts()[0];
        launch(e, "dropout",
               "tc::dropout(" + ptr(e.getIns()[0]) + ", " + ptr(out) + ", " + dims.numel(out) +
                   ", " + floatLit(e.getRate().convertToDouble()) + ", " +
                   std::to_string(e.getSeed()) + "ull + c.seed, " + dropoutStep(e) + ", " +
                   std::to_string(e.getStream()) + ", 0, tx::stream())");
        return done();
      })
      .Case([&](tfk::WeightGradOp e) -> Result {
        // out [K, N] = xᵀ·g over all rows: one GEMM, A transposed.
        Value x = e.getIns()[0], g = e.getIns()[1], out = e.getOuts()[0];
        const int64_t rank = rankOf(x);
        std::string kk = dims.dim(x, rank - 1), n = dims.dim(g, rank - 1);
        std::string rows = dims.product(x, 0, rank - 1);
        line("{");
        line("  " + cudaArgs("GemmArgs") + " g;");
        line("  g.m = " + kk + "; g.n = " + n + "; g.k = " + rows + ";");
        line("  g.a = " + ptr(x) + "; g.lda = " + kk + "; g.transA = true;");
        line("  g.b = " + ptr(g) + "; g.ldb = " + n + ";");
        line("  g.c = " + ptr(out) + "; g.ldc = " + n + ";");
        launch(e, "weight_grad", "tc::gemm(g, tx::stream())", "  "); // no rows: zeros
        line("}");
        flops("2.0 * " + dims.numel(x) + " * " + n);
        return done();
      })
      .Case([&](tfk::SliceGradOp e) -> Result {
        // Zeros, then g's rows into [start, start + n) along the axis.
        Value g = e.getIns()[0], out = e.getOuts()[0];
        int64_t axis = e.getAxis();
        std::string inner = dims.product(out, axis + 1, rankOf(out)), size = storageBytes(out);
        std::string inRow = "(" + dims.product(g, axis, rankOf(out)) + " * " + size + ")";
        std::string outRow = "(" + dims.product(out, axis, rankOf(out)) + " * " + size + ")";
        launch(e, "slice_grad",
               "cudaMemsetAsync(" + ptr(out) + ", 0, " + dims.numel(out) + " * " + size +
                   ", tx::stream())");
        launch(e, "slice_grad",
               "cudaMemcpy2DAsync(reinterpret_cast<char*>(" + ptr(out) + ") + " +
                   sliceStart(e, e.getStart()) + " * " + inner + " * " + size + ", " + outRow +
                   ", " + ptr(g) + ", " + inRow + ", " + inRow + ", " +
                   dims.product(out, 0, axis) + ", cudaMemcpyDeviceToDevice, tx::stream())");
        return done();
      })
      .Case([&](tfk::ReduceOp e) -> Result {
        line("{");
        line("  const exec::Shape xs = " + dims.shape(e.getIns()[0]) + ";");
        launch(e, "reduce",
               "tc::reduce(tc::ReduceKind::" + e.getKind().str() + ", " + ptr(e.getIns()[0]) +
                   ", xs.dims, xs.rank, " + std::to_string(e.getAxesMask()) + "u, " +
                   ptr(e.getOuts()[0]) + ", tx::stream())",
               "  ");
        line("}");
        return done();
      })
      .Default([](Operation *) { return Result(); });
}

llvm::Error CudaPrinter::printGemm(tfk::GemmOp g) {
  // Weights are used as stored ([N, K] with transpose_weight): no packing.
  Value x = g.getInput(), w = g.getWeight(), result = g.getOut();
  const GemmShape s = gemmShape(g);
  const std::string &m = s.m, &activation = s.activation;
  const int64_t n = s.n, k = s.k;
  const bool transW = s.transW;
  line("{");
  line("  " + cudaArgs("GemmArgs") + " g;");
  line("  g.m = " + m + "; g.n = " + std::to_string(n) + "; g.k = " + std::to_string(k) + ";");
  line("  g.a = " + ptr(x) + "; g.lda = " + std::to_string(k) + ";");
  line("  g.b = " + ptr(w) + "; g.ldb = " + std::to_string(transW ? k : n) + "; g.transB = " +
       (transW ? "true" : "false") + ";");
  line("  g.c = " + ptr(result) + "; g.ldc = " + std::to_string(g.getGated() ? n / 2 : n) + ";");
  if (s.pairKind) {
    line("  g.pairs = {transfuse::kernels::GemmPairs::Kind(" + std::to_string(s.pairKind) + "), " +
         std::to_string(s.headDim) + ", " + std::to_string(s.pairColumns) + "};");
    if (g.getInvFreq())
      line("  g.invFreq = " + ptr(g.getInvFreq()) + "; g.seqLen = size_t(" + s.seqLen +
           "); g.positionOffset = size_t(" + s.positionOffset + ");");
  }
  if (g.getBias())
    line("  g.bias = " + ptr(g.getBias()) + ";");
  if (activation != "kNone")
    line("  g.activation = tc::Activation::" + activation + ";");
  if (g.getResidual())
    line("  g.residual = " + ptr(g.getResidual()) + ";");
  if (g.getDerivative() != Activation::None) {
    // The backward's epilogue: C = (scale·A·B)·f'(pre).
    if (!cast<MemRefType>(g.getPre().getType()).getLayout().isIdentity())
      return fail(g, "reads its derivative's input through a strided view (rows of N are expected)");
    line("  g.derivative = tc::Activation::" + activationEnumerator(g.getDerivative()) +
         "; g.pre = " + ptr(g.getPre()) + "; g.scale = " +
         floatLit(g.getScale().convertToDouble()) + ";");
  }
  launch(g, "gemm", "tc::gemm(g, tx::stream())", "  ");
  line("}");
  return llvm::Error::success();
}

llvm::Error CudaPrinter::printMatmul(tfk::MatmulOp m) {
  // [..., M, K] · [..., K, N] (or [..., N, K] with transpose_rhs) as one
  // batched GEMM: an operand whose batch dimensions are the output's steps
  // through them, one without batch dimensions repeats.
  Value lhs = m.getLhs(), rhs = m.getRhs(), out = m.getOut();
  int64_t rank = rankOf(out);
  auto batchStride = [&](Value v, std::string &stride) {
    int64_t r = rankOf(v);
    if (r == 2) {
      stride = "0";
      return true;
    }
    if (r != rank)
      return false;
    for (int64_t d = 0; d < rank - 2; ++d)
      if (!tfk::sameSize(v, d, out, d))
        return false;
    stride = dims.product(v, r - 2, r);
    return true;
  };
  std::string strideA, strideB;
  if (!batchStride(lhs, strideA) || !batchStride(rhs, strideB))
    return fail(m, "a matmul whose operands broadcast only some batch dimensions has no cuda "
                   "form yet");
  bool transA = m.getTransposeLhs(), transB = m.getTransposeRhs();
  int64_t lr = rankOf(lhs);
  std::string mm = dims.dim(lhs, transA ? lr - 1 : lr - 2), k = dims.dim(lhs, transA ? lr - 2 : lr - 1);
  std::string n = dims.dim(out, rank - 1);
  line("{");
  line("  " + cudaArgs("GemmArgs") + " g;");
  line("  g.m = " + mm + "; g.n = " + n + "; g.k = " + k + ";");
  line("  g.a = " + ptr(lhs) + "; g.lda = " + (transA ? mm : k) + (transA ? "; g.transA = true;" : ";"));
  line("  g.b = " + ptr(rhs) + "; g.ldb = " + (transB ? k : n) + "; g.transB = " +
       (transB ? "true" : "false") + ";");
  line("  g.c = " + ptr(out) + "; g.ldc = " + n + ";");
  line("  g.batch = " + dims.product(out, 0, rank - 2) + "; g.strideA = " + strideA +
       "; g.strideB = " + strideB + "; g.strideC = " + mm + " * " + n + ";");
  launch(m, "matmul", "tc::gemm(g, tx::stream())", "  ");
  line("}");
  flops("2.0 * " + dims.numel(out) + " * " + k);
  return llvm::Error::success();
}

llvm::Error CudaPrinter::printDecodeAttention(tfk::DecodeAttentionOp op) {
  // As on the CPU, without the row ids: rows that share a cache each read it.
  if (llvm::Error e = decodeAttentionArgs(op, cudaArgs("DecodeAttentionArgs")))
    return e;
  launch(op, "decode_attention", "tc::decodeAttention(args, tx::stream())", "  ");
  line("}");
  return llvm::Error::success();
}

llvm::Error CudaPrinter::printAttention(tfk::AttentionOp op) {
  if (op.getBias())
    return fail(op, "an additive attention mask has no cuda form yet");
  if (cast<MemRefType>(op.getQuery().getType()).getDimSize(3) > 256)
    return fail(op, "the cuda attention kernel takes head dimensions up to 256");
  attentionArgs(op, cudaArgs("AttentionArgs"));
  dropoutArgs("args", op.getDropoutRate().convertToDouble(), op.getDropoutSeed(),
              op.getDropoutStream());
  launch(op, "attention", "tc::attention(args, tx::stream())", "  ");
  line("}");
  return llvm::Error::success();
}

llvm::Error CudaPrinter::pointwise(Operation *op, ValueRange inputs, ArrayRef<std::string> forms,
                                   const std::string &compute, const std::string &y, Value out) {
  // One thread per output element (grid-stride): input k is read whole
  // ("full"), as a trailing block repeated over the leading rows
  // ("trailing": [S, D] into [B, S, D]) or as one value ("splat").
  // "strided": NumPy broadcasting, each input's element strides over the
  // output's dimensions (exec::Strides), the offsets summed per element.
  if (cast<MemRefType>(out.getType()).getElementType() != Float32Type::get(op->getContext()))
    return fail(op, "a pointwise result that is not f32 has no cuda form yet");
  std::string name = "fe" + std::to_string(module.counter++);
  std::string params, loads, args, offsets;
  bool strided = false;
  for (auto [i, input] : llvm::enumerate(inputs)) {
    std::string idx = std::to_string(i);
    Type element = cast<MemRefType>(input.getType()).getElementType();
    std::string type = storageType(element);
    if (type.empty())
      return fail(op, "a pointwise input of an element type the cuda target does not hold");
    params += "const " + type + "* __restrict__ in" + idx + ", ";
    // Floats are read into fp32 (from bf16 storage too); ids and masks as they are.
    std::string load = element.isF32() ? "const float x" + idx + " = tc::toFloat("
                                       : "const auto x" + idx + " = (";
    args += ptr(input) + ", ";
    if (forms[i].empty() || forms[i] == "strided") {
      strided = true;
      params += "exec::Strides st" + idx + ", ";
      args += "exec::Strides(" + dims.shape(input) + ", os), ";
      offsets += "      o" + idx + " += i * st" + idx + ".step[d];\n";
      loads += "    " + load + "in" + idx + "[o" + idx + "]);\n";
    } else if (forms[i] == "splat") {
      loads += "    " + load + "in" + idx + "[0]);\n";
    } else if (forms[i] == "full") {
      loads += "    " + load + "in" + idx + "[e]);\n";
    } else if (forms[i] == "trailing") {
      loads += "    " + load + "in" + idx + "[e % block" + idx + "]);\n";
      params += "int64_t block" + idx + ", ";
      args += dims.numel(input) + ", ";
    } else {
      return fail(op, "an input read as '" + forms[i] + "' has no cuda form yet");
    }
  }
  std::string index;
  if (strided) {
    params += "exec::Shape os, ";
    args += "os, ";
    std::string zero;
    for (auto [i, f] : llvm::enumerate(forms))
      if (f.empty() || f == "strided")
        zero += (zero.empty() ? "" : ", ") + ("o" + std::to_string(i)) + " = 0";
    index = "    int64_t rem = e, " + zero + ";\n    for (int d = os.rank - 1; d >= 0; --d) {\n"
            "      const int64_t i = rem % os.dims[d];\n      rem /= os.dims[d];\n" +
            offsets + "    }\n";
  }
  const std::string outType = storageType(Float32Type::get(op->getContext()));
  module.code += "__global__ void " + name + "(" + params + outType +
                   "* __restrict__ out, int64_t total) {\n"
                   "  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;\n"
                   "       e += int64_t(gridDim.x) * blockDim.x) {\n" +
                   index + loads + compute + "    out[e] = tc::fromFloat<" + outType + ">(" + y +
                   ");\n  }\n}\n\n";
  line("{");
  line("  const int64_t total = " + dims.numel(out) + ";");
  if (strided)
    line("  const exec::Shape os = " + dims.shape(out) + ";");
  line("  if (total > 0) {");
  line("    " + name + "<<<tx::blocksFor(total), tx::kThreadsPerBlock, 0, tx::stream()>>>(" + args +
       ptr(out) + ", total);");
  launch(op, "pointwise " + name, "cudaGetLastError()", "    ");
  line("  }");
  line("}");
  return llvm::Error::success();
}

std::string CudaPrinter::readForm(Value input, Value out) {
  auto t = cast<MemRefType>(input.getType());
  int64_t r = t.getRank(), rank = rankOf(out);
  if (t.hasStaticShape() && t.getNumElements() == 1)
    return "splat";
  if (r > rank)
    return "strided";
  for (int64_t d = 0; d < r; ++d)
    if (!tfk::sameSize(input, d, out, rank - r + d))
      return "strided";
  return r == rank ? "full" : "trailing";
}

llvm::Error CudaPrinter::printElementwise(tfk::ElementwiseOp op) {
  std::string compute, y;
  if (llvm::Error e = regionBody(op, /*vector=*/false, "    ", compute, y))
    return e;
  // The lowering's forms where it chose Highway code; NumPy broadcasting
  // otherwise (selects, masks, any broadcast).
  std::vector<std::string> forms;
  for (Attribute kind : op.getKinds())
    forms.push_back(op.getVector() ? cast<StringAttr>(kind).getValue().str() : "strided");
  return pointwise(op, op.getInputs(), forms, compute, y, op.getOut());
}
