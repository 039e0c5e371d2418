// The CUDA kernels of a train step (runtime/kernels/cuda/Train.cuh, the
// attention backward, the GEMM's backward forms) against references: the
// CPU kernels' bits where the contract promises them (Adam, dropout, column
// sums, embedding_grad), double-precision references elsewhere, and bad
// labels and ids reported with nothing written. Exit 0: all passed; 1: a
// failure (each printed); 77: no CUDA device. Built like kernels_test.cu;
// tests/gpu/run.sh runs it on a GPU machine.

#include "runtime/kernels/cuda/Attention.cuh"
#include "runtime/kernels/cuda/CublasLt.cuh"
#include "runtime/kernels/cuda/Gemm.cuh"
#include "runtime/kernels/cuda/Train.cuh"
#include "runtime/kernels/ElementwiseMath.h"
#include "runtime/kernels/Optimizer.h"
#include "runtime/Philox.h"
#include "tests/gpu/TestUtil.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace {

using namespace gpu_test;

// The backward's GEMMs: A stored transposed ([K, M], a weight gradient's
// xᵀ), on the CUDA cores and through cuBLASLt where it is found, and the
// derivative epilogue C = (scale·A·B)·f'(pre), which cuBLASLt must refuse
// (the CUDA cores run it), against a double reference.
void testGemmBackward(size_t M, size_t N, size_t K, bool transA, bool transB,
                      transfuse::cuda::Activation derivative, float scale, std::mt19937& rng) {
  namespace tm = transfuse::kernels::math;
  using transfuse::cuda::Activation;
  const size_t lda = (transA ? M : K) + 3, ldb = (transB ? K : N) + 1, ldc = N + 2, ldp = N + 5;
  std::vector<float> a = randomVector((transA ? K : M) * lda, rng, -1, 1);
  std::vector<float> b = randomVector((transB ? N : K) * ldb, rng, -1, 1);
  std::vector<float> pre = randomVector(M * ldp, rng, -3, 3);
  std::vector<double> want(M * ldc, 7.0);
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      double v = 0;
      for (size_t k = 0; k < K; ++k)
        v += double(transA ? a[k * lda + i] : a[i * lda + k]) *
             double(transB ? b[j * ldb + k] : b[k * ldb + j]);
      const double x = pre[i * ldp + j];
      if (derivative == Activation::kRelu) v *= scale * tm::reluDerivative(x);
      if (derivative == Activation::kGelu) v *= scale * tm::geluDerivative(x);
      if (derivative == Activation::kGeluTanh) v *= scale * tm::geluTanhDerivative(x);
      if (derivative == Activation::kSilu) v *= scale * tm::siluDerivative(x);
      want[i * ldc + j] = v;
    }
  const std::vector<float> c0(M * ldc, 7.0f);  // the columns past N stay 7
  Device da(a), db(b), dpre(pre), dc(c0);
  transfuse::cuda::GemmArgs g;
  g.m = M; g.n = N; g.k = K;
  g.a = da.p; g.lda = lda; g.transA = transA;
  g.b = db.p; g.ldb = ldb; g.transB = transB;
  g.c = dc.p; g.ldc = ldc;
  g.derivative = derivative;
  g.pre = derivative == Activation::kNone ? nullptr : dpre.p;
  g.ldp = ldp;
  g.scale = scale;
  for (bool lt : {false, true}) {
    if (lt && !transfuse::cuda::cublasLtAvailable()) break;
    char what[112];
    std::snprintf(what, sizeof what, "gemm%s %zux%zux%zu%s%s derivative %d scale %g",
                  lt ? " (cuBLASLt)" : "", M, N, K, transA ? " transA" : "",
                  transB ? " transB" : "", int(derivative), scale);
    if (lt) {
      const cudaError_t e = transfuse::cuda::gemmCublasLt(g);
      if (derivative != Activation::kNone) {  // not expressible there
        std::printf("%-40s %s\n", what, e == cudaErrorNotSupported ? "refused" : "FAILED");
        gFailures += e != cudaErrorNotSupported;
        continue;
      }
      if (e == cudaErrorNotSupported) {  // no algorithm for these operands: the cores run it
        std::printf("%-40s %s\n", what, "not taken by cuBLASLt: skipped");
        continue;
      }
      CHECK_CUDA(e);
    } else {
      CHECK_CUDA(transfuse::cuda::gemmCudaCores(g));
    }
    CHECK_CUDA(cudaDeviceSynchronize());
    expectNear(what, dc.host(), want, 1e-5, 1e-5 * std::sqrt(double(K)) + 1e-5);
    CHECK_CUDA(cudaMemcpy(dc.p, c0.data(), c0.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
}

// What a device check word says: the first bad index, or "none".
unsigned int readBad(const DeviceOf<unsigned int>& bad) { return bad.host()[0]; }

void expectBad(const char* what, unsigned int got, unsigned int want) {
  std::printf("%-40s first bad index %d%s\n", what, int(got),
              got == want ? "" : "  FAILED");
  gFailures += got != want;
}

std::vector<double> toDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Adam against the CPU kernel's operations done here in the same order with
// the same roundings (runtime/kernels/Optimizer.cpp on an FMA target): the
// same bits.
void testAdam(size_t n, float weightDecay, float gradScale, int64_t step, std::mt19937& rng) {
  transfuse::kernels::AdamStep s;
  s.lr = 7e-4f;
  s.weightDecay = weightDecay;
  s.gradScale = gradScale;
  s.step = step;
  std::vector<float> p = randomVector(n, rng, -1, 1), g = randomVector(n, rng, -3, 3);
  std::vector<float> m = randomVector(n, rng, -0.1f, 0.1f), v = randomVector(n, rng, 0, 0.01f);
  const double t = double(step);
  const float size = float(s.lr / (1.0 - std::pow(double(s.beta1), t)));
  const float inv = float(1.0 / std::sqrt(1.0 - std::pow(double(s.beta2), t)));
  std::vector<double> wantP(n), wantM(n), wantV(n);
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * s.gradScale;
    float pi = p[i];
    if (weightDecay != 0.0f) pi *= 1.0f - s.lr * s.weightDecay;
    const float mi = std::fma(s.beta1, m[i], (1.0f - s.beta1) * gi);
    const float vi = std::fma(s.beta2, v[i], (1.0f - s.beta2) * (gi * gi));
    const float denom = std::fma(std::sqrt(vi), inv, s.eps);
    wantP[i] = std::fma(-size, mi / denom, pi);
    wantM[i] = mi;
    wantV[i] = vi;
  }
  Device dp(p), dg(g), dm(m), dv(v);
  CHECK_CUDA(transfuse::cuda::adamUpdate(dp.p, dg.p, dm.p, dv.p, n, s));
  CHECK_CUDA(cudaDeviceSynchronize());
  char what[96];
  std::snprintf(what, sizeof what, "adam n=%zu wd=%g scale=%g t=%lld", n, weightDecay, gradScale,
                (long long)step);
  expectNear(what, dp.host(), wantP, 0, 0);
  expectNear("  its m", dm.host(), wantM, 0, 0);
  expectNear("  its v", dv.host(), wantV, 0, 0);
}

// Dropout against philoxUniform itself (not the kernels' integer threshold):
// the same draws and bits as the CPU, from any first index.
void testDropout(size_t n, uint64_t first, double rate, bool inPlace, std::mt19937& rng) {
  const uint64_t seed = 0x1234567890abcdefull, step = 17, stream = 5;
  std::vector<float> x = randomVector(n, rng, -2, 2);
  const float keep = float(1.0 / (1.0 - rate));
  std::vector<double> want(n);
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool k = transfuse::rt::philoxUniform(seed, step, stream, first + i) >= rate;
    want[i] = k ? x[i] * keep : 0.0f;
    kept += k;
  }
  Device dx(x), dy(inPlace ? std::vector<float>() : std::vector<float>(n, NAN));
  CHECK_CUDA(transfuse::cuda::dropout(dx.p, inPlace ? dx.p : dy.p, n, rate, seed, step, stream,
                                      first));
  CHECK_CUDA(cudaDeviceSynchronize());
  char what[96];
  std::snprintf(what, sizeof what, "dropout n=%zu first=%llu rate=%g%s (%zu kept)", n,
                (unsigned long long)first, rate, inPlace ? " in place" : "", kept);
  expectNear(what, inPlace ? dx.host() : dy.host(), want, 0, 0);
}

