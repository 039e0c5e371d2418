// Checkpoint directories: see Checkpoint.h.
#include "runtime/host/Checkpoint.h"

#include "runtime/Json.h"
#include "runtime/Safetensors.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cinttypes>
#include <cstring>
#include <fstream>
#include <sstream>

namespace transfuse::rt {
namespace {

constexpr const char* kSums = "CHECKSUMS";
constexpr const char* kTmpMarker = ".tmp-";

Status sysError(const std::string& what, const std::string& path) {
  return Status::error(what + " '" + path + "': " + std::strerror(errno));
}

std::string parentOf(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string baseOf(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

Status fsyncPath(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return sysError("cannot open", path);
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return sysError("fsync failed on", path);
  return Status::ok();
}

// Creates `path` with `bytes`, fsynced.
Status writeSynced(const std::string& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return sysError("cannot create", path);
  bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return sysError("cannot write", path);
  return Status::ok();
}

// The size and CRC-32 of a file.
Status checksum(const std::string& path, uint64_t* size, uint32_t* crc) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sysError("cannot read", path);
  uLong c = crc32(0L, Z_NULL, 0);
  uint64_t n = 0;
  static thread_local std::vector<unsigned char> buffer(1 << 20);
  for (;;) {
    ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0) {
      ::close(fd);
      return sysError("cannot read", path);
    }
    if (got == 0) break;
    c = crc32(c, buffer.data(), static_cast<uInt>(got));
    n += static_cast<uint64_t>(got);
  }
  ::close(fd);
  *size = n;
  *crc = static_cast<uint32_t>(c);
  return Status::ok();
}

}  // namespace

Status removeDirectory(const std::string& path) {
  for (const std::string& name : entries(path))
    if (::unlink((path + "/" + name).c_str()) != 0 && errno != ENOENT)
      return sysError("cannot remove", path + "/" + name);
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return sysError("cannot remove", path);
  return Status::ok();
}

Status commitDirectory(const std::string& path,
                       const std::function<Status(const std::string& tmpDir)>& write) {
  const std::string parent = parentOf(path), base = baseOf(path);
  // Temporaries of commits that were killed: "." NAME ".tmp-" PID.
  for (const std::string& name : entries(parent))
    if (name.size() > 1 && name[0] == '.' && name.find(kTmpMarker) != std::string::npos) {
      const std::string stale = parent + "/" + name;
      size_t dash = name.rfind('-');
      pid_t pid = static_cast<pid_t>(std::atol(name.c_str() + dash + 1));
      if (pid == getpid() || ::kill(pid, 0) != 0)  // not another live process's
        (void)removeDirectory(stale);
    }
  const std::string tmp = parent + "/." + base + kTmpMarker + std::to_string(getpid());
  (void)removeDirectory(tmp);
  if (::mkdir(tmp.c_str(), 0755) != 0) return sysError("cannot create", tmp);
  auto fail = [&](Status s) {
    (void)removeDirectory(tmp);
    return s;
  };
  if (Status s = write(tmp); !s.isOk()) return fail(s);
  std::vector<std::string> files = entries(tmp);
  std::sort(files.begin(), files.end());
  std::string sums;
  for (const std::string& name : files) {
    const std::string file = tmp + "/" + name;
    struct stat st;
    if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      return fail(Status::error("'" + file + "' is not a regular file"));
    uint64_t size = 0;
    uint32_t crc = 0;
    if (Status s = fsyncPath(file, false); !s.isOk()) return fail(s);
    if (Status s = checksum(file, &size, &crc); !s.isOk()) return fail(s);
    char line[64];
    std::snprintf(line, sizeof line, "%08" PRIx32 " %" PRIu64 " ", crc, size);
    sums += line + name + "\n";
  }
  if (Status s = writeSynced(tmp + "/" + kSums, sums); !s.isOk()) return fail(s);
  if (Status s = fsyncPath(tmp, true); !s.isOk()) return fail(s);
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    // Replace: exchange the two in one step, then remove the old one.
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) != 0)
      return fail(sysError("cannot replace", path));
  } else if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(sysError("cannot rename into", path));
  }
  (void)removeDirectory(tmp);  // the old contents after an exchange
  return fsyncPath(parent, true);
}

Status writeFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + kTmpMarker + std::to_string(getpid());
  if (Status s = writeSynced(tmp, bytes); !s.isOk()) {
    ::unlink(tmp.c_str());
    return s;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = sysError("cannot rename into", path);
    ::unlink(tmp.c_str());
    return s;
  }
  return fsyncPath(parentOf(path), true);
}

