// The CUDA kernels (runtime/kernels/cuda) against double-precision references on
// random data: every row kernel at odd and large widths (the unstaged path
// past 11264 floats), residual / gamma / sum given or not, in place, and a
// fully masked softmax row. Exit 0: all passed; 1: a failure (each printed);
// 77: no CUDA device (ctest reports the test skipped). Built by every build
// where nvcc exists (sm_80 and sm_90, the CUDA runtime linked statically, so
// the binary runs on a GPU machine without the toolkit); tests/gpu/run.sh
// runs it there.

#include "runtime/kernels/cuda/Attention.cuh"
#include "runtime/kernels/cuda/AttentionBf16.cuh"
#include "runtime/kernels/cuda/Decode.cuh"
#include "runtime/kernels/cuda/Embedding.cuh"
#include "runtime/kernels/cuda/CublasLt.cuh"
#include "runtime/kernels/cuda/Gemm.cuh"
#include "runtime/kernels/cuda/Layout.cuh"
#include "runtime/kernels/cuda/Norm.cuh"
#include "runtime/kernels/cuda/Train.cuh"
#include "runtime/kernels/ElementwiseMath.h"
#include "runtime/kernels/Optimizer.h"
#include "runtime/Philox.h"
#include "tests/gpu/CudaCheck.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

int gFailures = 0;

