// Elementwise activations, token embedding with positional encoding, and the
// decoding helpers argmax / top-k over logits. fp32, Highway with dynamic
// dispatch per call. The generic map that generated code instantiates is the
// per-target header elementwise-inl.h (MapUnary / MapBinary / MapRowBroadcast).
//
// Pointers need no alignment; y may alias x.
#ifndef TRANSFUSE_RUNTIME_KERNELS_ELEMENTWISE_H
#define TRANSFUSE_RUNTIME_KERNELS_ELEMENTWISE_H

#include "runtime/Status.h"
#include "runtime/kernels/Activation.h"
#include "runtime/kernels/ElementwiseMath.h"

#include <cstddef>
#include <cstdint>

namespace transfuse::rt {
class ThreadPool;
}

namespace transfuse::kernels {

// y = x/2 · (1 + erf(x/√2)) (exact GELU). erf is our own (Erf-inl.h): max
// absolute error 1.64e-7 against std::erf over all of fp32; GELU's measured
// error is 1.2e-7 · max(1, |x|) absolute, and relative 1.7e-5 at worst in the
// negative tail x in [-12, -1] (no 1 + erf cancellation).
void gelu(const float* x, float* y, size_t n, rt::ThreadPool* pool = nullptr);
// y = x/2 · (1 + tanh(√(2/π)(x + 0.044715x³))) (GPT-2's "gelu_new").
void geluTanh(const float* x, float* y, size_t n, rt::ThreadPool* pool = nullptr);
// y = max(x, 0).
void relu(const float* x, float* y, size_t n, rt::ThreadPool* pool = nullptr);
// y = erf(x), exposed for tests and for generated code that needs it alone.
void erf(const float* x, float* y, size_t n);
// y = act(x) for any Activation (none copies), with the forms the GEMM's
// epilogue applies (the same bits for the same input).
void activate(Activation a, const float* x, float* y, size_t n, rt::ThreadPool* pool = nullptr);

// The gradient through an activation (transfuse.activation_grad):
// out[i] = g[i] · act'(x[i]) for an activation kind (relu, gelu, gelu_tanh,
// silu: ElementwiseMath.h's TRANSFUSE_DERIVATIVES), with those derivatives
// (relu: the scalar definition's bits; gelu: |err| <= 4e-7, gelu_tanh and
// silu: 6e-7 absolute against them in double, as elementwise_test
// measures). out may alias x or g; another kind writes nothing.
void activationGrad(math::Kind kind, const float* x, const float* g, float* out, size_t n,
                    rt::ThreadPool* pool = nullptr);

// Inverted dropout (transfuse.dropout) of elements [first, first + n) of a
// tensor: y[i] = x[i] / (1 - rate) when philoxUniform(seed, step, stream,
// first + i) >= rate (runtime/Philox.h), else 0; rate in [0, 1). The
// generator runs in vector lanes, one block of four elements per lane, and
// gives the scalar definition's bits on every target and thread count.
void dropout(const float* x, float* y, size_t n, double rate, uint64_t seed, uint64_t step,
             uint64_t stream, uint64_t first = 0, rt::ThreadPool* pool = nullptr);

enum class Positional {
  kNone,        // out = table[id] · scale
  kSinusoidal,  // + PE(pos), interleaved: PE(pos,2i) = sin(pos/10000^(2i/dim)),
                //                         PE(pos,2i+1) = cos(pos/10000^(2i/dim))
  kLearned,     // + learned[pos, :] ([learnedRows, dim])
};

// Token embedding: out[b, s, :] = table[ids[b, s], :] · scale + PE(offset + s)
// for ids [batch, seq] (int32, row-major) and out [batch, seq, dim]. `scale` is
// √dim in the paper, 1 in GPT-2. `positionOffset` shifts positions (the number
// of tokens already in a KV cache). The sinusoid's angle is formed and reduced
// mod 2π in double, so its error is ~1 ulp of fp32 at any position.
struct EmbeddingArgs {
  const int32_t* ids = nullptr;
  size_t batch = 0, seq = 0;
  const float* table = nullptr;  // [vocab, dim]
  size_t vocab = 0, dim = 0;
  float scale = 1.0f;
  Positional positional = Positional::kNone;
  size_t positionOffset = 0;
  const float* learned = nullptr;  // kLearned: [learnedRows, dim]
  size_t learnedRows = 0;
};
// Errors (nothing is written then): an id outside [0, vocab), naming the id and
// its position (batch, seq); a position past the learned table's rows.
rt::Status embedding(const EmbeddingArgs& args, float* out, rt::ThreadPool* pool = nullptr);

// out[r] = the index of the largest logits[r, :] (the lowest index among
// equal maxima); rows × width, contiguous, width >= 1. NaN logits are ignored
// unless a row is all NaN (then 0).
void argmax(const float* logits, size_t rows, size_t width, int32_t* out,
            rt::ThreadPool* pool = nullptr);

// The k largest of each row, in descending order, ties broken by the lower
// index: values [rows, k], indices [rows, k]. k <= width (else an error);
// k == 0 writes nothing. Logits must not be NaN.
rt::Status topK(const float* logits, size_t rows, size_t width, size_t k, float* values,
                int32_t* indices, rt::ThreadPool* pool = nullptr);

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_ELEMENTWISE_H
