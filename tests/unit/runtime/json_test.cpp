// Tests for runtime/Json.h: parsing of every kind, strictness (each malformed input
// rejected with a byte offset), exact int64 numbers, escapes incl. \uXXXX and
// surrogate pairs, key order and duplicate keys, and dump/parse round trips.
#include "runtime/Json.h"

#include <gtest/gtest.h>

#include <limits>

namespace transfuse::rt {
namespace {

JsonValue parseOk(std::string_view text) {
  StatusOr<JsonValue> v = JsonValue::parse(text);
  EXPECT_TRUE(v.isOk()) << text << ": " << v.status().message();
  return v.isOk() ? *v : JsonValue();
}

TEST(JsonTest, ParsesScalars) {
  EXPECT_TRUE(parseOk("null").isNull());
  EXPECT_TRUE(parseOk(" true ").asBool());
  EXPECT_FALSE(parseOk("false").asBool());
  EXPECT_TRUE(parseOk("false").isBool());
  EXPECT_EQ(parseOk("\"hi\"").asString(), "hi");
  EXPECT_DOUBLE_EQ(parseOk("-1.5e2").asNumber(), -150.0);
  EXPECT_DOUBLE_EQ(parseOk("0.25").asNumber(), 0.25);
  EXPECT_FALSE(parseOk("0.25").isInteger());
}

TEST(JsonTest, IntegersAreExact) {
  JsonValue big = parseOk("9007199254740993");  // 2^53 + 1, not a double
  ASSERT_TRUE(big.isInteger());
  EXPECT_EQ(big.asInt64(), 9007199254740993LL);
  EXPECT_EQ(big.dump(), "9007199254740993");
  EXPECT_EQ(parseOk("-9223372036854775808").asInt64(), INT64_MIN);
  EXPECT_EQ(parseOk("9223372036854775807").asInt64(), INT64_MAX);
  // Past int64: still a number, not an integer.
  JsonValue huge = parseOk("9223372036854775808");
  EXPECT_TRUE(huge.isNumber());
  EXPECT_FALSE(huge.isInteger());
  // An integral value written with an exponent is an integer too.
  EXPECT_TRUE(parseOk("1e3").isInteger());
  EXPECT_EQ(parseOk("1e3").asInt64(), 1000);
  EXPECT_TRUE(parseOk("1e-400").isNumber());  // underflow to 0 is fine
}

TEST(JsonTest, StringEscapes) {
  JsonValue v = parseOk(R"("a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u20ac\ud83d\ude00")");
  EXPECT_EQ(v.asString(), "a\"b\\c/d\b\f\n\r\tA\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  EXPECT_EQ(parseOk("\"\xC3\xA9\"").asString(), "\xC3\xA9");  // raw UTF-8 kept
}

TEST(JsonTest, ObjectsKeepOrderAndDuplicates) {
  JsonValue v = parseOk(R"({"z": 1, "a": [1, 2, {"k": null}], "m": {}, "z": 2})");
  ASSERT_TRUE(v.isObject());
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v.members()[0].first, "z");
  EXPECT_EQ(v.members()[1].first, "a");
  EXPECT_EQ(v.members()[3].first, "z");
  EXPECT_EQ(v.find("z")->asInt64(), 1);  // first one
  EXPECT_EQ(v.find("a")->asArray().size(), 3u);
  EXPECT_TRUE(v.find("a")->asArray()[2].find("k")->isNull());
  EXPECT_EQ(v.find("missing"), nullptr);
}

TEST(JsonTest, RejectsMalformedWithOffset) {
  struct Case {
    const char* text;
    size_t offset;
  };
  const Case cases[] = {
      {"", 0},           {"[1,]", 3},       {"{\"a\":1,}", 7},  {"01", 1},
      {"1.", 2},         {"-", 1},          {"NaN", 0},         {"[1 2]", 3},
      {"{\"a\" 1}", 5},  {"{a:1}", 1},      {"\"abc", 4},       {"\"\\x\"", 2},
      {"\"\\ud800\"", 7}, {"\"\\udc00\"", 7}, {"\"a\nb\"", 2},    {"tru", 0},
      {"[1] x", 4},      {"// c\n1", 0},    {"\"\xff\"", 1},     {"1e999", 0},
      {"{\"a\":1", 6},
  };
  for (const Case& c : cases) {
    StatusOr<JsonValue> v = JsonValue::parse(c.text);
    ASSERT_FALSE(v.isOk()) << "accepted: " << c.text;
    EXPECT_NE(v.status().message().find("at byte " + std::to_string(c.offset)),
              std::string::npos)
        << c.text << " -> " << v.status().message();
  }
}

TEST(JsonTest, RejectsDeepNesting) {
  std::string deep(300, '[');
  deep += std::string(300, ']');
  EXPECT_FALSE(JsonValue::parse(deep).isOk());
  std::string ok(200, '[');
  ok += std::string(200, ']');
  EXPECT_TRUE(JsonValue::parse(ok).isOk());
}

TEST(JsonTest, DumpRoundTrip) {
  JsonValue v = JsonValue::object();
  v.set("name", "x\"y\n\x01");
  v.set("n", 42);
  v.set("f", 0.1);
  v.set("neg", -7);
  v.set("b", true);
  v.set("null", nullptr);
  JsonValue arr = JsonValue::array();
  arr.push(1);
  arr.push("two");
  arr.push(JsonValue::object());
  v.set("arr", arr);
  v.set("n", 43);  // replaces in place
  EXPECT_EQ(v.dump(),
            R"({"name":"x\"y\n\u0001","n":43,"f":0.1,"neg":-7,"b":true,"null":null,)"
            R"("arr":[1,"two",{}]})");
  for (int indent : {-1, 0, 2}) {
    StatusOr<JsonValue> back = JsonValue::parse(v.dump(indent));
    ASSERT_TRUE(back.isOk()) << back.status().message();
    EXPECT_EQ(*back, v);
  }
  EXPECT_EQ(JsonValue::array().dump(2), "[]");
  JsonValue small = JsonValue::object();
  small.set("a", JsonValue::array({JsonValue(1)}));
  EXPECT_EQ(small.dump(2), "{\n  \"a\": [\n    1\n  ]\n}");
}

TEST(JsonTest, NonFiniteDumpsAsNull) {
  EXPECT_EQ(JsonValue(std::numeric_limits<double>::infinity()).dump(), "null");
  // Past int64: held as a double (2^64), printed in its shortest exact form.
  JsonValue big(uint64_t{18446744073709551615ull});
  EXPECT_FALSE(big.isInteger());
  EXPECT_EQ(big.dump(), "18446744073709551616");
  EXPECT_EQ(JsonValue::parse(big.dump())->asNumber(), 18446744073709551616.0);
}

}  // namespace
}  // namespace transfuse::rt
