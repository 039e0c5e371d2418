// int8 GEMM for quantized inference (the int8 linear):
//
//   C[M,N] = act((qa · qw) ⊙ (sa ⊗ sw) + bias[N]) + residual[M,N]
//
// A (fp32, row-major, lda) is quantized per row when the call runs:
// sa[i] = max_k |A(i,k)| / 127, qa(i,k) = round(A(i,k) / sa[i]) in
// [-127, 127] (ties to even; a zero row gives zeros). B (the weights,
// B(k,j) = b[k·ldb + j], or with transB b[j·ldb + k] as a linear layer's
// [N,K] weight) is quantized per output column the same way when it is
// packed (quantizePackB, once, at prepare time). The products are summed
// exactly in int32 (|Σ| <= K·127², exact for K < 133,000); each C element
// is then float(acc) · (sa[i] · sw[j]) + bias[j], the same float
// operations whichever path summed, so every path gives the same bits.
//
// Paths (Int8Path), chosen by CPUID, each forceable so that one machine
// tests every path it has:
//   amx     AMX-INT8 tiles (tdpbssd: s8 × s8), 32×32 blocks of four tiles,
//           after Linux grants the tile state (arch_prctl);
//   vnni    AVX512-VNNI (vpdpbusd: u8 × s8): A as qa + 128, and the
//           compensation 128 · Σ_k qw(k,j) (computed when packing)
//           subtracted from each sum;
//   avx2    AVX2 (vpmaddubsw): |qa| (u8) × qw with qa's sign (s8); a pair
//           of products is at most 2 · 127 · 127 = 32,258, under int16's
//           saturation, so the form is exact; pairs summed by vpmaddwd;
//   scalar  plain int32 loops (every machine; the reference).
// The weights are packed once for all paths: panels of 16 columns, k in
// quads: panel p holds qw(k, col(p, c)) at data[p·(Kp·16) + (k/4)·64 + c·4 +
// k%4], Kp = K rounded up to 64 (zero padding), which is also one AMX B tile
// row per k-quad. The kernels compute blocks of 32 columns, two panels;
// block b's panels hold the columns GemmPairs.h's panelColumns(pairs, N,
// 16, b) names: 32 in order (col(p, c) = 16p + c) without pairs, and with
// them a pair's two sets of 16 side by side, so each block's epilogue
// combines them as the fp32 GEMM's paired epilogues do (Gemm.h):
//   rotary  columns i and i + headDim/2 of a head rotated by the angle of
//           the row's position (after the bias); C has N columns;
//   gated   act(gate_j + bias_j)·(up_j + bias_{N/2+j}); C has N/2 columns.
// The scales and compensation are stored in packed order (32 per block).
//
// Threads: the pool splits the columns by pairs of panels; each C element is
// computed by one thread in one way, so results do not depend on the thread
// count. The pool may be null.
#ifndef TRANSFUSE_RUNTIME_KERNELS_INT8GEMM_H
#define TRANSFUSE_RUNTIME_KERNELS_INT8GEMM_H

#include "runtime/Status.h"
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Activation.h"
#include "runtime/kernels/GemmPairs.h"
#include "runtime/kernels/LineAligned.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace transfuse::kernels {

enum class Int8Path { kScalar, kAvx2, kVnni, kAmx };

const char* int8PathName(Int8Path path);  // "scalar", "avx2", "vnni", "amx"
std::optional<Int8Path> int8PathNamed(std::string_view name);  // any case

// The paths this CPU (and OS, for AMX) runs, best first; without a
// restriction (restrictInt8Paths) the first is what gemmInt8 uses.
std::vector<Int8Path> int8PathsAvailable();
Int8Path bestInt8Path();
// The path gemmInt8 takes for a product of `m` rows: the best, except that
// fewer than 16 rows take VNNI over AMX.
Int8Path int8PathFor(int64_t m);
// What gemmInt8 runs here, for reports: "amx, vnni under 16 rows", "avx2".
std::string int8PathsInUse();
// The rows of a path's block (its results are blocks of these × 32 columns).
int64_t int8BlockRows(Int8Path path);

// Turns paths off for the rest of the process, e.g. "-amx" or
// "-amx,-vnni" (names as int8PathName, any case); the best remaining one is
// then used. Error: an unknown name.
rt::Status restrictInt8Paths(std::string_view toggles);

struct Int8Weights {
  int64_t k = 0, n = 0;
  int64_t kPadded = 0;                // K rounded up to 64
  GemmPairs pairs;                    // how columns are paired in blocks (none: in order)
  int64_t blocks = 0;                 // of 32 columns, two panels each
  LineVector<int8_t> data;            // 2·blocks panels of 16 columns (see above)
  std::vector<float> scale;           // sw, per packed column (32 per block)
  std::vector<int32_t> compensation;  // 128 · Σ_k qw(k, j), per packed column
};

// B quantized per column and packed (see the file comment), its columns
// paired as `pairs` says (rotary: headDim a multiple of 2 and columns of
// headDim, as the fp32 GEMM's).
Int8Weights quantizePackB(const float* b, int64_t ldb, bool transB, int64_t k, int64_t n,
                          const GemmPairs& pairs = {});

// Per-row symmetric quantization of `rows` rows of `k` values (lda apart)
// into q (rows × ldq, int8, the tail after k untouched) and scales.
void quantizeRows(const float* a, int64_t lda, int64_t rows, int64_t k, int8_t* q, int64_t ldq,
                  float* scales);

// A linear layer's epilogue around the int8 product, as the fp32 GEMM's:
// C = act((qa · qw) ⊙ (sa ⊗ sw) + bias) + residual; the activation runs
// as kernels::activate (Erf-inl.h's forms, which the fp32 GEMM's epilogue
// uses too) over each row's block of columns, the residual added after.
struct Int8Epilogue {
  const float* bias = nullptr;      // [N] or null
  Activation activation = Activation::kNone;  // gated pairs: the gate's
  const float* residual = nullptr;  // [M, ldr] or null; must not overlap C; no pairs
  int64_t ldr = 0;                  // 0 means N
  // Rotary pairs: row i of C is at position positionOffset + i % seqLen;
  // invFreq holds headDim/2 inverse frequencies (as GemmEpilogue's).
  const float* invFreq = nullptr;
  int64_t seqLen = 1;
  int64_t positionOffset = 0;
};

// C = the product with its epilogue on `path` (it must be one of
// int8PathsAvailable(); by default int8PathFor(m)).
void gemmInt8(int64_t m, const float* a, int64_t lda, const Int8Weights& w,
              const Int8Epilogue& epilogue, float* c, int64_t ldc, rt::ThreadPool* pool);
void gemmInt8(int64_t m, const float* a, int64_t lda, const Int8Weights& w,
              const Int8Epilogue& epilogue, float* c, int64_t ldc, rt::ThreadPool* pool,
              Int8Path path);
// With a bias alone (may be null).
inline void gemmInt8(int64_t m, const float* a, int64_t lda, const Int8Weights& w,
                     const float* bias, float* c, int64_t ldc, rt::ThreadPool* pool) {
  gemmInt8(m, a, lda, w, Int8Epilogue{bias}, c, ldc, pool);
}
inline void gemmInt8(int64_t m, const float* a, int64_t lda, const Int8Weights& w,
                     const float* bias, float* c, int64_t ldc, rt::ThreadPool* pool,
                     Int8Path path) {
  gemmInt8(m, a, lda, w, Int8Epilogue{bias}, c, ldc, pool, path);
}

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_INT8GEMM_H
