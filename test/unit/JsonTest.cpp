//===- JsonTest.cpp - Tests of the runtime's JSON ---------------------------===//

#include "runtime/support/Json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using tessel::rt::Json;

namespace {

Json parseOk(std::string_view text) {
  std::string error;
  std::optional<Json> value = Json::parse(text, "t.json", error);
  EXPECT_TRUE(value) << text << ": " << error;
  return value ? *value : Json();
}

std::string parseError(std::string_view text, int maxDepth = 128) {
  std::string error;
  std::optional<Json> value = Json::parse(text, "t.json", error, maxDepth);
  EXPECT_FALSE(value) << "parsed: " << text;
  return error;
}

uint64_t bitsOf(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

TEST(Json, ScalarsRoundTrip) {
  for (const char *text : {"null", "true", "false", "0", "-1", "9223372036854775807",
                           "-9223372036854775808", "0.5", "\"\"", "\"text\"", "[]", "{}"}) {
    EXPECT_EQ(parseOk(text).compact(), text);
    EXPECT_EQ(parseOk(text).pretty(), text);
  }
}

TEST(Json, IntegersAreExact) {
  // 2^53 + 1 has no double; the int64 keeps it.
  Json big = parseOk("9007199254740993");
  ASSERT_TRUE(big.isInteger());
  EXPECT_EQ(big.asInt(), 9007199254740993LL);
  EXPECT_EQ(big.compact(), "9007199254740993");
  EXPECT_EQ(parseOk("-9223372036854775808").asInt(), std::numeric_limits<int64_t>::min());

  // Beyond int64: a double, not an integer.
  Json huge = parseOk("18446744073709551616");
  EXPECT_TRUE(huge.isNumber());
  EXPECT_FALSE(huge.isInteger());
  EXPECT_EQ(huge.asDouble(), 18446744073709551616.0);
  EXPECT_FALSE(Json(std::numeric_limits<uint64_t>::max()).isInteger());

  // Integral doubles count as integers; fractions and -0.0 do not.
  EXPECT_TRUE(parseOk("1e3").isInteger());
  EXPECT_EQ(parseOk("1e3").asInt(), 1000);
  EXPECT_FALSE(parseOk("1.5").isInteger());
  EXPECT_FALSE(parseOk("-0").isInteger());
  EXPECT_TRUE(std::signbit(parseOk("-0").asDouble()));
  EXPECT_EQ(Json(3.0).compact(), "3");
  EXPECT_EQ(Json(int64_t{42}).asDouble(), 42.0);
  EXPECT_EQ(Json(size_t{7}).asInt(), 7);
}

TEST(Json, DoublesRoundTripBitExactly) {
  std::vector<double> values = {0.1,
                                1.0 / 3.0,
                                -2.5e-8,
                                1e-300,
                                5e-324, // the smallest subnormal
                                std::numeric_limits<double>::max(),
                                std::numeric_limits<double>::min(),
                                -0.0,
                                1e20,
                                123456789012345680000.0,
                                9007199254740992.0,
                                0.1f};
  std::mt19937_64 random(7);
  for (int i = 0; i < 20000; ++i) {
    uint64_t bits = random();
    double value;
    std::memcpy(&value, &bits, sizeof value);
    if (std::isfinite(value))
      values.push_back(value);
  }
  for (double value : values) {
    std::string text = Json(value).compact();
    Json back = parseOk(text);
    ASSERT_TRUE(back.isNumber()) << text;
    EXPECT_EQ(bitsOf(back.asDouble()), bitsOf(value)) << text;
    // The same value inside a pretty document.
    Json doc = Json::object();
    doc.set("x", value);
    EXPECT_EQ(bitsOf(parseOk(doc.pretty()).find("x")->asDouble()), bitsOf(value));
  }
  EXPECT_EQ(Json(0.1).compact(), "0.1"); // shortest form, not 0.10000000000000001
}

TEST(Json, NonFiniteNumbersAreWrittenAsNull) {
  EXPECT_EQ(Json(std::nan("")).compact(), "null");
  EXPECT_EQ(Json(std::numeric_limits<double>::infinity()).compact(), "null");
}

TEST(Json, StringsEscapeControlCharactersAndPassUtf8Through) {
  std::string raw = std::string("quote\" backslash\\ slash/ \b\f\n\r\t nul") + '\0' +
                    "\x01\x1f\x7f h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9d\x84\x9e";
  std::string text = Json(raw).compact();
  EXPECT_EQ(text, "\"quote\\\" backslash\\\\ slash/ \\b\\f\\n\\r\\t nul\\u0000\\u0001\\u001f"
                  "\\u007f h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9d\x84\x9e\"");
  for (unsigned char c : text)
    EXPECT_TRUE(c >= 0x20 && c != 0x7f) << "raw control byte " << int(c);
  EXPECT_EQ(parseOk(text).asString(), raw);

  // \u escapes, including a surrogate pair, decode to UTF-8.
  EXPECT_EQ(parseOk(R"("\u00e9\u2713\ud834\udd1e\/")").asString(),
            "\xc3\xa9\xe2\x9c\x93\xf0\x9d\x84\x9e/");
}

TEST(Json, ObjectsKeepInsertionOrder) {
  Json object = parseOk(R"({"zeta": 1, "alpha": 2, "mid": 3})");
  ASSERT_EQ(object.size(), 3u);
  EXPECT_EQ(object.members()[0].first, "zeta");
  EXPECT_EQ(object.members()[2].first, "mid");
  EXPECT_EQ(object.compact(), R"({"zeta":1,"alpha":2,"mid":3})");

  object.set("alpha", "replaced"); // in place, not moved to the end
  object.set("new", nullptr);
  EXPECT_EQ(object.compact(), R"({"zeta":1,"alpha":"replaced","mid":3,"new":null})");
  EXPECT_EQ(object.find("mid")->asInt(), 3);
  EXPECT_EQ(object.find("missing"), nullptr);
}

TEST(Json, NullGrowsIntoAnObjectOrArray) {
  Json object;
  object.set("a", 1);
  EXPECT_EQ(object.compact(), R"({"a":1})");
  Json array;
  array.push("x");
  EXPECT_EQ(array.compact(), R"(["x"])");
}

TEST(Json, PrettyAndCompactLayout) {
  Json doc = Json::object();
  doc.set("format", "tessel-checkpoint");
  doc.set("step", 300);
  doc.set("shape", Json(Json::Array{128, 4, 32}));
  Json nested = Json::object();
  nested.set("lr", 0.003);
  nested.set("betas", Json(Json::Array{0.9, 0.95}));
  nested.set("empty", Json::array());
  nested.set("none", Json::object());
  doc.set("optimizer", nested);
  doc.set("list", Json(Json::Array{Json::object(), Json(Json::Array{1})}));

  EXPECT_EQ(doc.pretty(), R"({
  "format": "tessel-checkpoint",
  "step": 300,
  "shape": [128, 4, 32],
  "optimizer": {
    "lr": 0.003,
    "betas": [0.9, 0.95],
    "empty": [],
    "none": {}
  },
  "list": [
    {},
    [1]
  ]
})");
  EXPECT_EQ(doc.compact(), R"({"format":"tessel-checkpoint","step":300,"shape":[128,4,32],)"
                           R"("optimizer":{"lr":0.003,"betas":[0.9,0.95],"empty":[],"none":{}},)"
                           R"("list":[{},[1]]})");
  EXPECT_EQ(parseOk(doc.pretty()), doc);
  EXPECT_EQ(parseOk(doc.compact()), doc);
}

TEST(Json, Equality) {
  EXPECT_EQ(parseOk("[1, 2.5, \"x\", null, true]"), Json(Json::Array{1, 2.5, "x", nullptr, true}));
  EXPECT_NE(Json(1), Json(2));
  EXPECT_NE(Json(1), Json("1"));
  EXPECT_EQ(Json(2), Json(2.0));
  EXPECT_NE(parseOk(R"({"a":1,"b":2})"), parseOk(R"({"b":2,"a":1})")); // order matters
}

TEST(Json, ParseErrorsNameTheByte) {
  struct Case {
    const char *text;
    const char *error;
  };
  const Case cases[] = {
      {R"({"a": 1 "b": 2})", "t.json: expected ',' or '}' at byte 8"},
      {"[1, 2", "t.json: expected ',' or ']', found the end of the input at byte 5"},
      {"", "t.json: expected a value, found the end of the input at byte 0"},
      {"   ", "t.json: expected a value, found the end of the input at byte 3"},
      {R"({"a":1}x)", "t.json: unexpected 'x' after the value at byte 7"},
      {R"({"a":1,"a":2})", "t.json: duplicate key 'a' at byte 7"},
      {R"({"a" 1})", "t.json: expected ':' at byte 5"},
      {"{1:2}", "t.json: expected a string key at byte 1"},
      {"[1,]", "t.json: expected a value, found ']' at byte 3"},
      {"tru", "t.json: expected a value, found 't' at byte 0"},
      {"01", "t.json: unexpected '1' after the value at byte 1"},
      {"1.", "t.json: expected a digit after '.', found the end of the input at byte 2"},
      {"-", "t.json: expected a digit, found the end of the input at byte 1"},
      {"1e+", "t.json: expected a digit in the exponent, found the end of the input at byte 3"},
      {"1e999", "t.json: number out of range at byte 0"},
      {"\"abc", "t.json: expected '\"' to close the string, found the end of the input at byte 4"},
      {"\"a\x01\"", "t.json: control character byte 0x01 in a string (escape it) at byte 2"},
      {R"("\x")", "t.json: invalid escape 'x' at byte 2"},
      {R"("\u12g4")", "t.json: expected a hex digit at byte 5"},
      {R"("\ud800")", "t.json: unpaired high surrogate at byte 1"},
      {R"("\ud800\u0041")", "t.json: unpaired high surrogate at byte 1"},
      {R"("\udc00")", "t.json: unpaired low surrogate at byte 1"},
      {"\xef\xbb\xbf{}", "t.json: expected a value, found byte 0xef at byte 0"},
  };
  for (const Case &c : cases)
    EXPECT_EQ(parseError(c.text), c.error) << "input: " << c.text;
}

TEST(Json, DepthLimit) {
  auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  EXPECT_EQ(parseOk(nested(128)).compact(), nested(128));
  EXPECT_EQ(parseError(nested(129)), "t.json: nesting deeper than 128 levels at byte 128");
  EXPECT_EQ(parseError(nested(4), 3), "t.json: nesting deeper than 3 levels at byte 3");
  // Far deeper input fails at the limit instead of exhausting the stack.
  EXPECT_EQ(parseError(std::string(1000000, '[')),
            "t.json: nesting deeper than 128 levels at byte 128");
  EXPECT_EQ(parseError(R"({"a":{"b":[1]}})", 2), "t.json: nesting deeper than 2 levels at byte 10");
}

TEST(Json, MutatedInputFailsCleanlyOrRoundTrips) {
  // A small fuzzer: random edits of a valid document either fail with a located message or
  // parse to a value that writes and reads back unchanged.
  const std::string seed =
      R"({"a": [1, -2.5e3, true, null, "x\u00e9\n"], "b": {"c": [], "d": {}}, "e": 0.1})";
  const std::string alphabet = "{}[],:\"\\ 0123456789.eE+-truefalsnu\x01\xc3";
  std::mt19937_64 random(1);
  int parsed = 0;
  for (int i = 0; i < 30000; ++i) {
    std::string text = seed;
    for (int edits = 1 + int(random() % 3); edits > 0; --edits) {
      size_t at = random() % (text.size() + 1);
      char c = alphabet[random() % alphabet.size()];
      switch (random() % 3) {
      case 0:
        text.insert(at, 1, c);
        break;
      case 1:
        if (at < text.size())
          text[at] = c;
        break;
      default:
        if (at < text.size())
          text.erase(at, 1);
      }
    }
    std::string error;
    std::optional<Json> value = Json::parse(text, "fuzz", error);
    if (!value) {
      EXPECT_EQ(error.rfind("fuzz: ", 0), 0u) << error;
      EXPECT_NE(error.find(" at byte "), std::string::npos) << error;
      continue;
    }
    ++parsed;
    for (const std::string &written : {value->compact(), value->pretty()}) {
      std::optional<Json> again = Json::parse(written, "again", error);
      ASSERT_TRUE(again) << text << " -> " << written << ": " << error;
      EXPECT_EQ(*again, *value) << text;
    }
  }
  EXPECT_GT(parsed, 100);
}

TEST(Json, WhitespaceIsAllowedAroundTokens) {
  Json value = parseOk(" \t\r\n{ \"a\" :\n[ 1 , 2 ] }\n");
  EXPECT_EQ(value.compact(), R"({"a":[1,2]})");
}

} // namespace