// Column sums: a double sum in row order, rounded once (the CPU's bits).
void testColumnSums(size_t rows, size_t cols, double divisor, std::mt19937& rng) {
  std::vector<float> x = randomVector(rows * cols, rng, -1, 1);
  std::vector<double> want(cols);
  for (size_t j = 0; j < cols; ++j) {
    double acc = 0.0;
    for (size_t r = 0; r < rows; ++r) acc += x[r * cols + j];
    want[j] = float(acc / divisor);
  }
  Device dx(x), dout(std::vector<float>(cols, NAN));
  CHECK_CUDA(transfuse::cuda::columnSums(dx.p, rows, cols, divisor, dout.p));
  CHECK_CUDA(cudaDeviceSynchronize());
  char what[96];
  std::snprintf(what, sizeof what, "column sums %zux%zu / %g", rows, cols, divisor);
  expectNear(what, dout.host(), want, 0, 0);
}

// reduce over any axes against a double reference in element order: exact
// for sums over leading axes (columnSums' bits) and whole-tensor sums of few
// elements, else within a float rounding; a max is exact.
void testReduce(std::vector<int64_t> dims, uint32_t mask, transfuse::cuda::ReduceKind kind,
                std::mt19937& rng) {
  using transfuse::cuda::ReduceKind;
  const int rank = static_cast<int>(dims.size());
  size_t total = 1, outputs = 1;
  for (int d = 0; d < rank; ++d) {
    total *= dims[d];
    if (!((mask >> d) & 1u)) outputs *= dims[d];
  }
  std::vector<float> x = randomVector(total, rng, -1, 1);
  std::vector<double> sum(outputs, 0.0), best(outputs, -INFINITY), count(outputs, 0.0);
  for (size_t e = 0; e < total; ++e) {
    size_t rem = e, o = 0, stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      const size_t i = rem % dims[d];
      rem /= dims[d];
      if (!((mask >> d) & 1u)) {
        o += i * stride;
        stride *= dims[d];
      }
    }
    sum[o] += x[e];
    best[o] = std::max<double>(best[o], x[e]);
    count[o] += 1;
  }
  std::vector<double> want(outputs);
  for (size_t o = 0; o < outputs; ++o)
    want[o] = kind == ReduceKind::kMax   ? best[o]
              : kind == ReduceKind::kSum ? float(sum[o])
                                         : float(sum[o] / count[o]);
  Device dx(x), dy(std::vector<float>(outputs, NAN));
  CHECK_CUDA(transfuse::cuda::reduce(kind, dx.p, dims.data(), rank, mask, dy.p));
  CHECK_CUDA(cudaDeviceSynchronize());
  char what[96];
  std::snprintf(what, sizeof what, "reduce %s rank %d mask %u", kind == ReduceKind::kMax ? "max" : kind == ReduceKind::kSum ? "sum" : "mean", rank, mask);
  expectNear(what, dy.host(), want, 0, 0);
}

