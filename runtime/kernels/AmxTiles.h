// The AMX tile configuration the int8 and bf16 GEMMs share: palette 1 and
// tiles 0-7 of 16 rows of 64 bytes (an int8 tile is 16×64 values, a bf16
// tile 16×32 pairs' worth of 16×32 values). amxTilesBegin loads it on the
// calling thread before a run of blocks, amxTilesEnd releases the tiles.
// Call them only where Linux granted the tile state (arch_prctl).
#ifndef TRANSFUSE_RUNTIME_KERNELS_AMXTILES_H
#define TRANSFUSE_RUNTIME_KERNELS_AMXTILES_H

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace transfuse::kernels {

// Whether Linux (5.16+) grants this process the tile data state; ask once
// the CPU has the tiles (CPUID 7: AMX-TILE, and the caller's own unit).
inline bool amxTilesGranted() {
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

// ldtilecfg's 64 bytes. A constant in memory: GCC 12 does not see
// _tile_loadconfig read its operand and drops stores to a local one.
struct alignas(64) AmxTileConfig {
  uint8_t palette, startRow;
  uint8_t reserved[14];
  uint16_t bytesPerRow[16];
  uint8_t rows[16];
};
alignas(64) inline const AmxTileConfig kAmxTileConfig = {
    1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

__attribute__((target("amx-tile"))) inline void amxTilesBegin() {
  _tile_loadconfig(&kAmxTileConfig);
}
__attribute__((target("amx-tile"))) inline void amxTilesEnd() { _tile_release(); }

}  // namespace transfuse::kernels

#endif  // TRANSFUSE_RUNTIME_KERNELS_AMXTILES_H
