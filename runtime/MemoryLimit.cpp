// The machine's memory limit; see MemoryLimit.h.
#include "runtime/MemoryLimit.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace transfuse::rt {

namespace {

// A number of bytes from a cgroup file ("max" or an unreadable file: none).
uint64_t cgroupLimit(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty() || text[0] < '0' || text[0] > '9') return UINT64_MAX;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') break;
    if (v > (UINT64_MAX - 9) / 10) return UINT64_MAX;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v == 0 ? UINT64_MAX : v;
}

uint64_t readLimit() {
  uint64_t limit = UINT64_MAX;
  long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && pageSize > 0)
    limit = saturatingBytes(static_cast<uint64_t>(pages), static_cast<uint64_t>(pageSize));
  limit = std::min(limit, cgroupLimit("/sys/fs/cgroup/memory.max"));
  limit = std::min(limit, cgroupLimit("/sys/fs/cgroup/memory/memory.limit_in_bytes"));
  struct rlimit rl;
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    limit = std::min<uint64_t>(limit, rl.rlim_cur);
  return limit;
}

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

}  // namespace

uint64_t memoryLimitBytes() {
  static const uint64_t limit = readLimit();
  return limit;
}

uint64_t saturatingBytes(uint64_t count, uint64_t elementSize) {
  uint64_t out;
  return __builtin_mul_overflow(count, elementSize, &out) ? UINT64_MAX : out;
}

uint64_t saturatingAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

uint64_t tensorBytes(const int64_t* shape, size_t rank, uint64_t elementSize) {
  uint64_t bytes = elementSize;
  for (size_t d = 0; d < rank; ++d)
    bytes = saturatingBytes(bytes, shape[d] < 0 ? 0 : static_cast<uint64_t>(shape[d]));
  return bytes;
}

Status checkFitsInMemory(const std::string& what, uint64_t bytes) {
  const uint64_t limit = memoryLimitBytes();
  if (bytes <= limit) return Status::ok();
  return Status::error(what + " needs " + std::to_string(bytes) + " bytes (" + gib(bytes) +
                       "), more than the memory of this machine (" + gib(limit) + ")");
}

}  // namespace transfuse::rt