// scaleAdd: y·w, or y + w·x rounded twice; sumOfSquares against a double sum,
// the same bits twice.
void testScaleAddAndSumOfSquares(size_t n, std::mt19937& rng) {
  std::vector<float> x = randomVector(n, rng, -1, 1), y = randomVector(n, rng, -1, 1);
  std::vector<double> scaled(n), added(n);
  for (size_t i = 0; i < n; ++i) {
    scaled[i] = y[i] * 0.37f;
    const float product = 0.5f * x[i];  // rounded, then the sum rounded: the CPU's
    added[i] = y[i] + product;
  }
  Device dx(x), dy(y), dz(y);
  CHECK_CUDA(transfuse::cuda::scaleAdd(dy.p, nullptr, 0.37f, n));
  CHECK_CUDA(transfuse::cuda::scaleAdd(dz.p, dx.p, 0.5f, n));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectNear("scaleAdd y·w", dy.host(), scaled, 0, 0);
  expectNear("scaleAdd y + w·x", dz.host(), added, 0, 0);
  double want = 0.0;
  for (float v : x) want += double(v) * v;
  double* sums = nullptr;
  double* work = nullptr;
  CHECK_CUDA(cudaMalloc(&sums, 2 * sizeof(double)));
  CHECK_CUDA(cudaMalloc(&work, transfuse::cuda::kSumOfSquaresWork * sizeof(double)));
  CHECK_CUDA(transfuse::cuda::sumOfSquares(dx.p, n, sums, work));
  CHECK_CUDA(transfuse::cuda::sumOfSquares(dx.p, n, sums + 1, work));
  double got[2];
  CHECK_CUDA(cudaMemcpy(got, sums, sizeof got, cudaMemcpyDeviceToHost));
  cudaFree(sums);
  cudaFree(work);
  if (std::fabs(got[0] - want) > 1e-12 * std::max(1.0, want) || got[0] != got[1]) {
    std::printf("sumOfSquares n=%zu: %.17g and %.17g, want %.17g  FAILED\n", n, got[0], got[1], want);
    ++gFailures;
  } else {
    std::printf("sumOfSquares n=%zu: ok\n", n);
  }
}

