//===- TokenizerTest.cpp - Tests of the tokenizer library -----------------===//
//
// The parts of common/tokenizer on small, hand-made tokenizers: merges and their ranks, added
// and special tokens, decoding, the Llama 2 layout (byte fallback, Metaspace), files refused
// with their reasons, and the UTF-8, JSON, NFC and pattern helpers. Parity with Hugging Face's
// tokenizers on real vocabularies is test/Integration/Tokenizer/parity.test.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/Tokenizer.h"
#include "common/tokenizer/ByteLevel.h"
#include "common/tokenizer/JsonReader.h"
#include "common/tokenizer/Normalization.h"
#include "common/tokenizer/Regex.h"
#include "common/tokenizer/Utf8.h"

#include "ScratchDir.h"

#include <gtest/gtest.h>

#include <thread>

using namespace tessel;
using tessel::test::ScratchDir;
using tessel::test::writeFile;

namespace {

std::string spelled(std::string_view bytes) {
  std::string out;
  tok::byteLevelEncode(bytes, out);
  return out;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

/// The parts of a byte-level tokenizer.json that tests change.
struct JsonParts {
  std::vector<std::pair<std::string, std::string>> merges; // byte strings
  std::string addedTokens = "[]";
  std::string normalizer = "null";
  std::string preTokenizer =
      R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})";
  std::string postProcessor = "null";
  std::string decoder = R"({"type": "ByteLevel"})";
  std::string modelExtra;
};

/// A byte-level tokenizer.json: byte b is id b, merge i makes id 256 + i.
std::string byteLevelJson(const JsonParts &p) {
  std::string vocab;
  for (int b = 0; b < 256; ++b)
    vocab += (b ? ", " : "") + quote(spelled(std::string(1, static_cast<char>(b)))) + ": " +
             std::to_string(b);
  std::string merges;
  for (size_t i = 0; i < p.merges.size(); ++i) {
    const auto &[a, b] = p.merges[i];
    vocab += ", " + quote(spelled(a + b)) + ": " + std::to_string(256 + i);
    merges += (i ? ", " : "") + quote(spelled(a) + " " + spelled(b));
  }
  return R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": )" +
         p.addedTokens + R"(, "normalizer": )" + p.normalizer + R"(, "pre_tokenizer": )" +
         p.preTokenizer + R"(, "post_processor": )" + p.postProcessor + R"(, "decoder": )" +
         p.decoder + R"(, "model": {"type": "BPE", "dropout": null, "unk_token": null, )" +
         p.modelExtra + R"("vocab": {)" + vocab + R"(}, "merges": [)" + merges + "]}}";
}

std::string addedToken(uint32_t id, std::string_view content, std::string_view flags = "") {
  return R"({"id": )" + std::to_string(id) + R"(, "content": )" + quote(content) +
         R"(, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false,
            "special": true)" +
         std::string(flags.empty() ? "" : ", ") + std::string(flags) + "}";
}

/// Loads `json` as dir/tokenizer.json; `error` says why when it does not load.
std::unique_ptr<tok::Tokenizer> loadJson(const ScratchDir &dir, const std::string &json,
                                         std::string &error) {
  writeFile(dir / "tokenizer.json", json);
  return tok::Tokenizer::load(dir / "tokenizer.json", error);
}

std::unique_ptr<tok::Tokenizer> loadOk(const ScratchDir &dir, const std::string &json) {
  std::string error;
  std::unique_ptr<tok::Tokenizer> t = loadJson(dir, json, error);
  EXPECT_TRUE(t) << error;
  return t;
}

std::vector<uint32_t> bytesOf(std::string_view s) {
  std::vector<uint32_t> ids;
  for (char c : s)
    ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

#define SKIP_WITHOUT_PCRE2()                                                                       \
  if (!tok::haveRegexSupport())                                                                    \
  GTEST_SKIP() << "skipped: Tessel was built without PCRE2"

const JsonParts helloParts() {
  JsonParts p;
  p.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}, {" w", "o"}};
  return p;
}

} // namespace

