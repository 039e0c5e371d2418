//===- Train.cpp - the reference backend's train step (Train.h) -----------===//

#include "codegen/reference/Train.h"

#include <cmath>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::reference;
namespace rt = ::transfuse::rt;

double reference::learningRate(const AdamOptions &o, int64_t step) {
  const double s = (double)step;
  return o.lrFactor / std::sqrt((double)o.dModel) *
         std::min(1.0 / std::sqrt(s), s * std::pow((double)o.warmup, -1.5));
}

TrainState reference::startTraining(const TensorMap &weights) {
  TrainState state;
  for (const auto &[name, w] : weights) {
    rt::Tensor p = rt::Tensor::zeros(rt::DType::F64, w.shape);
    for (int64_t i = 0; i < w.numElements(); ++i)
      p.data<double>()[i] = w.dtype == rt::DType::F64 ? w.data<double>()[i] : w.data<float>()[i];
    state.m.emplace(name, rt::Tensor::zeros(rt::DType::F64, w.shape));
    state.v.emplace(name, rt::Tensor::zeros(rt::DType::F64, w.shape));
    state.weights.emplace(name, std::move(p));
  }
  return state;
}

llvm::Expected<StepResult> reference::trainStep(func::FuncOp lossGrad, TrainState &state,
                                                const TensorMap &inputs, const AdamOptions &o) {
  auto out = run(lossGrad, state.weights, inputs, /*f64Outputs=*/true);
  if (!out)
    return out.takeError();
  StepResult r;
  r.loss = out->at("loss").data<double>()[0];
  double sq = 0.0;
  for (auto &[name, g] : *out) {
    if (name == "loss")
      continue;
    if (!state.weights.count(name.substr(5)))
      return llvm::createStringError("the gradient '" + name + "' has no parameter");
    for (int64_t i = 0; i < g.numElements(); ++i)
      sq += g.data<double>()[i] * g.data<double>()[i];
  }
  r.gradNorm = std::sqrt(sq);
  const double clip = o.clipNorm > 0 && r.gradNorm > o.clipNorm ? o.clipNorm / (r.gradNorm + 1e-6) : 1.0;
  const int64_t t = ++state.step;
  r.lr = learningRate(o, t);
  const double bc1 = 1.0 - std::pow(o.beta1, (double)t), bc2 = 1.0 - std::pow(o.beta2, (double)t);
  for (auto &[name, p] : state.weights) {
    auto it = out->find("grad." + name);
    if (it == out->end())
      return llvm::createStringError("@" + lossGrad.getSymName().str() +
                                     " returns no gradient for parameter '" + name + "'");
    const double *g = it->second.data<double>();
    double *w = p.data<double>(), *m = state.m.at(name).data<double>(), *v = state.v.at(name).data<double>();
    for (int64_t i = 0; i < p.numElements(); ++i) {
      const double gi = g[i] * clip;
      if (o.weightDecay > 0)
        w[i] *= 1.0 - r.lr * o.weightDecay;
      m[i] = o.beta1 * m[i] + (1.0 - o.beta1) * gi;
      v[i] = o.beta2 * v[i] + (1.0 - o.beta2) * gi * gi;
      // torch.optim.Adam: p -= lr / bc1 · m / (sqrt(v) / sqrt(bc2) + eps).
      w[i] -= r.lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + o.eps);
    }
  }
  for (auto &[name, g] : *out)
    if (name != "loss")
      r.grads.emplace(name, std::move(g));
  return r;
}
