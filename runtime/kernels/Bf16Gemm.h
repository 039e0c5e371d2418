// bf16 GEMM: the products of `--dtype bf16` on the CPU (inference and the
// forward and backward products of mixed-precision training):
//
//   C[M,N] = epilogue(bf16(A) · bf16(B))       sums in fp32
//
// Each operand is rounded to bf16 once (round to nearest even on the bits;
// roundBf16): the weights when they are packed (packBf16, at load, or after
// each optimizer step), A as each call reads it. The products of two bf16
// are exact in fp32 and summed in fp32 (the order below), then the
// epilogue in fp32: GemmEpilogue's
// (Gemm.h) bias, activation, residual, the backward's derivative, and the
// rotary and gated column pairs, with the fp32 GEMM's formulas.
//
// Paths (Bf16Path), chosen by CPUID, each forceable so that one machine
// tests every path it has:
//   amx         AMX-BF16 tiles (tdpbf16ps), 32×32 blocks of four tiles,
//               after Linux grants the tile state (arch_prctl);
//   avx512bf16  AVX512-BF16 (vdpbf16ps: 16 columns × a k-pair per
//               instruction), 8×32 blocks;
//   avx2        bf16 storage, fp32 compute: the weights' pairs widened by
//               a shift or a mask, A's rounded values kept as floats, FMAs,
//               4×32 blocks (Zen 3);
//   scalar      plain loops (every machine; the reference).
// Each C element is one fp32 chain over the k-pairs, a pair's odd product
// added first (as vdpbf16ps adds them): so scalar, avx2 and avx512bf16 give
// the same bits (vdpbf16ps takes denormals as zero); amx's tdpbf16ps sums
// its own way (within the same bound; bf16_gemm_tests checks every path
// against the exact sum and the others against scalar bit for bit). A
// process uses one path for every product, whatever its rows (AMX's
// blocks of 16 rows serve a decode step), so a row's bits never depend on
// the batch it is in or on the thread count.
//
// The weights are packed once for all paths: panels of 16 columns, k in
// pairs: panel p holds bf16(B(k, col(p, c))) at data[p·(Kp·16) + (k/2)·32 +
// c·2 + k%2], Kp = K rounded up to 32 (zero padding), which is also one AMX
// B tile row per k-pair. Blocks of 32 columns (two panels) hold the columns
// GemmPairs.h's panelColumns(pairs, N, 16, b) names, as Int8Gemm.h's.
//
// Threads: the pool splits C into blocks of columns (and of rows when the
// columns are few); each C element is computed by one thread in one way,
// so results do not depend on the thread count. The pool may be null.
#ifndef TRANSFUSE_RUNTIME_KERNELS_BF16GEMM_H
#define TRANSFUSE_RUNTIME_KERNELS_BF16GEMM_H

#include "runtime/Status.h"
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Gemm.h"
#include "runtime/kernels/GemmPairs.h"
#include "runtime/kernels/LineAligned.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace transfuse::kernels {

enum class Bf16Path { kScalar, kAvx2, kAvx512Bf16, kAmx };

const char* bf16PathName(Bf16Path path);  // "scalar", "avx2", "avx512bf16", "amx"
std::optional<Bf16Path> bf16PathNamed(std::string_view name);  // any case

// The paths this CPU (and OS, for AMX) runs, best first; gemmBf16 takes
// the first.
std::vector<Bf16Path> bf16PathsAvailable();
Bf16Path bestBf16Path();
// The rows of a path's block (its results are blocks of these × 32 columns).
int64_t bf16BlockRows(Bf16Path path);

// Turns paths off for the rest of the process, e.g. "-amx" or
// "-amx,-avx512bf16" (names as bf16PathName); scalar stays. Error: an
// unknown name. (Targets.h's forceTarget routes --isa toggles here.)
rt::Status restrictBf16Paths(std::string_view toggles);

// The bf16 rounding (round to nearest even; a NaN stays a quiet NaN) and
// its exact widening.
uint16_t roundBf16(float x);
float widenBf16(uint16_t b);

struct Bf16Weights {
  int64_t k = 0, n = 0;
  int64_t kPadded = 0;         // K rounded up to 32
  GemmPairs pairs;             // how columns are paired in blocks (none: in order)
  int64_t blocks = 0;          // of 32 columns, two panels each
  LineVector<uint16_t> data;   // 2·blocks panels of 16 columns (see above)
};

// B rounded and packed (see the file comment; B(k,j) = b[k·ldb + j], or
// with transB b[j·ldb + k], a linear layer's [N,K] weight), over the pool's
// threads when one is given; `out`'s buffer is reused when it fits.
void packBf16(Bf16Weights& out, const float* b, int64_t ldb, bool transB, int64_t k, int64_t n,
              const GemmPairs& pairs = {}, rt::ThreadPool* pool = nullptr);
inline Bf16Weights packBf16(const float* b, int64_t ldb, bool transB, int64_t k, int64_t n,
                            const GemmPairs& pairs = {}, rt::ThreadPool* pool = nullptr) {
  Bf16Weights w;
  packBf16(w, b, ldb, transB, k, n, pairs, pool);
  return w;
}

// C = epilogue(A·W), A row-major (m × w.k, lda), C with w.n columns (w.n/2
// when gated), on `path` (one of bf16PathsAvailable(); by default the
// best). The residual may be C itself; nothing else may overlap C.
void gemmBf16(int64_t m, const float* a, int64_t lda, const Bf16Weights& w,
              const GemmEpilogue& epilogue, float* c, int64_t ldc, rt::ThreadPool* pool);
void gemmBf16(int64_t m, const float* a, int64_t lda, const Bf16Weights& w,
              const GemmEpilogue& epilogue, float* c, int64_t ldc, rt::ThreadPool* pool,
              Bf16Path path);

// As Gemm.h's unpacked gemm: A may be transposed, B is packed for the call
// (into the calling thread's buffer).
void gemmBf16(size_t M, size_t N, size_t K, const float* A, size_t lda, bool transA,
              const float* B, size_t ldb, bool transB, float* C, size_t ldc,
              const GemmEpilogue& epilogue = {}, rt::ThreadPool* pool = nullptr,
              const GemmPairs& pairs = {});

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_BF16GEMM_H
