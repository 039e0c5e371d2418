//===- Interpreter.cpp - the reference backend: fp64, plain loops ---------===//
//
// Every value is a Buf: a row-major shape and fp64 data (token ids and
// booleans are stored as exact doubles). Index values (from transfuse.dim)
// are int64. Ops are evaluated in program order.
//
// This file holds the driver (inputs in, outputs out, run-time shape checks,
// freeing dead values), the dispatch over ops with the one-line ops inline,
// the state ops, and the public entry points of Interpreter.h. The larger
// ops are in PrimitiveOps.cpp, FusedOps.cpp and GradOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "codegen/reference/Interpreter.h"
#include "codegen/reference/InterpreterOps.h"

#include "codegen/Interface.h"
#include "codegen/lowering/OpMath.h"
#include "ir/State.h"
#include "ir/TransfuseDialect.h"
#include "passes/Passes.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::transfuse;
using mlir::transfuse::reference::DropoutKey;
using mlir::transfuse::reference::State;
using mlir::transfuse::reference::TensorMap;
using mlir::transfuse::reference::detail::Interpreter;
using mlir::transfuse::reference::detail::numel;

namespace mlir::transfuse::reference::detail {

LogicalResult Interpreter::eval(Operation *op) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ParamOp p) {
        auto it = weights.find(p.getName().str());
        if (it == weights.end())
          return fail(op, "no weights for parameter '" + p.getName() + "'");
        const rt::Tensor &t = it->second; // F32 weights; F64 outputs of @prepare
        Buf r;
        r.shape.assign(t.shape.begin(), t.shape.end());
        if (t.dtype == rt::DType::F64)
          r.data.assign(t.data<double>(), t.data<double>() + t.numElements());
        else
          r.data.assign(t.data<float>(), t.data<float>() + t.numElements());
        set(p.getResult(), std::move(r));
        return success();
      })
      .Case([&](ConstantOp c) { return evalConstant(c); })
      .Case([&](DimOp d) {
        const Shape &shape = get(d.getInput()).shape;
        indices[d.getResult()] = shape[normalizedAxis(d.getAxis(), (int64_t)shape.size())];
        return success();
      })
      .Case([&](GatherOp g) { return evalGather(g); })
      .Case([&](MatmulOp m) {
        Buf r;
        if (failed(matmul(op, get(m.getLhs()), get(m.getRhs()), m.getTransposeLhs(),
                          m.getTransposeRhs(), r)))
          return failure();
        set(m.getResult(), std::move(r));
        return success();
      })
      .Case<AddOp, SubOp, MulOp, DivOp, PowOp>([&](auto o) {
        math::Kind k = *mathKindOf(op);
        return binary(op, o.getLhs(), o.getRhs(),
                      [k](double x, double y) { return math::apply(k, x, y); });
      })
      .Case([&](ScaleOp o) {
        double f = o.getFactor().convertToDouble();
        unary(op, o.getInput(), [f](double x) { return x * f; });
        return success();
      })
      .Case<ReluOp, ExpOp, TanhOp, GeluOp, SiluOp, SigmoidOp, SqrtOp, ErfOp>([&](auto o) {
        math::Kind k = *mathKindOf(op);
        unary(op, o.getInput(), [k](double x) { return math::apply(k, x); });
        return success();
      })
      .Case([&](SelectOp s) {
        const Buf &c = get(s.getCond()), &a = get(s.getOnTrue()), &b = get(s.getOnFalse());
        Buf r;
        Shape ab;
        if (failed(broadcast(op, a.shape, b.shape, ab)) ||
            failed(broadcast(op, c.shape, ab, r.shape)))
          return failure();
        r.data.resize(numel(r.shape));
        std::array<Shape, 3> strides = {broadcastStrides(c.shape, r.shape),
                                        broadcastStrides(a.shape, r.shape),
                                        broadcastStrides(b.shape, r.shape)};
        forEachBroadcast<3>(r.shape, strides, [&](int64_t i, const std::array<int64_t, 3> &o) {
          r.data[i] = c.data[o[0]] != 0.0 ? a.data[o[1]] : b.data[o[2]];
        });
        set(s.getResult(), std::move(r));
        return success();
      })
      .Case([&](SoftmaxOp s) {
        Buf r = get(s.getInput());
        softmaxInPlace(r, normalizedAxis(s.getAxis(), (int64_t)r.shape.size()));
        set(s.getResult(), std::move(r));
        return success();
      })
      .Case([&](LayerNormOp l) {
        Buf r = get(l.getInput());
        int64_t axis = normalizedAxis(l.getAxis(), (int64_t)r.shape.size());
        layerNormInPlace(r, get(l.getGamma()), l.getBeta() ? &get(l.getBeta()) : nullptr,
                         numel(ArrayRef<int64_t>(r.shape).drop_front(axis)),
                         l.getEpsilon().convertToDouble(), l.getRms());
        set(l.getResult(), std::move(r));
        return success();
      })
      .Case([&](AddLayerNormOp l) {
        Buf sum;
        if (failed(binary(op, get(l.getInput()), get(l.getResidual()), std::plus<>(), sum)))
          return failure();
        Buf r = sum;
        layerNormInPlace(r, get(l.getGamma()), l.getBeta() ? &get(l.getBeta()) : nullptr,
                         r.shape.back(), l.getEpsilon().convertToDouble(), l.getRms());
        set(l.getResult(), std::move(r));
        set(l.getSum(), std::move(sum));
        return success();
      })
      .Case([&](AttentionOp a) { return evalAttention(a); })
      .Case([&](LinearOp l) { return evalLinear(l); })
      .Case([&](FusedElementwiseOp f) { return evalFusedElementwise(f); })
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>([&](auto r) {
        return evalReduce(op, r.getInput(), r.getAxes(), r.getKeepDims());
      })
      .Case([&](DropoutOp d) {
        Buf r = get(d.getInput());
        dropoutInPlace(r, d.getRate().convertToDouble(), d.getSeed() + key.seed,
                       (d.getStep() ? indices[d.getStep()] : 0) + key.step, d.getStream());
        set(d.getResult(), std::move(r));
        return success();
      })
      .Case([&](CrossEntropyOp c) {
        return evalCrossEntropy(op, c.getLogits(), c.getLabels(),
                                c.getLabelSmoothing().convertToDouble(), c.getIgnoreIndex(), nullptr);
      })
      .Case([&](CrossEntropyGradOp c) {
        return evalCrossEntropy(op, c.getLogits(), c.getLabels(),
                                c.getLabelSmoothing().convertToDouble(), c.getIgnoreIndex(),
                                &get(c.getGrad()));
      })
      .Case([&](LayerNormGradOp l) { return evalLayerNormGrad(l); })
      .Case([&](PoolOp p) {
        return evalPool(op, p.getInput(), p.getKeep(), p.getMode(), nullptr);
      })
      .Case([&](PoolGradOp p) {
        return evalPool(op, p.getInput(), p.getKeep(), p.getMode(), &get(p.getGrad()));
      })
      .Case([&](UnfoldOp u) { return evalUnfold(op, u.getInput(), u.getPatch(), nullptr); })
      .Case([&](UnfoldGradOp u) {
        return evalUnfold(op, u.getInput(), u.getPatch(), &get(u.getGrad()));
      })
      .Case([&](L2NormalizeOp l) {
        return evalL2Normalize(op, l.getInput(), l.getEpsilon().convertToDouble(), nullptr);
      })
      .Case([&](L2NormalizeGradOp l) {
        return evalL2Normalize(op, l.getInput(), l.getEpsilon().convertToDouble(),
                               &get(l.getGrad()));
      })
      .Case([&](EmbeddingGradOp e) { return evalEmbeddingGrad(e); })
      .Case([&](SliceGradOp s) { return evalSliceGrad(s); })
      .Case([&](WeightGradOp w) { return evalWeightGrad(w); })
      .Case([&](AttentionGradOp a) { return evalAttentionGrad(a); })
      .Case([&](ActivationGradOp a) {
        const math::Kind f = *activationKind(a.getActivation()); // verified: not none
        return binary(op, a.getInput(), a.getGrad(),
                      [f](double x, double g) { return g * math::derivative(f, x); });
      })
      .Case([&](LinearInputGradOp l) {
        Buf product;
        if (failed(matmul(op, get(l.getGrad()), get(l.getWeight()), false, l.getTransposeWeight(),
                          product)))
          return failure();
        const Buf &pre = get(l.getPre());
        if (product.shape != pre.shape)
          return fail(op, "grad·op(W) " + str(product.shape) + " is not pre's shape " + str(pre.shape));
        const double scale = l.getScale().convertToDouble();
        const math::Kind f = *activationKind(l.getActivation()); // verified: not none
        for (size_t i = 0; i < product.data.size(); ++i)
          product.data[i] = product.data[i] * scale * math::derivative(f, pre.data[i]);
        set(l.getResult(), std::move(product));
        return success();
      })
      .Case([&](ExpandOp e) {
        return binary(op, e.getInput(), e.getLike(), [](double x, double) { return x; });
      })
      .Case([&](ReshapeOp r) { return evalReshape(r); })
      .Case([&](TransposeOp t) { return evalTranspose(t); })
      .Case([&](ConcatOp c) { return evalConcat(c); })
      .Case([&](SplitOp s) { return evalSplit(s); })
      .Case([&](SliceOp s) { return evalSlice(s); })
      .Case([&](CausalMaskOp c) {
        int64_t sq = indices[c.getQueryLen()], sk = indices[c.getKeyLen()];
        Buf r;
        r.shape = {sq, sk};
        r.data.resize(sq * sk);
        for (int64_t i = 0; i < sq; ++i)
          for (int64_t j = 0; j < sk; ++j)
            r.data[i * sk + j] = j <= i + sk - sq ? 1.0 : 0.0;
        set(c.getResult(), std::move(r));
        return success();
      })
      .Case([&](CastOp c) {
        unary(op, c.getInput(), [](double x) { return (double)(float)x; });
        return success();
      })
      .Case([&](KeyPaddingMaskOp k) {
        double pad = (double)k.getPadId();
        unary(op, k.getTokens(), [pad](double t) { return t != pad ? 1.0 : 0.0; });
        return success();
      })
      .Case([&](RotaryOp r) {
        Buf x = get(r.getInput());
        rotaryInPlace(x, get(r.getInvFreq()), r.getHeadDim(), x.shape.back(),
                      r.getOffset() ? indices[r.getOffset()] : 0, r.getInverse());
        set(r.getResult(), std::move(x));
        return success();
      })
      .Case([&](PositionalEncodingOp p) {
        int64_t len = indices[p.getLength()], d = p.getType().getDimSize(1);
        int64_t offset = p.getOffset() ? indices[p.getOffset()] : 0;
        Buf r;
        r.shape = {len, d};
        r.data.resize(len * d);
        for (int64_t pos = 0; pos < len; ++pos)
          for (int64_t j = 0; j < d; ++j) {
            // Column j's frequency index i and sine or cosine.
            int64_t i = p.getHalves() ? j % (d / 2) : j / 2;
            bool sine = p.getHalves() ? j < d / 2 : j % 2 == 0;
            double freq = std::exp(-(double)(2 * i) * std::log(10000.0) / (double)d);
            double angle = (double)(pos + offset) * freq;
            r.data[pos * d + j] = sine ? std::sin(angle) : std::cos(angle);
          }
        set(p.getResult(), std::move(r));
        return success();
      })
      .Case<StateLengthOp, CacheAppendOp, StateWriteOp, StateReadOp>(
          [&](auto) { return evalState(op); })
      .Default([&](Operation *) { return fail(op, "not supported by the reference backend"); });
}

