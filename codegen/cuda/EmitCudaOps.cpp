//===- EmitCudaOps.cpp - the cuda target: one launch per kernel op --------===//
//
// The CUDA backend prints the entry points of the kernel IR with the CPU
// printer's storage, sizes and checks (codegen/cpu/Emitter.h): what differs
// is this file, one launch of runtime/kernels/cuda per kernel op on the
// calling thread's stream, each followed by its launch check, and
// tfk.elementwise regions and lone pointwise ops as generated __global__
// kernels. It prints the graphs of every fusion strategy: GEMMs with
// epilogues and batched matmuls, attention, norms, softmax, embeddings,
// masks, positional tables, transposes and copies, constants, the
// decoding entries (the KV cache in device memory: state writes and reads,
// decode attention) and the train step's backward (Train.cuh, the attention
// backward, GEMMs with A transposed or the derivative epilogue).
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/Emitter.h"

#include "codegen/cpu/CppText.h"
#include "codegen/lowering/OpMath.h"
#include "runtime/exec/Generated.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::cpu;
namespace tfk = mlir::transfuse::kernel;

void Emitter::launch(Operation *op, const std::string &kernel, const std::string &launch,
                     const std::string &indent) {
  line(indent + "if (rt::Status s = tx::launched(" + launch + ", " + quote(kernel) + ", " +
       quote(locOf(op)) + "); !s) return s;");
  ++kernelCalls;
}

llvm::Error Emitter::emitCudaOp(Operation *op) {
  return llvm::TypeSwitch<Operation *, llvm::Error>(op)
      .Case([&](tfk::ConstantOp c) { return constant(c); }) // a __device__ array
      .Case([&](tfk::ExecOp e) { return emitCudaExec(e); })
      .Case([&](tfk::GemmOp g) { return emitCudaGemm(g); })
      .Case([&](tfk::MatmulOp m) { return emitCudaMatmul(m); })
      .Case([&](tfk::AttentionOp a) { return emitCudaAttention(a); })
      .Case([&](tfk::AddLayerNormOp l) -> llvm::Error {
        // As on the CPU: one call per block when the residual is a
        // trailing block of the output ([T, D] positions into [B, T, D]).
        Value x = l.getInput(), r = l.getResidual(), out = l.getOut();
        int64_t rank = rankOf(out), rr = rankOf(r);
        bool same = rr == rank;
        for (int64_t d = 0; same && d < rank; ++d)
          same = tfk::sameSize(r, d, out, d);
        std::string width = std::to_string(cast<MemRefType>(out.getType()).getDimSize(rank - 1));
        std::string rows = dims.product(r, 0, rr - 1);
        std::string sum = l.getSum() ? ptr(l.getSum()) : "nullptr";
        std::string eps = floatLit(l.getEpsilon().convertToDouble());
        std::string rest = ptr(l.getGamma()) + ", " + ptr(l.getBeta()) + ", ";
        if (same) {
          launch(l, "add_layer_norm",
                 "tc::addLayerNorm(" + ptr(x) + ", " + ptr(r) + ", " + rest + ptr(out) + ", " +
                     sum + ", " + rows + ", " + width + ", " + eps + ", tx::stream())");
          return llvm::Error::success();
        }
        line("for (int64_t b = 0, n = (" + rows + " * " + width + "); b < " +
             dims.product(out, 0, rank - rr) + "; ++b)");
        launch(l, "add_layer_norm",
               "tc::addLayerNorm(" + ptr(x) + " + b * n, " + ptr(r) + ", " + rest + ptr(out) +
                   " + b * n, " + (sum == "nullptr" ? sum : sum + " + b * n") + ", " + rows +
                   ", " + width + ", " + eps + ", tx::stream())",
               "  ");
        return llvm::Error::success();
      })
      .Case([&](tfk::LayerNormOp l) {
        Value x = l.getInput();
        int64_t axis = l.getAxis();
        launch(l, "layer_norm",
               "tc::addLayerNorm(" + ptr(x) + ", nullptr, " + ptr(l.getGamma()) + ", " +
                   ptr(l.getBeta()) + ", " + ptr(l.getOut()) + ", nullptr, " +
                   dims.product(x, 0, axis) + ", " + dims.product(x, axis, rankOf(x)) + ", " +
                   floatLit(l.getEpsilon().convertToDouble()) + ", tx::stream())");
        return llvm::Error::success();
      })
      .Case([&](tfk::ElementwiseOp e) { return emitCudaElementwise(e); })
      .Case([&](tfk::StateOp st) -> llvm::Error {
        // Held in device memory at its capacity by the tf_state.
        if (!st.getType().hasStaticShape())
          return fail(st, "a state tensor's type must be its capacity (static sizes)");
        usesState = true;
        return llvm::Error::success();
      })
      .Case([&](tfk::StateWriteOp w) -> llvm::Error {
        // The cache on the device; its extents and row ids on the host.
        Value in = w.getInput();
        auto state = w.getState().getDefiningOp<tfk::StateOp>();
        if (!state)
          return fail(w, "writes a buffer that is not a tfk.state");
        std::string position = dims.index(w.getPosition()), n = dims.dim(in, 2);
        std::string index = std::to_string(tables.stateIndex.lookup(state.getName()));
        std::string extent = "c.stateExtents[" + index + "]";
        launch(w, "state_write",
               "tc::stateWrite({" + attentionTensor(in) + "}, " + dims.dim(in, 0) + ", " + n +
                   ", " + stateTensor(w.getState(), w.getKeys()) + ", " + position +
                   ", tx::stream())");
        hostStatement(extent + " = std::max<int64_t>(" + extent + ", " + position + " + " + n + ");");
        hostStatement("exec::freshRowIds(c.stateRowIds[" + index + "], " + dims.dim(in, 0) +
                      ", c.stateSerial);");
        return llvm::Error::success();
      })
      .Case([&](tfk::StateReadOp r) {
        Value out = r.getOut();
        launch(r, "state_read",
               "tc::stateRead(" + stateTensor(r.getState(), r.getKeys()) + ", " +
                   dims.dim(out, 0) + ", " + dims.dim(out, 2) + ", " + ptr(out) +
                   ", tx::stream())");
        return llvm::Error::success();
      })
      .Case([&](tfk::AdvanceOp a) {
        hostStatement("*c.stateLength += " + dims.index(a.getCount()) + ";");
        return llvm::Error::success();
      })
      .Case([&](tfk::DecodeAttentionOp a) { return emitCudaDecodeAttention(a); })
      .Default([&](Operation *) {
        return fail(op, "has no cuda form yet (the cuda target prints inference graphs)");
      });
}

