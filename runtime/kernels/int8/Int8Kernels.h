// The int8 GEMM's block kernels, one translation unit per instruction set
// (compiled with its -m flags, called only where CPUID says the CPU has
// it; see Int8Gemm.h). Each sums a block of kRows[path] rows of the
// quantized A (rows lda bytes apart, Kp columns: s8, or u8 = qa + 128 for
// vnni) against two panels of packed weights (32 columns; panel1 may be
// panel0 again when there is no second one) into acc[rows][32], exactly.
#ifndef TRANSFUSE_RUNTIME_KERNELS_INT8_INT8KERNELS_H
#define TRANSFUSE_RUNTIME_KERNELS_INT8_INT8KERNELS_H

#include <cstdint>

namespace transfuse::kernels::int8 {

constexpr int64_t kPanel = 16;     // columns per packed panel
constexpr int64_t kBlockCols = 32; // columns per block: two panels
constexpr int64_t kRowsScalar = 8, kRowsAvx2 = 4, kRowsVnni = 8, kRowsAmx = 32;

using BlockKernel = void (*)(const uint8_t* a, int64_t lda, const int8_t* panel0,
                             const int8_t* panel1, int64_t kPadded, int32_t* acc);

void blockScalar(const uint8_t* a, int64_t lda, const int8_t* panel0, const int8_t* panel1,
                 int64_t kPadded, int32_t* acc);
void blockAvx2(const uint8_t* a, int64_t lda, const int8_t* panel0, const int8_t* panel1,
               int64_t kPadded, int32_t* acc);
void blockVnni(const uint8_t* a, int64_t lda, const int8_t* panel0, const int8_t* panel1,
               int64_t kPadded, int32_t* acc);
void blockAmx(const uint8_t* a, int64_t lda, const int8_t* panel0, const int8_t* panel1,
              int64_t kPadded, int32_t* acc);
// Loads the AMX tile configuration on the calling thread (before blockAmx)
// and releases it (after a run of blocks).
void amxBegin();
void amxEnd();

}  // namespace transfuse::kernels::int8

#endif  // TRANSFUSE_RUNTIME_KERNELS_INT8_INT8KERNELS_H