// layer_norm's backward against a double reference; dx in place of x or dy.
void testLayerNormGrad(size_t rows, size_t width, bool affine, int alias, std::mt19937& rng) {
  const float eps = 1e-5f;
  std::vector<float> x = randomVector(rows * width, rng, -2, 2);
  std::vector<float> dy = randomVector(rows * width, rng, -1, 1);
  std::vector<float> gamma = affine ? randomVector(width, rng, -1.5f, 1.5f) : std::vector<float>();
  std::vector<double> wantDx(rows * width), wantDg(width, 0.0), wantDb(width, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0, md = 0, mdx = 0;
    for (size_t j = 0; j < width; ++j) mean += x[r * width + j];
    mean /= width;
    for (size_t j = 0; j < width; ++j) var += std::pow(x[r * width + j] - mean, 2);
    const double rstd = 1.0 / std::sqrt(var / width + eps);
    auto xhat = [&](size_t j) { return (x[r * width + j] - mean) * rstd; };
    auto d = [&](size_t j) { return dy[r * width + j] * (affine ? double(gamma[j]) : 1.0); };
    for (size_t j = 0; j < width; ++j) {
      md += d(j);
      mdx += d(j) * xhat(j);
      wantDg[j] += dy[r * width + j] * xhat(j);
      wantDb[j] += dy[r * width + j];
    }
    md /= width;
    mdx /= width;
    for (size_t j = 0; j < width; ++j) wantDx[r * width + j] = rstd * (d(j) - md - xhat(j) * mdx);
  }
  Device dx(x), ddy(dy), dgamma(gamma), dout(alias ? std::vector<float>() :
                                                     std::vector<float>(rows * width, NAN));
  Device dg(std::vector<float>(width, NAN)), db(std::vector<float>(width, NAN));
  Device work(std::vector<float>(2 * rows));
  float* out = alias == 1 ? dx.p : alias == 2 ? ddy.p : dout.p;
  CHECK_CUDA(transfuse::cuda::layerNormGrad(dx.p, dgamma.p, ddy.p, out, dg.p, db.p, rows, width,
                                            eps, work.p));
  CHECK_CUDA(cudaDeviceSynchronize());
  char what[96];
  std::snprintf(what, sizeof what, "layer_norm_grad %zux%zu%s%s", rows, width,
                affine ? " affine" : "", alias == 1 ? " dx=x" : alias == 2 ? " dx=dy" : "");
  expectNear(what, alias == 1 ? dx.host() : alias == 2 ? ddy.host() : dout.host(), wantDx, 2e-5,
             1e-4);
  expectNear("  its dgamma", dg.host(), wantDg, 1e-4, 1e-4);
  expectNear("  its dbeta", db.host(), wantDb, 1e-5, 1e-5);
}