// A device copy of a host vector (empty: null), freed by the destructor.
template <class T>
struct DeviceOf {
  T* p = nullptr;
  size_t n = 0;
  explicit DeviceOf(const std::vector<T>& h) : n(h.size()) {
    if (!n) return;
    CHECK_CUDA(cudaMalloc(&p, n * sizeof(T)));
    CHECK_CUDA(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  DeviceOf(const DeviceOf&) = delete;
  DeviceOf& operator=(const DeviceOf&) = delete;
  ~DeviceOf() { cudaFree(p); }
  std::vector<T> host() const {
    std::vector<T> h(n);
    if (n) CHECK_CUDA(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};
using Device = DeviceOf<float>;

std::vector<float> randomVector(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// |got - want| <= atol + rtol·|want| everywhere; prints the worst error.
void expectNear(const char* what, const std::vector<float>& got, const std::vector<double>& want,
                double atol, double rtol) {
  double worst = 0;
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;  // NaN copied as is
    const double e = std::fabs(double(got[i]) - want[i]);
    if (!(e <= atol + rtol * std::fabs(want[i])) && bad++ < 5)
      std::printf("  %s[%zu] = %.9g, reference %.9g\n", what, i, got[i], want[i]);
    if (e > worst || std::isnan(e)) worst = e;
  }
  std::printf("%-40s max |error| %.3g%s\n", what, worst, bad ? "  FAILED" : "");
  gFailures += bad != 0;
}

void testAddLayerNorm(size_t rows, size_t width, bool residual, bool affine, bool withSum,
                      bool inPlace, std::mt19937& rng) {
  const float eps = 1e-5f;
  std::vector<float> x = randomVector(rows * width, rng, -2, 2);
  std::vector<float> res = residual ? randomVector(rows * width, rng, -2, 2) : std::vector<float>();
  std::vector<float> gamma = affine ? randomVector(width, rng, -1, 1) : std::vector<float>();
  std::vector<float> beta = affine ? randomVector(width, rng, -1, 1) : std::vector<float>();
  std::vector<double> want(rows * width), wantSum(rows * width);
  for (size_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (size_t j = 0; j < width; ++j)
      // The sum as the kernel forms it: one fp32 addition.
      mean += wantSum[r * width + j] = x[r * width + j] + (residual ? res[r * width + j] : 0.0f);
    mean /= width;
    for (size_t j = 0; j < width; ++j) var += std::pow(wantSum[r * width + j] - mean, 2);
    const double rstd = 1.0 / std::sqrt(var / width + eps);
    for (size_t j = 0; j < width; ++j)
      want[r * width + j] = (wantSum[r * width + j] - mean) * rstd * (affine ? gamma[j] : 1.0) +
                            (affine ? beta[j] : 0.0);
  }
  Device dx(x), dres(res), dgamma(gamma), dbeta(beta);
  Device dy(inPlace ? std::vector<float>() : std::vector<float>(rows * width));
  Device dsum(withSum ? std::vector<float>(rows * width) : std::vector<float>());
  float* y = inPlace ? dx.p : dy.p;
  CHECK_CUDA(transfuse::cuda::addLayerNorm(dx.p, dres.p, dgamma.p, dbeta.p, y, dsum.p, rows, width,
                                           eps));
  CHECK_CUDA(cudaDeviceSynchronize());
  char what[96];
  std::snprintf(what, sizeof what, "add_layer_norm %zux%zu%s%s%s%s", rows, width,
                residual ? " +res" : "", affine ? " affine" : "", withSum ? " sum" : "",
                inPlace ? " in place" : "");
  expectNear(what, inPlace ? dx.host() : dy.host(), want, 1e-5, 1e-5);
  if (withSum) {
    std::snprintf(what, sizeof what, "  its sum %zux%zu", rows, width);
    expectNear(what, dsum.host(), wantSum, 0, 0);
  }
}

void testSoftmax(size_t rows, size_t width, bool inPlace, std::mt19937& rng) {
  std::vector<float> x = randomVector(rows * width, rng, -8, 8);
  if (rows > 1) std::fill_n(x.begin(), width, -std::numeric_limits<float>::infinity());
  std::vector<double> want(rows * width, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, sum = 0;
    for (size_t j = 0; j < width; ++j) mx = std::max(mx, double(x[r * width + j]));
    if (mx == -INFINITY) continue;
    for (size_t j = 0; j < width; ++j) sum += want[r * width + j] = std::exp(x[r * width + j] - mx);
    for (size_t j = 0; j < width; ++j) want[r * width + j] /= sum;
  }
  Device dx(x), dy(inPlace ? std::vector<float>() : std::vector<float>(rows * width));
  CHECK_CUDA(transfuse::cuda::softmax(dx.p, inPlace ? dx.p : dy.p, rows, width));
  CHECK_CUDA(cudaDeviceSynchronize());
  char what[96];
  std::snprintf(what, sizeof what, "softmax %zux%zu%s", rows, width, inPlace ? " in place" : "");
  expectNear(what, inPlace ? dx.host() : dy.host(), want, 1e-9, 4e-6);
}

// Key lengths [B] for the attention tests: row 1 of the batch has none
// (fully masked), the others between Sk/2 and Sk.
std::vector<int32_t> attentionKeyLengths(size_t B, size_t Sk) {
  std::vector<int32_t> len(B);
  for (size_t b = 0; b < B; ++b) len[b] = b == 1 ? 0 : int32_t(Sk - (b * 7) % (Sk + 1) / 2);
  return len;
}

// Attention against a double-precision reference: Q and O in the [B, S, H, D]
// layout of a fused projection (strides), K and V dense; causal and key
// lengths (row 1 of the batch fully masked when there are two or more).
void testAttention(size_t B, size_t H, size_t Sq, size_t Sk, size_t D, bool causal,
                   bool lengths, std::mt19937& rng, bool dense = false, bool keyMask = false,
                   double rate = 0.0) {
  const uint64_t seed = 5, step = 2, stream = 9;  // dropout's draws (with a rate)
  auto weight = [&](size_t b, size_t h, size_t i, size_t j) {  // dropout's factor
    if (rate == 0.0) return 1.0;
    return transfuse::rt::philoxUniform(seed, step, stream, ((b * H + h) * Sq + i) * Sk + j) >= rate
               ? 1.0 / (1.0 - rate)
               : 0.0;
  };
  const float scale = 1.0f / std::sqrt(float(D));
  // Q and O [B, Sq, H, D] (strided), or [B, H, Sq, D] (dense, zero strides).
  auto qoIndex = [&](size_t b, size_t h, size_t i, size_t d) {
    return dense ? ((b * H + h) * Sq + i) * D + d : ((b * Sq + i) * H + h) * D + d;
  };
  std::vector<float> q = randomVector(B * Sq * H * D, rng, -1, 1);
  std::vector<float> k = randomVector(B * H * Sk * D, rng, -1, 1);
  std::vector<float> v = randomVector(B * H * Sk * D, rng, -1, 1);
  const std::vector<int32_t> len = attentionKeyLengths(B, Sk);
  // A byte mask [B, Sk] (0 masks): every third key, and all of row 1.
  std::vector<uint8_t> mask(B * Sk);
  for (size_t b = 0; b < B; ++b)
    for (size_t j = 0; j < Sk; ++j) mask[b * Sk + j] = b != 1 && (b + j) % 3 != 0;
  // Keys no query sees (past a row's length, or masked) hold NaN, as arena
  // garbage may: none of it may reach O.
  for (size_t b = 0; b < B; ++b)
    for (size_t j = 0; j < Sk; ++j)
      if ((lengths && long(j) >= len[b]) || (keyMask && !mask[b * Sk + j]))
        for (size_t h = 0; h < H; ++h)
          for (size_t d = 0; d < D; ++d)
            k[((b * H + h) * Sk + j) * D + d] = v[((b * H + h) * Sk + j) * D + d] = NAN;
  auto qAt = [&](size_t b, size_t h, size_t i, size_t d) { return double(q[qoIndex(b, h, i, d)]); };
  auto kvAt = [&](const std::vector<float>& t, size_t b, size_t h, size_t j, size_t d) {
    return double(t[((b * H + h) * Sk + j) * D + d]);
  };
  std::vector<double> want(B * Sq * H * D, 0.0);
  std::vector<double> s(Sk);
  for (size_t b = 0; b < B; ++b)
    for (size_t h = 0; h < H; ++h)
      for (size_t i = 0; i < Sq; ++i) {
        long end = long(Sk);
        if (lengths) end = std::min<long>(end, len[b]);
        if (causal) end = std::min<long>(end, long(i + Sk) - long(Sq) + 1);
        if (end <= 0) continue;
        double mx = -INFINITY, sum = 0;
        auto seen = [&](long j) { return !keyMask || mask[b * Sk + j]; };
        for (long j = 0; j < end; ++j) {
          if (!seen(j)) continue;
          double dot = 0;
          for (size_t d = 0; d < D; ++d) dot += qAt(b, h, i, d) * kvAt(k, b, h, j, d);
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        if (mx == -INFINITY) continue;  // every key masked: zeros
        for (long j = 0; j < end; ++j) sum += s[j] = seen(j) ? std::exp(s[j] - mx) : 0.0;
        for (long j = 0; j < end; ++j)
          for (size_t d = 0; d < D; ++d)
            if (seen(j))
              want[qoIndex(b, h, i, d)] += s[j] / sum * weight(b, h, i, j) * kvAt(v, b, h, j, d);
      }
  Device dq(q), dk(k), dv(v), dout(std::vector<float>(B * Sq * H * D, NAN));
  int32_t* dlen = nullptr;
  CHECK_CUDA(cudaMalloc(&dlen, B * sizeof(int32_t)));
  CHECK_CUDA(cudaMemcpy(dlen, len.data(), B * sizeof(int32_t), cudaMemcpyHostToDevice));
  uint8_t* dmask = nullptr;
  CHECK_CUDA(cudaMalloc(&dmask, B * Sk + 1));
  CHECK_CUDA(cudaMemcpy(dmask, mask.data(), B * Sk, cudaMemcpyHostToDevice));
  transfuse::cuda::AttentionArgs a;
  a.batch = B;
  a.heads = H;
  a.seqQ = Sq;
  a.seqK = Sk;
  a.headDim = D;
  a.q = dense ? transfuse::cuda::AttentionTensor{dq.p, 0, 0, 0}
              : transfuse::cuda::AttentionTensor{dq.p, Sq * H * D, D, H * D};
  a.k = {dk.p, 0, 0, 0};
  a.v = {dv.p, 0, 0, 0};
  a.out = dout.p;
  if (!dense) {
    a.outBatchStride = Sq * H * D;
    a.outHeadStride = D;
    a.outRowStride = H * D;
  }
  a.scale = scale;
  a.causal = causal;
  a.keyLengths = lengths ? dlen : nullptr;
  a.keyMask = keyMask ? dmask : nullptr;
  a.dropoutRate = rate;
  a.dropoutSeed = seed;
  a.dropoutStep = step;
  a.dropoutStream = stream;
  CHECK_CUDA(transfuse::cuda::attention(a));
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaFree(dlen));
  CHECK_CUDA(cudaFree(dmask));
  char what[112];
  std::snprintf(what, sizeof what, "attention B=%zu H=%zu Sq=%zu Sk=%zu D=%zu%s%s%s%s%s", B, H, Sq,
                Sk, D, causal ? " causal" : "", lengths ? " lengths" : "", dense ? " dense" : "",
                keyMask ? " key mask" : "", rate > 0 ? " dropout" : "");
  expectNear(what, dout.host(), want, 2e-5, 2e-5);
}

// The GEMM with every epilogue against a double reference, B as [K, N] or
// (transB, a weight) [N, K], leading dimensions past the row lengths.
// Runs `g` through cuBLASLt (`cublasLt`) or the CUDA-core kernel and waits;
// false when cuBLASLt cannot express it (the case is skipped).
bool runGemm(const transfuse::cuda::GemmArgs& g, bool cublasLt) {
  if (cublasLt) {
    const cudaError_t e = transfuse::cuda::gemmCublasLt(g);
    if (e == cudaErrorNotSupported) return false;
    CHECK_CUDA(e);
  } else {
    CHECK_CUDA(transfuse::cuda::gemmCudaCores(g));
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  return true;
}

// `cublasLt`: through cuBLASLt (where it is found; a case it cannot express
// is skipped), else the CUDA-core kernel.
void testGemm(size_t M, size_t N, size_t K, bool transB, bool bias, transfuse::cuda::Activation act,
              bool residual, std::mt19937& rng, bool cublasLt = false) {
  namespace tm = transfuse::kernels::math;
  const size_t lda = K + 3, ldb = (transB ? K : N) + 1, ldc = N + 2, ldr = N + 5;
  std::vector<float> a = randomVector(M * lda, rng, -1, 1);
  std::vector<float> b = randomVector((transB ? N : K) * ldb, rng, -1, 1);
  std::vector<float> bv = randomVector(N, rng, -1, 1), r = randomVector(M * ldr, rng, -1, 1);
  std::vector<double> want(M * ldc, 7.0);  // the columns past N stay untouched
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      double v = 0;
      for (size_t k = 0; k < K; ++k)
        v += double(a[i * lda + k]) * double(transB ? b[j * ldb + k] : b[k * ldb + j]);
      if (bias) v += bv[j];
      if (act == transfuse::cuda::Activation::kRelu) v = tm::relu(v);
      if (act == transfuse::cuda::Activation::kGelu) v = tm::gelu(v);
      if (act == transfuse::cuda::Activation::kGeluTanh) v = tm::geluTanh(v);
      if (residual) v += r[i * ldr + j];
      want[i * ldc + j] = v;
    }
  Device da(a), db(b), dbias(bv), dr(r), dc(std::vector<float>(M * ldc, 7.0f));
  transfuse::cuda::GemmArgs g;
  g.m = M; g.n = N; g.k = K;
  g.a = da.p; g.lda = lda;
  g.b = db.p; g.ldb = ldb; g.transB = transB;
  g.c = dc.p; g.ldc = ldc;
  g.bias = bias ? dbias.p : nullptr;
  g.activation = act;
  g.residual = residual ? dr.p : nullptr;
  g.ldr = ldr;
  if (!runGemm(g, cublasLt)) return;
  char what[96];
  std::snprintf(what, sizeof what, "gemm%s %zux%zux%zu%s%s act %d%s", cublasLt ? " (cuBLASLt)" : "",
                M, N, K, transB ? " transB" : "", bias ? " bias" : "", int(act),
                residual ? " residual" : "");
  // cuBLASLt's GELU epilogue evaluates tanh its own way: within 1e-4.
  const double atol = cublasLt && act == transfuse::cuda::Activation::kGeluTanh ? 1e-4 : 1e-5;
  expectNear(what, dc.host(), want, atol, 1e-5 * std::sqrt(double(K)) + 1e-5);
}

// The backward's GEMMs on the CUDA cores: A stored transposed ([K, M], a
// weight gradient's xᵀ) and the derivative epilogue C = (scale·A·B)·f'(pre),
// against a double reference; cuBLASLt must refuse both (the CUDA cores run
// them).
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
      want[i * ldc + j] = v;
    }
  Device da(a), db(b), dpre(pre), dc(std::vector<float>(M * ldc, 7.0f));
  transfuse::cuda::GemmArgs g;
  g.m = M; g.n = N; g.k = K;
  g.a = da.p; g.lda = lda; g.transA = transA;
  g.b = db.p; g.ldb = ldb; g.transB = transB;
  g.c = dc.p; g.ldc = ldc;
  g.derivative = derivative;
  g.pre = derivative == Activation::kNone ? nullptr : dpre.p;
  g.ldp = ldp;
  g.scale = scale;
  if (transfuse::cuda::cublasLtAvailable()) {
    const cudaError_t e = transfuse::cuda::gemmCublasLt(g);
    std::printf("%-40s %s\n", "  cuBLASLt refuses it",
                e == cudaErrorNotSupported ? "yes" : "no  FAILED");
    gFailures += e != cudaErrorNotSupported;
  }
  CHECK_CUDA(transfuse::cuda::gemm(g));
  CHECK_CUDA(cudaDeviceSynchronize());
  char what[96];
  std::snprintf(what, sizeof what, "gemm %zux%zux%zu%s%s derivative %d scale %g", M, N, K,
                transA ? " transA" : "", transB ? " transB" : "", int(derivative), scale);
  expectNear(what, dc.host(), want, 1e-5, 1e-5 * std::sqrt(double(K)) + 1e-5);
}

// The tensor-core bf16 attention under FlashAttention's rule: against the
// exact result on the same bf16 inputs its error is at most twice that of
// the unfused computation in bf16 (scores, weights and output rounded to
// bf16 as a bf16 matmul, softmax and matmul round them), with causal and
// key-length masks (row 1 of the batch fully masked).
void testAttentionBf16(size_t B, size_t H, size_t Sq, size_t Sk, size_t D, bool causal,
                       bool lengths, std::mt19937& rng) {
  auto round = [](float x) { return __bfloat162float(__float2bfloat16(x)); };
  const size_t nq = B * H * Sq * D, nk = B * H * Sk * D;
  std::vector<float> q = randomVector(nq, rng, -2, 2), k = randomVector(nk, rng, -2, 2),
                     v = randomVector(nk, rng, -1, 1);
  for (auto* t : {&q, &k, &v})
    for (float& x : *t) x = round(x);
  const std::vector<int32_t> len = attentionKeyLengths(B, Sk);
  // Keys past a row's length hold NaN, as arena garbage may: none of it
  // may reach O.
  if (lengths)
    for (size_t b = 0; b < B; ++b)
      for (size_t h = 0; h < H; ++h)
        for (size_t j = size_t(len[b]); j < Sk; ++j)
          for (size_t d = 0; d < D; ++d)
            k[((b * H + h) * Sk + j) * D + d] = v[((b * H + h) * Sk + j) * D + d] = NAN;
  const double scale = 1.0 / std::sqrt(double(D));
  std::vector<double> exact(nq, 0.0), unfused(nq, 0.0);
  std::vector<double> s(Sk);
  std::vector<float> sb(Sk);
  for (size_t b = 0; b < B; ++b)
    for (size_t h = 0; h < H; ++h)
      for (size_t i = 0; i < Sq; ++i) {
        long end = long(Sk);
        if (lengths) end = std::min<long>(end, len[b]);
        if (causal) end = std::min<long>(end, long(i + Sk) - long(Sq) + 1);
        if (end <= 0) continue;
        const float* qi = &q[((b * H + h) * Sq + i) * D];
        double mx = -INFINITY, sum = 0;
        float mxb = -INFINITY, sumb = 0;
        for (long j = 0; j < end; ++j) {
          const float* kj = &k[((b * H + h) * Sk + j) * D];
          double dot = 0;
          float dotf = 0;
          for (size_t d = 0; d < D; ++d) {
            dot += double(qi[d]) * kj[d];
            dotf += qi[d] * kj[d];
          }
          mx = std::max(mx, s[j] = dot * scale);
          mxb = std::max(mxb, sb[j] = round(round(dotf) * float(scale)));
        }
        for (long j = 0; j < end; ++j) {
          sum += s[j] = std::exp(s[j] - mx);
          sumb += sb[j] = std::exp(sb[j] - mxb);
        }
        for (size_t d = 0; d < D; ++d) {
          double o = 0;
          float ob = 0;
          for (long j = 0; j < end; ++j) {
            const float vj = v[((b * H + h) * Sk + j) * D + d];
            o += s[j] / sum * vj;
            ob += round(sb[j] / sumb) * vj;
          }
          exact[((b * H + h) * Sq + i) * D + d] = o;
          unfused[((b * H + h) * Sq + i) * D + d] = round(ob);
        }
      }
  auto toBf16 = [](const std::vector<float>& x) {
    std::vector<__nv_bfloat16> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = __float2bfloat16(x[i]);
    return y;
  };
  std::vector<__nv_bfloat16> hq = toBf16(q), hk = toBf16(k), hv = toBf16(v);
  __nv_bfloat16 *dq, *dk, *dv, *dout;
  int32_t* dlen;
  CHECK_CUDA(cudaMalloc(&dq, nq * 2));
  CHECK_CUDA(cudaMalloc(&dk, nk * 2 + 2));
  CHECK_CUDA(cudaMalloc(&dv, nk * 2 + 2));
  CHECK_CUDA(cudaMalloc(&dout, nq * 2));
  CHECK_CUDA(cudaMalloc(&dlen, B * sizeof(int32_t)));
  CHECK_CUDA(cudaMemcpy(dq, hq.data(), nq * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dk, hk.data(), nk * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dv, hv.data(), nk * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dout, 0xff, nq * 2));  // NaN until written
  CHECK_CUDA(cudaMemcpy(dlen, len.data(), B * sizeof(int32_t), cudaMemcpyHostToDevice));
  transfuse::cuda::AttentionBf16Args a;
  a.batch = B;
  a.heads = H;
  a.seqQ = Sq;
  a.seqK = Sk;
  a.headDim = D;
  a.q = {dq, 0, 0, 0};
  a.k = {dk, 0, 0, 0};
  a.v = {dv, 0, 0, 0};
  a.out = dout;
  a.scale = float(scale);
  a.causal = causal;
  a.keyLengths = lengths ? dlen : nullptr;
  CHECK_CUDA(transfuse::cuda::attentionBf16(a));
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<__nv_bfloat16> hout(nq);
  CHECK_CUDA(cudaMemcpy(hout.data(), dout, nq * 2, cudaMemcpyDeviceToHost));
  for (auto* p : {dq, dk, dv, dout}) CHECK_CUDA(cudaFree(p));
  CHECK_CUDA(cudaFree(dlen));
  double kernelError = 0, unfusedError = 0;
  for (size_t i = 0; i < nq; ++i) {
    const double e = std::fabs(double(__bfloat162float(hout[i])) - exact[i]);
    kernelError = std::max(kernelError, std::isnan(e) ? INFINITY : e);
    unfusedError = std::max(unfusedError, std::fabs(unfused[i] - exact[i]));
  }
  const bool ok = kernelError <= 2.0 * unfusedError;
  std::printf("%-40s max |error| %.3g, unfused bf16 %.3g%s\n",
              (std::string("attention bf16 S=") + std::to_string(Sq) + "x" + std::to_string(Sk) +
               " D=" + std::to_string(D) + (causal ? " causal" : "") + (lengths ? " lengths" : ""))
                  .c_str(),
              kernelError, unfusedError, ok ? "" : "  FAILED (more than twice the unfused error)");
  gFailures += !ok;
}

// A batch of products (an unfused attention's Q·Kᵀ per head): A stepping
// through its batch, B repeated (stride 0) or stepping, against a double
// reference.
void testBatchedGemm(size_t batch, size_t M, size_t N, size_t K, bool repeatB, std::mt19937& rng,
                     bool cublasLt = false) {
  std::vector<float> a = randomVector(batch * M * K, rng, -1, 1);
  std::vector<float> b = randomVector((repeatB ? 1 : batch) * N * K, rng, -1, 1);
  std::vector<double> want(batch * M * N);
  for (size_t z = 0; z < batch; ++z)
    for (size_t i = 0; i < M; ++i)
      for (size_t j = 0; j < N; ++j) {
        double v = 0;
        for (size_t k = 0; k < K; ++k)
          v += double(a[(z * M + i) * K + k]) * b[((repeatB ? 0 : z) * N + j) * K + k];
        want[(z * M + i) * N + j] = v;
      }
  Device da(a), db(b), dc(std::vector<float>(batch * M * N, NAN));
  transfuse::cuda::GemmArgs g;
  g.m = M; g.n = N; g.k = K;
  g.a = da.p; g.lda = K;
  g.b = db.p; g.ldb = K; g.transB = true;
  g.c = dc.p; g.ldc = N;
  g.batch = batch; g.strideA = M * K; g.strideB = repeatB ? 0 : N * K; g.strideC = M * N;
  if (!runGemm(g, cublasLt)) return;
  char what[96];
  std::snprintf(what, sizeof what, "batched gemm%s %zu x %zux%zux%zu%s", cublasLt ? " (cuBLASLt)" : "",
                batch, M, N, K, repeatB ? " B repeated" : "");
  expectNear(what, dc.host(), want, 1e-5, 1e-4);
}

// Transposes of floats and bytes (a permutation of 4 dimensions, and one of
// 3) and the causal mask, exactly.
void testLayout(std::mt19937& rng) {
  namespace tc = transfuse::cuda;
  const int64_t dims[] = {2, 5, 3, 7}, perm[] = {0, 2, 1, 3};
  std::vector<float> x = randomVector(2 * 5 * 3 * 7, rng, -1, 1);
  std::vector<double> want(x.size());
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 5; ++b)
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t d = 0; d < 7; ++d)
          want[((a * 3 + c) * 5 + b) * 7 + d] = x[((a * 5 + b) * 3 + c) * 7 + d];
  Device dx(x), dy(std::vector<float>(x.size(), NAN));
  CHECK_CUDA(tc::transpose(dx.p, dims, 4, perm, dy.p, sizeof(float)));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectNear("transpose [2,5,3,7] by {0,2,1,3}", dy.host(), want, 0, 0);

