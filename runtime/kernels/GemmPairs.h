// The column pairs of a GEMM's paired epilogues (Gemm.h's file comment:
// rotary and gated) and the columns each packed panel holds. Shared by the
// CPU kernel (Gemm.h) and the CUDA one (cuda/Gemm.cuh); no dependency
// beyond the standard library.
#ifndef TRANSFUSE_RUNTIME_KERNELS_GEMMPAIRS_H_
#define TRANSFUSE_RUNTIME_KERNELS_GEMMPAIRS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace transfuse::kernels {

// Column pairs the epilogue combines (Gemm.h's file comment): rotary pairs
// (i, i + headDim/2) within each head of the first `columns` columns, or
// gated pairs (j, n + j) of a [K, 2n] B whose result has n columns.
struct GemmPairs {
  enum class Kind : uint8_t { kNone, kRotary, kGated };
  Kind kind = Kind::kNone;
  size_t headDim = 0;  // kRotary: even
  size_t columns = 0;  // kRotary: the leading columns rotated, a multiple of headDim
  bool operator==(const GemmPairs& o) const {
    return kind == o.kind && headDim == o.headDim && columns == o.columns;
  }
};

// The B columns of one packed panel: its first vector holds columns
// [c0, c0 + n0), its second [c1, c1 + n1) (lanes past n are zero), for a
// panel width of 2·L floats. A plain panel p holds 2·L consecutive columns
// (c1 = c0 + L); a rotary pair panel a head's columns i.. and i + headDim/2..;
// a gated panel gate columns j.. and up columns n + j.. (stored to C's
// columns j..). panelCount is the number of panels of B's N columns.
struct PanelColumns {
  size_t c0, n0, c1, n1;
  bool paired;
};
inline size_t panelCount(const GemmPairs& pairs, size_t N, size_t L) {
  const size_t nr = 2 * L;
  switch (pairs.kind) {
    case GemmPairs::Kind::kNone:
      break;
    case GemmPairs::Kind::kRotary: {
      const size_t half = pairs.headDim / 2, perHead = (half + L - 1) / L;
      return pairs.columns / pairs.headDim * perHead + (N - pairs.columns + nr - 1) / nr;
    }
    case GemmPairs::Kind::kGated:
      return (N / 2 + L - 1) / L;
  }
  return (N + nr - 1) / nr;
}

inline PanelColumns panelColumns(const GemmPairs& pairs, size_t N, size_t L, size_t panel) {
  // Plain panels: 2·L consecutive columns from `base`.
  auto plain = [&](size_t base, size_t q) {
    const size_t c0 = base + q * 2 * L, c1 = c0 + L;
    return PanelColumns{c0, std::min(L, N - c0), c1, N > c1 ? std::min(L, N - c1) : 0, false};
  };
  switch (pairs.kind) {
    case GemmPairs::Kind::kNone:
      break;
    case GemmPairs::Kind::kRotary: {
      const size_t half = pairs.headDim / 2, perHead = (half + L - 1) / L;
      const size_t pairPanels = pairs.columns / pairs.headDim * perHead;
      if (panel >= pairPanels) return plain(pairs.columns, panel - pairPanels);
      const size_t i = panel % perHead * L, n = std::min(L, half - i);
      const size_t c0 = panel / perHead * pairs.headDim + i;
      return PanelColumns{c0, n, c0 + half, n, true};
    }
    case GemmPairs::Kind::kGated: {
      const size_t j = panel * L, n = std::min(L, N / 2 - j);
      return PanelColumns{j, n, N / 2 + j, n, true};
    }
  }
  return plain(0, panel);
}


}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_GEMMPAIRS_H_