// Cross-entropy with label smoothing and ignored rows against a double
// reference: the mean, and the gradient for an upstream gradient g (in
// place of the logits too); then a bad label writes nothing and is reported.
void testCrossEntropy(size_t rows, size_t width, float smoothing, bool inPlace,
                      std::mt19937& rng) {
  const int32_t ignore = 1;
  const float g = 2.5f;
  std::vector<float> x = randomVector(rows * width, rng, -6, 6);
  std::vector<int32_t> labels(rows);
  std::uniform_int_distribution<int32_t> pick(0, int32_t(width) - 1);
  for (size_t r = 0; r < rows; ++r) labels[r] = r % 3 == 1 ? ignore : pick(rng);
  size_t count = 0;
  double total = 0;
  std::vector<double> wantGrad(rows * width, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    if (labels[r] == ignore) continue;
    ++count;
  }
  for (size_t r = 0; r < rows; ++r) {
    if (labels[r] == ignore) continue;
    const float* xr = x.data() + r * width;
    double mx = -INFINITY, sum = 0, all = 0;
    for (size_t j = 0; j < width; ++j) mx = std::max(mx, double(xr[j]));
    for (size_t j = 0; j < width; ++j) {
      sum += std::exp(xr[j] - mx);
      all += xr[j];
    }
    const double lse = mx + std::log(sum), eps = smoothing, V = double(width);
    total += lse - (1 - eps) * xr[labels[r]] - eps / V * all;
    for (size_t j = 0; j < width; ++j)
      wantGrad[r * width + j] = g / double(count) *
          (std::exp(xr[j] - mx) / sum - eps / V - (j == size_t(labels[r]) ? 1 - eps : 0.0));
  }
  const double wantMean = count ? total / double(count) : 0.0;
  DeviceOf<int32_t> dlabels(labels);
  Device dx(x), dgrad(inPlace ? std::vector<float>() : std::vector<float>(rows * width, NAN));
  Device dmean(std::vector<float>{NAN}), dg(std::vector<float>{g});
  Device work(std::vector<float>(rows + 1));
  DeviceOf<unsigned int> bad(std::vector<unsigned int>{0xffffffffu});
  CHECK_CUDA(transfuse::cuda::crossEntropyMean(dx.p, dlabels.p, rows, width, smoothing, ignore,
                                               dmean.p, bad.p, work.p));
  float* grad = inPlace ? dx.p : dgrad.p;
  CHECK_CUDA(transfuse::cuda::crossEntropyGrad(dx.p, dlabels.p, rows, width, smoothing, ignore,
                                               dg.p, grad, bad.p, work.p));
  CHECK_CUDA(cudaDeviceSynchronize());
  char what[96];
  std::snprintf(what, sizeof what, "cross-entropy mean %zux%zu eps=%g", rows, width, smoothing);
  expectNear(what, dmean.host(), {wantMean}, 1e-5, 1e-5);
  std::snprintf(what, sizeof what, "  its gradient%s", inPlace ? " (in place)" : "");
  expectNear(what, inPlace ? dx.host() : dgrad.host(), wantGrad, 1e-7, 1e-4);
  expectBad("  no bad label", readBad(bad), 0xffffffffu);

  // Labels 2 and 4 out of range: the first, 2, is reported; nothing written.
  if (rows < 5) return;
  labels[4] = int32_t(width);
  labels[2] = -3;
  DeviceOf<int32_t> dbadLabels(labels);
  Device dmean2(std::vector<float>{NAN}), dgrad2(std::vector<float>(rows * width, NAN));
  CHECK_CUDA(transfuse::cuda::crossEntropyMean(dx.p, dbadLabels.p, rows, width, smoothing, ignore,
                                               dmean2.p, bad.p, work.p));
  CHECK_CUDA(transfuse::cuda::crossEntropyGrad(dx.p, dbadLabels.p, rows, width, smoothing, ignore,
                                               dg.p, dgrad2.p, bad.p, work.p));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectBad("cross-entropy, labels 2 and 4 bad", readBad(bad), 2);
  expectNear("  nothing written (mean)", dmean2.host(), {NAN}, 0, 0);
  expectNear("  nothing written (gradient)", dgrad2.host(),
             std::vector<double>(rows * width, NAN), 0, 0);
}