  const int64_t bdims[] = {3, 4, 5}, bperm[] = {2, 0, 1};
  std::vector<uint8_t> bytes(60);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 7 + 1);
  uint8_t *bx = nullptr, *by = nullptr;
  CHECK_CUDA(cudaMalloc(&bx, 60));
  CHECK_CUDA(cudaMalloc(&by, 60));
  CHECK_CUDA(cudaMemcpy(bx, bytes.data(), 60, cudaMemcpyHostToDevice));
  CHECK_CUDA(tc::transpose(bx, bdims, 3, bperm, by, 1));
  std::vector<uint8_t> got(60);
  CHECK_CUDA(cudaMemcpy(got.data(), by, 60, cudaMemcpyDeviceToHost));
  std::vector<float> gotF(60);
  std::vector<double> wantB(60);
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t c = 0; c < 5; ++c) wantB[(c * 3 + a) * 4 + b] = bytes[(a * 4 + b) * 5 + c];
  for (size_t i = 0; i < 60; ++i) gotF[i] = got[i];
  expectNear("transpose of bytes [3,4,5] by {2,0,1}", gotF, wantB, 0, 0);

  const size_t sq = 3, sk = 7;
  CHECK_CUDA(tc::causalMask(sq, sk, by));
  CHECK_CUDA(cudaMemcpy(got.data(), by, sq * sk, cudaMemcpyDeviceToHost));
  std::vector<float> maskGot(sq * sk);
  std::vector<double> maskWant(sq * sk);
  for (size_t i = 0; i < sq; ++i)
    for (size_t j = 0; j < sk; ++j) {
      maskGot[i * sk + j] = got[i * sk + j];
      maskWant[i * sk + j] = long(j) <= long(i + sk) - long(sq);
    }
  expectNear("causal mask 3x7 (bottom-right)", maskGot, maskWant, 0, 0);
  CHECK_CUDA(cudaFree(bx));
  CHECK_CUDA(cudaFree(by));
}

