// The int8 GEMM's block kernels, one translation unit per instruction set
// (its functions built for it, called only where CPUID says the CPU has it;
// see Int8Gemm.h). Each sums a block of up to kRows[path] rows of the
// quantized A (rows lda bytes apart, Kp columns: s8, or u8 = qa + 128 for
// vnni) against two panels of packed weights (32 columns) into
// acc[rows][32], exactly. `rows` says how many rows are live: the vnni,
// avx2 and scalar kernels compute that many rounded up to a power of two
// (a decode step's single row costs one row's work), amx always 32.
#ifndef TRANSFUSE_RUNTIME_KERNELS_INT8_INT8KERNELS_H
#define TRANSFUSE_RUNTIME_KERNELS_INT8_INT8KERNELS_H

#include <cstdint>

// Each file's functions carry their instruction set as a target attribute
// rather than its -m flags, so the files also compile as one translation
// unit (export-kernel's int8 linear).
#define TRANSFUSE_INT8_AVX2 __attribute__((target("avx2")))
#define TRANSFUSE_INT8_AVX512 __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define TRANSFUSE_INT8_AMX __attribute__((target("amx-tile,amx-int8")))

namespace transfuse::kernels::int8 {

constexpr int64_t kPanel = 16;     // columns per packed panel
constexpr int64_t kBlockCols = 32; // columns per block: two panels
constexpr int64_t kRowsScalar = 8, kRowsAvx2 = 4, kRowsVnni = 8, kRowsAmx = 32;

using BlockKernel = void (*)(const uint8_t* a, int64_t lda, const int8_t* panel0,
                             const int8_t* panel1, int64_t kPadded, int64_t rows, int32_t* acc);

void blockScalar(const uint8_t* a, int64_t lda, const int8_t* panel0, const int8_t* panel1,
                 int64_t kPadded, int64_t rows, int32_t* acc);
void blockAvx2(const uint8_t* a, int64_t lda, const int8_t* panel0, const int8_t* panel1,
               int64_t kPadded, int64_t rows, int32_t* acc);
void blockVnni(const uint8_t* a, int64_t lda, const int8_t* panel0, const int8_t* panel1,
               int64_t kPadded, int64_t rows, int32_t* acc);
void blockAmx(const uint8_t* a, int64_t lda, const int8_t* panel0, const int8_t* panel1,
              int64_t kPadded, int64_t rows, int32_t* acc);
// (blockAmx runs between AmxTiles.h's amxTilesBegin and amxTilesEnd.)

// The row work around the block kernels, with AVX2 where the CPU has it
// (the same bits as the scalar forms: max, round-to-nearest-even, and a
// multiply then an add, never fused):
//   quantizeRowAvx2: q[j] = clamp(round(x[j] · inverse)), j < k;
//   maxAbsAvx2:      max |x[j]|;
//   epilogueAvx2:    out[r·ldo + j] = float(acc[r·lda + j] - comp[j]) · (sa[r] · sw[j])
//                    (+ bias[j]), r < rows, j < n (comp and bias may be null).
// The same with AVX-512 (16 lanes), where the vnni path is on.
void quantizeRowAvx2(const float* x, int64_t k, float inverse, int8_t* q);
float maxAbsAvx2(const float* x, int64_t k);
void epilogueAvx2(const int32_t* acc, int64_t lda, const int32_t* comp, const float* sa,
                  int64_t rows, const float* sw, const float* bias, int64_t n, float* out,
                  int64_t ldo);
void quantizeRowAvx512(const float* x, int64_t k, float inverse, int8_t* q);
float maxAbsAvx512(const float* x, int64_t k);
void epilogueAvx512(const int32_t* acc, int64_t lda, const int32_t* comp, const float* sa,
                    int64_t rows, const float* sw, const float* bias, int64_t n, float* out,
                    int64_t ldo);

}  // namespace transfuse::kernels::int8

#endif  // TRANSFUSE_RUNTIME_KERNELS_INT8_INT8KERNELS_H
