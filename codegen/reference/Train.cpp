//===- Train.cpp - the reference backend's train step (Train.h) -----------===//

#include "codegen/reference/Train.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace mlir::transfuse;
using namespace mlir::transfuse::reference;
namespace rt = ::transfuse::rt;

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
                                                const std::vector<MicroBatch> &batches,
                                                const AdamOptions &o, uint64_t seed) {
  if (batches.empty())
    return llvm::createStringError("a train step needs a micro-batch");
  StepResult r;
  std::optional<TensorMap> sum; // the weighted gradients
  for (size_t b = 0; b < batches.size(); ++b) {
    const MicroBatch &mb = batches[b];
    auto out = run(lossGrad, state.weights, mb.inputs, /*f64Outputs=*/true, nullptr,
                   DropoutKey{seed, (uint64_t)state.step + 1});
    if (!out)
      return out.takeError();
    const double w = microBatchWeight(batches, b);
    r.loss += w * out->at("loss").data<double>()[0];
    out->erase("loss");
    for (auto &[name, g] : *out) {
      if (!state.weights.count(name.substr(5)))
        return llvm::createStringError("the gradient '" + name + "' has no parameter");
      double *p = g.data<double>();
      for (int64_t i = 0; i < g.numElements(); ++i)
        p[i] *= w;
      if (sum) {
        const double *acc = g.data<double>();
        double *to = sum->at(name).data<double>();
        for (int64_t i = 0; i < g.numElements(); ++i)
          to[i] += acc[i];
      }
    }
    if (!sum)
      sum = std::move(*out);
  }
  double sq = 0.0;
  for (auto &[name, g] : *sum)
    for (int64_t i = 0; i < g.numElements(); ++i)
      sq += g.data<double>()[i] * g.data<double>()[i];
  r.gradNorm = std::sqrt(sq);
  const double clip = o.clipNorm > 0 && r.gradNorm > o.clipNorm ? o.clipNorm / (r.gradNorm + 1e-6) : 1.0;
  const int64_t t = ++state.step;
  r.lr = learningRate(o, t);
  const double bc1 = 1.0 - std::pow(o.beta1, (double)t), bc2 = 1.0 - std::pow(o.beta2, (double)t);
  for (auto &[name, p] : state.weights) {
    auto it = sum->find("grad." + name);
    if (it == sum->end())
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
  r.grads = std::move(*sum);
  return r;
}
