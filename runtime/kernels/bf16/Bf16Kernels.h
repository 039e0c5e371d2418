// The bf16 GEMM's block kernels, one translation unit per instruction set
// (its functions built for it, called only where CPUID says the CPU has it;
// see Bf16Gemm.h). Each sums a block of up to kRows[path] rows of A (bf16;
// for avx2 their values as floats, `a` pointing at floats; rows lda
// elements apart, `kLength` columns, a multiple of 32; for amx in
// tiles, see Bf16Gemm.cpp) against two panels of packed weights (32
// columns) into acc[rows][32] (rows ldAcc floats apart: a scratch block's
// 32, or C's own rows), in fp32, starting from acc's values when
// `accumulate` (a pass over the next columns of K) and from zero otherwise.
// `rows` says how many rows are live: the avx512bf16, avx2 and scalar
// kernels compute that many rounded up to a power of two (a decode step's
// single row costs one row's work), amx 16 or 32.
//
// Each C element is one chain over the k-pairs in order (a pair is a packed
// 32-bit lane), each pair's two products added one after the other, odd k
// first, as vdpbf16ps does; each product is exact in fp32 (8-bit
// mantissas), so an FMA rounds as the add. So scalar, avx2 and avx512bf16
// give the same bits (vdpbf16ps takes denormals as zero). AMX's tdpbf16ps
// sums its own way (measured: not this order, nor one rounding per pair).
#ifndef TRANSFUSE_RUNTIME_KERNELS_BF16_BF16KERNELS_H
#define TRANSFUSE_RUNTIME_KERNELS_BF16_BF16KERNELS_H

#include <cstdint>

// Each file's functions carry their instruction set as a target attribute
// rather than its -m flags, so the files also compile as one translation
// unit (export-kernel's bf16 linear).
#define TRANSFUSE_BF16_AVX2 __attribute__((target("avx2,fma")))
#define TRANSFUSE_BF16_AVX512 __attribute__((target("avx512f,avx512bw,avx512bf16")))
#define TRANSFUSE_BF16_AMX __attribute__((target("amx-tile,amx-bf16")))

namespace transfuse::kernels::bf16 {

constexpr int64_t kPanel = 16;      // columns per packed panel
constexpr int64_t kBlockCols = 32;  // columns per block: two panels
constexpr int64_t kRowsScalar = 8, kRowsAvx2 = 4, kRowsAvx512 = 8, kRowsAmx = 32;

using BlockKernel = void (*)(const uint16_t* a, int64_t lda, const uint16_t* panel0,
                             const uint16_t* panel1, int64_t kLength, int64_t rows, float* acc,
                             int64_t ldAcc, bool accumulate);

void blockScalar(const uint16_t* a, int64_t lda, const uint16_t* panel0, const uint16_t* panel1,
                 int64_t kLength, int64_t rows, float* acc, int64_t ldAcc, bool accumulate);
void blockAvx2(const uint16_t* a, int64_t lda, const uint16_t* panel0, const uint16_t* panel1,
               int64_t kLength, int64_t rows, float* acc, int64_t ldAcc, bool accumulate);
void blockAvx512(const uint16_t* a, int64_t lda, const uint16_t* panel0, const uint16_t* panel1,
                 int64_t kLength, int64_t rows, float* acc, int64_t ldAcc, bool accumulate);
void blockAmx(const uint16_t* a, int64_t lda, const uint16_t* panel0, const uint16_t* panel1,
              int64_t kLength, int64_t rows, float* acc, int64_t ldAcc, bool accumulate);
// (blockAmx runs between AmxTiles.h's amxTilesBegin and amxTilesEnd.)

// x[j] rounded to bf16 into q[j], j < k: round to nearest even on the bits,
// a NaN kept a (quiet) NaN; the same bits as Bf16Gemm's scalar roundBf16.
void roundRowAvx2(const float* x, int64_t k, uint16_t* q);
void roundRowAvx512(const float* x, int64_t k, uint16_t* q);

// A block's plain epilogue: out[r·ldo + j] = (sums[r·32 + j] + bias[j]) +
// res[r·ldr + j], r < rows, j < n <= 32 (bias and res may be null; res may
// be out), in that order of adds, as the scalar form.
void storeRowsAvx2(const float* sums, int64_t rows, const float* bias, int64_t n,
                   const float* res, int64_t ldr, float* out, int64_t ldo);
void storeRowsAvx512(const float* sums, int64_t rows, const float* bias, int64_t n,
                     const float* res, int64_t ldr, float* out, int64_t ldo);

// One panel of packBf16's layout (Bf16Gemm.cpp) straight from fp32 B:
// columns first..first+count (count <= 16) of B(k, j) = b[k·ldb + j], or
// with transB b[j·ldb + k], rounded as roundRowAvx512 rounds, as kp/2 rows
// of 16 k-pairs, zeros past count and k.
void packPanelAvx512(const float* b, int64_t ldb, bool transB, int64_t first, int64_t count,
                     int64_t k, int64_t kp, uint16_t* panel);

// Rows i0..i0+15 of A stored transposed (A(i, k) = a[k·lda + i]), their
// k0..k0+31 rounded: row r's 32 values at out + r·ldo (ldo even), zeros
// past k and for rows r >= live.
void roundTransposedAvx512(const float* a, int64_t lda, int64_t i0, int64_t live, int64_t k,
                           int64_t k0, uint16_t* out, int64_t ldo);

// out[r·ldo + t] = a[t·lda + r], r, t < 16: a 16×16 transpose of 32-bit
// lanes (packPanelAvx512 and roundTransposedAvx512 move k-pairs with it).
void transpose16Avx512(const float* a, int64_t lda, float* out, int64_t ldo);

}  // namespace transfuse::kernels::bf16

#endif  // TRANSFUSE_RUNTIME_KERNELS_BF16_BF16KERNELS_H
