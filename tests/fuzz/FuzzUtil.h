// Helpers shared by the fuzz targets (tests/fuzz/README.md).
#ifndef TRANSFUSE_TESTS_FUZZ_FUZZUTIL_H
#define TRANSFUSE_TESTS_FUZZ_FUZZUTIL_H

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace transfuse::fuzz {

// The fuzz input as an in-memory file (memfd), reachable by path as
// /proc/self/fd/N, so that readers that take a path (mmap included) see the
// bytes without touching the disk. Closed on destruction.
class MemFile {
public:
  MemFile(const uint8_t* data, size_t size) {
    fd_ = ::memfd_create("transfuse-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) die("memfd_create failed");
    size_t done = 0;
    while (done < size) {
      ssize_t w = ::write(fd_, data + done, size - done);
      if (w <= 0) die("write to the memfd failed");
      done += static_cast<size_t>(w);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

private:
  [[noreturn]] static void die(const char* what) {
    std::fprintf(stderr, "fuzz harness: %s\n", what);
    std::abort();
  }
  int fd_ = -1;
  std::string path_;
};

// A directory of the process's own in /tmp, named from `prefix` on the
// first call (a target uses one), for targets whose reader takes a folder or
// resolves paths relative to the file.
inline const std::string& scratchDirectory(const char* prefix) {
  static const std::string dir = [prefix] {
    std::string pattern = std::string("/tmp/") + prefix + "-XXXXXX";
    if (!::mkdtemp(pattern.data())) {
      std::fprintf(stderr, "fuzz harness: mkdtemp failed\n");
      std::abort();
    }
    return pattern;
  }();
  return dir;
}

// A failed invariant of the code under test: a crash that libFuzzer records.
#define FUZZ_CHECK(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "FUZZ_CHECK failed: %s (%s:%d)\n", #cond, __FILE__, \
                   __LINE__);                                                  \
      std::fprintf(stderr, __VA_ARGS__);                                       \
      std::fprintf(stderr, "\n");                                              \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

}  // namespace transfuse::fuzz

#endif  // TRANSFUSE_TESTS_FUZZ_FUZZUTIL_H
