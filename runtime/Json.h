// JsonValue: a small, strict JSON (RFC 8259) value, parser and writer for the
// runtime (safetensors headers, manifest.json). Objects keep their key order and
// keep duplicate keys (find() returns the first; callers that must reject
// duplicates, like the safetensors reader, walk members()). Numbers are held as
// double; a number that is integral and fits int64 is also held exactly as int64
// (so 2^53+1 survives a round trip). The parser rejects trailing commas, leading
// zeros, NaN/Infinity, comments, control characters in strings, invalid UTF-8,
// unpaired surrogate escapes, trailing garbage and nesting deeper than 256; each
// error names the byte offset where it was found.
#ifndef TRANSFUSE_RUNTIME_JSON_H
#define TRANSFUSE_RUNTIME_JSON_H

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/Status.h"

namespace transfuse::rt {

class JsonValue {
public:
  enum class Kind { Null, Bool, Number, String, Array, Object };
  using Array = std::vector<JsonValue>;
  using Object = std::vector<std::pair<std::string, JsonValue>>;

  JsonValue() = default;  // null
  JsonValue(std::nullptr_t) {}
  JsonValue(bool b) : kind_(Kind::Bool), bool_(b) {}
  JsonValue(double d);
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>,
                                      int> = 0>
  JsonValue(I i) {
    if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(int64_t)) {
      if (i > static_cast<uint64_t>(INT64_MAX)) {
        *this = JsonValue(static_cast<double>(i));
        return;
      }
    }
    setInt(static_cast<int64_t>(i));
  }
  JsonValue(std::string s) : kind_(Kind::String), string_(std::move(s)) {}
  JsonValue(const char* s) : kind_(Kind::String), string_(s) {}
  JsonValue(std::string_view s) : kind_(Kind::String), string_(s) {}
  static JsonValue array(Array items = {});
  static JsonValue object(Object members = {});

  Kind kind() const { return kind_; }
  bool isNull() const { return kind_ == Kind::Null; }
  bool isBool() const { return kind_ == Kind::Bool; }
  bool isNumber() const { return kind_ == Kind::Number; }
  // A number that is integral and exactly representable as int64.
  bool isInteger() const { return kind_ == Kind::Number && isInt_; }
  bool isString() const { return kind_ == Kind::String; }
  bool isArray() const { return kind_ == Kind::Array; }
  bool isObject() const { return kind_ == Kind::Object; }

  // Accessors; calling one on the wrong kind returns a default (false, 0, "",
  // empty) rather than crashing.
  bool asBool() const { return kind_ == Kind::Bool && bool_; }
  double asNumber() const { return kind_ == Kind::Number ? number_ : 0.0; }
  int64_t asInt64() const { return isInteger() ? int_ : 0; }
  const std::string& asString() const;
  const Array& asArray() const;
  const Object& members() const;
  Array& asArray();
  Object& members();
  size_t size() const;  // elements of an array, members of an object, else 0

  // Object lookup: the first member named `key`, or nullptr.
  const JsonValue* find(std::string_view key) const;
  // Object update: replaces the first member named `key` in place or appends it.
  // Turns a null value into an object first.
  void set(std::string key, JsonValue value);
  // Array append; turns a null value into an array first.
  void push(JsonValue value);

  static StatusOr<JsonValue> parse(std::string_view text);
  // indent < 0: compact, no spaces. indent >= 0: one member/element per line,
  // nested by `indent` spaces, ": " after keys. Non-finite numbers print as null.
  std::string dump(int indent = -1) const;

  bool operator==(const JsonValue& other) const;
  bool operator!=(const JsonValue& other) const { return !(*this == other); }

private:
  void setInt(int64_t i) {
    kind_ = Kind::Number;
    isInt_ = true;
    int_ = i;
    number_ = static_cast<double>(i);
  }
  void dumpTo(std::string& out, int indent, int depth) const;

  Kind kind_ = Kind::Null;
  bool bool_ = false;
  bool isInt_ = false;
  int64_t int_ = 0;
  double number_ = 0.0;
  std::string string_;
  Array array_;
  Object object_;
};

// Appends `s` to `out` as a quoted JSON string literal.
void jsonQuote(std::string& out, std::string_view s);

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_JSON_H
