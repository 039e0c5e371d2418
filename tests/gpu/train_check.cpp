// A train step compiled with --target cuda --train against the same model
// compiled for the cpu target (DIR/cpu/libmodel.so), on a GPU machine,
// through the C ABI (runtime/host: no MLIR, no CUDA toolkit). Both draw the
// seeded weights (seed 0); DIR/train.safetensors holds a batch of
// loss_grad's inputs (tokens and labels, padding ignored). Dropout is on:
// the CUDA kernels draw the CPU's Philox bits.
//
//  1. Gradients: loss_grad once on each, the loss and every gradient within
//     `compile --verify`'s rule (max |error| <= tolerance · max(1, max |cpu|)).
//  2. Steps: three optimizer steps on each (accumulate, apply; the third
//     from the batch's two halves, weight 0.5 each): losses and gradient
//     norms within the tolerance; after the first, every weight is Adam's
//     update of the initial one by the model's own moments (in double);
//     after the third, every weight and moment within the tolerance.
//  3. Determinism: a second model runs the same steps to the same bits.
//  4. Resume: a third, given the first's weights, moments and step count
//     after step 1, runs steps 2 and 3 to the same bits.
//  5. Bad labels: a label outside the vocabulary is an error naming the
//     labels, after which the step count and the weights are unchanged.
//
//   cuda_train_check DIR [--tolerance 1e-3] [--library cpu/libmodel.so]
//
// --library checks another artifact of DIR in place of libmodel.so (ctest
// cuda_train_check_cpu: the cpu one, so the protocol runs without a GPU).
// Exit 0: passed; 1: a failure (printed); 77: no CUDA device (skipped).

#include "runtime/Tensor.h"
#include "runtime/host/CompiledModel.h"
#include "tests/gpu/CheckUtil.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace rt = transfuse::rt;
using gpu_check::compare;
using gpu_check::readAll;
using gpu_check::sameBytes;
using gpu_check::TensorMap;
using Role = rt::CompiledModel::ParamRole;

