// The int8 GEMM (see Int8Gemm.h): quantization, packing, the path's
// dispatch, the scalar block kernel, and the driver with the epilogue every
// path shares.

#include "runtime/kernels/Int8Gemm.h"

#include "runtime/kernels/AmxTiles.h"
#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/PairedBlock.h"
#include "runtime/kernels/Parallel.h"
#include "runtime/kernels/PathToggles.h"
#include "runtime/kernels/int8/Int8Kernels.h"

#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstring>
#include <mutex>

namespace transfuse::kernels {

using namespace int8;

namespace {

constexpr int64_t kMaxRows = kRowsAmx;  // A's rows are padded to a multiple of every block's

int64_t roundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// AMX needs Linux's permission for the tile data state (5.16+).
bool amxGranted() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool tile = d & (1u << 24), int8 = d & (1u << 25);
  return tile && int8 && amxTilesGranted();
}

std::vector<Int8Path> detect() {
  std::vector<Int8Path> paths;
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  if (avx512 && amxGranted()) paths.push_back(Int8Path::kAmx);
  if (avx512 && __builtin_cpu_supports("avx512vnni")) paths.push_back(Int8Path::kVnni);
  if (__builtin_cpu_supports("avx2")) paths.push_back(Int8Path::kAvx2);
  paths.push_back(Int8Path::kScalar);
  return paths;
}

std::mutex pathsMutex;
std::vector<Int8Path>& paths() {
  static std::vector<Int8Path> available = detect();
  return available;
}

}  // namespace

int64_t int8BlockRows(Int8Path path) {
  switch (path) {
    case Int8Path::kAmx: return kRowsAmx;
    case Int8Path::kVnni: return kRowsVnni;
    case Int8Path::kAvx2: return kRowsAvx2;
    case Int8Path::kScalar: break;
  }
  return kRowsScalar;
}

namespace {

BlockKernel kernelOf(Int8Path path) {
  switch (path) {
    case Int8Path::kAmx: return blockAmx;
    case Int8Path::kVnni: return blockVnni;
    case Int8Path::kAvx2: return blockAvx2;
    case Int8Path::kScalar: break;
  }
  return blockScalar;
}

// The row work (quantization, the epilogue): in AVX-512 where the vnni
// path is on, in AVX2 where the avx2 path is, else scalar loops; the same
// bits whichever.
struct RowWork {
  void (*quantizeRow)(const float*, int64_t, float, int8_t*) = nullptr;
  float (*maxAbs)(const float*, int64_t) = nullptr;
  void (*epilogue)(const int32_t*, int64_t, const int32_t*, const float*, int64_t, const float*,
                   const float*, int64_t, float*, int64_t) = nullptr;
};

RowWork rowWork() {
  std::lock_guard<std::mutex> lock(pathsMutex);
  const std::vector<Int8Path>& p = paths();
  auto on = [&](Int8Path path) { return std::find(p.begin(), p.end(), path) != p.end(); };
  if (on(Int8Path::kVnni)) return {quantizeRowAvx512, maxAbsAvx512, epilogueAvx512};
  if (on(Int8Path::kAvx2)) return {quantizeRowAvx2, maxAbsAvx2, epilogueAvx2};
  return {};
}

int8_t quantize(float x, float inverse) {
  const float q = std::nearbyint(x * inverse);
  return static_cast<int8_t>(std::min(127.0f, std::max(-127.0f, q)));
}

}  // namespace

namespace int8 {

void blockScalar(const uint8_t* a, int64_t lda, const int8_t* panel0, const int8_t* panel1,
                 int64_t kPadded, int64_t rows, int32_t* acc) {
  const auto* qa = reinterpret_cast<const int8_t*>(a);
  for (int64_t r = 0; r < std::min(rows, kRowsScalar); ++r)
    for (int64_t c = 0; c < kBlockCols; ++c) {
      const int8_t* panel = c < kPanel ? panel0 : panel1;
      const int64_t col = c % kPanel;
      int32_t sum = 0;
      for (int64_t k = 0; k < kPadded; ++k)
        sum += int32_t{qa[r * lda + k]} * int32_t{panel[(k / 4) * 64 + col * 4 + k % 4]};
      acc[r * kBlockCols + c] = sum;
    }
}

}  // namespace int8

const char* int8PathName(Int8Path path) {
  switch (path) {
    case Int8Path::kAmx: return "amx";
    case Int8Path::kVnni: return "vnni";
    case Int8Path::kAvx2: return "avx2";
    case Int8Path::kScalar: break;
  }
  return "scalar";
}