// embedding_grad: the rows of g added at their ids in token order (float
// adds, the CPU's bits), repeated ids included; then a bad id writes nothing.
void testEmbeddingGrad(std::mt19937& rng) {
  const size_t vocab = 40, dim = 300, count = 97;
  std::vector<int32_t> ids(count);
  for (size_t t = 0; t < count; ++t) ids[t] = int32_t((t * 7) % 13);  // ids 0..12, repeated
  std::vector<float> g = randomVector(count * dim, rng, -1, 1);
  std::vector<float> sum(vocab * dim, 0.0f);
  for (size_t t = 0; t < count; ++t)
    for (size_t c = 0; c < dim; ++c) sum[ids[t] * dim + c] += g[t * dim + c];
  DeviceOf<int32_t> dids(ids);
  Device dg(g), dout(std::vector<float>(vocab * dim, NAN));
  DeviceOf<unsigned int> bad(std::vector<unsigned int>{0xffffffffu});
  CHECK_CUDA(transfuse::cuda::embeddingGrad(dids.p, count, dg.p, vocab, dim, dout.p, bad.p));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectNear("embedding_grad (repeated ids)", dout.host(), toDouble(sum), 0, 0);
  expectBad("  no bad id", readBad(bad), 0xffffffffu);
  ids[50] = int32_t(vocab);
  ids[60] = -1;
  DeviceOf<int32_t> dbadIds(ids);
  Device dout2(std::vector<float>(vocab * dim, NAN));
  CHECK_CUDA(transfuse::cuda::embeddingGrad(dbadIds.p, count, dg.p, vocab, dim, dout2.p, bad.p));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectBad("embedding_grad, ids 50 and 60 bad", readBad(bad), 50);
  expectNear("  nothing written", dout2.host(), std::vector<double>(vocab * dim, NAN), 0, 0);
}