TEST(Tokenizer, MergesApplyInRankOrder) {
  SKIP_WITHOUT_PCRE2();
  ScratchDir dir;
  auto t = loadOk(dir, byteLevelJson(helloParts()));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("hello", false), (std::vector<uint32_t>{259}));
  // GPT-2's pattern splits " world" off; " w" then " wo" merge, the rest stays bytes.
  EXPECT_EQ(t->encode("hello world", false), (std::vector<uint32_t>{259, 261, 'r', 'l', 'd'}));
  EXPECT_EQ(t->decode({259, 261, 'r', 'l', 'd'}, false), "hello world");
  EXPECT_EQ(t->vocabSize(), 262u);
  EXPECT_EQ(t->tokenToId("hello"), 259u);
  EXPECT_EQ(t->tokenToId(spelled(" wo")), 261u);
  EXPECT_EQ(t->idToToken(260), spelled(" w"));
  EXPECT_FALSE(t->idToToken(262));
}

TEST(Tokenizer, LowerRankWinsAndEqualRanksGoLeftFirst) {
  SKIP_WITHOUT_PCRE2();
  ScratchDir dir;
  JsonParts p;
  p.merges = {{"b", "c"}, {"a", "b"}, {"a", "a"}};
  auto t = loadOk(dir, byteLevelJson(p));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("abc", false), (std::vector<uint32_t>{'a', 256}));
  EXPECT_EQ(t->encode("aaa", false), (std::vector<uint32_t>{258, 'a'}));
}

TEST(Tokenizer, SpecialTokensAreFoundBeforePreTokenizing) {
  SKIP_WITHOUT_PCRE2();
  ScratchDir dir;
  JsonParts p = helloParts();
  p.addedTokens = "[" + addedToken(262, "<|endoftext|>") + "]";
  auto t = loadOk(dir, byteLevelJson(p));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("hello<|endoftext|>hello", false), (std::vector<uint32_t>{259, 262, 259}));
  EXPECT_EQ(t->encode("<|endoftext", false), bytesOf("<|endoftext"));
  EXPECT_EQ(t->decode({259, 262, 259}, false), "hello<|endoftext|>hello");
  EXPECT_EQ(t->decode({259, 262, 259}, true), "hellohello");
  EXPECT_EQ(t->vocabSize(), 263u);
  EXPECT_EQ(t->tokenToId("<|endoftext|>"), 262u);
  // GPT-2's tokenizer.json names no EOS; its end-of-text token is taken as one.
  EXPECT_EQ(t->eosId(), 262u);
  EXPECT_FALSE(t->bosId());
}

TEST(Tokenizer, StripAndSingleWordTokens) {
  SKIP_WITHOUT_PCRE2();
  ScratchDir dir;
  JsonParts p;
  p.addedTokens = "[" + addedToken(256, "<mask>", R"("lstrip": true)") + ", " +
                  addedToken(257, "[SEP]", R"("rstrip": true)") + ", " +
                  addedToken(258, "cat", R"("single_word": true)") + "]";
  // Tests refer to these by id; the JSON's later keys override the defaults above.
  auto t = loadOk(dir, byteLevelJson(p));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("x  <mask>y", false), (std::vector<uint32_t>{'x', 256, 'y'}));
  EXPECT_EQ(t->encode("x[SEP]  y", false), (std::vector<uint32_t>{'x', 257, 'y'}));
  EXPECT_EQ(t->encode("a cat!", false), (std::vector<uint32_t>{'a', ' ', 258, '!'}));
  EXPECT_EQ(t->encode("cats", false), bytesOf("cats"));
  EXPECT_EQ(t->encode("\xC3\xA9"
                      "cat",
                      false),
            bytesOf("\xC3\xA9"
                    "cat"));
}

TEST(Tokenizer, PrefixSpaceAndTemplate) {
  SKIP_WITHOUT_PCRE2();
  ScratchDir dir;
  JsonParts p = helloParts();
  p.merges.push_back({" ", "hello"});
  p.addedTokens = "[" + addedToken(263, "<s>") + "]";
  p.preTokenizer = R"({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true})";
  p.postProcessor = R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [263], "tokens": ["<s>"]}}})";
  auto t = loadOk(dir, byteLevelJson(p));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("hello", false), (std::vector<uint32_t>{262}));
  EXPECT_EQ(t->encode("hello", true), (std::vector<uint32_t>{263, 262}));
  EXPECT_EQ(t->encode(" hello", false), (std::vector<uint32_t>{262}));
  EXPECT_EQ(t->bosId(), 263u);
}

