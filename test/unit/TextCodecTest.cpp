//===- TextCodecTest.cpp - Tests of generation's prompts and sampling -----===//

#include "runtime/core/Rng.h"
#include "runtime/host/TextCodec.h"
#include "test/unit/ScratchDir.h"

#include <gtest/gtest.h>

#include <map>

using namespace tessel::rt;
using tessel::test::ScratchDir;
using tessel::test::writeFile;

TEST(Sampling, TopPKeepsTheSmallestNucleus) {
  // Probabilities about 0.64, 0.24, 0.09, 0.03: top-p 0.5 keeps the first only, 0.8 the first
  // two, and with top-k 1 only the first ever comes out.
  const float logits[4] = {3.0f, 2.0f, 1.0f, 0.0f};
  std::vector<float> probs;
  Rng rng(7);
  std::map<int32_t, int> seen;
  for (int i = 0; i < 2000; ++i)
    ++seen[sampleToken(logits, 4, 1.0, 0, 0.5, rng, probs)];
  EXPECT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen.begin()->first, 0);
  seen.clear();
  for (int i = 0; i < 2000; ++i)
    ++seen[sampleToken(logits, 4, 1.0, 0, 0.8, rng, probs)];
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[0], seen[1]);
  seen.clear();
  for (int i = 0; i < 2000; ++i)
    ++seen[sampleToken(logits, 4, 1.0, 0, 1.0, rng, probs)];
  EXPECT_EQ(seen.size(), 4u);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(sampleToken(logits, 4, 1.0, 1, 1.0, rng, probs), 0);
}

TEST(TextCodec, BytesAndIds) {
  std::string error;
  auto bytes = TextCodec::create("byte", "", 256, error);
  ASSERT_TRUE(bytes) << error;
  std::vector<int32_t> ids;
  ASSERT_TRUE(bytes->encodePrompt("hi", true, ids, error));
  EXPECT_EQ(ids, (std::vector<int32_t>{'h', 'i'}));
  EXPECT_EQ(bytes->append('!'), "!");
  for (int32_t id : {0, 10, 255})
    EXPECT_FALSE(bytes->endsSample(id));
  auto tokens = TextCodec::create("tokens", "", 50257, error);
  ASSERT_TRUE(tokens->encodePrompt("15496 11", true, ids, error)) << error;
  EXPECT_EQ(ids, (std::vector<int32_t>{15496, 11}));
  EXPECT_EQ(tokens->echo("15496 11", true, ids), "15496 11 ");
  EXPECT_FALSE(tokens->encodePrompt("hello", true, ids, error));
  EXPECT_NE(error.find("its prompt is token ids"), std::string::npos) << error;
}

TEST(TextCodec, TokenizerPrintsWholeCharactersAndKnowsItsEnd) {
  // Byte-level BPE over bytes alone (ids 0-255 spell bytes in GPT-2's alphabet), with an EOS.
  ScratchDir dir;
  std::string vocab = "{";
  auto spell = [](int b) -> std::string {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    int code = b;
    if (!printable) {
      int k = 0;
      for (int c = 0; c < b; ++c)
        k += !((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE));
      code = 256 + k;
    }
    std::string utf8;
    if (code < 0x80)
      utf8 += static_cast<char>(code);
    else {
      utf8 += static_cast<char>(0xC0 | (code >> 6));
      utf8 += static_cast<char>(0x80 | (code & 0x3F));
    }
    if (utf8 == "\"" || utf8 == "\\")
      utf8 = "\\" + utf8;
    return utf8;
  };
  for (int b = 0; b < 256; ++b)
    vocab += (b ? ", \"" : "\"") + spell(b) + "\": " + std::to_string(b);
  vocab += "}";
  writeFile(dir.path() + "/tokenizer.json",
            R"({"version": "1.0", "added_tokens": [{"id": 256, "content": "<|endoftext|>",
                "single_word": false, "lstrip": false, "rstrip": false, "normalized": false,
                "special": true}], "normalizer": null,
                "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false,
                                  "trim_offsets": true, "use_regex": true},
                "post_processor": null, "decoder": {"type": "ByteLevel"},
                "model": {"type": "BPE", "vocab": )" +
                vocab + R"(, "merges": []}})");
  std::string error;
  auto codec = TextCodec::create("tokens", dir.path(), 300, error);
  ASSERT_TRUE(codec) << error;
  EXPECT_TRUE(codec->endsSample(256));
  EXPECT_FALSE(codec->endsSample(255));
  std::vector<int32_t> ids;
  ASSERT_TRUE(codec->encodePrompt("hé", true, ids, error)) << error;
  EXPECT_EQ(ids, (std::vector<int32_t>{'h', 0xC3, 0xA9}));
  // "é" is two bytes: nothing is printed until its second arrives.
  EXPECT_EQ(codec->append('a'), "a");
  EXPECT_EQ(codec->append(0xC3), "");
  EXPECT_EQ(codec->append(0xA9), "\xC3\xA9");
  EXPECT_FALSE(TextCodec::create("tokens", dir.path(), 200, error));
  EXPECT_NE(error.find("more than the model's 200"), std::string::npos) << error;

  // Without a chat template, --chat says where one comes from.
  EXPECT_FALSE(codec->encodeChat("hi", "", "", ids, error));
  EXPECT_NE(error.find("the tokenizer has no chat template"), std::string::npos) << error;
  // A chat: the template's rendering of a system and a user turn with the generation prompt,
  // encoded as it is (the template writes the special tokens); generation_config.json's
  // eos_token_id ends a sample too.
  writeFile(dir.path() + "/tokenizer_config.json",
            R"({"eos_token": "<|endoftext|>", "chat_template": "{% for m in messages %}<{{ m.role }}>{{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"})");
  writeFile(dir.path() + "/generation_config.json", R"({"eos_token_id": [256, 10]})");
  codec = TextCodec::create("tokens", dir.path(), 300, error);
  ASSERT_TRUE(codec) << error;
  ASSERT_TRUE(codec->encodeChat("hi", "be", "", ids, error)) << error;
  std::vector<int32_t> want;
  for (unsigned char c : std::string("<system>be"))
    want.push_back(c);
  want.push_back(256);
  for (unsigned char c : std::string("<user>hi"))
    want.push_back(c);
  want.push_back(256);
  for (unsigned char c : std::string("<assistant>"))
    want.push_back(c);
  EXPECT_EQ(ids, want);
  EXPECT_TRUE(codec->endsSample(256));
  EXPECT_TRUE(codec->endsSample(10));
  EXPECT_FALSE(codec->endsSample(11));
  // A built-in template by name, and one that does not exist.
  ASSERT_TRUE(codec->encodeChat("hi", "", "chatml", ids, error)) << error;
  EXPECT_FALSE(codec->encodeChat("hi", "", "no-such-template", ids, error));
  EXPECT_NE(error.find("neither a file nor a built-in template"), std::string::npos) << error;
  // A generation_config.json whose eos_token_id is no id is refused.
  writeFile(dir.path() + "/generation_config.json", R"({"eos_token_id": "x"})");
  EXPECT_FALSE(TextCodec::create("tokens", dir.path(), 300, error));
  EXPECT_NE(error.find("generation_config.json: eos_token_id"), std::string::npos) << error;
}