namespace {
constexpr std::array<Int8Path, 4> kInt8Paths = {Int8Path::kAmx, Int8Path::kVnni, Int8Path::kAvx2,
                                                Int8Path::kScalar};
}  // namespace

std::optional<Int8Path> int8PathNamed(std::string_view name) {
  return pathNamed(name, kInt8Paths, int8PathName);
}

std::vector<Int8Path> int8PathsAvailable() {
  std::lock_guard<std::mutex> lock(pathsMutex);
  return paths();
}

Int8Path bestInt8Path() { return int8PathsAvailable().front(); }

rt::Status restrictInt8Paths(std::string_view toggles) {
  std::lock_guard<std::mutex> lock(pathsMutex);
  return removeToggledPaths(toggles, paths(), kInt8Paths, int8PathName, "int8");
}

namespace {

// quantizeRows with the row work chosen once by the caller. `tiles`: q in
// AMX's A tile layout instead (Int8Gemm.h: each group of 16 rows as its
// 16×64 tiles in k order, ldq = Kp); `plus128`: each row as u8 = q + 128
// (vnni's A), flipped while it is in L1.
void quantizeRowsWith(const RowWork& vector, const float* a, int64_t lda, int64_t rows, int64_t k,
                      int8_t* q, int64_t ldq, float* scales, bool tiles = false,
                      bool plus128 = false) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* x = a + i * lda;
    // The next row on its way while this one is read twice (A's rows are
    // a GEMM's first read of them: from L3 or memory).
    if (i + 1 < rows)
      for (int64_t j = 0; j < k; j += 16) __builtin_prefetch(x + lda + j, 0, 2);
    float peak = 0.0f;
    if (vector.maxAbs) {
      peak = vector.maxAbs(x, k);
    } else {
      for (int64_t j = 0; j < k; ++j) peak = std::max(peak, std::fabs(x[j]));
    }
    const float inverse = peak > 0.0f ? 127.0f / peak : 0.0f;
    // Pieces of the row: all of it, or its 64-value pieces 1 KiB apart.
    const int64_t piece = tiles ? 64 : std::max<int64_t>(k, 1), step = tiles ? 1024 : 0;
    int8_t* row = tiles ? q + (i / 16) * 16 * ldq + (i % 16) * 64 : q + i * ldq;
    for (int64_t j0 = 0; j0 < k; j0 += piece, row += step) {
      const int64_t n = std::min(piece, k - j0);
      if (vector.quantizeRow) {
        vector.quantizeRow(x + j0, n, inverse, row);
      } else {
        for (int64_t j = 0; j < n; ++j) row[j] = quantize(x[j0 + j], inverse);
      }
    }
    if (plus128) {  // q ^ 0x80 = q + 128 as u8, eight bytes at a time
      int8_t* r = q + i * ldq;
      int64_t j = 0;
      for (; j + 8 <= k; j += 8) {
        uint64_t word;
        std::memcpy(&word, r + j, 8);
        word ^= 0x8080808080808080ull;
        std::memcpy(r + j, &word, 8);
      }
      for (; j < k; ++j) r[j] = static_cast<int8_t>(static_cast<uint8_t>(r[j]) ^ 0x80u);
    }
    scales[i] = peak / 127.0f;
  }
}

}  // namespace

void quantizeRows(const float* a, int64_t lda, int64_t rows, int64_t k, int8_t* q, int64_t ldq,
                  float* scales) {
  quantizeRowsWith(rowWork(), a, lda, rows, k, q, ldq, scales);
}