TEST(Tokenizer, InvalidUtf8IsTokenizedAsReplacementCharacters) {
  SKIP_WITHOUT_PCRE2();
  ScratchDir dir;
  auto t = loadOk(dir, byteLevelJson(JsonParts()));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("a\xFF"
                      "b\xE2\x82",
                      false),
            t->encode("a\uFFFD"
                      "b\uFFFD",
                      false));
  // Decoding bytes that are not UTF-8 gives U+FFFD per maximal invalid subpart.
  EXPECT_EQ(t->decode({0xE2, 0x82}, false), "\uFFFD");
  EXPECT_EQ(t->decode({0xE2, 0x82, 0xAC}, false), "\u20AC");
  EXPECT_EQ(t->decode({0xE2, 0x82, 'x', 0xFF}, false), "\uFFFDx\uFFFD");
  // Ids the tokenizer does not have are left out.
  EXPECT_EQ(t->decode({'a', 100000, 'b'}, false), "ab");
}

TEST(Tokenizer, Llama3Layout) {
  SKIP_WITHOUT_PCRE2();
  ScratchDir dir;
  JsonParts p;
  p.merges = {{"1", "2"}, {"12", "3"}, {"a", "b"}};
  p.preTokenizer = R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
       "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})";
  p.modelExtra = R"("ignore_merges": true, )";
  auto t = loadOk(dir, byteLevelJson(p));
  ASSERT_TRUE(t);
  // Digits in threes; "12" "3" merges and then "4" stays.
  EXPECT_EQ(t->encode("1234", false), (std::vector<uint32_t>{257, '4'}));
  EXPECT_EQ(t->encode("IT'S", false), bytesOf("IT'S"));
}

TEST(Tokenizer, Llama2LayoutWithByteFallback) {
  ScratchDir dir;
  // <unk> <s> </s>, the 256 byte tokens, then pieces.
  std::string vocab = R"("<unk>": 0, "<s>": 1, "</s>": 2)";
  const char *digits = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b)
    vocab +=
        std::string(", \"<0x") + digits[b >> 4] + digits[b & 15] + ">\": " + std::to_string(3 + b);
  vocab += R"(, "▁": 259, "h": 260, "i": 261, "▁h": 262, "▁hi": 263)";
  std::string json = R"({"version": "1.0", "added_tokens": [)" + addedToken(0, "<unk>") + ", " +
                     addedToken(1, "<s>") + ", " + addedToken(2, "</s>") + R"(],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": null,
    "post_processor": {"type": "TemplateProcessing", "single": ["<s>", "$A"],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
        "vocab": {)" +
                     vocab + R"(}, "merges": [["▁", "h"], ["▁h", "i"]]}})";
  auto t = loadOk(dir, json);
  ASSERT_TRUE(t);
  // "hi hi!": "▁hi" twice; '!' is no piece: its byte token.
  EXPECT_EQ(t->encode("hi hi!", false), (std::vector<uint32_t>{263, 263, 3 + '!'}));
  EXPECT_EQ(t->encode("hi", true), (std::vector<uint32_t>{1, 263}));
  // After a special token the text is normalized again, with its own "▁".
  EXPECT_EQ(t->encode("<s>hi", false), (std::vector<uint32_t>{1, 263}));
  EXPECT_EQ(t->decode({1, 263, 263, 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80}, true), "hi hi😀");
  EXPECT_EQ(t->decode({263, 3 + 0xF0, 3 + 0x9F}, false), "hi\uFFFD\uFFFD");
}

