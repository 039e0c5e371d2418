// CUDA decode-step kernels over a device KV cache (Decode.cuh).

#include "runtime/kernels/cuda/Decode.cuh"

#include "runtime/kernels/cuda/Reduce.cuh"

#include <cmath>

namespace transfuse::cuda {
namespace {

constexpr int kThreads = 128;

unsigned blocksFor(size_t n) {
  const size_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 65535 * 16 ? b : 65535 * 16);
}

// Element (b, h, s, d) of a state tensor at position p = s (+ offset).
template <class T>
__device__ size_t stateIndex(const StateTensorOf<T>& st, size_t b, size_t h, size_t p, size_t d) {
  const size_t plane = (b * st.heads + h) * st.positions * st.headDim;
  return st.keys ? plane + d * st.positions + p : plane + p * st.headDim + d;
}

template <class T>
__global__ void writeKernel(AttentionTensorOf<T> in, size_t H, size_t n, size_t D,
                            StateTensorOf<T> st, size_t position, size_t total) {
  for (size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t d = e % D, s = e / D % n, h = e / (D * n) % H, b = e / (D * n * H);
    st.data[stateIndex(st, b, h, position + s, d)] =
        in.data[b * in.batchStride + h * in.headStride + s * in.rowStride + d];
  }
}

template <class T>
__global__ void readKernel(StateTensorOf<T> st, size_t n, T* out, size_t total) {
  for (size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t D = st.headDim, H = st.heads;
    const size_t d = e % D, s = e / D % n, h = e / (D * n) % H, b = e / (D * n * H);
    out[e] = st.data[stateIndex(st, b, h, s, d)];
  }
}

template <class T>
struct DecodeParams {
  int H, G, Sq, Sk, D;  // G: query heads per K/V head
  const T* q;
  size_t qb, qh, qr;
  DecodeKeysOf<T> k;
  const T* v;
  size_t vb, vh, vr;
  T* out;
  size_t ob, oh, orow;
  float scale;
  bool causal;
  const uint8_t* keyMask;
};

// One block per (b·H + h, query i); dynamic shared memory: D floats of the
// query, then Sk scores.
template <class T>
__global__ void __launch_bounds__(kThreads) decodeKernel(DecodeParams<T> p) {
  extern __shared__ float smem[];
  __shared__ float scratch[kThreads / 32];
  float* q = smem;
  float* s = smem + p.D;
  const int b = blockIdx.x / p.H, h = blockIdx.x % p.H, i = blockIdx.y;
  const T* qRow = p.q + b * p.qb + h * p.qh + static_cast<size_t>(i) * p.qr;
  for (int d = threadIdx.x; d < p.D; d += kThreads) q[d] = toFloat(qRow[d]) * p.scale;
  __syncthreads();
  int end = p.Sk;
  if (p.causal) end = min(end, i + p.Sk - p.Sq + 1);
  const T* k = p.k.data + b * p.k.batchStride + (h / p.G) * p.k.headStride;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < p.Sk; j += kThreads) {
    float score = -INFINITY;
    if (j < end && (!p.keyMask || p.keyMask[static_cast<size_t>(b) * p.Sk + j])) {
      float dot = 0.0f;
      for (int d = 0; d < p.D; ++d) dot = fmaf(q[d], toFloat(k[d * p.k.dimStride + j]), dot);
      score = dot;
    }
    s[j] = score;
    mx = fmaxf(mx, score);
  }
  mx = blockReduce<kThreads, true>(mx, scratch);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < p.Sk; j += kThreads) {
    const float w = s[j] == -INFINITY ? 0.0f : expf(s[j] - mx);
    s[j] = w;
    sum += w;
  }
  sum = blockReduce<kThreads, false>(sum, scratch);  // its __syncthreads orders the s[] writes
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  const T* v = p.v + b * p.vb + (h / p.G) * p.vh;
  T* o = p.out + b * p.ob + h * p.oh + static_cast<size_t>(i) * p.orow;
  for (int d = threadIdx.x; d < p.D; d += kThreads) {
    float acc = 0.0f;
    for (int j = 0; j < p.Sk; ++j)  // masked keys: weight 0, and their V is not read
      if (s[j] != 0.0f) acc = fmaf(s[j], toFloat(v[static_cast<size_t>(j) * p.vr + d]), acc);
    o[d] = fromFloat<T>(acc * inv);
  }
}

template <class T>
cudaError_t runStateWrite(const AttentionTensorOf<T>& in, size_t batch, size_t n,
                          StateTensorOf<T> state, size_t position, cudaStream_t stream) {
  const size_t H = state.heads, D = state.headDim, total = batch * H * n * D;
  if (total == 0) return cudaSuccess;
  if (!in.data || !state.data || position + n > state.positions) return cudaErrorInvalidValue;
  AttentionTensorOf<T> t = in;
  if (t.batchStride == 0 && t.headStride == 0 && t.rowStride == 0) {
    t.rowStride = D;
    t.headStride = n * D;
    t.batchStride = H * n * D;
  }
  writeKernel<T><<<blocksFor(total), 256, 0, stream>>>(t, H, n, D, state, position, total);
  return cudaGetLastError();
}