llvm::Error Emitter::emitCudaExec(tfk::ExecOp e) {
  StringRef k = e.getKernel();
  ValueRange ins = e.getIns();
  Value out = e.getOuts()[0];
  if (k == "gather") {
    // An id out of range lowers its check word to the first bad position.
    auto table = cast<MemRefType>(ins[0].getType());
    auto what = e->getAttrOfType<StringAttr>("what");
    std::string vocab = std::to_string(table.getDimSize(0));
    std::string word = deviceCheck(quote(what ? what.getValue() : "an operand"),
                                   "the token id at flat position", vocab);
    if (word.empty())
      return fail(e, "more checked kernels than the device's check words");
    launch(e, "gather",
           "tc::gather(" + ptr(ins[0]) + ", " + vocab + ", " +
               std::to_string(table.getDimSize(1)) + ", " + ptr(ins[1]) + ", " +
               dims.numel(ins[1]) + ", " + ptr(out) + ", " + word + ", tx::stream())");
  } else if (k == "key_padding_mask") {
    launch(e, "key_padding_mask",
           "tc::keyPaddingMask(" + ptr(ins[0]) + ", " + dims.numel(ins[0]) + ", " +
               std::to_string(intAttr(e, "pad_id")) + ", " + ptr(out) + ", tx::stream())");
  } else if (k == "positional_encoding") {
    std::string offset = ins.size() > 1 ? dims.index(ins[1]) : "0";
    launch(e, "positional_encoding",
           "tc::positionalEncoding(" + dims.index(ins[0]) + ", " + offset + ", " +
               dims.dim(out, 1) + ", " + ptr(out) + ", tx::stream())");
  } else if (k == "copy") {
    launch(e, "copy",
           "cudaMemcpyAsync(" + ptr(out) + ", " + ptr(ins[0]) + ", " + dims.numel(ins[0]) + " * " +
               storageBytes(out) + ", cudaMemcpyDeviceToDevice, tx::stream())");
  } else if (k == "slice" || k == "concat") {
    // Row-major copies of blocks: `rows` = the product of the dimensions
    // before the axis, a row of each block its extent from the axis on.
    int64_t axis = intAttr(e, "axis");
    std::string rows = dims.product(out, 0, axis), size = storageBytes(out);
    std::string outRow = "(" + dims.product(out, axis, rankOf(out)) + " * " + size + ")";
    if (k == "slice") {
      std::string start = std::to_string(intAttr(e, "start"));
      if (ins.size() > 1)
        start = "(" + start + " + " + dims.index(ins[1]) + ")";
      std::string inner = dims.product(ins[0], axis + 1, rankOf(out));
      std::string inRow = "(" + dims.product(ins[0], axis, rankOf(out)) + " * " + size + ")";
      launch(e, "slice",
             "cudaMemcpy2DAsync(" + ptr(out) + ", " + outRow + ", reinterpret_cast<const char*>(" +
                 ptr(ins[0]) + ") + " + start + " * " + inner + " * " + size + ", " + inRow +
                 ", " + outRow + ", " + rows + ", cudaMemcpyDeviceToDevice, tx::stream())");
    } else {
      std::string offset = "0";
      for (Value v : ins) {
        std::string inRow = "(" + dims.product(v, axis, rankOf(v)) + " * " + size + ")";
        launch(e, "concat",
               "cudaMemcpy2DAsync(reinterpret_cast<char*>(" + ptr(out) + ") + " + offset + ", " +
                   outRow + ", " + ptr(v) + ", " + inRow + ", " + inRow + ", " + rows +
                   ", cudaMemcpyDeviceToDevice, tx::stream())");
        offset += " + " + inRow;
      }
    }
  } else if (k == "select") {
    std::vector<std::string> forms;
    for (Value v : ins)
      forms.push_back(cudaReadForm(v, out));
    return cudaPointwise(e, ins, forms, "    const float t0 = x0 ? x1 : x2;\n", "t0", out);
  } else if (k == "causal_mask") {
    launch(e, "causal_mask",
           "tc::causalMask(" + dims.index(ins[0]) + ", " + dims.index(ins[1]) + ", " + ptr(out) +
               ", tx::stream())");
  } else if (k == "softmax") {
    int64_t axis = intAttr(e, "axis"), rank = rankOf(ins[0]);
    if (axis != rank - 1)
      return fail(e, "a softmax over an axis other than the last has no cuda form yet");
    launch(e, "softmax",
           "tc::softmax(" + ptr(ins[0]) + ", " + ptr(out) + ", " + dims.product(ins[0], 0, axis) +
               ", " + dims.dim(ins[0], axis) + ", tx::stream())");
  } else if (k == "transpose") {
    std::string perm;
    auto p = e->getAttrOfType<DenseI64ArrayAttr>("permutation").asArrayRef();
    for (int64_t i : p)
      perm += (perm.empty() ? "" : ", ") + std::to_string(i);
    line("{");
    line("  const exec::Shape xs = " + dims.shape(ins[0]) + ";");
    line("  const int64_t perm[] = {" + perm + "};");
    launch(e, "transpose",
           "tc::transpose(" + ptr(ins[0]) + ", xs.dims, xs.rank, perm, " + ptr(out) + ", " +
               storageBytes(out) + ", tx::stream())",
           "  ");
    line("}");
  } else if (k == "binary" || k == "unary" || k == "scale") {
    // One formula of ElementwiseMath.h, the inputs broadcast as NumPy does.
    std::vector<std::string> forms, args;
    for (auto [i, v] : llvm::enumerate(ins)) {
      forms.push_back(cudaReadForm(v, out));
      args.push_back("x" + std::to_string(i));
    }
    std::string expr;
    if (k == "scale") {
      expr = "tm::mul(x0, " + floatLit(e->getAttrOfType<FloatAttr>("factor").getValueAsDouble()) + ")";
    } else {
      StringRef kind = e->getAttrOfType<StringAttr>("kind").getValue();
      std::optional<math::Kind> named = math::kindNamed(kind);
      if (!named || math::info(*named).arity != (int)ins.size())
        return fail(e, "an unknown elementwise kind '" + kind + "'");
      expr = "tm::" + std::string(math::info(*named).scalar) + "(" + llvm::join(args, ", ") + ")";
    }
    return cudaPointwise(e, ins, forms, "    const float t0 = " + expr + ";\n", "t0", out);
  } else {
    return emitCudaTrainExec(e);
  }
  return llvm::Error::success();
}

