// The bf16 GEMM (see Bf16Gemm.h): rounding, packing, the path's dispatch,
// the scalar block kernel, and the driver with the epilogue every path
// shares.

#include "runtime/kernels/Bf16Gemm.h"

#include "runtime/kernels/AmxTiles.h"
#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/PairedBlock.h"
#include "runtime/kernels/Parallel.h"
#include "runtime/kernels/PathToggles.h"
#include "runtime/kernels/bf16/Bf16Kernels.h"

#include <cpuid.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <mutex>

namespace transfuse::kernels {

using namespace bf16;

namespace {

constexpr int64_t kMaxRows = kRowsAmx;  // A's rows are padded to a multiple of every block's

int64_t roundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

std::vector<Bf16Path> detect() {
  std::vector<Bf16Path> paths;
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool amx = avx512 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 24)) &&
                   (d & (1u << 22)) && amxTilesGranted();
  if (amx) paths.push_back(Bf16Path::kAmx);
  if (avx512 && __builtin_cpu_supports("avx512bf16")) paths.push_back(Bf16Path::kAvx512Bf16);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    paths.push_back(Bf16Path::kAvx2);
  paths.push_back(Bf16Path::kScalar);
  return paths;
}

std::mutex pathsMutex;
std::vector<Bf16Path>& paths() {
  static std::vector<Bf16Path> available = detect();
  return available;
}

BlockKernel kernelOf(Bf16Path path) {
  switch (path) {
    case Bf16Path::kAmx: return blockAmx;
    case Bf16Path::kAvx512Bf16: return blockAvx512;
    case Bf16Path::kAvx2: return blockAvx2;
    case Bf16Path::kScalar: break;
  }
  return blockScalar;
}

using RoundRow = void (*)(const float*, int64_t, uint16_t*);
using StoreRows = void (*)(const float*, int64_t, const float*, int64_t, const float*, int64_t,
                           float*, int64_t);

void roundRowScalar(const float* x, int64_t k, uint16_t* q) {
  for (int64_t j = 0; j < k; ++j) q[j] = roundBf16(x[j]);
}

void storeRowsScalar(const float* sums, int64_t rows, const float* bias, int64_t n,
                     const float* res, int64_t ldr, float* out, int64_t ldo) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      float v = sums[r * kBlockCols + j];
      if (bias) v += bias[j];
      if (res) v += res[r * ldr + j];
      out[r * ldo + j] = v;
    }
}

// The row work around the block kernels (rounding A and B, the plain
// epilogue): in AVX-512 where the avx512bf16 path is on, in AVX2 where the
// avx2 path is, else scalar loops; the same bits whichever.
struct RowWork {
  RoundRow round = roundRowScalar;
  StoreRows store = storeRowsScalar;
  // A stored transposed, 16 rows by 32 k rounded (null: transposed by scalar loops).
  void (*roundTransposed)(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, uint16_t*,
                          int64_t) = nullptr;
  // A panel of packed B straight from fp32 (null: rows rounded, then laid out).
  void (*packPanel)(const float*, int64_t, bool, int64_t, int64_t, int64_t, int64_t,
                    uint16_t*) = nullptr;
};

RowWork rowWork() {
  std::lock_guard<std::mutex> lock(pathsMutex);
  const std::vector<Bf16Path>& p = paths();
  auto on = [&](Bf16Path path) { return std::find(p.begin(), p.end(), path) != p.end(); };
  if (on(Bf16Path::kAvx512Bf16))
    return {roundRowAvx512, storeRowsAvx512, roundTransposedAvx512, packPanelAvx512};
  if (on(Bf16Path::kAvx2)) return {roundRowAvx2, storeRowsAvx2};
  return {};
}

}  // namespace