LogicalResult Interpreter::evalState(Operation *op) {
  if (!state)
    return fail(op, "reads the decoding state, and the call has none");
  if (isa<StateLengthOp>(op)) {
    indices[op->getResult(0)] = state->length;
    return success();
  }
  StringRef name = op->getAttrOfType<StringAttr>("name").getValue();
  auto it = state->tensors.find(name.str());
  if (it == state->tensors.end())
    return fail(op, "no state tensor '" + name + "'");
  State::Tensor &t = it->second; // [R, H, T, D]
  int64_t rows = t.shape[0], heads = t.shape[1], cap = t.shape[2], d = t.shape[3];
  auto at = [&](int64_t r, int64_t h, int64_t p) { return ((r * heads + h) * cap + p) * d; };
  // Copies positions [from, from + n) of rows 0..b of the state to or from x.
  auto transfer = [&](Buf &x, int64_t from, bool toState) -> LogicalResult {
    int64_t b = x.shape[0], n = x.shape[2];
    if (b > rows)
      return fail(op, "batch " + llvm::Twine(b) + " exceeds the " + llvm::Twine(rows) +
                          " rows of state '" + name + "' (max_batch · max_beam)");
    if (from + n > cap)
      return fail(op, "positions " + llvm::Twine(from + n) + " exceed the capacity " +
                          llvm::Twine(cap) + " of state '" + name + "' (max_seq_len)");
    for (int64_t r = 0; r < b; ++r)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t p = 0; p < n; ++p)
          for (int64_t j = 0; j < d; ++j) {
            double &s = t.data[at(r, h, from + p) + j];
            double &v = x.data[((r * heads + h) * n + p) * d + j];
            toState ? (s = v) : (v = s);
          }
    return success();
  };
  if (auto w = dyn_cast<StateWriteOp>(op))
    return transfer(get(w.getInput()), 0, true);
  if (auto a = dyn_cast<CacheAppendOp>(op)) {
    Buf &x = get(a.getInput());
    int64_t n = x.shape[2];
    if (appended && *appended != n)
      return fail(op, "appends " + llvm::Twine(n) + " positions, another cache " +
                          llvm::Twine(*appended));
    appended = n;
    if (failed(transfer(x, state->length, true)))
      return failure();
    Buf r;
    r.shape = {x.shape[0], heads, state->length + n, d};
    r.data.resize(numel(r.shape));
    if (failed(transfer(r, 0, false)))
      return failure();
    set(a.getResult(), std::move(r));
    return success();
  }
  auto read = cast<StateReadOp>(op);
  Buf r;
  r.shape.assign(read.getType().getShape().begin(), read.getType().getShape().end());
  for (int64_t i = 0, k = 0; i < 4; ++i)
    if (read.getType().isDynamicDim(i))
      r.shape[i] = indices[read.getSizes()[k++]];
  r.data.resize(numel(r.shape));
  if (failed(transfer(r, 0, false)))
    return failure();
  set(read.getResult(), std::move(r));
  return success();
}