TEST(Tokenizer, Metaspace) {
  ScratchDir dir;
  std::string json = R"({"version": "1.0", "added_tokens": [)" + addedToken(0, "<s>") + R"(],
    "normalizer": null,
    "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true},
    "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true},
    "model": {"type": "BPE", "vocab": {"<s>": 0, "▁": 1, "a": 2, "b": 3, "▁a": 4, "▁b": 5},
              "merges": ["▁ a", "▁ b"]}})";
  auto t = loadOk(dir, json);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("a b", false), (std::vector<uint32_t>{4, 5}));
  // Only the text at the start gets the prefix ("first").
  EXPECT_EQ(t->encode("<s>a", false), (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(t->decode({4, 5}, false), "a b");
}

TEST(Tokenizer, FolderWithConfig) {
  SKIP_WITHOUT_PCRE2();
  ScratchDir dir;
  JsonParts p = helloParts();
  p.addedTokens = "[" + addedToken(262, "<|begin|>") + ", " + addedToken(263, "<|end|>") + "]";
  writeFile(dir / "tokenizer.json", byteLevelJson(p));
  writeFile(dir / "tokenizer_config.json",
            R"({"bos_token": "<|begin|>", "eos_token": {"content": "<|end|>"},
                "chat_template": "{{ messages }}"})");
  std::string error;
  auto t = tok::Tokenizer::load(dir.path(), error);
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(t->bosId(), 262u);
  EXPECT_EQ(t->eosId(), 263u);
  EXPECT_EQ(t->chatTemplate(), "{{ messages }}");
  EXPECT_NE(t->description().find("tokenizer.json: byte-level BPE, 264 ids"), std::string::npos)
      << t->description();

  writeFile(dir / "tokenizer_config.json", R"({"eos_token": "<|missing|>"})");
  EXPECT_FALSE(tok::Tokenizer::load(dir.path(), error));
  EXPECT_NE(error.find("tokenizer_config.json: eos_token '<|missing|>' is not a token of"),
            std::string::npos)
      << error;
}

TEST(Tokenizer, EncodesOnManyThreads) {
  SKIP_WITHOUT_PCRE2();
  ScratchDir dir;
  auto t = loadOk(dir, byteLevelJson(helloParts()));
  ASSERT_TRUE(t);
  std::string text;
  for (int i = 0; i < 200; ++i)
    text += "hello world " + std::to_string(i) + " ";
  const std::vector<uint32_t> expected = t->encode(text, false);
  std::vector<std::thread> threads;
  std::vector<int> same(4, 0);
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int r = 0; r < 50; ++r)
        same[k] += t->encode(text, false) == expected;
    });
  for (std::thread &th : threads)
    th.join();
  EXPECT_EQ(same, std::vector<int>(4, 50));
}