// attention_grad against a double reference of the CPU kernel's formulas:
// Q, dO and dQ in the [B, S, H, D] layout of a fused projection (strided)
// or dense, K, V, dK and dV dense; causal, key lengths (row 1 of the batch
// fully masked) and a key mask; dropout from the same Philox draws. Keys no
// query sees hold NaN (arena garbage): their dK and dV must be 0.
void testAttentionGrad(size_t B, size_t H, size_t Sq, size_t Sk, size_t D, bool causal,
                       bool lengths, bool keyMask, double rate, bool dense, std::mt19937& rng) {
  const float scale = 1.0f / std::sqrt(float(D));
  const uint64_t seed = 99, step = 3, stream = 11;
  auto qIndex = [&](size_t b, size_t h, size_t i, size_t d) {
    return dense ? ((b * H + h) * Sq + i) * D + d : ((b * Sq + i) * H + h) * D + d;
  };
  auto kIndex = [&](size_t b, size_t h, size_t j, size_t d) { return ((b * H + h) * Sk + j) * D + d; };
  std::vector<float> q = randomVector(B * Sq * H * D, rng, -1, 1);
  std::vector<float> g = randomVector(B * Sq * H * D, rng, -1, 1);
  std::vector<float> k = randomVector(B * H * Sk * D, rng, -1, 1);
  std::vector<float> v = randomVector(B * H * Sk * D, rng, -1, 1);
  const std::vector<int32_t> len = attentionKeyLengths(B, Sk);
  std::vector<uint8_t> mask(B * Sk);
  for (size_t b = 0; b < B; ++b)
    for (size_t j = 0; j < Sk; ++j) mask[b * Sk + j] = (b + j) % 4 != 0;
  auto visible = [&](size_t b, size_t i, size_t j) {
    long end = long(Sk);
    if (lengths) end = std::min<long>(end, len[b]);
    if (causal) end = std::min<long>(end, long(i + Sk) - long(Sq) + 1);
    return long(j) < end && (!keyMask || mask[b * Sk + j]);
  };
  for (size_t b = 0; b < B; ++b)
    for (size_t j = 0; j < Sk; ++j) {
      bool seen = false;
      for (size_t i = 0; i < Sq; ++i) seen |= visible(b, i, j);
      if (!seen)
        for (size_t h = 0; h < H; ++h)
          for (size_t d = 0; d < D; ++d) k[kIndex(b, h, j, d)] = v[kIndex(b, h, j, d)] = NAN;
    }
  const double ks = 1.0 / (1.0 - rate);
  std::vector<double> wantDq(q.size(), 0.0), wantDk(k.size(), 0.0), wantDv(v.size(), 0.0);
  std::vector<double> P(Sq * Sk), dPd(Sq * Sk);
  std::vector<char> keep(Sq * Sk);
  for (size_t b = 0; b < B; ++b)
    for (size_t h = 0; h < H; ++h) {
      std::fill(P.begin(), P.end(), 0.0);
      std::fill(dPd.begin(), dPd.end(), 0.0);
      for (size_t i = 0; i < Sq; ++i) {
        double mx = -INFINITY, sum = 0;
        for (size_t j = 0; j < Sk; ++j) {
          keep[i * Sk + j] = rate == 0 || transfuse::rt::philoxUniform(
                                              seed, step, stream, ((b * H + h) * Sq + i) * Sk + j) >= rate;
          if (!visible(b, i, j)) continue;
          double dot = 0, dp = 0;
          for (size_t d = 0; d < D; ++d) {
            dot += double(q[qIndex(b, h, i, d)]) * k[kIndex(b, h, j, d)];
            dp += double(g[qIndex(b, h, i, d)]) * v[kIndex(b, h, j, d)];
          }
          P[i * Sk + j] = dot * scale;
          dPd[i * Sk + j] = keep[i * Sk + j] ? dp * (rate > 0 ? ks : 1.0) : 0.0;
          mx = std::max(mx, P[i * Sk + j]);
        }
        if (mx == -INFINITY) continue;
        for (size_t j = 0; j < Sk; ++j)
          if (visible(b, i, j)) sum += P[i * Sk + j] = std::exp(P[i * Sk + j] - mx);
        double rowDot = 0;
        for (size_t j = 0; j < Sk; ++j)
          if (visible(b, i, j)) {
            P[i * Sk + j] /= sum;
            rowDot += dPd[i * Sk + j] * P[i * Sk + j];
          }
        for (size_t j = 0; j < Sk; ++j) {
          if (!visible(b, i, j)) continue;
          const double p = P[i * Sk + j];
          const double pd = keep[i * Sk + j] ? p * (rate > 0 ? ks : 1.0) : 0.0;
          const double ds = p * (dPd[i * Sk + j] - rowDot) * scale;
          for (size_t d = 0; d < D; ++d) {
            wantDv[kIndex(b, h, j, d)] += pd * g[qIndex(b, h, i, d)];
            wantDq[qIndex(b, h, i, d)] += ds * k[kIndex(b, h, j, d)];
            wantDk[kIndex(b, h, j, d)] += ds * q[qIndex(b, h, i, d)];
          }
        }
      }
    }
  Device dq(q), dg(g), dk(k), dv(v);
  Device gq(std::vector<float>(q.size(), NAN)), gk(std::vector<float>(k.size(), NAN)),
      gv(std::vector<float>(v.size(), NAN)), work(std::vector<float>(2 * B * H * Sq + 1));
  DeviceOf<int32_t> dlen(len);
  DeviceOf<uint8_t> dmask(mask);
  transfuse::cuda::AttentionGradArgs a;
  transfuse::cuda::AttentionArgs& f = a.forward;
  f.batch = B;
  f.heads = H;
  f.seqQ = Sq;
  f.seqK = Sk;
  f.headDim = D;
  const size_t qb = dense ? 0 : Sq * H * D, qh = dense ? 0 : D, qr = dense ? 0 : H * D;
  f.q = {dq.p, qb, qh, qr};
  f.k = {dk.p, 0, 0, 0};
  f.v = {dv.p, 0, 0, 0};
  f.scale = scale;
  f.causal = causal;
  f.keyLengths = lengths ? dlen.p : nullptr;
  f.keyMask = keyMask ? dmask.p : nullptr;
  a.grad = {dg.p, qb, qh, qr};
  a.dq = {gq.p, qb, qh, qr};
  a.dk = {gk.p, 0, 0, 0};
  a.dv = {gv.p, 0, 0, 0};
  f.dropoutRate = rate;
  f.dropoutSeed = seed;
  f.dropoutStep = step;
  f.dropoutStream = stream;
  CHECK_CUDA(transfuse::cuda::attentionBackward(a, work.p));
  CHECK_CUDA(cudaDeviceSynchronize());
  char what[128];
  std::snprintf(what, sizeof what, "attention_grad B=%zu H=%zu Sq=%zu Sk=%zu D=%zu%s%s%s%s dQ", B,
                H, Sq, Sk, D, causal ? " causal" : "", lengths ? " lengths" : "",
                keyMask ? " key mask" : "", rate > 0 ? " dropout" : "");
  expectNear(what, gq.host(), wantDq, 1e-5, 1e-4);
  expectNear("  its dK", gk.host(), wantDk, 1e-5, 1e-4);
  expectNear("  its dV", gv.host(), wantDv, 1e-5, 1e-4);
}

}  // namespace

