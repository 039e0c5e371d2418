// Text corpora for training: see Corpus.h.
#include "runtime/host/Corpus.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>

namespace transfuse::rt {
namespace {

// The length of the UTF-8 sequence at s[i..n), or 0 when it is not one
// (overlong forms, surrogates and values past U+10FFFF included).
size_t utf8Length(const unsigned char* s, size_t i, size_t n) {
  unsigned char c = s[i];
  if (c < 0x80) return 1;
  size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (len == 0 || c > 0xF4 || i + len > n) return 0;
  for (size_t k = 1; k < len; ++k)
    if ((s[i + k] & 0xC0) != 0x80) return 0;
  if (c == 0xE0 && s[i + 1] < 0xA0) return 0;  // overlong
  if (c == 0xED && s[i + 1] >= 0xA0) return 0;  // surrogates
  if (c == 0xF0 && s[i + 1] < 0x90) return 0;  // overlong
  if (c == 0xF4 && s[i + 1] >= 0x90) return 0;  // past U+10FFFF
  return len;
}

StatusOr<std::string> readAll(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files as they are
  if (!f) return Status::error("cannot read '" + path + "': " + std::strerror(errno));
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    int n = gzread(f, buffer, sizeof buffer);
    if (n < 0) {
      int code = 0;
      std::string why = gzerror(f, &code);
      gzclose(f);
      return Status::error(path + ": corrupt gzip data (" + why + ")");
    }
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  // A truncated stream reads as a short file; gzclose_r reports it.
  if (int rc = gzclose(f); rc != Z_OK)
    return Status::error(path + ": truncated or corrupt gzip data");
  return bytes;
}

// SplitMix64: the draws of the batch plan (std's distributions differ
// between libraries; this is the same everywhere).
struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (n < 2^32; the bias of the multiply-shift is < 2^-32).
  uint64_t below(uint64_t n) { return ((next() >> 32) * n) >> 32; }
};

template <class T>
void shuffle(std::vector<T>& v, SplitMix& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

}  // namespace

StatusOr<std::vector<std::string>> readTextLines(const std::string& path) {
  StatusOr<std::string> all = readAll(path);
  if (!all.isOk()) return all.status();
  const std::string& text = *all;
  std::vector<std::string> lines;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t begin = 0;
  for (size_t i = 0; i <= text.size();) {
    if (i == text.size() || s[i] == '\n') {
      if (i == text.size() && begin == i) break;  // the newline ended the last line
      size_t end = i;
      if (end > begin && s[end - 1] == '\r') --end;
      lines.emplace_back(text, begin, end - begin);
      begin = ++i;
      continue;
    }
    if (s[i] == 0)
      return Status::error(path + ": line " + std::to_string(lines.size() + 1) +
                           ": a NUL byte (is this a text file?)");
    size_t len = utf8Length(s, i, text.size());
    if (len == 0)
      return Status::error(path + ": line " + std::to_string(lines.size() + 1) +
                           ": bytes that are not UTF-8 at column " + std::to_string(i - begin + 1));
    i += len;
  }
  if (lines.empty()) return Status::error(path + ": the file is empty");
  return lines;
}

std::vector<std::vector<int32_t>> epochBatches(const std::vector<ExampleLength>& lengths,
                                               int64_t batchTokens, int64_t maxRows, uint64_t seed,
                                               int64_t epoch, bool bucket) {
  SplitMix rng{seed * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(epoch) + 1) * 0xD1B54A32D192ED03ull};
  std::vector<int32_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  auto longer = [&](int32_t i) { return std::max(lengths[i].src, lengths[i].tgt); };
  auto shorter = [&](int32_t i) { return std::min(lengths[i].src, lengths[i].tgt); };
  if (bucket) {
    shuffle(order, rng);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return std::make_pair(longer(a), shorter(a)) < std::make_pair(longer(b), shorter(b));
    });
  }
  std::vector<std::vector<int32_t>> batches;
  std::vector<int32_t> current;
  int64_t width = 0;
  for (int32_t i : order) {
    int64_t w = std::max<int64_t>(width, longer(i));
    bool full = static_cast<int64_t>(current.size() + 1) * w > batchTokens ||
                (maxRows > 0 && static_cast<int64_t>(current.size()) >= maxRows);
    if (!current.empty() && full) {
      batches.push_back(std::move(current));
      current.clear();
      w = longer(i);
    }
    current.push_back(i);
    width = w;
  }
  if (!current.empty()) batches.push_back(std::move(current));
  if (bucket) shuffle(batches, rng);
  return batches;
}

int64_t maxBatchRows(const std::vector<ExampleLength>& lengths, int64_t batchTokens,
                     int64_t maxRows) {
  int64_t shortest = INT64_MAX;
  for (const ExampleLength& l : lengths) shortest = std::min<int64_t>(shortest, std::max(l.src, l.tgt));
  if (lengths.empty()) return 1;
  int64_t rows = std::max<int64_t>(1, batchTokens / std::max<int64_t>(1, shortest));
  rows = std::min<int64_t>(rows, static_cast<int64_t>(lengths.size()));
  return maxRows > 0 ? std::min(rows, maxRows) : rows;
}

}  // namespace transfuse::rt