template <class T>
cudaError_t runStateRead(StateTensorOf<T> state, size_t batch, size_t n, T* out,
                         cudaStream_t stream) {
  const size_t total = batch * state.heads * n * state.headDim;
  if (total == 0) return cudaSuccess;
  if (!out || !state.data || n > state.positions) return cudaErrorInvalidValue;
  readKernel<T><<<blocksFor(total), 256, 0, stream>>>(state, n, out, total);
  return cudaGetLastError();
}

template <class T>
cudaError_t runDecodeAttention(const DecodeAttentionArgsOf<T>& a, cudaStream_t stream) {
  const size_t Hkv = a.kvHeads ? a.kvHeads : a.heads;
  if (a.headDim == 0 || a.headDim > 256 || a.heads % Hkv != 0) return cudaErrorInvalidValue;
  if (a.batch * a.heads * a.seqQ == 0) return cudaSuccess;
  if (!a.q.data || !a.out || (a.seqK > 0 && (!a.k.data || !a.v.data))) return cudaErrorInvalidValue;
  const size_t H = a.heads, D = a.headDim, Sq = a.seqQ, Sk = a.seqK;
  const bool qDense = !a.q.batchStride && !a.q.headStride && !a.q.rowStride;
  const bool vDense = !a.v.batchStride && !a.v.headStride && !a.v.rowStride;
  const bool kDense = !a.k.batchStride && !a.k.headStride && !a.k.dimStride;
  const bool oDense = !a.outBatchStride && !a.outHeadStride && !a.outRowStride;
  DecodeParams<T> p;
  p.H = static_cast<int>(H);
  p.G = static_cast<int>(H / Hkv);
  p.Sq = static_cast<int>(Sq);
  p.Sk = static_cast<int>(Sk);
  p.D = static_cast<int>(D);
  p.q = a.q.data;
  p.qb = qDense ? H * Sq * D : a.q.batchStride;
  p.qh = qDense ? Sq * D : a.q.headStride;
  p.qr = qDense ? D : a.q.rowStride;
  p.k = a.k;
  if (kDense) p.k = {a.k.data, Hkv * D * Sk, D * Sk, Sk};
  p.v = a.v.data;
  p.vb = vDense ? Hkv * Sk * D : a.v.batchStride;
  p.vh = vDense ? Sk * D : a.v.headStride;
  p.vr = vDense ? D : a.v.rowStride;
  p.out = a.out;
  p.ob = oDense ? H * Sq * D : a.outBatchStride;
  p.oh = oDense ? Sq * D : a.outHeadStride;
  p.orow = oDense ? D : a.outRowStride;
  p.scale = a.scale;
  p.causal = a.causal;
  p.keyMask = a.keyMask;
  const size_t shared = (D + Sk) * sizeof(float);
  if (shared > 48 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(decodeKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(shared));
    if (e != cudaSuccess) return e;
  }
  if (Sq > 65535 || a.batch * H > 0x7fffffffu) return cudaErrorInvalidValue;
  decodeKernel<T><<<dim3(static_cast<unsigned>(a.batch * H), static_cast<unsigned>(Sq)), kThreads,
                 shared, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t stateWrite(const AttentionTensorOf<float>& in, size_t batch, size_t n,
                       StateTensorOf<float> state, size_t position, cudaStream_t stream) {
  return runStateWrite(in, batch, n, state, position, stream);
}
cudaError_t stateWrite(const AttentionTensorOf<bf16>& in, size_t batch, size_t n,
                       StateTensorOf<bf16> state, size_t position, cudaStream_t stream) {
  return runStateWrite(in, batch, n, state, position, stream);
}
cudaError_t stateRead(StateTensorOf<float> state, size_t batch, size_t n, float* out,
                      cudaStream_t stream) {
  return runStateRead(state, batch, n, out, stream);
}
cudaError_t stateRead(StateTensorOf<bf16> state, size_t batch, size_t n, bf16* out,
                      cudaStream_t stream) {
  return runStateRead(state, batch, n, out, stream);
}
cudaError_t decodeAttention(const DecodeAttentionArgsOf<float>& a, cudaStream_t stream) {
  return runDecodeAttention(a, stream);
}
cudaError_t decodeAttention(const DecodeAttentionArgsOf<bf16>& a, cudaStream_t stream) {
  return runDecodeAttention(a, stream);
}

}  // namespace transfuse::cuda