int main() {
  deviceOrSkip("the CUDA training kernel tests");
  std::mt19937 rng(11);
  using transfuse::cuda::Activation;
  testGemmBackward(37, 70, 300, true, false, Activation::kNone, 1.0f, rng);
  testGemmBackward(130, 65, 45, true, true, Activation::kRelu, 1.0f, rng);
  testGemmBackward(64, 128, 64, false, true, Activation::kGelu, 0.5f, rng);
  testGemmBackward(3, 200, 17, false, false, Activation::kGeluTanh, 1.0f, rng);
  testGemmBackward(40, 33, 70, true, true, Activation::kSilu, 1.25f, rng);
  for (size_t n : {size_t(1), size_t(1000), size_t(100003)}) {
    testAdam(n, 0.0f, 1.0f, 1, rng);
    testAdam(n, 0.01f, 0.37f, 4000, rng);
  }
  testDropout(1, 0, 0.1, false, rng);
  testDropout(1001, 3, 0.1, false, rng);
  testDropout(70000, 1ull << 33, 0.5, true, rng);  // indices past 32 bits
  testColumnSums(1, 5, 1.0, rng);
  testColumnSums(3001, 515, 1.0, rng);
  testColumnSums(64, 2048, 64.0, rng);
  using transfuse::cuda::ReduceKind;
  testReduce({37, 5, 21}, 3u, ReduceKind::kSum, rng);   // a bias gradient: columnSums
  testReduce({6, 4, 33}, 1u, ReduceKind::kMean, rng);  // the first axis: columnSums
  testReduce({2, 3, 17, 1}, 8u, ReduceKind::kSum, rng);  // size-1 last axis
  testReduce({2, 3, 5, 7}, 10u, ReduceKind::kMax, rng);  // axes 1 and 3
  testReduce({3, 4, 5}, 7u, ReduceKind::kSum, rng);      // everything
  testReduce({4, 0, 3}, 2u, ReduceKind::kMax, rng);      // over nothing: -inf
  for (size_t n : {size_t(1), size_t(1000), size_t(1000003)}) testScaleAddAndSumOfSquares(n, rng);
  for (int alias : {0, 1, 2}) {
    testLayerNormGrad(37, 515, true, alias, rng);
    testLayerNormGrad(3, 4096, false, alias, rng);
  }
  testLayerNormGrad(1, 1, true, 0, rng);
  testCrossEntropy(7, 37, 0.1f, false, rng);
  testCrossEntropy(300, 8000, 0.1f, true, rng);
  testCrossEntropy(33, 1001, 0.0f, false, rng);
  testCrossEntropy(3, 5, 0.1f, false, rng);  // rows 0 and 2 count
  testEmbeddingGrad(rng);
  testAttentionGrad(2, 3, 37, 45, 64, true, true, false, 0.0, false, rng);
  testAttentionGrad(3, 2, 50, 50, 32, false, true, true, 0.1, false, rng);
  testAttentionGrad(1, 2, 40, 20, 37, true, false, false, 0.0, true, rng);  // Sq > Sk
  testAttentionGrad(2, 1, 33, 65, 128, false, false, true, 0.3, true, rng);
  testAttentionGrad(1, 1, 5, 7, 256, true, false, false, 0.0, true, rng);
  std::printf("%s\n", gFailures ? "FAIL" : "PASS");
  return gFailures ? 1 : 0;
}