// gather (an id out of range reported at its first position, its row
// zeroed), the positional table and the key padding mask.
void testEmbedding(std::mt19937& rng) {
  const size_t vocab = 50, dim = 300, n = 37;
  std::vector<float> table = randomVector(vocab * dim, rng, -1, 1);
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = int32_t((i * 13) % vocab);
  ids[20] = int32_t(vocab);  // out of range
  ids[30] = -1;
  std::vector<double> want(n * dim, 0.0);
  for (size_t i = 0; i < n; ++i)
    if (ids[i] >= 0 && size_t(ids[i]) < vocab)
      for (size_t j = 0; j < dim; ++j) want[i * dim + j] = table[ids[i] * dim + j];
  Device dt(table), dout(std::vector<float>(n * dim, NAN));
  int32_t* dids = nullptr;
  unsigned int* dbad = nullptr;
  uint8_t* dmask = nullptr;
  CHECK_CUDA(cudaMalloc(&dids, n * sizeof(int32_t)));
  CHECK_CUDA(cudaMalloc(&dbad, sizeof(unsigned int)));
  CHECK_CUDA(cudaMalloc(&dmask, n));
  CHECK_CUDA(cudaMemcpy(dids, ids.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dbad, 0xff, sizeof(unsigned int)));
  CHECK_CUDA(transfuse::cuda::gather(dt.p, vocab, dim, dids, n, dout.p, dbad));
  CHECK_CUDA(transfuse::cuda::keyPaddingMask(dids, n, 13, dmask));
  unsigned int bad = 0;
  std::vector<uint8_t> mask(n);
  CHECK_CUDA(cudaMemcpy(&bad, dbad, sizeof bad, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(mask.data(), dmask, n, cudaMemcpyDeviceToHost));
  expectNear("gather (ids 20 and 30 out of range)", dout.host(), want, 0, 0);
  std::printf("%-40s first bad position %u%s\n", "gather's bad-id report", bad,
              bad == 20 ? "" : "  FAILED (expected 20)");
  gFailures += bad != 20;
  std::vector<float> maskGot(n);
  std::vector<double> maskWant(n);
  for (size_t i = 0; i < n; ++i) {
    maskGot[i] = mask[i];
    maskWant[i] = ids[i] != 13;
  }
  expectNear("key padding mask (pad id 13)", maskGot, maskWant, 0, 0);
  CHECK_CUDA(cudaFree(dids));
  CHECK_CUDA(cudaFree(dbad));
  CHECK_CUDA(cudaFree(dmask));

  const size_t length = 45, offset = 3, width = 34;
  Device dpos(std::vector<float>(length * width, NAN));
  CHECK_CUDA(transfuse::cuda::positionalEncoding(length, offset, width, dpos.p));
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<double> pos(length * width);
  for (size_t p = 0; p < length; ++p)
    for (size_t j = 0; j < width; ++j) {
      const double angle = double(p + offset) * std::pow(10000.0, -double(j - j % 2) / double(width));
      pos[p * width + j] = j % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
  expectNear("positional encoding (offset 3)", dpos.host(), pos, 1e-6, 0);
}

// A decode step: keys and values written into caches of capacity T (K
// transposed) from a strided [B, S, H, D] projection, read back, and
// attention of Sq queries over the first Sk positions against a double
// reference (causal, a key mask with row 1 fully masked).
void testDecode(size_t B, size_t H, size_t Sq, size_t Sk, size_t T, size_t D, bool causal,
                bool keyMask, std::mt19937& rng) {
  namespace tc = transfuse::cuda;
  // The new keys and values, as columns of a [B, Sk, 2, H, D] projection.
  std::vector<float> kv = randomVector(B * Sk * 2 * H * D, rng, -1, 1);
  std::vector<float> q = randomVector(B * H * Sq * D, rng, -1, 1);
  auto kvAt = [&](int which, size_t b, size_t h, size_t j, size_t d) {
    return kv[(((b * Sk + j) * 2 + which) * H + h) * D + d];
  };
  std::vector<uint8_t> mask(B * Sk);
  for (size_t b = 0; b < B; ++b)
    for (size_t j = 0; j < Sk; ++j) mask[b * Sk + j] = b != 1 && (b * 5 + j) % 4 != 0;
  if (keyMask)  // masked keys' K and V are NaN: none of it may reach O
    for (size_t b = 0; b < B; ++b)
      for (size_t j = 0; j < Sk; ++j)
        if (!mask[b * Sk + j])
          for (size_t x = 0; x < 2 * H * D; ++x) kv[(b * Sk + j) * 2 * H * D + x] = NAN;
  std::vector<double> want(B * H * Sq * D, 0.0);
  std::vector<double> sc(Sk);
  for (size_t b = 0; b < B; ++b)
    for (size_t h = 0; h < H; ++h)
      for (size_t i = 0; i < Sq; ++i) {
        long end = causal ? std::min<long>(long(Sk), long(i + Sk) - long(Sq) + 1) : long(Sk);
        double mx = -INFINITY, sum = 0;
        for (long j = 0; j < end; ++j) {
          if (keyMask && !mask[b * Sk + j]) continue;
          double dot = 0;
          for (size_t d = 0; d < D; ++d)
            dot += double(q[((b * H + h) * Sq + i) * D + d]) * kvAt(0, b, h, j, d);
          mx = std::max(mx, sc[j] = dot / std::sqrt(double(D)));
        }
        if (mx == -INFINITY) continue;
        for (long j = 0; j < end; ++j)
          sum += sc[j] = keyMask && !mask[b * Sk + j] ? 0.0 : std::exp(sc[j] - mx);
        for (long j = 0; j < end; ++j)
          for (size_t d = 0; d < D; ++d)
            if (!keyMask || mask[b * Sk + j])
              want[((b * H + h) * Sq + i) * D + d] += sc[j] / sum * kvAt(1, b, h, j, d);
      }
  Device dkv(kv), dq(q), dout(std::vector<float>(B * H * Sq * D, NAN));
  Device kCache(std::vector<float>(B * H * D * T, NAN)), vCache(std::vector<float>(B * H * T * D, NAN));
  Device kBack(std::vector<float>(B * H * Sk * D, NAN));
  const tc::StateTensor ks{kCache.p, H, T, D, true}, vs{vCache.p, H, T, D, false};
  // Written in two parts (positions [0, 2) then [2, Sk)), as a prefill and
  // a step would.
  for (size_t from : {size_t(0), size_t(2)}) {
    const size_t n = from == 0 ? std::min<size_t>(2, Sk) : Sk - std::min<size_t>(2, Sk);
    if (n == 0) continue;
    const size_t row = 2 * H * D, at = from * row;
    CHECK_CUDA(tc::stateWrite({dkv.p + at, Sk * row, D, row}, B, n, ks, from));
    CHECK_CUDA(tc::stateWrite({dkv.p + at + H * D, Sk * row, D, row}, B, n, vs, from));
  }
  CHECK_CUDA(tc::stateRead(ks, B, Sk, kBack.p));
  uint8_t* dmask = nullptr;
  CHECK_CUDA(cudaMalloc(&dmask, B * Sk + 1));
  CHECK_CUDA(cudaMemcpy(dmask, mask.data(), B * Sk, cudaMemcpyHostToDevice));
  tc::DecodeAttentionArgs a;
  a.batch = B;
  a.heads = H;
  a.seqQ = Sq;
  a.seqK = Sk;
  a.headDim = D;
  a.q = {dq.p, 0, 0, 0};
  a.k = {kCache.p, H * D * T, D * T, T};
  a.v = {vCache.p, H * T * D, T * D, D};
  a.out = dout.p;
  a.scale = float(1.0 / std::sqrt(double(D)));
  a.causal = causal;
  a.keyMask = keyMask ? dmask : nullptr;
  CHECK_CUDA(tc::decodeAttention(a));
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaFree(dmask));
  std::vector<double> keysBack(B * H * Sk * D);
  for (size_t b = 0; b < B; ++b)
    for (size_t h = 0; h < H; ++h)
      for (size_t j = 0; j < Sk; ++j)
        for (size_t d = 0; d < D; ++d) keysBack[((b * H + h) * Sk + j) * D + d] = kvAt(0, b, h, j, d);
  char what[112];
  std::snprintf(what, sizeof what, "state write+read B=%zu H=%zu Sk=%zu T=%zu D=%zu", B, H, Sk, T, D);
  expectNear(what, kBack.host(), keysBack, 0, 0);
  std::snprintf(what, sizeof what, "decode attention B=%zu H=%zu Sq=%zu Sk=%zu D=%zu%s%s", B, H, Sq,
                Sk, D, causal ? " causal" : "", keyMask ? " key mask" : "");
  expectNear(what, dout.host(), want, 2e-5, 2e-5);
}


// ---- the train step's kernels (Train.cuh) ----

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
  deviceOrSkip("the CUDA kernel tests");
  std::mt19937 rng(7);
  const size_t shapes[][2] = {{1, 1}, {3, 7}, {37, 515}, {64, 4096}, {5, 11264}, {5, 11265}, {3, 20001}};
  for (const auto& s : shapes) {
    testAddLayerNorm(s[0], s[1], true, true, true, false, rng);
    testAddLayerNorm(s[0], s[1], false, false, false, false, rng);
    testAddLayerNorm(s[0], s[1], true, true, true, true, rng);
    testSoftmax(s[0], s[1], false, rng);
    testSoftmax(s[0], s[1], true, rng);
  }
  testAttention(2, 3, 37, 45, 64, true, true, rng);
  testAttention(1, 2, 70, 70, 128, false, false, rng);
  testAttention(3, 1, 5, 33, 256, false, true, rng);
  testAttention(2, 2, 1, 100, 40, true, false, rng);
  testAttention(1, 8, 512, 512, 64, true, false, rng);
  testAttention(2, 2, 40, 20, 37, true, true, rng, /*dense=*/true);  // Sq > Sk: early queries see nothing
  testAttention(1, 3, 33, 65, 100, false, false, rng, /*dense=*/true);
  testAttention(3, 2, 17, 50, 64, false, false, rng, false, /*keyMask=*/true);
  testAttention(2, 2, 50, 50, 32, true, true, rng, false, /*keyMask=*/true);
  testAttention(2, 3, 37, 45, 64, true, true, rng, false, false, /*rate=*/0.1);
  testAttention(1, 2, 70, 70, 128, false, false, rng, true, true, /*rate=*/0.5);
  using transfuse::cuda::Activation;
  std::printf("cuBLASLt: %s\n", transfuse::cuda::cublasLtAvailable()
                                     ? "found; the GEMM cases run through it too"
                                     : "not found ($TRANSFUSE_CUBLASLT, libcublasLt.so.13/.12)");
  for (bool lt : {false, true}) {
    if (lt && !transfuse::cuda::cublasLtAvailable()) break;
    testGemm(1, 1, 1, false, false, Activation::kNone, false, rng, lt);
    testGemm(37, 70, 45, true, true, Activation::kRelu, true, rng, lt);
    testGemm(37, 70, 45, true, true, Activation::kRelu, false, rng, lt);
    testGemm(130, 65, 300, false, true, Activation::kGelu, false, rng, lt);
    testGemm(64, 128, 64, true, false, Activation::kGeluTanh, true, rng, lt);
    testGemm(64, 128, 64, true, true, Activation::kGeluTanh, false, rng, lt);
    testGemm(200, 513, 512, true, true, Activation::kNone, true, rng, lt);
    testGemm(200, 513, 512, false, false, Activation::kNone, false, rng, lt);
    testGemm(5, 3, 0, true, true, Activation::kNone, true, rng, lt);  // K = 0: the epilogue alone
  }
  testGemmBackward(37, 70, 300, true, false, Activation::kNone, 1.0f, rng);
  testGemmBackward(130, 65, 45, true, true, Activation::kRelu, 1.0f, rng);
  testGemmBackward(64, 128, 64, false, true, Activation::kGelu, 0.5f, rng);
  testGemmBackward(3, 200, 17, false, false, Activation::kGeluTanh, 1.0f, rng);
  testEmbedding(rng);
  testAttentionBf16(2, 2, 100, 100, 64, false, false, rng);
  testAttentionBf16(3, 2, 70, 130, 128, true, true, rng);
  testAttentionBf16(1, 4, 256, 256, 64, true, false, rng);
  testAttentionBf16(2, 1, 1, 64, 128, false, true, rng);
  testAttentionBf16(1, 2, 90, 40, 64, true, false, rng);  // Sq > Sk: early queries see nothing
  for (bool lt : {false, true}) {
    if (lt && !transfuse::cuda::cublasLtAvailable()) break;
    testBatchedGemm(16, 33, 47, 64, false, rng, lt);
    testBatchedGemm(5, 64, 70, 29, true, rng, lt);
  }
  testLayout(rng);
  testDecode(3, 2, 1, 9, 16, 64, false, true, rng);
  testDecode(2, 4, 4, 37, 40, 32, true, false, rng);
  testDecode(4, 1, 2, 600, 1024, 128, true, true, rng);
  testDecode(1, 2, 1, 1, 8, 256, false, false, rng);
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