namespace bf16 {

void blockScalar(const uint16_t* a, int64_t lda, const uint16_t* panel0, const uint16_t* panel1,
                 int64_t kLength, int64_t rows, float* acc, int64_t ldAcc, bool accumulate) {
  for (int64_t r = 0; r < std::min(rows, kRowsScalar); ++r)
    for (int64_t c = 0; c < kBlockCols; ++c) {
      const uint16_t* panel = c < kPanel ? panel0 : panel1;
      const int64_t col = c % kPanel;
      float sum = accumulate ? acc[r * ldAcc + c] : 0.0f;
      for (int64_t k = 0; k < kLength; k += 2)
        for (int64_t odd : {1, 0}) {  // a pair's odd product first, as vdpbf16ps
          const float product = widenBf16(a[r * lda + k + odd]) *
                                widenBf16(panel[(k / 2) * 32 + col * 2 + odd]);
          sum += product;  // exact product, one rounding per add
        }
      acc[r * ldAcc + c] = sum;
    }
}

}  // namespace bf16

uint16_t roundBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

float widenBf16(uint16_t b) {
  const uint32_t bits = uint32_t{b} << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

const char* bf16PathName(Bf16Path path) {
  switch (path) {
    case Bf16Path::kAmx: return "amx";
    case Bf16Path::kAvx512Bf16: return "avx512bf16";
    case Bf16Path::kAvx2: return "avx2";
    case Bf16Path::kScalar: break;
  }
  return "scalar";
}

namespace {
constexpr std::array<Bf16Path, 4> kBf16Paths = {Bf16Path::kAmx, Bf16Path::kAvx512Bf16,
                                                Bf16Path::kAvx2, Bf16Path::kScalar};
}  // namespace

std::optional<Bf16Path> bf16PathNamed(std::string_view name) {
  return pathNamed(name, kBf16Paths, bf16PathName);
}

std::vector<Bf16Path> bf16PathsAvailable() {
  std::lock_guard<std::mutex> lock(pathsMutex);
  return paths();
}

rt::Status restrictBf16Paths(std::string_view toggles) {
  std::lock_guard<std::mutex> lock(pathsMutex);
  return removeToggledPaths(toggles, paths(), kBf16Paths, bf16PathName, "bf16");
}

Bf16Path bestBf16Path() { return bf16PathsAvailable().front(); }

int64_t bf16BlockRows(Bf16Path path) {
  switch (path) {
    case Bf16Path::kAmx: return kRowsAmx;
    case Bf16Path::kAvx512Bf16: return kRowsAvx512;
    case Bf16Path::kAvx2: return kRowsAvx2;
    case Bf16Path::kScalar: break;
  }
  return kRowsScalar;
}

void packBf16(Bf16Weights& w, const float* b, int64_t ldb, bool transB, int64_t k, int64_t n,
              const GemmPairs& pairs, rt::ThreadPool* pool) {
  w.k = k;
  w.n = n;
  w.kPadded = roundUp(std::max<int64_t>(k, 1), 32);
  w.pairs = pairs;
  w.blocks = static_cast<int64_t>(panelCount(pairs, static_cast<size_t>(n), kPanel));
  const size_t size = static_cast<size_t>(2 * w.blocks * w.kPadded * kPanel);
  w.data.resize(size);
  const RowWork vector = rowWork();
  const int64_t kp = w.kPadded;
  if (vector.packPanel) {  // each panel rounded and laid out in one pass
    parallelFor(pool, static_cast<size_t>(w.blocks), 1, [&](size_t begin, size_t end) {
      for (size_t blk = begin; blk < end; ++blk) {
        const PanelColumns cols = panelColumns(pairs, static_cast<size_t>(n), kPanel, blk);
        for (int64_t half = 0; half < 2; ++half)
          vector.packPanel(b, ldb, transB, static_cast<int64_t>(half ? cols.c1 : cols.c0),
                           static_cast<int64_t>(half ? cols.n1 : cols.n0), k, kp,
                           w.data.data() + (2 * static_cast<int64_t>(blk) + half) * kp * kPanel);
      }
    });
    return;
  }
  const RoundRow round = vector.round;
  // B rounded as it is stored (each of its rows a run of contiguous floats,
  // over the pool), into the calling thread's buffer (workers see it
  // through `rounded`), then laid out a panel at a time: a column's k-pairs
  // side by side, 16 columns a pair row, zeros past N and K.
  const int64_t rows = transB ? n : k, length = transB ? k : n;
  thread_local std::vector<uint16_t> buffer;
  buffer.resize(static_cast<size_t>(rows * length));
  uint16_t* rounded = buffer.data();
  parallelFor(pool, static_cast<size_t>(rows), rowGrain(static_cast<size_t>(length)),
              [&](size_t begin, size_t end) {
                for (size_t r = begin; r < end; ++r)
                  round(b + static_cast<int64_t>(r) * ldb, length,
                        rounded + static_cast<int64_t>(r) * length);
              });
  parallelFor(pool, static_cast<size_t>(w.blocks), 1, [&](size_t begin, size_t end) {
    for (size_t blk = begin; blk < end; ++blk) {
      const PanelColumns cols = panelColumns(pairs, static_cast<size_t>(n), kPanel, blk);
      for (int64_t half = 0; half < 2; ++half) {
        const int64_t first = static_cast<int64_t>(half ? cols.c1 : cols.c0);
        const int64_t count = static_cast<int64_t>(half ? cols.n1 : cols.n0);
        uint16_t* panel = w.data.data() + (2 * static_cast<int64_t>(blk) + half) * kp * kPanel;
        std::fill(panel, panel + kp * kPanel, uint16_t{0});
        // Reading along the rounded copy's rows: a column's k with transB,
        // a row's columns otherwise.
        // (A pair is one 32-bit lane: k even in its low half.)
        if (transB) {
          for (int64_t c = 0; c < count; ++c) {
            const uint16_t* column = rounded + (first + c) * k;
            for (int64_t p = 0; p < k / 2; ++p)
              std::memcpy(panel + p * 32 + c * 2, column + 2 * p, 4);
            if (k % 2) panel[(k / 2) * 32 + c * 2] = column[k - 1];
          }
        } else {
          for (int64_t i = 0; i + 1 < k; i += 2) {
            const uint16_t *even = rounded + i * n + first, *odd = even + n;
            uint32_t lanes[kPanel];
            for (int64_t c = 0; c < count; ++c)
              lanes[c] = uint32_t{even[c]} | uint32_t{odd[c]} << 16;
            std::memcpy(panel + (i / 2) * 32, lanes, static_cast<size_t>(count) * 4);
          }
          if (k % 2)
            for (int64_t c = 0; c < count; ++c)
              panel[(k / 2) * 32 + c * 2] = rounded[(k - 1) * n + first + c];
        }
      }
    }
  });
  // Kept for the next call (a train step repacks every weight), unless it
  // holds a large matrix's worth (a vocabulary projection packed at load).
  if (buffer.size() > (size_t{8} << 20)) std::vector<uint16_t>().swap(buffer);
}

namespace {

// A (m rows of k, or transposed) rounded into rows of Kp bf16 values, zero
// past k (they meet zero weights; a NaN's bits there would not): as
// `tiled` AMX tiles (each group of 16 rows as its 16×32 tiles in k order),
// or `wide`, the rounded values as floats (the avx2 path, which then
// broadcasts them from memory instead of widening each).
void roundA(const RowWork& vector, const float* a, int64_t lda, bool transA, int64_t m,
            int64_t k, int64_t kp, bool tiled, bool wide, uint16_t* q, rt::ThreadPool* pool) {
  const RoundRow round = vector.round;
  // A piece of a row, rounded into `piece`, to its place: bf16 bits, or
  // (wide) their values as floats at q viewed as floats.
  auto put = [&](const uint16_t* piece, int64_t n, int64_t row, int64_t k0, int64_t i0) {
    if (wide) {
      float* to = reinterpret_cast<float*>(q) + row * kp + k0;
      for (int64_t j = 0; j < n; ++j) to[j] = widenBf16(piece[j]);
    } else if (tiled) {
      for (int64_t t = 0; t < n; t += 32)
        std::memcpy(q + i0 * kp + ((k0 + t) / 32) * 512 + (row - i0) * 32, piece + t, 64);
    } else {
      std::memcpy(q + row * kp + k0, piece, static_cast<size_t>(n) * sizeof(uint16_t));
    }
  };
  const int64_t groups = (m + 15) / 16;
  if (transA && vector.roundTransposed && !wide) {
    // A is stored as Aᵀ [K, M]: slabs of 64 of its rows over the pool (read
    // in order), each cut into groups of A's 16 rows by 32 k, rounded and
    // transposed in registers straight to their place.
    parallelFor(pool, static_cast<size_t>(kp / 32 + 1) / 2, 1, [&](size_t begin, size_t end) {
      for (size_t slab = begin; slab < end; ++slab)
        for (int64_t k0 = static_cast<int64_t>(slab) * 64;
             k0 < std::min(kp, static_cast<int64_t>(slab + 1) * 64); k0 += 32)
          for (int64_t g = 0; g < groups; ++g) {
            const int64_t i0 = g * 16, live = std::min<int64_t>(16, m - i0);
            if (tiled)  // the group's tile for these 32 k: 16 rows of 64 bytes
              vector.roundTransposed(a, lda, i0, live, k, k0, q + i0 * kp + (k0 / 32) * 512, 32);
            else
              vector.roundTransposed(a, lda, i0, live, k, k0, q + i0 * kp + k0, kp);
          }
    });
    return;
  }
  if (transA) {
    // The same with scalar loops: each group's 16 columns of a slab
    // transposed into a tile in L1, whose rows are rounded as pieces of
    // A's rows.
    parallelFor(pool, static_cast<size_t>(kp / 32 + 1) / 2, 1, [&](size_t begin, size_t end) {
      alignas(64) float tile[16][64];
      alignas(64) uint16_t piece[64];
      for (size_t slab = begin; slab < end; ++slab) {
        const int64_t k0 = static_cast<int64_t>(slab) * 64;
        const int64_t len = std::max<int64_t>(0, std::min<int64_t>(64, k - k0));
        const int64_t span = std::min<int64_t>(64, kp - k0);  // 64, or 32 at the end
        for (int64_t g = 0; g < groups; ++g) {
          const int64_t i0 = g * 16, live = std::min<int64_t>(16, m - i0);
          for (int64_t kk = 0; kk < len; ++kk)
            for (int64_t r = 0; r < live; ++r) tile[r][kk] = a[(k0 + kk) * lda + i0 + r];
          for (int64_t r = 0; r < live; ++r) {
            round(tile[r], len, piece);
            std::fill(piece + len, piece + span, uint16_t{0});
            put(piece, span, i0 + r, k0, i0);
          }
        }
      }
    });
    return;
  }
  // Groups of 16 rows over the pool, each row rounded whole.
  parallelFor(pool, static_cast<size_t>(groups), 4, [&](size_t begin, size_t end) {
    std::vector<uint16_t> row(tiled || wide ? static_cast<size_t>(kp) : 0);
    for (size_t g = begin; g < end; ++g) {
      const int64_t i0 = static_cast<int64_t>(g) * 16, live = std::min<int64_t>(16, m - i0);
      for (int64_t r = 0; r < live; ++r) {
        const float* x = a + (i0 + r) * lda;
        if (!tiled && !wide) {  // straight into place
          uint16_t* out = q + (i0 + r) * kp;
          round(x, k, out);
          std::fill(out + k, out + kp, uint16_t{0});
          continue;
        }
        round(x, k, row.data());
        std::fill(row.begin() + k, row.end(), uint16_t{0});
        put(row.data(), kp, i0 + r, 0, i0);
      }
    }
  });
}

void gemmRounded(int64_t m, const uint16_t* qa, const Bf16Weights& w,
                 const GemmEpilogue& epilogue, float* c, int64_t ldc, rt::ThreadPool* pool,
                 Bf16Path path) {
  const int64_t kp = w.kPadded;
  const bool tiled = path == Bf16Path::kAmx;
  const BlockKernel kernel = kernelOf(path);
  const RowWork vector = rowWork();
  const int64_t rows = bf16BlockRows(path);
  const int64_t blockStride = kp, groupStride = tiled ? 16 * kp : kp;
  // A's element in the buffer's uint16 units: avx2 reads floats.
  const int64_t unit = path == Bf16Path::kAvx2 ? 2 : 1;
  const GemmPairs& pairs = w.pairs;
  assert(pairs.kind == GemmPairs::Kind::kNone || !epilogue.residual);
  const float* bias = epilogue.bias;
  const int64_t ldr = epilogue.ldr ? static_cast<int64_t>(epilogue.ldr) : w.n;
  const int64_t ldp = epilogue.ldp ? static_cast<int64_t>(epilogue.ldp) : w.n;
  const bool derivative = epilogue.derivative != Activation::kNone;
  const PairedBlock paired(pairs, epilogue.activation, epilogue.invFreq,
                           static_cast<int64_t>(epilogue.seqLen),
                           static_cast<int64_t>(epilogue.positionOffset), m);
  // Where the epilogue stores the sums as they are, a block whose rows and
  // columns are all live is summed straight into C (rows ldc apart): no
  // scratch, no store pass (the same bits: fp32 sums reloaded exactly).
  const bool plain = pairs.kind == GemmPairs::Kind::kNone && !derivative && !bias &&
                     !epilogue.residual && epilogue.activation == Activation::kNone;
  // The block's sums: C's own rows, or `scratch` (32 floats a row).
  struct Sums {
    float* at;
    int64_t ld;
    bool direct;
  };
  auto sumsOf = [&](int64_t i, int64_t blk, float* scratch) -> Sums {
    if (plain && m - i >= rows) {
      const PanelColumns cols = panelColumns(pairs, static_cast<size_t>(w.n), kPanel,
                                             static_cast<size_t>(blk));
      if (cols.n0 + cols.n1 == static_cast<size_t>(kBlockCols))
        return {c + i * ldc + static_cast<int64_t>(cols.c0), ldc, true};
    }
    return {scratch, kBlockCols, false};
  };
  // Units of (a chunk of rows, a block of columns): blocks alone when there
  // are enough for the threads, else rows too (a multiple of 32).
  const int64_t threads = pool ? std::max(1, pool->numThreads()) : 1;
  const int64_t chunkRows =
      w.blocks >= 4 * threads ? roundUp(m, kMaxRows) : std::max<int64_t>(256, kMaxRows);
  const int64_t chunks = (m + chunkRows - 1) / chunkRows;
  // K in passes: the avx512bf16, avx2 and scalar paths keep a pair of
  // panels' 256 k (32 KiB) in L1 while A streams; amx keeps a block of 32
  // rows × 1024 k of A (64 KiB, in L1 and L2) while the panels stream
  // (1024³: 1.1x over passes of 512, whose sums go to scratch and back
  // twice as often). The sums between passes wait in the thread's scratch
  // (fp32, reloaded exactly).
  const int64_t pass = tiled ? 1024 : 256;
  parallelFor(pool, static_cast<size_t>(chunks * w.blocks), 1, [&](size_t begin, size_t end) {
    alignas(64) float x[kBlockCols];
    // A block's values for its epilogue's one call of an elementwise kernel.
    alignas(64) float values[kMaxRows * kBlockCols], pres[kMaxRows * kBlockCols];
    // The worker's own buffer (thread_local here names the worker's).
    thread_local LineVector<float> scratchBuffer;
    // A block's epilogue: rows [i, i + live) from their sums (rows 32 apart).
    auto store = [&](int64_t i, int64_t blk, const float* acc) {
      const PanelColumns cols = panelColumns(pairs, static_cast<size_t>(w.n), kPanel,
                                             static_cast<size_t>(blk));
      const int64_t c0 = static_cast<int64_t>(cols.c0), c1 = static_cast<int64_t>(cols.c1);
      const int64_t n0 = static_cast<int64_t>(cols.n0);
      const int64_t live = std::min(rows, m - i);
      const int64_t n = n0 + static_cast<int64_t>(cols.n1);  // unpaired: columns c0..
      if (!cols.paired && !derivative && epilogue.activation == Activation::kNone) {
        const float* res = epilogue.residual ? epilogue.residual + i * ldr + c0 : nullptr;
        vector.store(acc, live, bias ? bias + c0 : nullptr, n, res, ldr, c + i * ldc + c0, ldc);
        return;
      }
      if (!cols.paired && derivative) {
        // (scale · sum) · f'(pre), as exec::scale then activationGrad, over
        // the block's rows in one call (a call per row costs its dispatch).
        // (Locals, not epilogue's fields, in the loops: they vectorize.)
        const float scale = epilogue.scale;
        for (int64_t r = 0; r < live; ++r) {
          const float* sums = acc + r * kBlockCols;
          float* to = values + r * n;
          if (scale != 1.0f)
            for (int64_t j = 0; j < n; ++j) to[j] = sums[j] * scale;
          else
            std::memcpy(to, sums, static_cast<size_t>(n) * sizeof(float));
          std::memcpy(pres + r * n, epilogue.pre + (i + r) * ldp + c0,
                      static_cast<size_t>(n) * sizeof(float));
        }
        activationGrad(*math::activationKind(epilogue.derivative), pres, values, values,
                       static_cast<size_t>(live * n));
        for (int64_t r = 0; r < live; ++r)
          std::memcpy(c + (i + r) * ldc + c0, values + r * n,
                      static_cast<size_t>(n) * sizeof(float));
        return;
      }
      if (!cols.paired) {  // bias, then the activation over the block's rows at once, residual
        for (int64_t r = 0; r < live; ++r) {
          const float* sums = acc + r * kBlockCols;
          float* to = values + r * n;
          if (bias)
            for (int64_t j = 0; j < n; ++j) to[j] = sums[j] + bias[c0 + j];
          else  // no add (-0 stays)
            std::memcpy(to, sums, static_cast<size_t>(n) * sizeof(float));
        }
        activate(epilogue.activation, values, values, static_cast<size_t>(live * n));
        for (int64_t r = 0; r < live; ++r) {
          float* crow = c + (i + r) * ldc + c0;
          const float* x = values + r * n;
          if (const float* res = epilogue.residual) {
            const float* rrow = res + (i + r) * ldr + c0;
            for (int64_t j = 0; j < n; ++j) crow[j] = x[j] + rrow[j];
          } else {
            std::memcpy(crow, x, static_cast<size_t>(n) * sizeof(float));
          }
        }
        return;
      }
      for (int64_t r = 0; r < live; ++r) {
        // A pair's two sets of n0 columns (x[t], x[16 + t]), then combined.
        std::copy(acc + r * kBlockCols, acc + (r + 1) * kBlockCols, x);
        paired.combine(x, bias, i + r, c0, c1, n0, c + (i + r) * ldc);
      }
    };
    if (tiled) amxTilesBegin();
    for (size_t u = begin; u < end;) {
      const int64_t chunk = static_cast<int64_t>(u) / w.blocks;
      const size_t stop = std::min(end, static_cast<size_t>((chunk + 1) * w.blocks));
      const int64_t b0 = static_cast<int64_t>(u) - chunk * w.blocks;
      const int64_t b1 = static_cast<int64_t>(stop) - chunk * w.blocks;
      const int64_t r0 = chunk * chunkRows, r1 = std::min(m, r0 + chunkRows);
      u = stop;
      auto panelOf = [&](int64_t blk) { return w.data.data() + 2 * blk * kp * kPanel; };
      if (tiled) {
        // Column groups whose panels fit half of L2 (1 MiB), then blocks of
        // 32 rows, then the group's columns: A's block stays in L1 while
        // the group's panels stream from L2, and C is written a row after
        // another. Scratch: a 32×32 block of sums per column block.
        const int64_t group = std::max<int64_t>(1, (int64_t{1} << 20) / (2 * kp * kPanel * 2));
        scratchBuffer.resize(static_cast<size_t>(std::min(group, b1 - b0) * kMaxRows * kBlockCols));
        float* scratch = scratchBuffer.data();
        for (int64_t g0 = b0; g0 < b1; g0 += group) {
          const int64_t g1 = std::min(b1, g0 + group);
          for (int64_t i = r0; i < r1; i += rows) {
            const uint16_t* ai = qa + i * blockStride;
            for (int64_t k0 = 0; k0 < kp; k0 += pass)
              for (int64_t blk = g0; blk < g1; ++blk) {
                const uint16_t* p0 = panelOf(blk) + k0 * kPanel;
                const Sums sums = sumsOf(i, blk, scratch + (blk - g0) * kMaxRows * kBlockCols);
                kernel(ai + k0 * 16, groupStride, p0, p0 + kp * kPanel, std::min(pass, kp - k0),
                       m - i, sums.at, sums.ld, k0 > 0);
              }
            for (int64_t blk = g0; blk < g1; ++blk) {
              const Sums sums = sumsOf(i, blk, scratch + (blk - g0) * kMaxRows * kBlockCols);
              if (!sums.direct) store(i, blk, sums.at);
            }
          }
        }
      } else {
        // A pair of panels outside (its pass of K in L1 while A streams).
        // Scratch: every row's 32 sums.
        scratchBuffer.resize(static_cast<size_t>(roundUp(r1 - r0, kMaxRows) * kBlockCols));
        float* scratch = scratchBuffer.data();
        for (int64_t blk = b0; blk < b1; ++blk) {
          for (int64_t k0 = 0; k0 < kp; k0 += pass) {
            const uint16_t* p0 = panelOf(blk) + k0 * kPanel;
            for (int64_t i = r0; i < r1; i += rows) {
              const Sums sums = sumsOf(i, blk, scratch + (i - r0) * kBlockCols);
              kernel(qa + (i * blockStride + k0) * unit, groupStride, p0, p0 + kp * kPanel,
                     std::min(pass, kp - k0), m - i, sums.at, sums.ld, k0 > 0);
            }
          }
          for (int64_t i = r0; i < r1; i += rows) {
            const Sums sums = sumsOf(i, blk, scratch + (i - r0) * kBlockCols);
            if (!sums.direct) store(i, blk, sums.at);
          }
        }
      }
    }
    if (tiled) amxTilesEnd();
  });
}

// The calling thread's buffers, kept between calls (fresh pages each call
// cost time); workers see them through pointers.
LineVector<uint16_t>& roundedA() {
  thread_local LineVector<uint16_t> qa;
  return qa;
}

// A rounded into the calling thread's buffer for `path` (AMX tiles, the
// avx2 path's floats, or rows), then the product.
void roundAndMultiply(int64_t m, const float* a, int64_t lda, bool transA, const Bf16Weights& w,
                      const GemmEpilogue& epilogue, float* c, int64_t ldc, rt::ThreadPool* pool,
                      Bf16Path path) {
  if (m <= 0 || w.n <= 0) return;
  const bool wide = path == Bf16Path::kAvx2;  // A's values as floats
  LineVector<uint16_t>& qa = roundedA();
  const size_t size = static_cast<size_t>(roundUp(m, kMaxRows) * w.kPadded * (wide ? 2 : 1));
  if (qa.size() < size) qa.resize(size);
  roundA(rowWork(), a, lda, transA, m, w.k, w.kPadded, path == Bf16Path::kAmx, wide, qa.data(),
         pool);
  gemmRounded(m, qa.data(), w, epilogue, c, ldc, pool, path);
}

}  // namespace

void gemmBf16(int64_t m, const float* a, int64_t lda, const Bf16Weights& w,
              const GemmEpilogue& epilogue, float* c, int64_t ldc, rt::ThreadPool* pool) {
  gemmBf16(m, a, lda, w, epilogue, c, ldc, pool, bestBf16Path());
}

void gemmBf16(int64_t m, const float* a, int64_t lda, const Bf16Weights& w,
              const GemmEpilogue& epilogue, float* c, int64_t ldc, rt::ThreadPool* pool,
              Bf16Path path) {
  roundAndMultiply(m, a, lda, false, w, epilogue, c, ldc, pool, path);
}

void gemmBf16(size_t M, size_t N, size_t K, const float* A, size_t lda, bool transA,
              const float* B, size_t ldb, bool transB, float* C, size_t ldc,
              const GemmEpilogue& epilogue, rt::ThreadPool* pool, const GemmPairs& pairs) {
  if (M == 0 || N == 0) return;
  thread_local Bf16Weights packed;
  packBf16(packed, B, static_cast<int64_t>(ldb), transB, static_cast<int64_t>(K),
           static_cast<int64_t>(N), pairs, pool);
  roundAndMultiply(static_cast<int64_t>(M), A, static_cast<int64_t>(lda), transA, packed,
                   epilogue, C, static_cast<int64_t>(ldc), pool, bestBf16Path());
}

}  // namespace transfuse::kernels
