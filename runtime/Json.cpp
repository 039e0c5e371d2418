// Strict JSON parser (recursive descent over a string_view, depth-limited) and
// writer for Json.h. Locale-independent: numbers go through std::from_chars and
// std::to_chars (shortest round-trip form).
#include "runtime/Json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace transfuse::rt {

namespace {
const std::string kEmptyString;
const JsonValue::Array kEmptyArray;
const JsonValue::Object kEmptyObject;
constexpr int kMaxDepth = 256;

class Parser {
public:
  explicit Parser(std::string_view text) : s_(text) {}

  StatusOr<JsonValue> run() {
    JsonValue v;
    skipWs();
    if (!parseValue(v, 0)) return Status::error(err_);
    skipWs();
    if (pos_ != s_.size()) {
      fail("unexpected trailing characters");
      return Status::error(err_);
    }
    return v;
  }

private:
  bool fail(const std::string& what) {
    if (err_.empty())
      err_ = "JSON parse error at byte " + std::to_string(pos_) + ": " + what;
    return false;
  }
  void skipWs() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return fail("invalid literal");
    pos_ += word.size();
    return true;
  }

  bool parseValue(JsonValue& out, int depth) {
    if (pos_ >= s_.size()) return fail("unexpected end of input, expected a value");
    char c = s_[pos_];
    switch (c) {
      case 'n': out = JsonValue(); return literal("null");
      case 't': out = JsonValue(true); return literal("true");
      case 'f': out = JsonValue(false); return literal("false");
      case '"': {
        std::string str;
        if (!parseString(str)) return false;
        out = JsonValue(std::move(str));
        return true;
      }
      case '[': return parseArray(out, depth + 1);
      case '{': return parseObject(out, depth + 1);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return parseNumber(out);
        return fail(std::string("unexpected character '") + c + "'");
    }
  }

  bool parseArray(JsonValue& out, int depth) {
    if (depth > kMaxDepth) return fail("nesting deeper than 256");
    ++pos_;  // '['
    out = JsonValue::array();
    skipWs();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      skipWs();
      JsonValue item;
      if (!parseValue(item, depth)) return false;
      out.push(std::move(item));
      skipWs();
      if (pos_ >= s_.size()) return fail("unexpected end of input in array");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or ']' in array");
    }
  }

  bool parseObject(JsonValue& out, int depth) {
    if (depth > kMaxDepth) return fail("nesting deeper than 256");
    ++pos_;  // '{'
    out = JsonValue::object();
    skipWs();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      skipWs();
      if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a string key in object");
      std::string key;
      if (!parseString(key)) return false;
      skipWs();
      if (pos_ >= s_.size() || s_[pos_] != ':') return fail("expected ':' after object key");
      ++pos_;
      skipWs();
      JsonValue value;
      if (!parseValue(value, depth)) return false;
      // Append directly (not set()) so duplicate keys are preserved.
      out.members().emplace_back(std::move(key), std::move(value));
      skipWs();
      if (pos_ >= s_.size()) return fail("unexpected end of input in object");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or '}' in object");
    }
  }

  bool hex4(uint32_t* out) {
    if (pos_ + 4 > s_.size()) return fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_ + i];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return fail("invalid hex digit in \\u escape");
    }
    pos_ += 4;
    *out = v;
    return true;
  }

  static void appendUtf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  // Validates one raw UTF-8 sequence starting at pos_ and copies it.
  bool copyUtf8(std::string& out) {
    auto byte = [&](size_t i) { return static_cast<unsigned char>(s_[i]); };
    unsigned char b0 = byte(pos_);
    size_t len;
    uint32_t cp;
    if (b0 >= 0xc2 && b0 <= 0xdf) len = 2, cp = b0 & 0x1f;
    else if (b0 >= 0xe0 && b0 <= 0xef) len = 3, cp = b0 & 0x0f;
    else if (b0 >= 0xf0 && b0 <= 0xf4) len = 4, cp = b0 & 0x07;
    else return fail("invalid UTF-8 in string");
    if (pos_ + len > s_.size()) return fail("truncated UTF-8 sequence in string");
    for (size_t i = 1; i < len; ++i) {
      unsigned char b = byte(pos_ + i);
      if ((b & 0xc0) != 0x80) return fail("invalid UTF-8 in string");
      cp = (cp << 6) | (b & 0x3f);
    }
    // Reject overlong forms, surrogates and code points past U+10FFFF.
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return fail("invalid UTF-8 in string");
    out.append(s_.substr(pos_, len));
    pos_ += len;
    return true;
  }

  bool parseString(std::string& out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= s_.size()) return fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20) return fail("control character in string");
      if (c >= 0x80) {
        if (!copyUtf8(out)) return false;
        continue;
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= s_.size()) return fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(&cp)) return false;
          if (cp >= 0xdc00 && cp <= 0xdfff) return fail("unpaired low surrogate escape");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            if (s_.substr(pos_, 2) != "\\u") return fail("unpaired high surrogate escape");
            pos_ += 2;
            uint32_t lo = 0;
            if (!hex4(&lo)) return false;
            if (lo < 0xdc00 || lo > 0xdfff) return fail("unpaired high surrogate escape");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
          appendUtf8(out, cp);
          break;
        }
        default:
          --pos_;
          return fail(std::string("invalid escape '\\") + e + "'");
      }
    }
  }

  bool parseNumber(JsonValue& out) {
    size_t start = pos_;
    auto digit = [&](size_t i) { return i < s_.size() && s_[i] >= '0' && s_[i] <= '9'; };
    if (s_[pos_] == '-') ++pos_;
    if (!digit(pos_)) return fail("expected a digit");
    if (s_[pos_] == '0') {
      ++pos_;
      if (digit(pos_)) return fail("leading zero in number");
    } else {
      while (digit(pos_)) ++pos_;
    }
    bool integral = true;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      integral = false;
      ++pos_;
      if (!digit(pos_)) return fail("expected a digit after '.'");
      while (digit(pos_)) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digit(pos_)) return fail("expected a digit in exponent");
      while (digit(pos_)) ++pos_;
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + pos_;
    if (integral) {
      int64_t i;
      auto r = std::from_chars(first, last, i);
      if (r.ec == std::errc() && r.ptr == last) {
        out = JsonValue(i);
        return true;
      }
    }
    double d;
    auto r = std::from_chars(first, last, d);
    if (r.ptr != last || (r.ec != std::errc() && r.ec != std::errc::result_out_of_range)) {
      pos_ = start;
      return fail("invalid number");
    }
    if (r.ec == std::errc::result_out_of_range) {
      // Overflow (e.g. 1e999) is an error; underflow to zero is fine.
      bool tiny = false;
      // from_chars leaves d unspecified on range errors; decide by the exponent sign.
      for (const char* p = first; p != last; ++p)
        if ((*p == 'e' || *p == 'E') && p + 1 != last && p[1] == '-') tiny = true;
      if (!tiny) {
        pos_ = start;
        return fail("number out of range");
      }
      d = 0.0;
    }
    out = JsonValue(d);
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
  std::string err_;
};