// A corrupt or unsupported file is refused with the key at fault, never loaded half.
TEST(Tokenizer, RefusesBadFilesWithReasons) {
  SKIP_WITHOUT_PCRE2();
  ScratchDir dir;
  const std::string good = byteLevelJson(helloParts());
  auto replaced = [&](const std::string &from, const std::string &to) {
    std::string s = good;
    size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? s : s.replace(at, from.size(), to);
  };
  JsonParts badAdded = helloParts();
  badAdded.addedTokens = "[" + addedToken(300, "<x>") + "]";
  JsonParts unsupported = helloParts();
  unsupported.preTokenizer = R"({"type": "BertPreTokenizer"})";
  JsonParts badRegex = helloParts();
  badRegex.preTokenizer =
      R"({"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": false})";
  JsonParts badTemplate = helloParts();
  badTemplate.postProcessor = R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "special_tokens": {}})";
  const std::pair<std::string, std::string> cases[] = {
      {good.substr(0, good.size() / 2), "not valid JSON: line 1, column"},
      {"[1, 2]", "a tokenizer.json holds an object, not an array"},
      {R"({"version": "1.0"})", "there is no \"model\""},
      {replaced(R"("type": "BPE")", R"("type": "Unigram")"), "model.type (line 1, column"},
      {replaced(R"("type": "BPE")", R"("type": "Unigram")"), "model 'Unigram' is not supported"},
      {replaced(R"("dropout": null)", R"("dropout": 0.1)"), "BPE dropout is not supported"},
      {replaced(quote(spelled("he") + " " + spelled("ll")), "\"he ll x\""),
       "model.merges[2] (line 1, column"},
      {replaced(quote(spelled("he") + " " + spelled("ll")), "\"zz ll\""),
       "merges[2]: 'zz' is not in the vocabulary"},
      {replaced(quote(spelled("he") + " " + spelled("ll")), "7"),
       "a merge is a string \"a b\" or an array of two strings"},
      {replaced(R"("hello": 259)", R"("hello": 258)"), "vocab: id 258 is given to both"},
      {replaced(R"("hello": 259)", R"("hello": -1)"), "model.vocab['hello']"},
      {replaced(R"("hello": 259)", R"("hello": 99999999)"), "beyond the largest Tessel takes"},
      {byteLevelJson(badAdded), "added_tokens[0].id (line 1, column"},
      {byteLevelJson(badAdded),
       "'<x>' has id 300 but the vocabulary and the tokens before it give it 262"},
      {byteLevelJson(unsupported), "pre-tokenizer 'BertPreTokenizer' is not supported"},
      {byteLevelJson(badRegex), "pre_tokenizer.pattern (line 1, column"},
      {byteLevelJson(badRegex), "the pattern does not compile (PCRE2"},
      {byteLevelJson(badTemplate), "special token '<s>' is not in special_tokens"},
      {replaced(R"("version": "1.0")", R"("version": "2.0")"), "version"},
      {std::string(2000, '[') + std::string(2000, ']'), "nest deeper than 512"},
      {"{\"a\": \"\xC3\x28\"}", "invalid UTF-8"},
      {R"({"a": "\ud800"})", "a high surrogate escape without a low surrogate"},
      {R"({"a": [1, 2,]})", "a trailing comma"},
  };
  for (const auto &[json, expected] : cases) {
    std::string error;
    EXPECT_FALSE(loadJson(dir, json, error)) << expected;
    EXPECT_NE(error.find(dir / "tokenizer.json"), std::string::npos) << error;
    EXPECT_NE(error.find(expected), std::string::npos)
        << "expected: " << expected << "\nerror:    " << error;
  }
}

TEST(Tokenizer, RefusesWhatIsNotATokenizer) {
  ScratchDir dir;
  std::string error;
  EXPECT_FALSE(tok::Tokenizer::load(dir / "absent", error));
  EXPECT_NE(error.find("no such file or folder"), std::string::npos) << error;
  EXPECT_FALSE(tok::Tokenizer::load(dir.path(), error));
  EXPECT_NE(error.find("holds neither tokenizer.json nor tokenizer.model"), std::string::npos)
      << error;
  writeFile(dir / "tokenizer.model", std::string("\x00\x01garbage\xFF", 11));
  EXPECT_FALSE(tok::Tokenizer::load(dir / "tokenizer.model", error));
  EXPECT_NE(error.find(tok::haveSentencePieceSupport() ? "not a SentencePiece model"
                                                       : "built without SentencePiece"),
            std::string::npos)
      << error;
}

