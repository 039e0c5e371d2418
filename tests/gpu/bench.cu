// GPU benchmarks of the CUDA kernels (runtime/kernels/cuda), for the
// figures issue 15 asks for, on whatever GPU runs them:
//   - fused attention forward, fp32 (CUDA cores) and bf16 (tensor cores),
//     head dim 64 and 128, sequence 512 to 8192 at batch·seq = 16384, 32
//     heads of 64 or 16 of 128, causal and not: TFLOP/s with FLOPs counted
//     as 4·B·H·S²·D (halved when causal);
//   - add+layer_norm and softmax over 16384 rows of 1024 floats: GB/s of
//     the bytes each must move (read x and residual, write y; read x,
//     write y) against the device's memory bandwidth;
//   - the GEMM at transformer-base shapes (B·S = 512 rows): TFLOP/s of the
//     CUDA-core kernel and, where it is found, cuBLASLt's (fp32, no TF32).
// Each timing is the median of 20 runs after 3 warm-ups, by CUDA events on
// one stream. Exit 0; 77 without a device. tests/gpu/run.sh runs it.

#include "runtime/kernels/cuda/Attention.cuh"
#include "runtime/kernels/cuda/AttentionBf16.cuh"
#include "runtime/kernels/cuda/CublasLt.cuh"
#include "runtime/kernels/cuda/Gemm.cuh"
#include "runtime/kernels/cuda/Norm.cuh"
#include "tests/gpu/CudaCheck.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace {

// Device memory of n floats filled with small values (a hash of the index).
float* deviceFloats(size_t n) {
  float* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, n * sizeof(float)));
  std::vector<float> h(std::min<size_t>(n, size_t(1) << 20));
  for (size_t i = 0; i < h.size(); ++i) h[i] = float((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
  for (size_t at = 0; at < n; at += h.size())
    CHECK_CUDA(cudaMemcpy(p + at, h.data(), std::min(h.size(), n - at) * sizeof(float),
                          cudaMemcpyHostToDevice));
  return p;
}

// The same values as deviceFloats, in bf16.
__nv_bfloat16* deviceBf16(size_t n) {
  __nv_bfloat16* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, n * sizeof(__nv_bfloat16)));
  std::vector<__nv_bfloat16> h(std::min<size_t>(n, size_t(1) << 20));
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = __float2bfloat16(float((i * 2654435761u) % 2001) / 1000.0f - 1.0f);
  for (size_t at = 0; at < n; at += h.size())
    CHECK_CUDA(cudaMemcpy(p + at, h.data(), std::min(h.size(), n - at) * sizeof(__nv_bfloat16),
                          cudaMemcpyHostToDevice));
  return p;
}