std::string Emitter::deviceCheck(const std::string &what, const std::string &item,
                                 const std::string &vocab) {
  if (deviceChecks.size() >= (size_t)::transfuse::exec::kDeviceCheckWords)
    return "";
  std::string word = std::to_string(deviceChecks.size());
  deviceChecks.push_back("rt::Status::error(std::string(" + what + ") + \": " + item +
                         " \" + std::to_string(checks[" + word +
                         "]) + \" is outside the vocabulary [0, " + vocab + ")\")");
  return "c.deviceChecks + " + word;
}

llvm::Error Emitter::emitCudaTrainExec(tfk::ExecOp e) {
  // The backward's kernels (runtime/kernels/cuda/Train.cuh, Attention.cuh);
  // those with scratch take it from tx::Scratch for the launch.
  StringRef k = e.getKernel();
  ValueRange ins = e.getIns();
  Value out = e.getOuts()[0];
  auto kind = [&] { return e->getAttrOfType<StringAttr>("kind").str(); };
  auto scratch = [&](const std::string &bytes, const std::string &kernel) {
    line("  tx::Scratch work;");
    line("  if (rt::Status s = work.allocate(" + bytes + ", " + quote(kernel) +
         "); !s) return s;");
  };
  if (k == "cross_entropy" || k == "cross_entropy_grad") {
    // Labels out of range lower a check word to their row; nothing is written.
    const bool grad = k == "cross_entropy_grad";
    labelsPerRow(e);
    auto logits = cast<MemRefType>(ins[0].getType());
    std::string vocab = std::to_string(logits.getDimSize(logits.getRank() - 1));
    std::string what = quote(e->getAttrOfType<StringAttr>("what").getValue());
    std::string word = deviceCheck(what, "the label at row", vocab);
    if (word.empty())
      return fail(e, "more checked kernels than the device's check words");
    std::string rows = dims.numel(ins[1]);
    std::string args = ptr(ins[0]) + ", " + ptr(ins[1]) + ", " + rows + ", " + vocab + ", " +
                       floatLit(e->getAttrOfType<FloatAttr>("label_smoothing").getValueAsDouble()) +
                       ", " + std::to_string(intAttr(e, "ignore_index")) + ", ";
    line("{");
    scratch(grad ? "sizeof(uint32_t)" : "(" + rows + " + 1) * sizeof(float)", k.str());
    launch(e, k.str(),
           grad ? "tc::crossEntropyGrad(" + args + ptr(ins[2]) + ", " + ptr(out) + ", " + word +
                      ", work.as<void>(), tx::stream())"
                : "tc::crossEntropyMean(" + args + ptr(out) + ", " + word +
                      ", work.as<void>(), tx::stream())",
           "  ");
    line("}");
  } else if (k == "embedding_grad") {
    auto table = cast<MemRefType>(out.getType());
    std::string vocab = std::to_string(table.getDimSize(0));
    std::string word = deviceCheck(quote(e->getAttrOfType<StringAttr>("what").getValue()),
                                   "the token id at flat position", vocab);
    if (word.empty())
      return fail(e, "more checked kernels than the device's check words");
    launch(e, "embedding_grad",
           "tc::embeddingGrad(" + ptr(ins[0]) + ", " + dims.numel(ins[0]) + ", " + ptr(ins[1]) +
               ", " + vocab + ", " + std::to_string(table.getDimSize(1)) + ", " + ptr(out) + ", " +
               word + ", tx::stream())");
  } else if (k == "activation_grad") {
    // out = g · f'(x), ElementwiseMath.h's derivative.
    std::optional<math::Kind> named = math::kindNamed(kind());
    const char *derivative = !named                        ? nullptr
                             : *named == math::Kind::kRelu ? "reluDerivative"
                             : *named == math::Kind::kGelu ? "geluDerivative"
                             : *named == math::Kind::kGeluTanh ? "geluTanhDerivative"
                                                               : nullptr;
    if (!derivative)
      return fail(e, "an activation without a derivative: '" + kind() + "'");
    return cudaPointwise(e, ins, {"full", "full"},
                         "    const float t0 = tm::mul(x1, tm::" + std::string(derivative) +
                             "(x0));\n",
                         "t0", out);
  } else if (k == "expand") {
    return cudaPointwise(e, ins, {"strided"}, "    const float t0 = x0;\n", "t0", out);
  } else if (k == "layer_norm_grad") {
    int64_t axis = intAttr(e, "axis");
    std::string rows = dims.product(ins[0], 0, axis);
    line("{");
    scratch("2 * " + rows + " * sizeof(float)", "layer_norm_grad");
    launch(e, "layer_norm_grad",
           "tc::layerNormGrad(" + ptr(ins[0]) + ", " + ptr(ins[1]) + ", " + ptr(ins[2]) + ", " +
               ptr(out) + ", " + ptr(e.getOuts()[1]) + ", " + ptr(e.getOuts()[2]) + ", " + rows +
               ", " + dims.product(ins[0], axis, rankOf(ins[0])) + ", " +
               floatLit(e->getAttrOfType<FloatAttr>("epsilon").getValueAsDouble()) +
               ", work.as<float>(), tx::stream())",
           "  ");
    line("}");
  } else if (k == "attention_grad") {
    Value q = ins[0];
    if (cast<MemRefType>(q.getType()).getDimSize(3) > 256)
      return fail(e, "the cuda attention kernels take head dimensions up to 256");
    attentionGradArgs(e, "tc::AttentionGradArgs");
    scratch("2 * " + dims.dim(q, 0) + " * " + dims.dim(q, 1) + " * " + dims.dim(q, 2) +
                " * sizeof(float)",
            "attention_grad");
    launch(e, "attention_grad", "tc::attentionBackward(args, work.as<float>(), tx::stream())",
           "  ");
    line("}");
  } else if (k == "dropout") {
    std::string step = ins.size() > 1 ? "uint64_t(" + dims.index(ins[1]) + ") + c.step" : "c.step";
    launch(e, "dropout",
           "tc::dropout(" + ptr(ins[0]) + ", " + ptr(out) + ", " + dims.numel(out) + ", " +
               floatLit(e->getAttrOfType<FloatAttr>("rate").getValueAsDouble()) + ", " +
               std::to_string(intAttr(e, "seed")) + "ull + c.seed, " + step + ", " +
               std::to_string(intAttr(e, "stream")) + ", 0, tx::stream())");
  } else if (k == "weight_grad") {
    // out [K, N] = xᵀ·g over all rows: one GEMM, A transposed.
    const int64_t rank = rankOf(ins[0]);
    std::string kk = dims.dim(ins[0], rank - 1), n = dims.dim(ins[1], rank - 1);
    std::string rows = dims.product(ins[0], 0, rank - 1);
    line("{");
    line("  " + cudaArgs("GemmArgs") + " g;");
    line("  g.m = " + kk + "; g.n = " + n + "; g.k = " + rows + ";");
    line("  g.a = " + ptr(ins[0]) + "; g.lda = " + kk + "; g.transA = true;");
    line("  g.b = " + ptr(ins[1]) + "; g.ldb = " + n + ";");
    line("  g.c = " + ptr(out) + "; g.ldc = " + n + ";");
    launch(e, "weight_grad", "tc::gemm(g, tx::stream())", "  ");  // no rows: zeros
    line("}");
    flops("2.0 * " + dims.numel(ins[0]) + " * " + n);
  } else if (k == "slice_grad") {
    // Zeros, then g's rows into [start, start + n) along the axis.
    int64_t axis = intAttr(e, "axis");
    std::string start = std::to_string(intAttr(e, "start"));
    if (ins.size() > 1)
      start = "(" + start + " + " + dims.index(ins[1]) + ")";
    std::string inner = dims.product(out, axis + 1, rankOf(out)), size = storageBytes(out);
    std::string inRow = "(" + dims.product(ins[0], axis, rankOf(out)) + " * " + size + ")";
    std::string outRow = "(" + dims.product(out, axis, rankOf(out)) + " * " + size + ")";
    launch(e, "slice_grad",
           "cudaMemsetAsync(" + ptr(out) + ", 0, " + dims.numel(out) + " * " + size +
               ", tx::stream())");
    launch(e, "slice_grad",
           "cudaMemcpy2DAsync(reinterpret_cast<char*>(" + ptr(out) + ") + " + start + " * " +
               inner + " * " + size + ", " + outRow + ", " + ptr(ins[0]) + ", " + inRow + ", " +
               inRow + ", " + dims.product(out, 0, axis) +
               ", cudaMemcpyDeviceToDevice, tx::stream())");
  } else if (k == "reduce") {
    line("{");
    line("  const exec::Shape xs = " + dims.shape(ins[0]) + ";");
    launch(e, "reduce",
           "tc::reduce(tc::ReduceKind::" + kind() + ", " + ptr(ins[0]) + ", xs.dims, xs.rank, " +
               std::to_string(intAttr(e, "axes_mask")) + "u, " + ptr(out) + ", tx::stream())",
           "  ");
    line("}");
  } else {
    return fail(e, "kernel '" + k + "' has no cuda form yet");
  }
  return llvm::Error::success();
}