llvm::Expected<TensorMap> Interpreter::run(func::FuncOp func, const TensorMap &inputs,
                                           const EntryPoint &ep) {
  if (rt::Status s = rt::validateInputs(ep.inputs, inputs); !s.isOk())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), s.message());
  for (auto [arg, spec] : llvm::zip(func.getArguments(), ep.inputs)) {
    const rt::Tensor &given = inputs.at(spec.name);
    // I64 ids (validateInputs takes them for I32) as the compiled code reads
    // them: narrowed, an id outside int32 an error.
    const bool narrow = given.dtype == rt::DType::I64 && spec.dtype == rt::DType::I32;
    rt::Tensor narrowed;
    if (narrow) {
      narrowed = rt::Tensor::zeros(rt::DType::I32, given.shape);
      if (rt::Status s = rt::narrowIds(spec.name, given.data<int64_t>(), given.numElements(),
                                       narrowed.data<int32_t>());
          !s.isOk())
        return llvm::createStringError(llvm::inconvertibleErrorCode(), s.message());
    }
    const rt::Tensor &t = narrow ? narrowed : given;
    if (t.dtype != rt::DType::I32 && t.dtype != rt::DType::Bool &&
        t.dtype != rt::DType::F32 && t.dtype != rt::DType::F64)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "input '%s': the reference backend reads F32, F64, I32 "
                                     "(or I64 ids) and BOOL inputs only", spec.name.c_str());
    Buf b;
    b.shape.assign(t.shape.begin(), t.shape.end());
    int64_t n = t.numElements();
    b.data.resize(n);
    for (int64_t i = 0; i < n; ++i)
      b.data[i] = t.dtype == rt::DType::I32 ? (double)t.data<int32_t>()[i]
                  : t.dtype == rt::DType::Bool ? (double)t.data<uint8_t>()[i]
                  : t.dtype == rt::DType::F64 ? t.data<double>()[i]
                                              : (double)t.data<float>()[i];
    argNames[arg] = spec.name;
    set(arg, std::move(b));
  }
  TensorMap outputs;
  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [value, spec] : llvm::zip(ret.getOperands(), ep.outputs)) {
        const Buf &b = get(value);
        bool isFloat = spec.dtype != rt::DType::I32 && spec.dtype != rt::DType::Bool;
        rt::DType dtype = f64Outputs && isFloat ? rt::DType::F64 : spec.dtype;
        rt::Tensor t = rt::Tensor::zeros(dtype, std::vector<int64_t>(b.shape.begin(), b.shape.end()));
        for (size_t i = 0; i < b.data.size(); ++i) {
          switch (dtype) {
          case rt::DType::F64: t.data<double>()[i] = b.data[i]; break;
          case rt::DType::I32: t.data<int32_t>()[i] = (int32_t)b.data[i]; break;
          case rt::DType::Bool: t.data<uint8_t>()[i] = b.data[i] != 0.0; break;
          default: t.data<float>()[i] = (float)b.data[i]; break;
          }
        }
        outputs[spec.name] = std::move(t);
      }
      break;
    }
    if (failed(eval(&op)))
      return llvm::createStringError(llvm::inconvertibleErrorCode(), error);
    // Check run-time shapes against the static sizes of the result types.
    for (Value result : op.getResults()) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type)
        continue;
      const Buf &b = get(result);
      bool ok = (int64_t)b.shape.size() == type.getRank();
      for (int64_t d = 0; ok && d < type.getRank(); ++d)
        ok = type.isDynamicDim(d) || type.getDimSize(d) == b.shape[d];
      if (!ok) {
        (void)fail(&op, "produced shape " + str(b.shape) + ", which does not match its type");
        return llvm::createStringError(llvm::inconvertibleErrorCode(), error);
      }
    }
    // Free values whose last user has run (keeps the base model's memory low).
    for (Value operand : op.getOperands())
      if (llvm::all_of(operand.getUsers(), [&](Operation *u) {
            return u->getBlock() == op.getBlock() && !op.isBeforeInBlock(u);
          }))
        values.erase(operand.getAsOpaquePointer());
  }
  return outputs;
}

} // namespace mlir::transfuse::reference::detail

