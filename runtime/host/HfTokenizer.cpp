// Hugging Face tokenizer.json pipelines: see HfTokenizer.h. Each step
// follows the `tokenizers` crate (huggingface/tokenizers, tokenizers/src:
// normalizers/bert.rs, pre_tokenizers/bert.rs, pre_tokenizers/split.rs,
// pre_tokenizers/byte_level.rs, models/wordpiece, models/bpe,
// tokenizer/added_vocabulary.rs, utils/truncation.rs, processors/template.rs,
// decoders/wordpiece.rs, decoders/byte_level.rs); text is handled as code
// points (std::u32string) between the UTF-8 check at the door and the
// vocabulary lookups, and regular expressions run on it as UTF-32.
#include "runtime/host/HfTokenizer.h"

#include <oniguruma.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <queue>
#include <sstream>
#include <tuple>

#include "runtime/Json.h"

namespace transfuse::rt {

// An Oniguruma pattern over UTF-32 text (code points as they are in a
// std::u32string), the engine and syntax of `tokenizers`' SysRegex.
class HfTokenizer::Regex {
 public:
  static StatusOr<std::shared_ptr<const Regex>> compile(const std::u32string& pattern) {
    static const bool initialized = [] {
      OnigEncoding encodings[] = {encoding()};
      return onig_initialize(encodings, 1) == ONIG_NORMAL;
    }();
    if (!initialized) return Status::error("Oniguruma did not initialize");
    OnigRegex re = nullptr;
    OnigErrorInfo info;
    const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
    int r = onig_new(&re, p, p + pattern.size() * sizeof(char32_t), ONIG_OPTION_NONE, encoding(),
                     ONIG_SYNTAX_DEFAULT, &info);
    if (r != ONIG_NORMAL) {
      OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
      onig_error_code_to_str(message, r, &info);
      return Status::error(reinterpret_cast<const char*>(message));
    }
    return std::shared_ptr<const Regex>(new Regex(re));
  }
  ~Regex() { onig_free(re_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // [begin, end) of each non-empty, non-overlapping match in s, left to
  // right (find_iter). onig_search reads the compiled pattern only, so one
  // Regex serves concurrent calls, each with its own region.
  void findAll(const std::u32string& s, std::vector<std::pair<size_t, size_t>>& out) const {
    OnigRegion* region = onig_region_new();
    const auto* begin = reinterpret_cast<const OnigUChar*>(s.data());
    const auto* end = begin + s.size() * sizeof(char32_t);
    for (size_t at = 0; at < s.size();) {
      int r = onig_search(re_, begin, end, begin + at * sizeof(char32_t), end, region,
                          ONIG_OPTION_NONE);
      if (r < 0) break;  // ONIG_MISMATCH (or an error: no further matches)
      size_t b = static_cast<size_t>(region->beg[0]) / sizeof(char32_t);
      size_t e = static_cast<size_t>(region->end[0]) / sizeof(char32_t);
      if (e > b) out.push_back({b, e});
      at = e > b ? e : b + 1;
    }
    onig_region_free(region, 1);
  }

 private:
  explicit Regex(OnigRegex re) : re_(re) {}
  static OnigEncoding encoding() {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return ONIG_ENCODING_UTF32_LE;
#else
    return ONIG_ENCODING_UTF32_BE;
#endif
  }
  OnigRegex re_;
};

namespace {

// ---------------------------------------------------------------- UTF-8

// Decodes strict UTF-8 (utf8proc: no overlong forms, surrogates or values
// past U+10FFFF); the error names the byte offset of the first bad sequence.
StatusOr<std::u32string> decodeUtf8(std::string_view s, const char* what) {
  std::u32string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  for (size_t i = 0; i < s.size();) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t len = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    if (len <= 0 || cp < 0)
      return Status::error(std::string(what) + ": invalid UTF-8 at byte offset " +
                           std::to_string(i));
    out.push_back(static_cast<char32_t>(cp));
    i += static_cast<size_t>(len);
  }
  return out;
}

void appendUtf8(std::string& out, char32_t c) {
  utf8proc_uint8_t buf[4];
  utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

std::string toUtf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) appendUtf8(out, c);
  return out;
}

// ------------------------------------------------------- character classes

utf8proc_category_t category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

// Rust's char::is_whitespace (the White_Space property): categories Zs, Zl,
// Zp and the controls \t \n \v \f \r and U+0085.
bool isWhitespace(char32_t c) {
  if ((c >= 0x09 && c <= 0x0D) || c == 0x85) return true;
  if (c < 0x80) return c == ' ';
  auto k = category(c);
  return k == UTF8PROC_CATEGORY_ZS || k == UTF8PROC_CATEGORY_ZL || k == UTF8PROC_CATEGORY_ZP;
}

// BertNormalizer's is_control: category Cc, Cf, Co or Cs ("other" without
// the unassigned Cn), except \t \n \r.
bool isControl(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  auto k = category(c);
  return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CO ||
         k == UTF8PROC_CATEGORY_CS;
}

// BertNormalizer's is_chinese_char: the CJK Unified Ideographs blocks and
// their extensions A-E, the compatibility ideographs and their supplement.
bool isChinese(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// BertPreTokenizer's punctuation: ASCII punctuation (which includes the
// symbols $ + < = > ^ ` | ~) or a category P* character.
bool isPunctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
           (c >= 123 && c <= 126);
  switch (category(c)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

bool isMark(char32_t c) {
  auto k = category(c);
  return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ME;
}

// The regex class \w of Rust's regex crate: Alphabetic (letters, Nl and
// Other_Alphabetic: marks, and the circled and squared Latin letters, the
// only symbols in it), marks, decimal digits, connector punctuation and the
// joiners U+200C/U+200D.
bool isWordChar(char32_t c) {
  if (c < 0x80)
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (c == 0x200C || c == 0x200D) return true;
  if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
      (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189))
    return true;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

// ------------------------------------------------------------ byte level

// GPT-2's bytes_to_unicode: the printable bytes ! .. ~, ¡ .. ¬ and ® .. ÿ
// stand for themselves, the other 68 for U+0100.. in byte order.
const std::array<char32_t, 256>& byteToChar() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      t[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

// The byte a character of byteToChar stands for, -1 for any other.
int byteOfChar(char32_t c) {
  static const std::array<int16_t, 0x144> table = [] {
    std::array<int16_t, 0x144> t;
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[byteToChar()[b]] = static_cast<int16_t>(b);
    return t;
  }();
  return c < table.size() ? table[c] : -1;
}

// GPT-2's pre-tokenizer pattern (ByteLevel with use_regex).
const HfTokenizer::Regex& gpt2Pattern() {
  static const std::shared_ptr<const HfTokenizer::Regex> re = [] {
    auto r = HfTokenizer::Regex::compile(
        U"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+");
    return r.isOk() ? *r : nullptr;
  }();
  return *re;
}

// Bytes as text, as Rust's String::from_utf8_lossy: each maximal prefix of
// a valid sequence that is cut short, and each byte that starts none,
// becomes one U+FFFD.
std::string fromUtf8Lossy(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  for (size_t i = 0; i < n;) {
    const unsigned char b = s[i];
    size_t width = b < 0x80 ? 1 : b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3
                                : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    size_t good = width ? 1 : 0;  // the bytes of a valid prefix
    for (; good < width && i + good < n; ++good) {
      const unsigned char c = s[i + good];
      unsigned char lo = 0x80, hi = 0xBF;
      if (good == 1) {  // the second byte's range depends on the first
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
      }
      if (c < lo || c > hi) break;
    }
    if (width && good == width) {
      out.append(bytes, i, width);
      i += width;
    } else {
      out += "\xEF\xBF\xBD";
      i += std::max<size_t>(good, 1);
    }
  }
  return out;
}

// ---------------------------------------------------------- normalization

// utf8proc over code points: the text goes back to UTF-8 (what its
// decomposition takes), comes back as code points. `options` is
// UTF8PROC_DECOMPOSE or UTF8PROC_COMPOSE, with or without UTF8PROC_COMPAT.
std::u32string unicodeNormalize(const std::u32string& text, int options) {
  if (text.empty()) return text;
  std::string bytes = toUtf8(text);
  auto opts = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | options);
  std::vector<utf8proc_int32_t> buffer(text.size() * 2 + 8);
  utf8proc_ssize_t n;
  for (;;) {
    n = utf8proc_decompose(reinterpret_cast<const utf8proc_uint8_t*>(bytes.data()),
                           static_cast<utf8proc_ssize_t>(bytes.size()), buffer.data(),
                           static_cast<utf8proc_ssize_t>(buffer.size()), opts);
    if (n < 0) return text;  // cannot happen on valid code points
    if (static_cast<size_t>(n) <= buffer.size()) break;
    buffer.resize(static_cast<size_t>(n));
  }
  if (options & UTF8PROC_COMPOSE) n = utf8proc_normalize_utf32(buffer.data(), n, opts);
  if (n < 0) return text;
  return std::u32string(buffer.begin(), buffer.begin() + n);
}

// Rust's char::to_lowercase: the simple mapping, and the one unconditional
// multi-character mapping of SpecialCasing.txt (U+0130 -> i + U+0307).
void appendLowercase(std::u32string& out, char32_t c) {
  if (c < 0x80) {
    out += (c >= 'A' && c <= 'Z') ? static_cast<char32_t>(c + 32) : c;
  } else if (c == 0x130) {
    out += U'i';
    out += static_cast<char32_t>(0x307);
  } else {
    out += static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
  }
}

template <class Pred>
std::u32string filtered(const std::u32string& s, Pred keep) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t c : s)
    if (keep(c)) out += c;
  return out;
}

// ------------------------------------------------------- pre-tokenization

using Behavior = HfTokenizer::SplitBehavior;

// A piece of a string: [begin, end), a delimiter's match or not.
struct Span {
  size_t begin, end;
  bool match;
};

// NormalizedString::split: `spans` cover s in order; `behavior` says where
// the matches go. Empty pieces are dropped.
void splitSpans(const std::u32string& s, const std::vector<Span>& spans, Behavior behavior,
                std::vector<std::u32string>& out) {
  std::vector<std::pair<size_t, size_t>> pieces;  // [begin, end)
  switch (behavior) {
    case Behavior::Removed:
      for (const Span& g : spans)
        if (!g.match) pieces.push_back({g.begin, g.end});
      break;
    case Behavior::Isolated:
      for (const Span& g : spans) pieces.push_back({g.begin, g.end});
      break;
    case Behavior::Contiguous: {
      bool previous = false;
      for (const Span& g : spans) {
        if (g.match == previous && !pieces.empty())
          pieces.back().second = g.end;
        else
          pieces.push_back({g.begin, g.end});
        previous = g.match;
      }
      break;
    }
    case Behavior::MergedWithPrevious: {
      bool previous = false;
      for (const Span& g : spans) {
        if (g.match && !previous && !pieces.empty())
          pieces.back().second = g.end;
        else
          pieces.push_back({g.begin, g.end});
        previous = g.match;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      bool previous = false;
      for (size_t k = spans.size(); k-- > 0;) {
        const Span& g = spans[k];
        if (g.match && !previous && !pieces.empty())
          pieces.back().first = g.begin;
        else
          pieces.push_back({g.begin, g.end});
        previous = g.match;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    }
  }
  for (auto [b, e] : pieces)
    if (e > b) out.push_back(s.substr(b, e - b));
}

// The spans of s around non-overlapping matches [begin, end), in order;
// `invert` makes the pieces between them the matches.
std::vector<Span> spansAround(size_t size, const std::vector<std::pair<size_t, size_t>>& matches,
                              bool invert) {
  std::vector<Span> spans;
  size_t last = 0;
  for (auto [b, e] : matches) {
    if (last < b) spans.push_back({last, b, invert});
    spans.push_back({b, e, !invert});
    last = e;
  }
  if (last < size) spans.push_back({last, size, invert});
  return spans;
}

// NormalizedString::split with a character predicate: each delimiter
// character is a match of its own.
template <class Pred>
void splitPiece(const std::u32string& s, Pred isDelim, Behavior behavior,
                std::vector<std::u32string>& out) {
  std::vector<std::pair<size_t, size_t>> matches;
  for (size_t i = 0; i < s.size(); ++i)
    if (isDelim(s[i])) matches.push_back({i, i + 1});
  splitSpans(s, spansAround(s.size(), matches, false), behavior, out);
}

// The Whitespace pre-tokenizer: the matches of \w+|[^\w\s]+.
void splitWordsAndSymbols(const std::u32string& s, std::vector<std::u32string>& out) {
  size_t i = 0;
  while (i < s.size()) {
    if (isWordChar(s[i])) {
      size_t j = i;
      while (j < s.size() && isWordChar(s[j])) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    } else if (!isWhitespace(s[i])) {
      size_t j = i;
      while (j < s.size() && !isWordChar(s[j]) && !isWhitespace(s[j])) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    } else {
      ++i;
    }
  }
}

// ------------------------------------------------------ added-token match

// A piece of text between added tokens (id < 0) or an added token's match.
struct Segment {
  int32_t id;
  size_t begin, end;
};

size_t whitespaceRunBefore(const std::u32string& s, size_t end) {
  size_t b = end;
  while (b > 0 && isWhitespace(s[b - 1])) --b;
  return b;
}

// AddedVocabulary::find_matches: leftmost-longest, non-overlapping matches
// of the added tokens whose `normalized` flag is `normalized` (matched by
// their normalized content then), with single_word, lstrip and rstrip.
std::vector<Segment> findAdded(const std::u32string& s,
                               const std::vector<HfTokenizer::AddedToken>& added,
                               const std::vector<std::u32string>& patterns, bool normalized) {
  std::vector<Segment> out;
  size_t startOffset = 0, i = 0;
  while (i < s.size()) {
    // The longest pattern starting at i.
    size_t best = SIZE_MAX, bestLen = 0;
    for (size_t t = 0; t < added.size(); ++t) {
      if (added[t].normalized != normalized) continue;
      const std::u32string& p = patterns[t];
      if (p.size() > bestLen && p.size() <= s.size() - i && s.compare(i, p.size(), p) == 0) {
        best = t;
        bestLen = p.size();
      }
    }
    if (best == SIZE_MAX) {
      ++i;
      continue;
    }
    const HfTokenizer::AddedToken& tok = added[best];
    size_t start = i, stop = i + bestLen;
    i = stop;  // the search goes on after this match, kept or not
    if (tok.singleWord) {
      bool startSpace = start == 0 || !isWordChar(s[start - 1]);
      bool stopSpace = stop == s.size() || !isWordChar(s[stop]);
      if (!startSpace || !stopSpace) continue;
    }
    if (tok.lstrip) start = std::max(whitespaceRunBefore(s, start), startOffset);
    if (tok.rstrip) {
      while (stop < s.size() && isWhitespace(s[stop])) ++stop;
      i = stop;
    }
    if (startOffset < start) out.push_back({-1, startOffset, start});
    out.push_back({tok.id, start, stop});
    startOffset = stop;
  }
  if (startOffset < s.size()) out.push_back({-1, startOffset, s.size()});
  return out;
}

// ------------------------------------------------------------- truncation

void truncateTo(std::vector<int32_t>& ids, size_t n, bool left) {
  if (ids.size() <= n) return;
  if (left)
    ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(n));
  else
    ids.resize(n);
}

// utils/truncation.rs truncate_encodings over the sequences' ids (before
// the specials): `maxLength` is what is left after the specials.
Status truncateSequences(std::vector<int32_t>& a, std::vector<int32_t>* b, size_t maxLength,
                         const HfTokenizer::Truncation& t) {
  if (maxLength == 0) {
    a.clear();
    if (b) b->clear();
    return Status::ok();
  }
  size_t total = a.size() + (b ? b->size() : 0);
  if (total <= maxLength) return Status::ok();
  size_t toRemove = total - maxLength;
  if (t.strategy == HfTokenizer::Truncation::LongestFirst) {
    if (!b) {
      truncateTo(a, total - toRemove, t.left);
      return Status::ok();
    }
    size_t n1 = a.size(), n2 = b->size();
    bool swap = n1 > n2;
    if (swap) std::swap(n1, n2);
    n2 = n1 > maxLength ? n1 : std::max(n1, maxLength - n1);
    if (n1 + n2 > maxLength) {
      n1 = maxLength / 2;
      n2 = n1 + maxLength % 2;
    }
    if (swap) std::swap(n1, n2);
    truncateTo(a, n1, t.left);
    truncateTo(*b, n2, t.left);
    return Status::ok();
  }
  std::vector<int32_t>* target = &a;
  if (t.strategy == HfTokenizer::Truncation::OnlySecond) {
    if (!b) return Status::error("truncation only_second needs a pair");
    target = b;
  }
  if (target->size() <= toRemove)
    return Status::error("the sequence to truncate (" + std::to_string(target->size()) +
                         " tokens) is too short to remove " + std::to_string(toRemove));
  truncateTo(*target, target->size() - toRemove, t.left);
  return Status::ok();
}

// --------------------------------------------------------------- loading

Status keyError(const std::string& path, const std::string& key, const std::string& what) {
  return Status::error(path + ": " + key + ": " + what);
}

StatusOr<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot read '" + path + "': " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::error("cannot read '" + path + "'");
  return ss.str();
}

StatusOr<JsonValue> readJson(const std::string& path) {
  StatusOr<std::string> text = readFile(path);
  if (!text.isOk()) return text.status();
  StatusOr<JsonValue> json = JsonValue::parse(*text);
  if (!json.isOk()) return Status::error(path + ": not valid JSON: " + json.status().message());
  if (!json->isObject()) return Status::error(path + ": not a JSON object");
  return json;
}

// Optional typed members: absent or null keeps `value`.
Status readBool(const JsonValue& obj, const char* key, bool& value, const std::string& path,
                const std::string& prefix) {
  const JsonValue* v = obj.find(key);
  if (!v || v->isNull()) return Status::ok();
  if (!v->isBool()) return keyError(path, prefix + key, "expected true or false");
  value = v->asBool();
  return Status::ok();
}

Status readInt(const JsonValue& obj, const char* key, int64_t& value, const std::string& path,
               const std::string& prefix) {
  const JsonValue* v = obj.find(key);
  if (!v || v->isNull()) return Status::ok();
  if (!v->isInteger() || v->asInt64() < 0)
    return keyError(path, prefix + key, "expected a non-negative integer");
  value = v->asInt64();
  return Status::ok();
}

Status readString(const JsonValue& obj, const char* key, std::string& value,
                  const std::string& path, const std::string& prefix) {
  const JsonValue* v = obj.find(key);
  if (!v || v->isNull()) return Status::ok();
  if (!v->isString()) return keyError(path, prefix + key, "expected a string");
  value = v->asString();
  return Status::ok();
}

#define WP_RETURN_IF_ERROR(expr)         \
  do {                                   \
    ::transfuse::rt::Status s_ = (expr); \
    if (!s_.isOk()) return s_;           \
  } while (0)

StatusOr<std::string> componentType(const JsonValue& obj, const std::string& path,
                                    const std::string& key) {
  if (!obj.isObject()) return keyError(path, key, "expected an object");
  const JsonValue* type = obj.find("type");
  if (!type || !type->isString()) return keyError(path, key + ".type", "missing");
  return type->asString();
}

Status parseNormalizer(const JsonValue& n, const std::string& path, const std::string& key,
                       std::vector<HfTokenizer::NormStep>& steps) {
  using Step = HfTokenizer::NormStep;
  StatusOr<std::string> type = componentType(n, path, key);
  if (!type.isOk()) return type.status();
  if (*type == "BertNormalizer") {
    bool clean = true, chinese = true, lowercase = true;
    WP_RETURN_IF_ERROR(readBool(n, "clean_text", clean, path, key + "."));
    WP_RETURN_IF_ERROR(readBool(n, "handle_chinese_chars", chinese, path, key + "."));
    WP_RETURN_IF_ERROR(readBool(n, "lowercase", lowercase, path, key + "."));
    bool strip = lowercase;  // null: follow lowercase
    WP_RETURN_IF_ERROR(readBool(n, "strip_accents", strip, path, key + "."));
    if (clean) steps.push_back({Step::CleanText});
    if (chinese) steps.push_back({Step::ChineseChars});
    if (strip) steps.push_back({Step::NfdStripMn});
    if (lowercase) steps.push_back({Step::Lowercase});
  } else if (*type == "Sequence") {
    const JsonValue* list = n.find("normalizers");
    if (!list || !list->isArray()) return keyError(path, key + ".normalizers", "expected an array");
    for (size_t i = 0; i < list->size(); ++i)
      WP_RETURN_IF_ERROR(parseNormalizer(list->asArray()[i], path,
                                         key + ".normalizers[" + std::to_string(i) + "]", steps));
  } else if (*type == "Lowercase") {
    steps.push_back({Step::Lowercase});
  } else if (*type == "NFD") {
    steps.push_back({Step::Nfd});
  } else if (*type == "NFKD") {
    steps.push_back({Step::Nfkd});
  } else if (*type == "NFC") {
    steps.push_back({Step::Nfc});
  } else if (*type == "NFKC") {
    steps.push_back({Step::Nfkc});
  } else if (*type == "StripAccents") {
    steps.push_back({Step::StripMarks});
  } else {
    return keyError(path, key + ".type",
                    "normalizer \"" + *type +
                        "\" is not supported (BertNormalizer, Sequence, Lowercase, NFD, NFKD, NFC, "
                        "NFKC, StripAccents are)");
  }
  return Status::ok();
}

Status parsePreTokenizer(const JsonValue& p, const std::string& path, const std::string& key,
                         std::vector<HfTokenizer::PreStep>& steps) {
  using Step = HfTokenizer::PreStep;
  StatusOr<std::string> type = componentType(p, path, key);
  if (!type.isOk()) return type.status();
  if (*type == "BertPreTokenizer") {
    steps.push_back({Step::Bert});
  } else if (*type == "WhitespaceSplit") {
    steps.push_back({Step::WhitespaceSplit});
  } else if (*type == "Whitespace") {
    steps.push_back({Step::Whitespace});
  } else if (*type == "Punctuation" || *type == "Split") {
    Step step{*type == "Split" ? Step::Split : Step::Punctuation};
    std::string behavior = "Isolated";
    WP_RETURN_IF_ERROR(readString(p, "behavior", behavior, path, key + "."));
    using B = HfTokenizer::SplitBehavior;
    if (behavior == "Removed")
      step.behavior = B::Removed;
    else if (behavior == "Isolated")
      step.behavior = B::Isolated;
    else if (behavior == "MergedWithPrevious")
      step.behavior = B::MergedWithPrevious;
    else if (behavior == "MergedWithNext")
      step.behavior = B::MergedWithNext;
    else if (behavior == "Contiguous")
      step.behavior = B::Contiguous;
    else
      return keyError(path, key + ".behavior", "unknown behavior \"" + behavior + "\"");
    if (step.kind == Step::Split) {
      WP_RETURN_IF_ERROR(readBool(p, "invert", step.invert, path, key + "."));
      const JsonValue* pattern = p.find("pattern");
      const JsonValue* regex = pattern && pattern->isObject() ? pattern->find("Regex") : nullptr;
      const JsonValue* literal = pattern && pattern->isObject() ? pattern->find("String") : nullptr;
      if (!(regex && regex->isString()) && !(literal && literal->isString()))
        return keyError(path, key + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
      StatusOr<std::u32string> text =
          decodeUtf8((regex ? regex : literal)->asString(), "the pattern");
      if (!text.isOk()) return keyError(path, key + ".pattern", text.status().message());
      if (text->empty()) return keyError(path, key + ".pattern", "empty");
      if (regex) {
        auto compiled = HfTokenizer::Regex::compile(*text);
        if (!compiled.isOk())
          return keyError(path, key + ".pattern.Regex",
                          "not a valid regular expression: " + compiled.status().message());
        step.regex = *compiled;
      } else {
        step.literal = std::move(*text);
      }
    }
    steps.push_back(step);
  } else if (*type == "ByteLevel") {
    Step step{Step::ByteLevel};
    WP_RETURN_IF_ERROR(readBool(p, "add_prefix_space", step.addPrefixSpace, path, key + "."));
    WP_RETURN_IF_ERROR(readBool(p, "use_regex", step.useRegex, path, key + "."));
    steps.push_back(step);
  } else if (*type == "Sequence") {
    const JsonValue* list = p.find("pretokenizers");
    if (!list || !list->isArray())
      return keyError(path, key + ".pretokenizers", "expected an array");
    for (size_t i = 0; i < list->size(); ++i)
      WP_RETURN_IF_ERROR(parsePreTokenizer(
          list->asArray()[i], path, key + ".pretokenizers[" + std::to_string(i) + "]", steps));
  } else {
    return keyError(path, key + ".type",
                    "pre-tokenizer \"" + *type +
                        "\" is not supported (BertPreTokenizer, WhitespaceSplit, Whitespace, "
                        "Punctuation, Split, ByteLevel, Sequence are)");
  }
  return Status::ok();
}

// TemplateProcessing's "single"/"pair": [{"SpecialToken": {"id", "type_id"}}
// | {"Sequence": {"id": "A"|"B", "type_id"}}], the specials' ids from
// "special_tokens".
Status parseTemplate(const JsonValue& proc, const std::string& procKey, const char* which,
                     const std::string& path, std::vector<HfTokenizer::TemplatePiece>& out) {
  std::string key = procKey + "." + which;
  const JsonValue* list = proc.find(which);
  if (!list || !list->isArray()) return keyError(path, key, "expected an array");
  const JsonValue* specials = proc.find("special_tokens");
  for (size_t i = 0; i < list->size(); ++i) {
    const JsonValue& item = list->asArray()[i];
    std::string at = key + "[" + std::to_string(i) + "]";
    HfTokenizer::TemplatePiece piece;
    const JsonValue* body = nullptr;
    if ((body = item.find("Sequence"))) {
      const JsonValue* id = body->find("id");
      if (!id || !id->isString() || (id->asString() != "A" && id->asString() != "B"))
        return keyError(path, at + ".Sequence.id", "expected \"A\" or \"B\"");
      piece.isSequence = true;
      piece.sequence = id->asString() == "B" ? 1 : 0;
    } else if ((body = item.find("SpecialToken"))) {
      const JsonValue* id = body->find("id");
      if (!id || !id->isString()) return keyError(path, at + ".SpecialToken.id", "missing");
      const JsonValue* spec = specials ? specials->find(id->asString()) : nullptr;
      const JsonValue* ids = spec ? spec->find("ids") : nullptr;
      if (!ids || !ids->isArray())
        return keyError(path, procKey + ".special_tokens",
                        "no ids for \"" + id->asString() + "\"");
      piece.isSequence = false;
      for (const JsonValue& v : ids->asArray()) {
        if (!v.isInteger() || v.asInt64() < 0 || v.asInt64() > INT32_MAX)
          return keyError(path, procKey + ".special_tokens." + id->asString() + ".ids",
                          "expected non-negative integers");
        piece.ids.push_back(static_cast<int32_t>(v.asInt64()));
      }
    } else {
      return keyError(path, at, "expected a Sequence or a SpecialToken");
    }
    int64_t typeId = 0;
    WP_RETURN_IF_ERROR(readInt(*body, "type_id", typeId, path, at + "."));
    piece.typeId = static_cast<int32_t>(typeId);
    out.push_back(std::move(piece));
  }
  return Status::ok();
}

void bertTemplates(int32_t cls, int32_t sep, std::vector<HfTokenizer::TemplatePiece>& single,
                   std::vector<HfTokenizer::TemplatePiece>& pair) {
  using P = HfTokenizer::TemplatePiece;
  single = {P{false, 0, {cls}, 0}, P{true, 0, {}, 0}, P{false, 0, {sep}, 0}};
  pair = {P{false, 0, {cls}, 0}, P{true, 0, {}, 0}, P{false, 0, {sep}, 0}, P{true, 1, {}, 1},
          P{false, 0, {sep}, 1}};
}

// BertProcessing's "cls"/"sep": ["[CLS]", 101].
Status parseNamedId(const JsonValue& proc, const std::string& procKey, const char* which,
                    const std::string& path, int32_t& id) {
  const JsonValue* v = proc.find(which);
  if (!v || !v->isArray() || v->size() != 2 || !v->asArray()[1].isInteger())
    return keyError(path, procKey + "." + which, "expected [token, id]");
  id = static_cast<int32_t>(v->asArray()[1].asInt64());
  return Status::ok();
}

}  // namespace

// --------------------------------------------------------------- loaders

StatusOr<WordPieceOptions> readTokenizerConfig(const std::string& path) {
  StatusOr<JsonValue> json = readJson(path);
  if (!json.isOk()) return json.status();
  WordPieceOptions o;
  WP_RETURN_IF_ERROR(readBool(*json, "do_lower_case", o.lowercase, path, ""));
  WP_RETURN_IF_ERROR(readBool(*json, "tokenize_chinese_chars", o.handleChineseChars, path, ""));
  if (const JsonValue* v = json->find("strip_accents"); v && !v->isNull()) {
    if (!v->isBool()) return keyError(path, "strip_accents", "expected true, false or null");
    o.stripAccents = v->asBool();
  }
  if (const JsonValue* v = json->find("model_max_length"); v && !v->isNull()) {
    if (!v->isNumber() || v->asNumber() < 0)
      return keyError(path, "model_max_length", "expected a non-negative number");
    // transformers writes int(1e30) for "no limit".
    o.modelMaxLength = v->asNumber() >= 1e18 ? 0 : static_cast<int64_t>(v->asNumber());
  }
  struct Named {
    const char* key;
    std::string* value;
  } names[] = {{"unk_token", &o.unkToken},
               {"sep_token", &o.sepToken},
               {"pad_token", &o.padToken},
               {"cls_token", &o.clsToken},
               {"mask_token", &o.maskToken}};
  for (const Named& n : names) {
    const JsonValue* v = json->find(n.key);
    if (!v || v->isNull()) continue;
    if (v->isObject()) v = v->find("content");  // an AddedToken object
    if (!v || !v->isString()) return keyError(path, n.key, "expected a string");
    *n.value = v->asString();
  }
  return o;
}

namespace {
// The largest token id a tokenizer.json may name: the id → token tables are
// dense, so an id is memory (the largest real vocabularies hold about 2^18).
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

uint64_t pairKey(int32_t left, int32_t right) {
  return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
}
}  // namespace

// models/bpe's keys beyond the vocabulary: merges as "a b" strings or
// [a, b] pairs (newer files), each a rank in file order (a repeated pair
// keeps its last rank, as the crate's map does), the merged token a + b
// without b's continuing_subword_prefix.
Status HfTokenizer::readBpe(const JsonValue& model, const std::string& path) {
  if (const JsonValue* d = model.find("dropout"); d && !d->isNull())
    return keyError(path, "model.dropout", "must be null (dropout samples merges at random)");
  WP_RETURN_IF_ERROR(readString(model, "end_of_word_suffix", bpeSuffix_, path, "model."));
  WP_RETURN_IF_ERROR(readBool(model, "ignore_merges", ignoreMerges_, path, "model."));
  WP_RETURN_IF_ERROR(readBool(model, "byte_fallback", byteFallback_, path, "model."));
  WP_RETURN_IF_ERROR(readBool(model, "fuse_unk", fuseUnk_, path, "model."));
  const JsonValue* merges = model.find("merges");
  if (!merges) return keyError(path, "model.merges", "missing");
  if (!merges->isArray()) return keyError(path, "model.merges", "expected an array");
  auto idOf = [&](const std::string& token, const std::string& at, const char* what,
                  int32_t& id) -> Status {
    auto it = vocab_.find(token);
    if (it == vocab_.end())
      return keyError(path, at, std::string(what) + " \"" + token + "\" is not in the vocabulary");
    id = it->second;
    return Status::ok();
  };
  merges_.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const JsonValue& m = merges->asArray()[i];
    const std::string at = "model.merges[" + std::to_string(i) + "]";
    std::string a, b;
    if (m.isString()) {
      const std::string& s = m.asString();
      size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        return keyError(path, at, "expected \"a b\" (two tokens and one space)");
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (m.isArray() && m.size() == 2 && m.asArray()[0].isString() &&
               m.asArray()[1].isString()) {
      a = m.asArray()[0].asString();
      b = m.asArray()[1].asString();
    } else {
      return keyError(path, at, "expected \"a b\" or [a, b]");
    }
    int32_t left = 0, right = 0, merged = 0;
    WP_RETURN_IF_ERROR(idOf(a, at, "token", left));
    WP_RETURN_IF_ERROR(idOf(b, at, "token", right));
    WP_RETURN_IF_ERROR(idOf(a + b.substr(std::min(prefix_.size(), b.size())), at,
                            "the merged token", merged));
    merges_[pairKey(left, right)] = {static_cast<int32_t>(i), merged};
  }
  if (byteFallback_) {
    byteIds_.assign(256, -1);
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      if (auto it = vocab_.find(name); it != vocab_.end()) byteIds_[b] = it->second;
    }
  }
  return Status::ok();
}

StatusOr<HfTokenizer> HfTokenizer::fromTokenizerJson(const std::string& path) {
  StatusOr<JsonValue> json = readJson(path);
  if (!json.isOk()) return json.status();
  const JsonValue& root = *json;
  HfTokenizer t;

  const JsonValue* model = root.find("model");
  if (!model || !model->isObject()) return keyError(path, "model", "missing");
  const JsonValue* type = model->find("type");
  // Old files may omit model.type; a WordPiece model is told by its keys.
  if (type && !type->isString()) return keyError(path, "model.type", "expected a string");
  if (type && type->asString() != "WordPiece" && type->asString() != "BPE")
    return keyError(path, "model.type",
                    "\"" + type->asString() + "\" is not supported (WordPiece and BPE are)");
  if (type && type->asString() == "BPE") {
    t.model_ = ModelKind::Bpe;
    t.decoder_ = DecoderKind::None;
    t.unkToken_.clear();
    t.prefix_.clear();
  }
  const JsonValue* vocab = model->find("vocab");
  if (!vocab) return keyError(path, "model.vocab", "missing");
  if (!vocab->isObject()) return keyError(path, "model.vocab", "expected an object of ids");
  for (const auto& [token, id] : vocab->members()) {
    if (!id.isInteger() || id.asInt64() < 0 || id.asInt64() > kMaxTokenId)
      return keyError(path, "model.vocab",
                      "the id of \"" + token + "\" is not an id in [0, " +
                          std::to_string(kMaxTokenId) + "]");
    t.vocab_[token] = static_cast<int32_t>(id.asInt64());
  }
  WP_RETURN_IF_ERROR(readString(*model, "unk_token", t.unkToken_, path, "model."));
  WP_RETURN_IF_ERROR(readString(*model, "continuing_subword_prefix", t.prefix_, path, "model."));
  if (t.model_ == ModelKind::Bpe)
    WP_RETURN_IF_ERROR(t.readBpe(*model, path));
  else
    WP_RETURN_IF_ERROR(
        readInt(*model, "max_input_chars_per_word", t.maxInputCharsPerWord_, path, "model."));

  if (const JsonValue* n = root.find("normalizer"); n && !n->isNull())
    WP_RETURN_IF_ERROR(parseNormalizer(*n, path, "normalizer", t.normalizer_));
  if (const JsonValue* p = root.find("pre_tokenizer"); p && !p->isNull())
    WP_RETURN_IF_ERROR(parsePreTokenizer(*p, path, "pre_tokenizer", t.preTokenizer_));

  if (const JsonValue* list = root.find("added_tokens"); list && !list->isNull()) {
    if (!list->isArray()) return keyError(path, "added_tokens", "expected an array");
    for (size_t i = 0; i < list->size(); ++i) {
      const JsonValue& item = list->asArray()[i];
      std::string at = "added_tokens[" + std::to_string(i) + "].";
      if (!item.isObject())
        return keyError(path, at.substr(0, at.size() - 1), "expected an object");
      AddedToken a;
      std::string content;
      int64_t id = -1;
      WP_RETURN_IF_ERROR(readString(item, "content", content, path, at));
      WP_RETURN_IF_ERROR(readInt(item, "id", id, path, at));
      if (id < 0 || id > kMaxTokenId)
        return keyError(path, at + "id", "missing, or not an id in [0, " +
                                              std::to_string(kMaxTokenId) + "]");
      WP_RETURN_IF_ERROR(readBool(item, "single_word", a.singleWord, path, at));
      WP_RETURN_IF_ERROR(readBool(item, "lstrip", a.lstrip, path, at));
      WP_RETURN_IF_ERROR(readBool(item, "rstrip", a.rstrip, path, at));
      a.normalized = true;
      WP_RETURN_IF_ERROR(readBool(item, "normalized", a.normalized, path, at));
      WP_RETURN_IF_ERROR(readBool(item, "special", a.special, path, at));
      StatusOr<std::u32string> cps = decodeUtf8(content, "added token");
      if (!cps.isOk()) return keyError(path, at + "content", cps.status().message());
      if (cps->empty()) continue;  // `tokenizers` ignores empty added tokens
      a.content = std::move(*cps);
      a.id = static_cast<int32_t>(id);
      t.added_.push_back(std::move(a));
    }
  }

  // No post-processor: the sequences as they are, the pair's type id 1.
  t.single_ = {TemplatePiece{true, 0, {}, 0}};
  t.pair_ = {TemplatePiece{true, 0, {}, 0}, TemplatePiece{true, 1, {}, 1}};
  const JsonValue* proc = root.find("post_processor");
  bool bertProcessing = false;
  std::function<Status(const JsonValue&, const std::string&)> postProcessor =
      [&](const JsonValue& pp, const std::string& key) -> Status {
    StatusOr<std::string> ptype = componentType(pp, path, key);
    if (!ptype.isOk()) return ptype.status();
    if (*ptype == "TemplateProcessing") {
      t.single_.clear();
      t.pair_.clear();
      WP_RETURN_IF_ERROR(parseTemplate(pp, key, "single", path, t.single_));
      return parseTemplate(pp, key, "pair", path, t.pair_);
    }
    if (*ptype == "BertProcessing") {
      int32_t cls = 0, sep = 0;
      WP_RETURN_IF_ERROR(parseNamedId(pp, key, "cls", path, cls));
      WP_RETURN_IF_ERROR(parseNamedId(pp, key, "sep", path, sep));
      bertTemplates(cls, sep, t.single_, t.pair_);
      bertProcessing = true;
      return Status::ok();
    }
    if (*ptype == "ByteLevel") return Status::ok();  // offsets only: no id changes
    if (*ptype == "Sequence") {
      const JsonValue* list = pp.find("processors");
      if (!list || !list->isArray()) return keyError(path, key + ".processors", "expected an array");
      for (size_t i = 0; i < list->size(); ++i)
        WP_RETURN_IF_ERROR(
            postProcessor(list->asArray()[i], key + ".processors[" + std::to_string(i) + "]"));
      return Status::ok();
    }
    return keyError(path, key + ".type",
                    "\"" + *ptype +
                        "\" is not supported (TemplateProcessing, BertProcessing, ByteLevel and "
                        "Sequence are)");
  };
  if (proc && !proc->isNull()) WP_RETURN_IF_ERROR(postProcessor(*proc, "post_processor"));

  if (const JsonValue* d = root.find("decoder"); d && !d->isNull()) {
    StatusOr<std::string> dtype = componentType(*d, path, "decoder");
    if (!dtype.isOk()) return dtype.status();
    if (*dtype == "WordPiece") {
      t.decoder_ = DecoderKind::WordPiece;
      WP_RETURN_IF_ERROR(readString(*d, "prefix", t.decoderPrefix_, path, "decoder."));
      WP_RETURN_IF_ERROR(readBool(*d, "cleanup", t.cleanup_, path, "decoder."));
    } else if (*dtype == "ByteLevel") {
      t.decoder_ = DecoderKind::ByteLevel;
    } else {
      return keyError(path, "decoder.type",
                      "\"" + *dtype + "\" is not supported (WordPiece and ByteLevel are)");
    }
  } else {
    t.decoder_ = DecoderKind::None;
  }

  std::string padToken = "[PAD]";
  if (const JsonValue* tr = root.find("truncation"); tr && !tr->isNull()) {
    if (!tr->isObject()) return keyError(path, "truncation", "expected an object");
    t.truncation_.present = true;
    WP_RETURN_IF_ERROR(readInt(*tr, "max_length", t.truncation_.maxLength, path, "truncation."));
    std::string strategy = "LongestFirst", direction = "Right";
    WP_RETURN_IF_ERROR(readString(*tr, "strategy", strategy, path, "truncation."));
    WP_RETURN_IF_ERROR(readString(*tr, "direction", direction, path, "truncation."));
    if (strategy == "LongestFirst")
      t.truncation_.strategy = Truncation::LongestFirst;
    else if (strategy == "OnlyFirst")
      t.truncation_.strategy = Truncation::OnlyFirst;
    else if (strategy == "OnlySecond")
      t.truncation_.strategy = Truncation::OnlySecond;
    else
      return keyError(path, "truncation.strategy", "unknown strategy \"" + strategy + "\"");
    if (direction != "Right" && direction != "Left")
      return keyError(path, "truncation.direction", "expected \"Right\" or \"Left\"");
    t.truncation_.left = direction == "Left";
    t.modelMaxLength_ = t.truncation_.maxLength;
  }
  if (const JsonValue* pad = root.find("padding"); pad && !pad->isNull()) {
    if (!pad->isObject()) return keyError(path, "padding", "expected an object");
    t.padding_.present = true;
    const JsonValue* strategy = pad->find("strategy");
    if (strategy && strategy->isObject()) {
      const JsonValue* fixed = strategy->find("Fixed");
      if (!fixed || !fixed->isInteger() || fixed->asInt64() < 0)
        return keyError(path, "padding.strategy", "expected \"BatchLongest\" or {\"Fixed\": n}");
      t.padding_.fixed = fixed->asInt64();
    } else if (strategy && !(strategy->isString() && strategy->asString() == "BatchLongest")) {
      return keyError(path, "padding.strategy", "expected \"BatchLongest\" or {\"Fixed\": n}");
    }
    std::string direction = "Right";
    WP_RETURN_IF_ERROR(readString(*pad, "direction", direction, path, "padding."));
    if (direction != "Right" && direction != "Left")
      return keyError(path, "padding.direction", "expected \"Right\" or \"Left\"");
    t.padding_.left = direction == "Left";
    WP_RETURN_IF_ERROR(
        readInt(*pad, "pad_to_multiple_of", t.padding_.multipleOf, path, "padding."));
    int64_t padId = 0, padTypeId = 0;
    WP_RETURN_IF_ERROR(readInt(*pad, "pad_id", padId, path, "padding."));
    WP_RETURN_IF_ERROR(readInt(*pad, "pad_type_id", padTypeId, path, "padding."));
    t.padding_.padId = static_cast<int32_t>(padId);
    t.padding_.padTypeId = static_cast<int32_t>(padTypeId);
    WP_RETURN_IF_ERROR(readString(*pad, "pad_token", padToken, path, "padding."));
  }

  WP_RETURN_IF_ERROR(t.finish(path));
  t.specials_.cls = t.idOf("[CLS]");
  t.specials_.sep = t.idOf("[SEP]");
  if (bertProcessing) {
    t.specials_.cls = t.single_.front().ids[0];
    t.specials_.sep = t.single_.back().ids[0];
  }
  t.specials_.pad = t.padding_.present ? t.padding_.padId : t.idOf(padToken);
  t.specials_.unk = t.unkId_;
  t.specials_.mask = t.idOf("[MASK]");
  return t;
}

StatusOr<HfTokenizer> HfTokenizer::fromVocabTxt(const std::string& vocabPath,
                                                              const WordPieceOptions& options) {
  StatusOr<std::string> text = readFile(vocabPath);
  if (!text.isOk()) return text.status();
  HfTokenizer t;
  // WordPiece::read_file: one token a line ("\n" or "\r\n"), its trailing
  // White_Space dropped; a repeated token keeps its last line.
  size_t begin = 0;
  for (int32_t line = 0; begin < text->size(); ++line) {
    size_t end = text->find('\n', begin);
    if (end == std::string::npos) end = text->size();
    StatusOr<std::u32string> cps =
        decodeUtf8(std::string_view(*text).substr(begin, end - begin), "vocabulary");
    if (!cps.isOk())
      return Status::error(vocabPath + ": line " + std::to_string(line + 1) + ": " +
                           cps.status().message() + " of the line");
    size_t n = cps->size();
    while (n > 0 && isWhitespace((*cps)[n - 1])) --n;
    t.vocab_[toUtf8(std::u32string_view(*cps).substr(0, n))] = line;
    begin = end + 1;
  }
  if (t.vocab_.empty()) return Status::error(vocabPath + ": the vocabulary is empty");
  t.unkToken_ = options.unkToken;
  t.prefix_ = options.continuingSubwordPrefix;
  t.maxInputCharsPerWord_ = options.maxInputCharsPerWord;
  t.normalizer_.push_back({NormStep::CleanText});
  if (options.handleChineseChars) t.normalizer_.push_back({NormStep::ChineseChars});
  if (options.stripAccents.value_or(options.lowercase))
    t.normalizer_.push_back({NormStep::NfdStripMn});
  if (options.lowercase) t.normalizer_.push_back({NormStep::Lowercase});
  t.preTokenizer_ = {PreStep{PreStep::Bert}};
  for (const std::string* name : {&options.padToken, &options.unkToken, &options.clsToken,
                                  &options.sepToken, &options.maskToken}) {
    auto it = t.vocab_.find(*name);
    if (it == t.vocab_.end() || name->empty()) continue;
    AddedToken a;
    a.content = *decodeUtf8(*name, "token");
    a.id = it->second;
    a.special = true;
    a.normalized = false;
    t.added_.push_back(std::move(a));
  }
  auto cls = t.vocab_.find(options.clsToken), sep = t.vocab_.find(options.sepToken);
  if (cls == t.vocab_.end())
    return Status::error(vocabPath + ": the vocabulary has no " + options.clsToken + " token");
  if (sep == t.vocab_.end())
    return Status::error(vocabPath + ": the vocabulary has no " + options.sepToken + " token");
  bertTemplates(cls->second, sep->second, t.single_, t.pair_);
  t.modelMaxLength_ = options.modelMaxLength;
  WP_RETURN_IF_ERROR(t.finish(vocabPath));
  t.specials_.cls = cls->second;
  t.specials_.sep = sep->second;
  t.specials_.pad = t.idOf(options.padToken);
  t.specials_.unk = t.unkId_;
  t.specials_.mask = t.idOf(options.maskToken);
  return t;
}

// What both loaders share: the reverse vocabulary, the normalized forms of
// the added tokens, the specials' counts of the templates.
Status HfTokenizer::finish(const std::string& name) {
  int32_t maxId = -1;
  for (const auto& [token, id] : vocab_) {
    maxId = std::max(maxId, id);
    maxTokenBytes_ = std::max(maxTokenBytes_, token.size());
  }
  for (const AddedToken& a : added_) maxId = std::max(maxId, a.id);
  vocabSize_ = maxId + 1;
  idToToken_.assign(static_cast<size_t>(vocabSize_), std::string());
  hasToken_.assign(static_cast<size_t>(vocabSize_), false);
  for (const auto& [token, id] : vocab_) {
    idToToken_[static_cast<size_t>(id)] = token;
    hasToken_[static_cast<size_t>(id)] = true;
  }
  for (size_t i = 0; i < added_.size(); ++i) {
    addedById_[added_[i].id] = i;
    const AddedToken& a = added_[i];
    rawPatterns_.push_back(a.normalized ? std::u32string() : a.content);
    normalizedPatterns_.push_back(a.normalized ? normalizeCodepoints(a.content) : std::u32string());
    (a.normalized ? anyNormalized_ : anyRaw_) = true;
    if (a.special) specialTexts_.insert(toUtf8(a.content));
  }
  if (auto it = vocab_.find(unkToken_); it != vocab_.end()) unkId_ = it->second;
  for (const auto* tmpl : {&single_, &pair_})
    for (const TemplatePiece& p : *tmpl)
      for (int32_t id : p.ids)
        if (id < 0 || id >= vocabSize_)
          return Status::error(name + ": post_processor: special id " + std::to_string(id) +
                               " is outside the vocabulary");
  addedSingle_ = addedPair_ = 0;
  for (const TemplatePiece& p : single_) addedSingle_ += p.ids.size();
  for (const TemplatePiece& p : pair_) addedPair_ += p.ids.size();
  if (vocabSize_ == 0) return Status::error(name + ": the vocabulary is empty");
  return Status::ok();
}

// -------------------------------------------------------------- encoding

std::u32string HfTokenizer::normalizeCodepoints(std::u32string s) const {
  for (const NormStep& step : normalizer_) {
    switch (step.kind) {
      case NormStep::CleanText: {
        std::u32string out;
        out.reserve(s.size());
        for (char32_t c : s) {
          if (c == 0 || c == 0xFFFD || isControl(c)) continue;
          out += isWhitespace(c) ? U' ' : c;
        }
        s = std::move(out);
        break;
      }
      case NormStep::ChineseChars: {
        std::u32string out;
        out.reserve(s.size());
        for (char32_t c : s) {
          if (isChinese(c)) {
            out += U' ';
            out += c;
            out += U' ';
          } else {
            out += c;
          }
        }
        s = std::move(out);
        break;
      }
      case NormStep::NfdStripMn:
        s = filtered(unicodeNormalize(s, UTF8PROC_DECOMPOSE),
                     [](char32_t c) { return category(c) != UTF8PROC_CATEGORY_MN; });
        break;
      case NormStep::Lowercase: {
        std::u32string out;
        out.reserve(s.size());
        for (char32_t c : s) appendLowercase(out, c);
        s = std::move(out);
        break;
      }
      case NormStep::Nfd:
        s = unicodeNormalize(s, UTF8PROC_DECOMPOSE);
        break;
      case NormStep::Nfkd:
        s = unicodeNormalize(s, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
        break;
      case NormStep::Nfc:
        s = unicodeNormalize(s, UTF8PROC_COMPOSE);
        break;
      case NormStep::Nfkc:
        s = unicodeNormalize(s, UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
        break;
      case NormStep::StripMarks:
        s = filtered(s, [](char32_t c) { return !isMark(c); });
        break;
    }
  }
  return s;
}

void HfTokenizer::preTokenizeInto(const std::u32string& text,
                                         std::vector<std::u32string>& words) const {
  std::vector<std::u32string> pieces{text}, next;
  if (text.empty()) pieces.clear();
  for (const PreStep& step : preTokenizer_) {
    next.clear();
    for (const std::u32string& p : pieces) {
      switch (step.kind) {
        case PreStep::Bert: {
          std::vector<std::u32string> words0;
          splitPiece(p, isWhitespace, Behavior::Removed, words0);
          for (const std::u32string& w : words0)
            splitPiece(w, isPunctuation, Behavior::Isolated, next);
          break;
        }
        case PreStep::WhitespaceSplit:
          splitPiece(p, isWhitespace, Behavior::Removed, next);
          break;
        case PreStep::Punctuation:
          splitPiece(p, isPunctuation, step.behavior, next);
          break;
        case PreStep::Whitespace:
          splitWordsAndSymbols(p, next);
          break;
        case PreStep::Split: {
          std::vector<std::pair<size_t, size_t>> matches;
          if (step.regex) {
            step.regex->findAll(p, matches);
          } else {
            const size_t n = step.literal.size();
            for (size_t at = p.find(step.literal); at != std::u32string::npos;
                 at = p.find(step.literal, at + n))
              matches.push_back({at, at + n});
          }
          splitSpans(p, spansAround(p.size(), matches, step.invert), step.behavior, next);
          break;
        }
        case PreStep::ByteLevel: {
          std::u32string q = p;
          if (step.addPrefixSpace && (q.empty() || q[0] != U' ')) q.insert(q.begin(), U' ');
          std::vector<std::u32string> parts;
          if (step.useRegex) {
            std::vector<std::pair<size_t, size_t>> matches;
            gpt2Pattern().findAll(q, matches);
            splitSpans(q, spansAround(q.size(), matches, false), Behavior::Isolated, parts);
          } else {
            parts.push_back(std::move(q));
          }
          for (const std::u32string& part : parts) {
            std::u32string mapped;
            for (unsigned char b : toUtf8(part)) mapped += byteToChar()[b];
            next.push_back(std::move(mapped));
          }
          break;
        }
      }
    }
    pieces.swap(next);
  }
  for (std::u32string& p : pieces) words.push_back(std::move(p));
}

// models/wordpiece: greedy longest-match-first; the whole word is [UNK]
// when it is too long or a position has no piece (-1 when the vocabulary
// has no [UNK]: encode reports it).
void HfTokenizer::wordPiece(const std::u32string& word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  if (static_cast<int64_t>(word.size()) > maxInputCharsPerWord_) {
    ids.push_back(unkId_);
    return;
  }
  // Byte offsets of each code point, to cut the UTF-8 form.
  std::string bytes;
  std::vector<size_t> at;
  at.reserve(word.size() + 1);
  for (char32_t c : word) {
    at.push_back(bytes.size());
    appendUtf8(bytes, c);
  }
  at.push_back(bytes.size());
  size_t before = ids.size();
  std::string key;
  size_t start = 0, n = word.size();
  while (start < n) {
    size_t end = n;
    int32_t found = -1;
    for (; end > start; --end) {
      size_t len = at[end] - at[start];
      size_t keyLen = len + (start > 0 ? prefix_.size() : 0);
      if (keyLen > maxTokenBytes_) continue;
      key.assign(start > 0 ? prefix_ : std::string());
      key.append(bytes, at[start], len);
      auto it = vocab_.find(key);
      if (it != vocab_.end()) {
        found = it->second;
        break;
      }
    }
    if (found < 0) {
      ids.resize(before);
      ids.push_back(unkId_);
      return;
    }
    ids.push_back(found);
    start = end;
  }
}

// models/bpe: the word's characters (the first without, the others with
// continuing_subword_prefix, the last with end_of_word_suffix), then
// merges by a queue of (rank, left position, merged id), lowest first: a
// popped merge applies if its position still starts a pair that merges to
// its id, and queues the new pairs on both sides (Word::merge_all).
void HfTokenizer::bpe(const std::u32string& word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  std::string piece;
  if (ignoreMerges_) {
    piece = toUtf8(word);
    if (auto it = vocab_.find(piece); it != vocab_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  struct Symbol {
    int32_t id, prev, next;
    bool alive;
  };
  std::vector<Symbol> syms;
  syms.reserve(word.size());
  auto add = [&](int32_t id) {
    const int32_t k = static_cast<int32_t>(syms.size());
    syms.push_back({id, k - 1, k + 1, true});
  };
  bool lastUnknown = false;
  for (size_t i = 0; i < word.size(); ++i) {
    piece.assign(i > 0 ? prefix_ : std::string());
    appendUtf8(piece, word[i]);
    if (i + 1 == word.size()) piece += bpeSuffix_;
    if (auto it = vocab_.find(piece); it != vocab_.end()) {
      add(it->second);
      lastUnknown = false;
      continue;
    }
    if (byteFallback_) {
      std::string bytes;
      appendUtf8(bytes, word[i]);
      bool all = true;
      for (unsigned char b : bytes) all = all && byteIds_[b] >= 0;
      if (all) {
        for (unsigned char b : bytes) add(byteIds_[b]);
        lastUnknown = false;
        continue;
      }
    }
    if (unkId_ < 0) continue;  // no unknown token: the character is dropped
    if (!(fuseUnk_ && lastUnknown)) add(unkId_);
    lastUnknown = true;
  }
  if (syms.empty()) return;
  syms.back().next = -1;
  using Merge = std::tuple<int32_t, int32_t, int32_t>;  // rank, left position, merged id
  std::priority_queue<Merge, std::vector<Merge>, std::greater<Merge>> queue;
  auto consider = [&](int32_t left) {
    const int32_t right = syms[static_cast<size_t>(left)].next;
    if (right < 0) return;
    auto it = merges_.find(pairKey(syms[left].id, syms[right].id));
    if (it != merges_.end()) queue.push({it->second.first, left, it->second.second});
  };
  for (int32_t k = 0; k + 1 < static_cast<int32_t>(syms.size()); ++k) consider(k);
  while (!queue.empty()) {
    auto [rank, left, merged] = queue.top();
    queue.pop();
    Symbol& l = syms[static_cast<size_t>(left)];
    if (!l.alive || l.next < 0) continue;
    Symbol& r = syms[static_cast<size_t>(l.next)];
    auto it = merges_.find(pairKey(l.id, r.id));
    if (it == merges_.end() || it->second.second != merged) continue;
    l.id = merged;
    r.alive = false;
    l.next = r.next;
    if (r.next >= 0) syms[static_cast<size_t>(r.next)].prev = left;
    if (l.prev >= 0) consider(l.prev);
    consider(left);
  }
  for (int32_t k = 0; k >= 0; k = syms[static_cast<size_t>(k)].next) ids.push_back(syms[k].id);
}

// Normalized pieces: the added tokens with `normalized` set are matched by
// their normalized form; the rest is pre-tokenized and split into pieces.
void HfTokenizer::splitNormalizedAdded(const std::u32string& normalized,
                                              std::vector<int32_t>& ids) const {
  std::vector<Segment> segs;
  if (anyNormalized_)
    segs = findAdded(normalized, added_, normalizedPatterns_, true);
  else
    segs.push_back(Segment{-1, 0, normalized.size()});
  std::vector<std::u32string> words;
  for (const Segment& g : segs) {
    if (g.id >= 0) {
      ids.push_back(g.id);
      continue;
    }
    words.clear();
    preTokenizeInto(normalized.substr(g.begin, g.end - g.begin), words);
    for (const std::u32string& w : words) {
      if (model_ == ModelKind::Bpe)
        bpe(w, ids);
      else
        wordPiece(w, ids);
    }
  }
}

void HfTokenizer::encodeSequence(std::u32string text, std::vector<int32_t>& ids) const {
  std::vector<Segment> segs;
  if (anyRaw_)
    segs = findAdded(text, added_, rawPatterns_, false);
  else
    segs.push_back(Segment{-1, 0, text.size()});
  for (const Segment& g : segs) {
    if (g.id >= 0)
      ids.push_back(g.id);
    else
      splitNormalizedAdded(normalizeCodepoints(text.substr(g.begin, g.end - g.begin)), ids);
  }
}

StatusOr<HfEncoding> HfTokenizer::encode(std::string_view text,
                                                       const std::string_view* pair,
                                                       int64_t maxLength, bool truncate,
                                                       bool addSpecialTokens) const {
  if (maxLength < 0)
    return Status::error("maxLength " + std::to_string(maxLength) + " is negative");
  StatusOr<std::u32string> a = decodeUtf8(text, "text");
  if (!a.isOk()) return a.status();
  std::optional<std::u32string> b;
  if (pair) {
    StatusOr<std::u32string> bb = decodeUtf8(*pair, "pair text");
    if (!bb.isOk()) return bb.status();
    b = std::move(*bb);
  }
  std::vector<int32_t> idsA, idsB;
  encodeSequence(std::move(*a), idsA);
  if (b) encodeSequence(std::move(*b), idsB);
  if (unkId_ < 0 &&
      (std::count(idsA.begin(), idsA.end(), -1) || std::count(idsB.begin(), idsB.end(), -1)))
    return Status::error("a word needs the unknown token \"" + unkToken_ +
                         "\", which the vocabulary does not have");

  HfEncoding enc;
  Truncation trunc = truncation_;
  if (maxLength > 0) {
    trunc.present = true;
    trunc.maxLength = maxLength;
  }
  if (trunc.present) {
    size_t specials = addSpecialTokens ? (b ? addedPair_ : addedSingle_) : 0;
    size_t total = idsA.size() + idsB.size() + specials;
    if (total > static_cast<size_t>(trunc.maxLength)) {
      if (!truncate)
        return Status::error("the input is " + std::to_string(total) +
                             " tokens long, more than the maximum of " +
                             std::to_string(trunc.maxLength));
      if (static_cast<size_t>(trunc.maxLength) < specials)
        return Status::error("the maximum length " + std::to_string(trunc.maxLength) +
                             " leaves no room for the " + std::to_string(specials) +
                             " special tokens");
      Status s = truncateSequences(idsA, b ? &idsB : nullptr,
                                   static_cast<size_t>(trunc.maxLength) - specials, trunc);
      if (!s.isOk()) return s;
      enc.truncated = true;
    }
  }

  const std::vector<TemplatePiece>& tmpl = b ? pair_ : single_;
  for (const TemplatePiece& p : tmpl) {
    if (p.isSequence) {
      const std::vector<int32_t>& seq = p.sequence == 0 ? idsA : idsB;
      enc.ids.insert(enc.ids.end(), seq.begin(), seq.end());
      enc.typeIds.insert(enc.typeIds.end(), seq.size(), p.typeId);
    } else if (addSpecialTokens) {
      enc.ids.insert(enc.ids.end(), p.ids.begin(), p.ids.end());
      enc.typeIds.insert(enc.typeIds.end(), p.ids.size(), p.typeId);
    }
  }
  enc.attentionMask.assign(enc.ids.size(), 1);

  if (padding_.present) {
    size_t target = padding_.fixed > 0 ? static_cast<size_t>(padding_.fixed) : enc.ids.size();
    if (padding_.multipleOf > 0 && target % static_cast<size_t>(padding_.multipleOf) != 0)
      target += static_cast<size_t>(padding_.multipleOf) -
                target % static_cast<size_t>(padding_.multipleOf);
    if (enc.ids.size() < target) {
      size_t n = target - enc.ids.size();
      auto at = [&](auto& v) { return padding_.left ? v.begin() : v.end(); };
      enc.ids.insert(at(enc.ids), n, padding_.padId);
      enc.typeIds.insert(at(enc.typeIds), n, padding_.padTypeId);
      enc.attentionMask.insert(at(enc.attentionMask), n, 0);
    }
  }
  return enc;
}

StatusOr<std::string> HfTokenizer::normalize(std::string_view text) const {
  StatusOr<std::u32string> cps = decodeUtf8(text, "text");
  if (!cps.isOk()) return cps.status();
  return toUtf8(normalizeCodepoints(std::move(*cps)));
}

StatusOr<std::vector<std::string>> HfTokenizer::preTokenize(std::string_view text) const {
  StatusOr<std::u32string> cps = decodeUtf8(text, "text");
  if (!cps.isOk()) return cps.status();
  std::vector<std::u32string> words;
  preTokenizeInto(*cps, words);
  std::vector<std::string> out;
  for (const std::u32string& w : words) out.push_back(toUtf8(w));
  return out;
}

// -------------------------------------------------------------- decoding

int32_t HfTokenizer::idOf(std::string_view token) const {
  StatusOr<std::u32string> cps = decodeUtf8(token, "token");
  if (cps.isOk())
    for (const AddedToken& a : added_)
      if (a.content == *cps) return a.id;
  auto it = vocab_.find(std::string(token));
  return it == vocab_.end() ? -1 : it->second;
}

std::string HfTokenizer::tokenOf(int32_t id) const {
  if (auto it = addedById_.find(id); it != addedById_.end()) {
    const AddedToken& a = added_[it->second];
    // AddedVocabulary::simple_id_to_token: a normalized token decodes as
    // its normalized form.
    return toUtf8(a.normalized ? normalizeCodepoints(a.content) : a.content);
  }
  if (id < 0 || id >= vocabSize_) return std::string();
  return idToToken_[static_cast<size_t>(id)];
}

std::string HfTokenizer::decode(const std::vector<int32_t>& ids, bool skipSpecial) const {
  std::vector<std::string> tokens;
  for (int32_t id : ids) {
    bool known =
        addedById_.count(id) || (id >= 0 && id < vocabSize_ && hasToken_[static_cast<size_t>(id)]);
    if (!known) continue;
    std::string token = tokenOf(id);
    if (skipSpecial) {
      // Tokenizer::decode skips a token whose text is a special added token's.
      if (specialTexts_.count(token)) continue;
    }
    tokens.push_back(std::move(token));
  }
  std::string out;
  if (decoder_ == DecoderKind::None) {
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  if (decoder_ == DecoderKind::ByteLevel) {
    // Each token's characters back to the bytes they stand for; a token
    // with any other character (an added token) as its UTF-8.
    for (const std::string& token : tokens) {
      StatusOr<std::u32string> cps = decodeUtf8(token, "token");
      bool mapped = cps.isOk() && std::all_of(cps->begin(), cps->end(),
                                              [](char32_t c) { return byteOfChar(c) >= 0; });
      if (!mapped) {
        out += token;
        continue;
      }
      for (char32_t c : *cps) out += static_cast<char>(byteOfChar(c));
    }
    return fromUtf8Lossy(out);
  }
  static const std::pair<const char*, const char*> kCleanup[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string token = std::move(tokens[i]);
    if (i != 0) {
      if (token.compare(0, decoderPrefix_.size(), decoderPrefix_) == 0)
        token.erase(0, decoderPrefix_.size());
      else
        token.insert(0, " ");
    }
    if (cleanup_) {
      // decoders/wordpiece.rs cleanup: str::replace of each pattern in turn.
      for (const auto& [from, to] : kCleanup) {
        std::string replaced;
        size_t fromLen = std::strlen(from), pos = 0;
        for (size_t hit; (hit = token.find(from, pos)) != std::string::npos; pos = hit + fromLen)
          replaced.append(token, pos, hit - pos).append(to);
        replaced.append(token, pos, std::string::npos);
        token = std::move(replaced);
      }
    }
    out += token;
  }
  return out;
}

}  // namespace transfuse::rt