Int8Weights quantizePackB(const float* b, int64_t ldb, bool transB, int64_t k, int64_t n,
                          const GemmPairs& pairs) {
  Int8Weights w;
  w.k = k;
  w.n = n;
  w.kPadded = roundUp(std::max<int64_t>(k, 1), 64);
  w.pairs = pairs;
  w.blocks = static_cast<int64_t>(panelCount(pairs, static_cast<size_t>(n), kPanel));
  w.data.assign(static_cast<size_t>(2 * w.blocks * w.kPadded * kPanel), 0);
  w.scale.assign(static_cast<size_t>(w.blocks * kBlockCols), 0.0f);
  w.compensation.assign(static_cast<size_t>(w.blocks * kBlockCols), 0);
  std::vector<float> column(static_cast<size_t>(k));
  std::vector<int8_t> q(static_cast<size_t>(k));
  const RowWork vector = rowWork();
  // Packed column p (block p / 32, panel p / 16) holds B's column j.
  auto pack = [&](int64_t p, int64_t j) {
    for (int64_t i = 0; i < k; ++i) column[i] = transB ? b[j * ldb + i] : b[i * ldb + j];
    quantizeRowsWith(vector, column.data(), k, 1, k, q.data(), k, &w.scale[p]);
    int8_t* panel = w.data.data() + (p / kPanel) * w.kPadded * kPanel;
    int32_t sum = 0;
    for (int64_t i = 0; i < k; ++i) {
      panel[(i / 4) * 64 + (p % kPanel) * 4 + i % 4] = q[i];
      sum += q[i];
    }
    w.compensation[p] = 128 * sum;
  };
  for (int64_t blk = 0; blk < w.blocks; ++blk) {
    const PanelColumns cols = panelColumns(pairs, static_cast<size_t>(n), kPanel, blk);
    for (size_t c = 0; c < cols.n0; ++c) pack(blk * kBlockCols + c, cols.c0 + c);
    for (size_t c = 0; c < cols.n1; ++c) pack(blk * kBlockCols + kPanel + c, cols.c1 + c);
  }
  return w;
}

Int8Path int8PathFor(int64_t m) {
  // AMX computes 32 rows a block: a few rows (decoding) waste most of it,
  // and VNNI's blocks of 8 are faster there (m = 1, 8192×1024: 1.5x). The
  // bits are the same either way.
  const std::vector<Int8Path> available = int8PathsAvailable();
  if (available.front() == Int8Path::kAmx && m < 16 && available.size() > 1 &&
      available[1] == Int8Path::kVnni)
    return Int8Path::kVnni;
  return available.front();
}

std::string int8PathsInUse() {
  const Int8Path many = int8PathFor(1 << 20), few = int8PathFor(1);
  std::string s = int8PathName(many);
  if (few != many) s += std::string(", ") + int8PathName(few) + " under 16 rows";
  return s;
}

void gemmInt8(int64_t m, const float* a, int64_t lda, const Int8Weights& w,
              const Int8Epilogue& epilogue, float* c, int64_t ldc, rt::ThreadPool* pool) {
  gemmInt8(m, a, lda, w, epilogue, c, ldc, pool, int8PathFor(m));
}