TEST(TokenizerUtf8, RepairsMaximalSubparts) {
  EXPECT_TRUE(tok::isValidUtf8("plain ascii and \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));
  EXPECT_EQ(tok::repairUtf8("a\xFF"
                            "b"),
            "a\uFFFD"
            "b");
  EXPECT_EQ(tok::repairUtf8("\xE2\x82"), "\uFFFD");
  EXPECT_EQ(tok::repairUtf8("\xE2\x82x"), "\uFFFDx");
  EXPECT_EQ(tok::repairUtf8("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD"); // a surrogate
  EXPECT_EQ(tok::repairUtf8("\xC0\xAF"), "\uFFFD\uFFFD");           // overlong
  EXPECT_EQ(tok::repairUtf8("\xF4\x90\x80\x80"), "\uFFFD\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(tok::repairUtf8("\xF0\x9F\x98 "), "\uFFFD ");
}

TEST(TokenizerByteLevel, Alphabet) {
  EXPECT_EQ(spelled(" "), "\u0120");
  EXPECT_EQ(spelled("\n"), "\u010A");
  EXPECT_EQ(spelled("a!~"), "a!~");
  std::string all, back;
  for (int b = 0; b < 256; ++b)
    all.push_back(static_cast<char>(b));
  ASSERT_TRUE(tok::byteLevelDecode(spelled(all), back));
  EXPECT_EQ(back, all);
  EXPECT_FALSE(tok::byteLevelDecode("\u2581", back));
}

TEST(TokenizerJson, ValuesAndLocations) {
  tok::JsonDocument doc;
  std::string error;
  ASSERT_TRUE(doc.parse("{\"a\": [1, -2.5e1, true, null],\n \"b\": \"x\\u00e9\\ud83d\\ude00\", "
                        "\"a\": 3}",
                        error))
      << error;
  tok::JsonValue root = doc.root();
  EXPECT_EQ(root.find("a").integer(), 3); // the last of a repeated key
  EXPECT_EQ(root.value(0).at(1).number(), -25.0);
  EXPECT_FALSE(root.value(0).at(1).isInteger());
  EXPECT_TRUE(root.value(0).at(2).boolean());
  EXPECT_EQ(root.find("b").string(), "x\u00e9\U0001F600");
  EXPECT_EQ(root.find("b").location(), "line 2, column 7");
  EXPECT_FALSE(doc.parse("{\"a\": 01}", error));
  EXPECT_EQ(error, "line 1, column 7: a number may not start with a leading zero");
  EXPECT_FALSE(doc.parse("\"tab\tin string\"", error));
  EXPECT_NE(error.find("control character 0x09"), std::string::npos) << error;
  EXPECT_FALSE(doc.parse("{} x", error));
  EXPECT_NE(error.find("unexpected text after the JSON value"), std::string::npos) << error;
}

TEST(TokenizerNfc, ComposesAndOrders) {
  auto nfc = [](std::string_view s) {
    std::string out;
    tok::appendNfc(s, out);
    return out;
  };
  EXPECT_EQ(nfc("plain"), "plain");
  EXPECT_EQ(nfc("e\u0301"), "\u00E9");
  EXPECT_EQ(nfc("\u1100\u1161\u11A8"), "\uAC01"); // Hangul jamo to a syllable
  EXPECT_EQ(nfc("a\u0302\u0323"), "\u1EAD");      // marks reordered, then composed
  EXPECT_EQ(nfc("\u212B"), "\u00C5");             // a singleton decomposition
  EXPECT_EQ(nfc("\u0344"), "\u0308\u0301");       // excluded from composition
  EXPECT_EQ(nfc("\u00E9\u0301"), "\u00E9\u0301"); // nothing to compose with
}

TEST(TokenizerRegex, OnigurumaClassesRewritten) {
  std::string s = tok::rewriteOnigurumaPattern("\\s+(?!\\S)");
  EXPECT_EQ(s.find("\\s"), std::string::npos) << s;
  EXPECT_NE(s.find("[^\\t-\\r "), std::string::npos) << s;
  std::string l = tok::rewriteOnigurumaPattern("[^\\s\\p{L}\\p{N}]+|\\pL");
  EXPECT_EQ(l.rfind("[^\\t-\\r ", 0), 0u) << l;
  EXPECT_NE(l.find("\\p{L}\\x{1C89}"), std::string::npos) << l;
  EXPECT_NE(l.find("|[\\p{L}\\x{1C89}"), std::string::npos) << l;
  EXPECT_EQ(tok::rewriteOnigurumaPattern("\\Q\\s\\E[]\\s]"),
            "\\Q\\s\\E[]" +
                std::string(
                    "\\t-\\r "
                    "\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"
                    "\\x{3000}]"));
  SKIP_WITHOUT_PCRE2();
  tok::Regex re;
  std::string error;
  ASSERT_TRUE(re.compile("\\s+", error)) << error;
  tok::RegexScratch scratch;
  size_t start = 0, stop = 0;
  // U+180E is no space for Oniguruma (nor for Hugging Face's tokenizers).
  EXPECT_FALSE(re.find("a\u180Eb", 0, start, stop, scratch));
  ASSERT_TRUE(re.find("a\u3000 b", 0, start, stop, scratch));
  EXPECT_EQ(start, 1u);
  EXPECT_EQ(stop, 5u);
}
