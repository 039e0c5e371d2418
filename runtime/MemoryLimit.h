// The memory limit that every large allocation is checked against before it
// is made: model parameters (bound, drawn at random or packed) and arenas. A
// request over it is one clear error naming what needed the memory, never an
// out-of-memory kill. The limit follows the machine (docs/reliability.md),
// not a fixed cap: the smallest of physical memory, the cgroup's memory.max
// (v2) or memory.limit_in_bytes (v1), and RLIMIT_AS when set.
#ifndef TRANSFUSE_RUNTIME_MEMORYLIMIT_H
#define TRANSFUSE_RUNTIME_MEMORYLIMIT_H

#include <cstdint>
#include <string>

#include "runtime/Status.h"

namespace transfuse::rt {

// The limit in bytes (read once per process).
uint64_t memoryLimitBytes();

// ok when `bytes` fit in the limit; else "<what> needs N bytes (x.x GiB),
// more than the memory of this machine (y.y GiB)".
Status checkFitsInMemory(const std::string& what, uint64_t bytes);

// Bytes of `count` elements of `elementSize` bytes, saturating at UINT64_MAX
// (so that an overflowing request still fails checkFitsInMemory).
uint64_t saturatingBytes(uint64_t count, uint64_t elementSize);
uint64_t saturatingAdd(uint64_t a, uint64_t b);

// Bytes of a dense tensor of `rank` dimensions (negative sizes count as 0),
// saturating like saturatingBytes.
uint64_t tensorBytes(const int64_t* shape, size_t rank, uint64_t elementSize);

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_MEMORYLIMIT_H