void gemmInt8(int64_t m, const float* a, int64_t lda, const Int8Weights& w,
              const Int8Epilogue& epilogue, float* c, int64_t ldc, rt::ThreadPool* pool,
              Int8Path path) {
  const float* bias = epilogue.bias;
  const int64_t ldr = epilogue.ldr ? epilogue.ldr : w.n;
  if (m <= 0 || w.n <= 0) return;
  const int64_t kp = w.kPadded, mPadded = roundUp(m, kMaxRows);
  // A quantized per row into rows of Kp columns, a whole number of blocks
  // of rows; u8 (qa + 128) for vnni. The buffers are the calling
  // thread's, kept between calls (fresh pages each call cost 10%).
  // (Workers see them through the pointers q8 and rowScales: a
  // thread_local named inside the parallel loop would be the worker's.)
  thread_local LineVector<int8_t> qa;
  thread_local std::vector<float> sa;
  // Only the m rows' first K columns are written: the columns past K meet
  // zero weights, and the rows past m (blocks are whole) are never stored,
  // so what the buffer held before does not change a result.
  // AMX loads A as whole 16×64 tiles: each group of 16 rows as its tiles
  // in k order (1 KiB each), so a tile is one contiguous read; A is
  // quantized into that layout directly.
  const bool tiled = path == Int8Path::kAmx;
  if (qa.size() < static_cast<size_t>(mPadded * kp)) qa.resize(static_cast<size_t>(mPadded * kp));
  sa.resize(static_cast<size_t>(m));
  const RowWork vector = rowWork();
  const bool unsigned8 = path == Int8Path::kVnni;  // u8 = qa + 128
  quantizeRowsWith(vector, a, lda, m, w.k, qa.data(), kp, sa.data(), tiled, unsigned8);
  const float* rowScales = sa.data();
  const BlockKernel kernel = kernelOf(path);
  const int64_t rows = int8BlockRows(path);
  const auto* q8 = reinterpret_cast<const uint8_t*>(qa.data());
  // Bytes from a block of rows to the next (block i starts at i·kp either
  // way) and, for AMX, from a group of 16 rows' tiles to the next.
  const int64_t blockStride = kp, groupStride = tiled ? 16 * kp : kp;
  // A block's sums of `live` rows (kBlockCols apart) to floats:
  // float(sum) · (sa · sw) (+ bias), rows ldo apart.
  auto convert = [&](const int32_t* sums, const int32_t* comp, const float* scales, int64_t live,
                     const float* sw, const float* b, int64_t n, float* out, int64_t ldo) {
    if (vector.epilogue)
      return vector.epilogue(sums, kBlockCols, comp, scales, live, sw, b, n, out, ldo);
    for (int64_t r = 0; r < live; ++r)
      for (int64_t j = 0; j < n; ++j) {
        float value = static_cast<float>(sums[r * kBlockCols + j] - (comp ? comp[j] : 0)) *
                      (scales[r] * sw[j]);
        if (b) value += b[j];
        out[r * ldo + j] = value;
      }
  };
  const GemmPairs& pairs = w.pairs;
  assert(pairs.kind == GemmPairs::Kind::kNone || !epilogue.residual);
  const PairedBlock paired(pairs, epilogue.activation, epilogue.invFreq, epilogue.seqLen,
                           epilogue.positionOffset, m);
  parallelFor(pool, static_cast<size_t>(w.blocks), 1, [&](size_t begin, size_t end) {
    alignas(64) int32_t acc[kMaxRows * kBlockCols];
    alignas(64) float x[kBlockCols];  // a paired block's row as floats
    if (path == Int8Path::kAmx) amxTilesBegin();
    auto block = [&](int64_t i, size_t blk) {
      const int8_t* panel0 = w.data.data() + 2 * static_cast<int64_t>(blk) * kp * kPanel;
      kernel(q8 + i * blockStride, groupStride, panel0, panel0 + kp * kPanel, kp, m - i, acc);
      const PanelColumns cols = panelColumns(pairs, static_cast<size_t>(w.n), kPanel, blk);
      const int64_t packed0 = static_cast<int64_t>(blk) * kBlockCols;
      const int32_t* comp = unsigned8 ? w.compensation.data() + packed0 : nullptr;
      const float* sw = w.scale.data() + packed0;
      const int64_t c0 = static_cast<int64_t>(cols.c0), c1 = static_cast<int64_t>(cols.c1);
      const int64_t n0 = static_cast<int64_t>(cols.n0);
      const int64_t live = std::min(rows, m - i);
      if (!cols.paired) {  // columns c0.. in order (c1 = c0 + 16 where n1 > 0)
        const int64_t n = n0 + static_cast<int64_t>(cols.n1);
        float* out = c + i * ldc + c0;
        convert(acc, comp, rowScales + i, live, sw, bias ? bias + c0 : nullptr, n, out, ldc);
        for (int64_t r = 0; r < live; ++r) {
          if (epilogue.activation != Activation::kNone)
            activate(epilogue.activation, out + r * ldc, out + r * ldc, static_cast<size_t>(n));
          if (const float* res = epilogue.residual) {
            const float* row = res + (i + r) * ldr + c0;
            for (int64_t j = 0; j < n; ++j) out[r * ldc + j] += row[j];
          }
        }
        return;
      }
      for (int64_t r = 0; r < live; ++r) {
        const int32_t* sums = acc + r * kBlockCols;
        float* crow = c + (i + r) * ldc;
        // A pair's two sets of n0 columns (x[t], x[16 + t]) as floats, then combined.
        convert(sums, comp, rowScales + i + r, 1, sw, nullptr, kBlockCols, x, kBlockCols);
        paired.combine(x, bias, i + r, c0, c1, n0, crow);
      }
    };
    if (path == Int8Path::kAmx) {
      // Blocks of 32 rows outside, the chunk's columns inside: the A block
      // stays in L1 while the panels stream from L2, and C is written a
      // row after another (1024³: 1.2x over the other order, whose column
      // strips 4 KiB apart conflict in the cache).
      for (int64_t i = 0; i < m; i += rows)
        for (size_t blk = begin; blk < end; ++blk) block(i, blk);
    } else {
      // Blocks of 8 rows or fewer: a pair of panels stays in L1 while A
      // streams (the other order is 10% slower for VNNI at 1024³).
      for (size_t blk = begin; blk < end; ++blk)
        for (int64_t i = 0; i < m; i += rows) block(i, blk);
    }
    if (path == Int8Path::kAmx) amxTilesEnd();
  });
}

}  // namespace transfuse::kernels