llvm::Error Emitter::emitCudaGemm(tfk::GemmOp g) {
  // Weights are used as stored ([N, K] with transpose_weight): no packing.
  Value x = g.getInput(), w = g.getWeight(), result = g.getOut();
  const auto [m, n, k, transW, activation] = gemmShape(g);
  line("{");
  line("  " + cudaArgs("GemmArgs") + " g;");
  line("  g.m = " + m + "; g.n = " + std::to_string(n) + "; g.k = " + std::to_string(k) + ";");
  line("  g.a = " + ptr(x) + "; g.lda = " + std::to_string(k) + ";");
  line("  g.b = " + ptr(w) + "; g.ldb = " + std::to_string(transW ? k : n) + "; g.transB = " +
       (transW ? "true" : "false") + ";");
  line("  g.c = " + ptr(result) + "; g.ldc = " + std::to_string(n) + ";");
  if (g.getBias())
    line("  g.bias = " + ptr(g.getBias()) + ";");
  if (activation != "kNone")
    line("  g.activation = tc::Activation::" + activation + ";");
  if (g.getResidual())
    line("  g.residual = " + ptr(g.getResidual()) + ";");
  if (std::optional<math::Kind> d = activationKind(g.getDerivative())) {
    // The backward's epilogue: C = (scale·A·B)·f'(pre).
    if (!cast<MemRefType>(g.getPre().getType()).getLayout().isIdentity())
      return fail(g, "reads its derivative's input through a strided view (rows of N are expected)");
    line("  g.derivative = tc::Activation::" + std::string(math::info(*d).enumerator) +
         "; g.pre = " + ptr(g.getPre()) + "; g.scale = " +
         floatLit(g.getScale().convertToDouble()) + ";");
  }
  launch(g, "gemm", "tc::gemm(g, tx::stream())", "  ");
  line("}");
  return llvm::Error::success();
}