// Median milliseconds of `run` (which launches and returns its error).
double medianMs(const std::function<cudaError_t()>& run) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) CHECK_CUDA(run());
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    CHECK_CUDA(cudaEventRecord(start));
    CHECK_CUDA(run());
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main() {
  deviceOrSkip("the GPU benchmarks");
  int memClockKHz = 0, busBits = 0;
  cudaDeviceGetAttribute(&memClockKHz, cudaDevAttrMemoryClockRate, 0);
  cudaDeviceGetAttribute(&busBits, cudaDevAttrGlobalMemoryBusWidth, 0);
  const double peakGBs = 2.0 * memClockKHz * 1e3 * (busBits / 8) / 1e9;  // DDR
  std::printf("memory bandwidth %.0f GB/s by its clocks\n", peakGBs);

  // Fused attention, fp32 on CUDA cores.
  for (int D : {64, 128}) {
    const int H = D == 64 ? 32 : 16;
    for (int S : {512, 1024, 2048, 4096, 8192}) {
      const int B = 16384 / S;
      const size_t n = size_t(B) * H * S * D;
      float *q = deviceFloats(n), *k = deviceFloats(n), *v = deviceFloats(n), *o = deviceFloats(n);
      __nv_bfloat16 *qb = deviceBf16(n), *kb = deviceBf16(n), *vb = deviceBf16(n), *ob = deviceBf16(n);
      for (bool causal : {false, true}) {
        transfuse::cuda::AttentionArgs a;
        a.batch = B;
        a.heads = H;
        a.seqQ = a.seqK = S;
        a.headDim = D;
        a.q = {q, 0, 0, 0};
        a.k = {k, 0, 0, 0};
        a.v = {v, 0, 0, 0};
        a.out = o;
        a.scale = 0.125f;
        a.causal = causal;
        const double ms = medianMs([&] { return transfuse::cuda::attention(a); });
        const double flops = 4.0 * B * H * double(S) * S * D / (causal ? 2 : 1);
        std::printf("attention fp32 B=%d H=%d S=%d D=%d%s: %.3f ms, %.1f TFLOP/s\n", B, H, S, D,
                    causal ? " causal" : "", ms, flops / ms / 1e9);
        // The same on tensor cores in bf16.
        transfuse::cuda::AttentionBf16Args hb;
        hb.batch = B;
        hb.heads = H;
        hb.seqQ = hb.seqK = S;
        hb.headDim = D;
        hb.q = {qb, 0, 0, 0};
        hb.k = {kb, 0, 0, 0};
        hb.v = {vb, 0, 0, 0};
        hb.out = ob;
        hb.scale = 0.125f;
        hb.causal = causal;
        const double msBf16 = medianMs([&] { return transfuse::cuda::attentionBf16(hb); });
        std::printf("attention bf16 B=%d H=%d S=%d D=%d%s: %.3f ms, %.1f TFLOP/s\n", B, H, S, D,
                    causal ? " causal" : "", msBf16, flops / msBf16 / 1e9);
      }
      for (float* p : {q, k, v, o}) CHECK_CUDA(cudaFree(p));
      for (__nv_bfloat16* p : {qb, kb, vb, ob}) CHECK_CUDA(cudaFree(p));
    }
  }

  // Row kernels: bytes moved against the memory bandwidth.
  {
    const size_t rows = 16384, width = 1024, n = rows * width;
    float *x = deviceFloats(n), *r = deviceFloats(n), *y = deviceFloats(n);
    float *g = deviceFloats(width), *b = deviceFloats(width);
    double ms = medianMs([&] {
      return transfuse::cuda::addLayerNorm(x, r, g, b, y, nullptr, rows, width, 1e-5f);
    });
    std::printf("add+layer_norm %zux%zu: %.3f ms, %.0f GB/s (%.0f%% of the bandwidth)\n", rows, width,
                ms, 3.0 * n * 4 / ms / 1e6, 100.0 * 3.0 * n * 4 / ms / 1e6 / peakGBs);
    ms = medianMs([&] { return transfuse::cuda::softmax(x, y, rows, width); });
    std::printf("softmax %zux%zu: %.3f ms, %.0f GB/s (%.0f%% of the bandwidth)\n", rows, width, ms,
                2.0 * n * 4 / ms / 1e6, 100.0 * 2.0 * n * 4 / ms / 1e6 / peakGBs);
    for (float* p : {x, r, y, g, b}) CHECK_CUDA(cudaFree(p));
  }

  // The GEMM at transformer-base shapes: 512 rows (B·S), weights [N, K].
  const size_t shapes[][2] = {{1536, 512}, {512, 512}, {2048, 512}, {512, 2048}, {32000, 512}};
  for (const auto& s : shapes) {
    const size_t M = 512, N = s[0], K = s[1];
    float *a = deviceFloats(M * K), *w = deviceFloats(N * K), *c = deviceFloats(M * N);
    float* bias = deviceFloats(N);
    transfuse::cuda::GemmArgs g;
    g.m = M; g.n = N; g.k = K;
    g.a = a; g.lda = K;
    g.b = w; g.ldb = K; g.transB = true;
    g.c = c; g.ldc = N;
    g.bias = bias;
    const double ms = medianMs([&] { return transfuse::cuda::gemmCudaCores(g); });
    std::printf("gemm fp32 CUDA cores %zux%zux%zu (+bias): %.3f ms, %.1f TFLOP/s\n", M, N, K, ms,
                2.0 * M * N * K / ms / 1e9);
    if (transfuse::cuda::cublasLtAvailable()) {
      const double lt = medianMs([&] { return transfuse::cuda::gemmCublasLt(g); });
      std::printf("gemm fp32 cuBLASLt   %zux%zux%zu (+bias): %.3f ms, %.1f TFLOP/s (ours / cuBLASLt %.2f)\n",
                  M, N, K, lt, 2.0 * M * N * K / lt / 1e9, lt / ms);
    }
    // bf16 (--dtype bf16): the same product on our tensor cores, and cuBLASLt's.
    using transfuse::cuda::bf16;
    bf16 *ha = deviceBf16(M * K), *hw = deviceBf16(N * K), *hc = deviceBf16(M * N);
    bf16* hbias = deviceBf16(N);
    transfuse::cuda::GemmArgsOf<bf16> h;
    h.m = M; h.n = N; h.k = K;
    h.a = ha; h.lda = K;
    h.b = hw; h.ldb = K; h.transB = true;
    h.c = hc; h.ldc = N;
    h.bias = hbias;
    const double tc = medianMs([&] { return transfuse::cuda::gemmTensorCores(h); });
    std::printf("gemm bf16 tensor cores %zux%zux%zu (+bias): %.3f ms, %.1f TFLOP/s\n", M, N, K, tc,
                2.0 * M * N * K / tc / 1e9);
    if (transfuse::cuda::cublasLtAvailable()) {
      const double lt = medianMs([&] { return transfuse::cuda::gemmCublasLt(h); });
      std::printf("gemm bf16 cuBLASLt     %zux%zux%zu (+bias): %.3f ms, %.1f TFLOP/s (ours / cuBLASLt %.2f)\n",
                  M, N, K, lt, 2.0 * M * N * K / lt / 1e9, lt / tc);
    }
    for (float* p : {a, w, c, bias}) CHECK_CUDA(cudaFree(p));
    for (bf16* p : {ha, hw, hc, hbias}) CHECK_CUDA(cudaFree(p));
  }
  return 0;
}