void newline(std::string& out, int indent, int depth) {
  out += '\n';
  out.append(static_cast<size_t>(indent) * depth, ' ');
}
}  // namespace

JsonValue::JsonValue(double d) : kind_(Kind::Number), number_(d) {
  // Integral values inside (-2^63, 2^63) are also held exactly as int64.
  if (std::isfinite(d) && d == std::trunc(d) && d > -9223372036854775808.0 &&
      d < 9223372036854775808.0) {
    isInt_ = true;
    int_ = static_cast<int64_t>(d);
  }
}

JsonValue JsonValue::array(Array items) {
  JsonValue v;
  v.kind_ = Kind::Array;
  v.array_ = std::move(items);
  return v;
}

JsonValue JsonValue::object(Object members) {
  JsonValue v;
  v.kind_ = Kind::Object;
  v.object_ = std::move(members);
  return v;
}

const std::string& JsonValue::asString() const {
  return kind_ == Kind::String ? string_ : kEmptyString;
}
const JsonValue::Array& JsonValue::asArray() const {
  return kind_ == Kind::Array ? array_ : kEmptyArray;
}
const JsonValue::Object& JsonValue::members() const {
  return kind_ == Kind::Object ? object_ : kEmptyObject;
}
JsonValue::Array& JsonValue::asArray() { return array_; }
JsonValue::Object& JsonValue::members() { return object_; }

size_t JsonValue::size() const {
  if (kind_ == Kind::Array) return array_.size();
  if (kind_ == Kind::Object) return object_.size();
  return 0;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  if (kind_ != Kind::Object) return nullptr;
  for (const auto& m : object_)
    if (m.first == key) return &m.second;
  return nullptr;
}

void JsonValue::set(std::string key, JsonValue value) {
  if (kind_ == Kind::Null) kind_ = Kind::Object;
  for (auto& m : object_) {
    if (m.first == key) {
      m.second = std::move(value);
      return;
    }
  }
  object_.emplace_back(std::move(key), std::move(value));
}

void JsonValue::push(JsonValue value) {
  if (kind_ == Kind::Null) kind_ = Kind::Array;
  array_.push_back(std::move(value));
}

StatusOr<JsonValue> JsonValue::parse(std::string_view text) { return Parser(text).run(); }

bool JsonValue::operator==(const JsonValue& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::Null: return true;
    case Kind::Bool: return bool_ == o.bool_;
    case Kind::Number:
      if (isInt_ && o.isInt_) return int_ == o.int_;
      return number_ == o.number_;
    case Kind::String: return string_ == o.string_;
    case Kind::Array: return array_ == o.array_;
    case Kind::Object: return object_ == o.object_;
  }
  return false;
}

void jsonQuote(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

void JsonValue::dumpTo(std::string& out, int indent, int depth) const {
  switch (kind_) {
    case Kind::Null: out += "null"; return;
    case Kind::Bool: out += bool_ ? "true" : "false"; return;
    case Kind::Number: {
      char buf[64];
      std::to_chars_result r;
      if (isInt_) r = std::to_chars(buf, buf + sizeof buf, int_);
      else if (!std::isfinite(number_)) {
        out += "null";
        return;
      } else {
        r = std::to_chars(buf, buf + sizeof buf, number_);
      }
      out.append(buf, r.ptr);
      return;
    }
    case Kind::String: jsonQuote(out, string_); return;
    case Kind::Array: {
      out += '[';
      for (size_t i = 0; i < array_.size(); ++i) {
        if (i) out += ',';
        if (indent >= 0) newline(out, indent, depth + 1);
        array_[i].dumpTo(out, indent, depth + 1);
      }
      if (indent >= 0 && !array_.empty()) newline(out, indent, depth);
      out += ']';
      return;
    }
    case Kind::Object: {
      out += '{';
      for (size_t i = 0; i < object_.size(); ++i) {
        if (i) out += ',';
        if (indent >= 0) newline(out, indent, depth + 1);
        jsonQuote(out, object_[i].first);
        out += indent >= 0 ? ": " : ":";
        object_[i].second.dumpTo(out, indent, depth + 1);
      }
      if (indent >= 0 && !object_.empty()) newline(out, indent, depth);
      out += '}';
      return;
    }
  }
}

std::string JsonValue::dump(int indent) const {
  std::string out;
  dumpTo(out, indent, 0);
  return out;
}

}  // namespace transfuse::rt