namespace {

constexpr uint64_t kSeed = 5;  // the dropout draws' seed

rt::CompiledModel::TrainOptions options() {
  rt::CompiledModel::TrainOptions o;
  o.learningRate = 1e-2;  // updates far above the rounding of the weights
  o.maxGradNorm = 1.0;
  // Adam turns any gradient much larger than ε into a step of about the
  // learning rate. Some are rounding noise of either sign on either target
  // (K's bias: the sum of a softmax's zero-sum gradient), so ε keeps those
  // below the tolerance and the weights comparable.
  o.epsilon = 1e-5;
  return o;
}

// Rows [begin, end) of every tensor (dimension 0).
TensorMap rowsOf(const TensorMap& batch, int64_t begin, int64_t end) {
  TensorMap part;
  for (const auto& [name, t] : batch) {
    std::vector<int64_t> shape = t.shape;
    const size_t row = t.bytes.size() / static_cast<size_t>(shape[0]);
    shape[0] = end - begin;
    rt::Tensor p = rt::Tensor::zeros(t.dtype, shape);
    std::memcpy(p.bytes.data(), t.bytes.data() + begin * row, (end - begin) * row);
    part[name] = std::move(p);
  }
  return part;
}

// Every parameter of every role, keyed "name (role)".
TensorMap paramsOf(const rt::CompiledModel& m) {
  static const char* roles[] = {"weight", "adam_m", "adam_v"};
  TensorMap all;
  for (const auto& p : m.params()) {
    auto t = m.readParam(p.name, p.role);
    if (!t) {
      std::printf("reading '%s': %s  FAILED\n", p.name.c_str(), t.status().message().c_str());
      std::exit(1);
    }
    all[p.name + " (" + roles[static_cast<int>(p.role)] + ")"] = std::move(*t);
  }
  return all;
}

struct Trace {
  std::vector<double> losses, norms;
  TensorMap afterFirst, last;  // every parameter after step 1 and at the end
};

// Steps [from, 3] of the protocol on `m` (see the file comment).
rt::Status train(rt::CompiledModel& m, const TensorMap& batch, int from, Trace& trace) {
  const int64_t rows = batch.begin()->second.shape[0];
  for (int step = from; step <= 3; ++step) {
    std::vector<TensorMap> parts;
    if (step < 3) parts = {batch};
    else parts = {rowsOf(batch, 0, rows / 2), rowsOf(batch, rows / 2, rows)};
    double loss = 0.0;
    for (const TensorMap& part : parts) {
      auto l = m.accumulateGradients("loss_grad", part, 1.0 / parts.size(), kSeed);
      if (!l) return l.status();
      loss += *l / parts.size();
    }
    auto norm = m.applyGradients(options());
    if (!norm) return norm.status();
    trace.losses.push_back(loss);
    trace.norms.push_back(*norm);
    if (step == 1) trace.afterFirst = paramsOf(m);
  }
  trace.last = paramsOf(m);
  return rt::Status::ok();
}

std::unique_ptr<rt::CompiledModel> load(const std::string& path) {
  rt::LoadOptions load;  // seed 0
  auto m = rt::CompiledModel::load(path, load);
  if (!m) {
    const std::string& message = m.status().message();
    std::printf("%s\n", message.c_str());
    std::exit(message.find("no CUDA device") != std::string::npos ? 77 : 1);
  }
  return std::move(*m);
}

bool near(const char* what, double got, double want, double tolerance) {
  const bool ok = std::fabs(got - want) <= tolerance * std::max(1.0, std::fabs(want));
  std::printf("%s: %.9g against %.9g %s\n", what, got, want, ok ? "ok" : "FAILED");
  return ok;
}

// After step 1 (moments from zero, t = 1): w1 = w0 - lr·m̂ / (√v̂ + ε) with
// m̂ = M/(1 - β1), v̂ = V/(1 - β2), from the model's own moments.
bool checkAdam(const TensorMap& initial, const TensorMap& after) {
  const rt::CompiledModel::TrainOptions o = options();
  double worst = 0.0;
  bool ok = true;
  for (const auto& [key, w0] : initial) {
    if (key.find(" (weight)") == std::string::npos) continue;
    const std::string name = key.substr(0, key.size() - 9);
    const rt::Tensor& w1 = after.at(key);
    const rt::Tensor& m = after.at(name + " (adam_m)");
    const rt::Tensor& v = after.at(name + " (adam_v)");
    for (int64_t i = 0; i < w0.numElements(); ++i) {
      const double mh = m.data<float>()[i] / (1.0 - o.beta1);
      const double vh = v.data<float>()[i] / (1.0 - o.beta2);
      const double want = w0.data<float>()[i] - o.learningRate * mh / (std::sqrt(vh) + o.epsilon);
      const double e = std::fabs(w1.data<float>()[i] - want);
      worst = std::max(worst, e);
      // A few roundings of w and of the update.
      if (!(e <= 1e-6 * std::max(1.0, std::fabs(want)) + 1e-4 * o.learningRate)) ok = false;
    }
  }
  std::printf("step 1: every weight is Adam's update by its moments: max |error| %.3g %s\n", worst,
              ok ? "ok" : "FAILED");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::printf("usage: %s DIR [--tolerance X] [--library L]\n", argv[0]);
    return 1;
  }
  const std::string dir = argv[1];
  double tolerance = 1e-3;
  std::string library = "libmodel.so";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--tolerance") tolerance = std::atof(argv[i + 1]);
    else if (flag == "--library") library = argv[i + 1];
    else {
      std::printf("unknown flag %s\n", flag.c_str());
      return 1;
    }
  }
  const TensorMap batch = readAll(dir + "/train.safetensors");
  auto cuda = load(dir + "/" + library);
  auto cpu = load(dir + "/cpu/libmodel.so");
  bool ok = true;

  // 1. Gradients.
  auto got = cuda->run("loss_grad", batch);
  auto want = cpu->run("loss_grad", batch);
  if (!got || !want) {
    std::printf("loss_grad: %s%s  FAILED\n", got ? "" : got.status().message().c_str(),
                want ? "" : want.status().message().c_str());
    return 1;
  }
  ok &= compare(dir + " loss_grad (against the cpu target)", *got, *want, tolerance, false);

  // 2. Steps, against the cpu target.
  const TensorMap initial = paramsOf(*cuda);
  Trace a, reference;
  for (auto [model, trace] : {std::pair{cuda.get(), &a}, {cpu.get(), &reference}})
    if (rt::Status s = train(*model, batch, 1, *trace); !s) {
      std::printf("training: %s  FAILED\n", s.message().c_str());
      return 1;
    }
  for (int s = 0; s < 3; ++s) {
    const std::string step = "step " + std::to_string(s + 1);
    ok &= near((step + " loss").c_str(), a.losses[s], reference.losses[s], tolerance);
    ok &= near((step + " gradient norm").c_str(), a.norms[s], reference.norms[s], tolerance);
  }
  ok &= checkAdam(initial, a.afterFirst);
  ok &= compare(dir + " after 3 steps (against the cpu target)", a.last, reference.last, tolerance,
                false);

  // 3. Determinism.
  auto again = load(dir + "/" + library);
  Trace b;
  if (rt::Status s = train(*again, batch, 1, b); !s) {
    std::printf("training again: %s  FAILED\n", s.message().c_str());
    return 1;
  }
  const bool same = a.losses == b.losses && a.norms == b.norms && sameBytes(a.last, b.last);
  std::printf("a second model, the same steps: %s\n", same ? "the same bits" : "DIFFERENT  FAILED");
  ok &= same;

  // 4. Resume after step 1.
  auto resumed = load(dir + "/" + library);
  for (const auto& p : resumed->params()) {
    static const char* roles[] = {"weight", "adam_m", "adam_v"};
    const rt::Tensor& t = a.afterFirst.at(p.name + " (" + roles[static_cast<int>(p.role)] + ")");
    if (rt::Status s = resumed->writeParam(p.name, p.role, t); !s) {
      std::printf("resume: %s  FAILED\n", s.message().c_str());
      return 1;
    }
  }
  Trace c;
  rt::Status s = resumed->setTrainSteps(1);
  if (s) s = train(*resumed, batch, 2, c);
  if (!s) {
    std::printf("resume: %s  FAILED\n", s.message().c_str());
    return 1;
  }
  const bool resumedSame = sameBytes(a.last, c.last) && c.losses[0] == a.losses[1] &&
                           c.losses[1] == a.losses[2];
  std::printf("resumed after step 1: %s\n", resumedSame ? "the same bits" : "DIFFERENT  FAILED");
  ok &= resumedSame;

  // 5. Bad labels.
  TensorMap bad = batch;
  bad.at("labels").data<int32_t>()[1] = 1 << 20;
  const int64_t steps = cuda->trainSteps();
  auto refused = cuda->accumulateGradients("loss_grad", bad, 1.0, kSeed);
  const bool named = !refused && refused.status().message().find("labels") != std::string::npos &&
                     refused.status().message().find("outside the vocabulary") != std::string::npos;
  std::printf("a label outside the vocabulary: %s %s\n",
              refused ? "accepted" : refused.status().message().c_str(), named ? "ok" : "FAILED");
  const bool unchanged = cuda->trainSteps() == steps && sameBytes(paramsOf(*cuda), a.last);
  std::printf("after it: %s\n", unchanged ? "nothing changed" : "CHANGED  FAILED");
  ok &= named && unchanged;

  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