llvm::Error Emitter::emitCudaMatmul(tfk::MatmulOp m) {
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

llvm::Error Emitter::emitCudaDecodeAttention(tfk::DecodeAttentionOp op) {
  // As on the CPU, without the row ids: rows that share a cache each read it.
  if (llvm::Error e = decodeAttentionArgs(op, cudaArgs("DecodeAttentionArgs")))
    return e;
  launch(op, "decode_attention", "tc::decodeAttention(args, tx::stream())", "  ");
  line("}");
  return llvm::Error::success();
}

llvm::Error Emitter::emitCudaAttention(tfk::AttentionOp op) {
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

llvm::Error Emitter::cudaPointwise(Operation *op, ValueRange inputs, ArrayRef<std::string> forms,
                                   const std::string &compute, const std::string &y, Value out) {
  // One thread per output element (grid-stride): input k is read whole
  // ("full"), as a trailing block repeated over the leading rows
  // ("trailing": [S, D] into [B, S, D]) or as one value ("splat").
  // "strided": NumPy broadcasting, each input's element strides over the
  // output's dimensions (exec::Strides), the offsets summed per element.
  if (cast<MemRefType>(out.getType()).getElementType() != Float32Type::get(op->getContext()))
    return fail(op, "a pointwise result that is not f32 has no cuda form yet");
  std::string name = "fe" + std::to_string(counter++);
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
  scalarKernels += "__global__ void " + name + "(" + params + outType +
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

std::string Emitter::cudaReadForm(Value input, Value out) {
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

llvm::Error Emitter::emitCudaElementwise(tfk::ElementwiseOp op) {
  std::string compute, y;
  if (llvm::Error e = regionBody(op, /*vector=*/false, "    ", compute, y))
    return e;
  // The lowering's forms where it chose Highway code; NumPy broadcasting
  // otherwise (selects, masks, any broadcast).
  std::vector<std::string> forms;
  for (Attribute kind : op.getKinds())
    forms.push_back(op.getVector() ? cast<StringAttr>(kind).getValue().str() : "strided");
  return cudaPointwise(op, op.getInputs(), forms, compute, y, op.getOut());
}