/// Runs one entry point of `mi` with `weights` as they are.
static llvm::Expected<TensorMap> runEntry(func::FuncOp func, const ModelInterface &mi, DropoutKey key,
                                          const TensorMap &weights, const TensorMap &inputs,
                                          bool f64Outputs, State *state = nullptr) {
  for (const EntryPoint &ep : mi.entryPoints)
    if (ep.name == func.getName()) {
      Interpreter interpreter(weights, f64Outputs);
      interpreter.key = key;
      std::optional<State> copy;
      if (state)
        interpreter.state = &copy.emplace(*state);
      auto outputs = interpreter.run(func, inputs, ep);
      if (outputs && state) {
        *state = std::move(*copy);
        state->length += interpreter.appended.value_or(0);
      }
      return outputs;
    }
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "no entry point '%s'",
                                 func.getName().str().c_str());
}

llvm::Expected<TensorMap> mlir::transfuse::reference::run(func::FuncOp func,
                                                          const TensorMap &weights,
                                                          const TensorMap &inputs,
                                                          bool f64Outputs, State *state,
                                                          DropoutKey key) {
  auto module = func->getParentOfType<ModuleOp>();
  if (usesState(func) && !state)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "entry point '%s' uses the decoding state; pass one",
                                   func.getName().str().c_str());
  auto mi = extractInterface(module);
  if (!mi)
    return mi.takeError();
  // Weight-only work hoisted into @prepare runs first; its outputs are the
  // `prepared` params of the other entry points.
  auto prepare = module.lookupSymbol<func::FuncOp>(kPrepareFunction);
  if (!prepare || prepare == func)
    return runEntry(func, *mi, key, weights, inputs, f64Outputs, state);
  auto prepared = runEntry(prepare, *mi, key, weights, {}, /*f64Outputs=*/true);
  if (!prepared)
    return prepared.takeError();
  TensorMap all = weights;
  for (auto &[name, tensor] : *prepared)
    all[name] = std::move(tensor);
  return runEntry(func, *mi, key, all, inputs, f64Outputs, state);
}

llvm::Expected<State> mlir::transfuse::reference::createState(ModuleOp module) {
  auto decls = collectStates(module);
  if (failed(decls))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the model's state tensors disagree (see the diagnostics)");
  State state;
  for (const StateDecl &d : *decls) {
    State::Tensor &t = state.tensors[d.name];
    t.shape.assign(d.capacity.getShape().begin(), d.capacity.getShape().end());
    t.data.assign(numel(t.shape), 0.0);
  }
  return state;
}