Status verifyDirectory(const std::string& path) {
  std::ifstream in(path + "/" + kSums);
  if (!in) return Status::error(path + ": no " + kSums + " (not a whole checkpoint)");
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string crcHex, name;
    uint64_t size = 0;
    if (!(row >> crcHex >> size >> name))
      return Status::error(path + "/" + kSums + ": malformed line " + std::to_string(lines + 1));
    ++lines;
    uint64_t actualSize = 0;
    uint32_t crc = 0;
    if (Status s = checksum(path + "/" + name, &actualSize, &crc); !s.isOk())
      return Status::error(path + ": " + s.message());
    if (actualSize != size)
      return Status::error(path + "/" + name + ": " + std::to_string(actualSize) +
                           " bytes, CHECKSUMS says " + std::to_string(size) + " (a torn file)");
    if (std::strtoul(crcHex.c_str(), nullptr, 16) != crc)
      return Status::error(path + "/" + name + ": the CRC-32 does not match CHECKSUMS (damaged)");
  }
  if (lines == 0) return Status::error(path + "/" + kSums + " lists no files");
  return Status::ok();
}

std::string checkpointName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08" PRId64, step);
  return name;
}

std::vector<int64_t> listCheckpoints(const std::string& dir) {
  std::vector<int64_t> steps;
  for (const std::string& name : entries(dir)) {
    if (name.size() != 13 || name.compare(0, 5, "step-") != 0) continue;
    if (name.find_first_not_of("0123456789", 5) != std::string::npos) continue;
    steps.push_back(std::atoll(name.c_str() + 5));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string joinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::vector<int64_t> wholeCheckpoints(const std::string& dir, std::vector<std::string>* skipped) {
  std::vector<int64_t> steps = listCheckpoints(dir), whole;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (Status s = verifyDirectory(joinPath(dir, checkpointName(*it))); !s.isOk()) {
      if (skipped) skipped->push_back(s.message());
      continue;
    }
    whole.push_back(*it);
  }
  return whole;
}

StatusOr<JsonValue> readState(const std::string& checkpoint) {
  const std::string path = joinPath(checkpoint, kStateFile);
  std::ifstream in(path, std::ios::binary);
  if (!in) return sysError("cannot read", path);
  std::ostringstream text;
  text << in.rdbuf();
  StatusOr<JsonValue> state = JsonValue::parse(text.str());
  if (!state.isOk()) return Status::error(path + ": " + state.status().message());
  if (!state->isObject()) return Status::error(path + ": not a JSON object");
  return state;
}

StatusOr<int64_t> bestCheckpoint(const std::string& dir, const std::vector<int64_t>& steps) {
  int64_t best = -1;
  double bestLoss = 0;
  for (int64_t step : steps) {
    StatusOr<JsonValue> state = readState(joinPath(dir, checkpointName(step)));
    if (!state.isOk()) return state.status();
    const JsonValue* loss = state->find("valid_loss");
    if (loss && loss->isNumber() && (best < 0 || loss->asNumber() < bestLoss)) {
      bestLoss = loss->asNumber();
      best = step;
    }
  }
  return best;
}

StatusOr<std::map<std::string, Tensor>> averageSafetensors(const std::vector<std::string>& paths) {
  if (paths.empty()) return Status::error("no checkpoints to average");
  std::map<std::string, std::vector<double>> sums;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (size_t f = 0; f < paths.size(); ++f) {
    StatusOr<SafetensorsFile> file = SafetensorsFile::open(paths[f]);
    if (!file.isOk()) return file.status();
    std::vector<std::string> names = file->names();
    if (f > 0 && names.size() != sums.size())
      return Status::error(paths[f] + " holds " + std::to_string(names.size()) + " tensors, " +
                           paths[0] + " " + std::to_string(sums.size()));
    for (const std::string& name : names) {
      StatusOr<Tensor> t = file->readAsF32(name);
      if (!t.isOk()) return Status::error(paths[f] + ": " + t.status().message());
      if (f == 0) {
        shapes[name] = t->shape;
        sums[name].assign(static_cast<size_t>(t->numElements()), 0.0);
      } else if (!shapes.count(name) || shapes[name] != t->shape) {
        return Status::error(paths[f] + ": tensor '" + name + "' is " +
                             (shapes.count(name) ? shapeToString(t->shape) + ", " + paths[0] +
                                                       " has " + shapeToString(shapes[name])
                                                 : std::string("not in ") + paths[0]));
      }
      std::vector<double>& sum = sums[name];
      const float* p = t->data<float>();
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += p[i];
    }
  }
  std::map<std::string, Tensor> out;
  for (auto& [name, sum] : sums) {
    Tensor t = Tensor::zeros(DType::F32, shapes[name]);
    float* p = t.data<float>();
    for (size_t i = 0; i < sum.size(); ++i) p[i] = static_cast<float>(sum[i] / paths.size());
    out.emplace(name, std::move(t));
  }
  return out;
}

}  // namespace transfuse::rt
