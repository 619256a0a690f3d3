//===- HfTokenizerReader.h - The reader of tokenizer.json files -*- C++ -*-===//
//
// The reader that builds an HfTokenizer's steps from a tokenizer.json, a friend of the
// tokenizer, shared by the files that define it: the whole file and the checks of keys' types
// (HfTokenizerJson.cpp), the normalizer, pre-tokenizer and decoder steps
// (HfTokenizerJsonSteps.cpp), and the model's vocabulary and merges, the added tokens and the
// post-processor's ids (HfTokenizerJsonVocabulary.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_HFTOKENIZERREADER_H
#define TESSEL_COMMON_TOKENIZER_HFTOKENIZERREADER_H

#include "common/tokenizer/HfTokenizer.h"
#include "common/tokenizer/JsonReader.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::tok {

class HfTokenizerReader {
public:
  HfTokenizerReader(const std::string &file, std::string &error) : file_(file), error_(error) {}

  std::unique_ptr<HfTokenizer> read(std::string_view text);

private:
  const std::string &file_;
  std::string &error_;

  // ---- The file, and the checks of keys (HfTokenizerJson.cpp) ----

  /// `s` quoted for a message, cut after 80 bytes.
  static std::string quoted(std::string_view s);
  bool fail(JsonValue at, std::string_view path, const std::string &what);
  static std::string join(std::string_view path, std::string_view key);
  static std::string index(std::string_view path, size_t i);
  bool optionalString(JsonValue object, std::string_view key, std::string_view path,
                      std::optional<std::string> &out);
  bool requiredString(JsonValue object, std::string_view key, std::string_view path,
                      std::string &out);
  bool flag(JsonValue object, std::string_view key, std::string_view path, bool &out);
  bool unsignedValue(JsonValue v, std::string_view path, uint32_t &out);
  bool typeOf(JsonValue v, std::string_view path, std::string &type);

  // ---- Normalizer, pre-tokenizer and decoder steps (HfTokenizerJsonSteps.cpp) ----

  bool character(JsonValue object, std::string_view key, std::string_view path, std::string &out);
  bool readPattern(JsonValue object, std::string_view path, Pattern &out);
  bool readNormalizer(JsonValue v, const std::string &path, HfTokenizer &t);
  bool readPreTokenizer(JsonValue v, const std::string &path, HfTokenizer &t);
  bool readPrependScheme(JsonValue v, std::string_view path, PrependScheme &scheme);
  bool checkByteLevelLast(JsonValue root, HfTokenizer &t);
  bool readDecoders(JsonValue v, const std::string &path, HfTokenizer &t);

  // ---- The model, added tokens and post-processor (HfTokenizerJsonVocabulary.cpp) ----

  bool readModel(JsonValue v, JsonValue root, HfTokenizer &t);
  bool readAddedTokens(JsonValue list, HfTokenizer &t);
  bool finishAddedTokens(JsonValue list, HfTokenizer &t);
  bool readPostProcessor(JsonValue v, const std::string &path, std::vector<uint32_t> &prefix,
                         std::vector<uint32_t> &suffix);
  bool tokenPair(JsonValue v, std::string_view key, std::string_view path, uint32_t &id);
  bool readTemplate(JsonValue v, const std::string &path, std::vector<uint32_t> &prefix,
                    std::vector<uint32_t> &suffix);
  bool checkProcessorId(uint32_t id, const HfTokenizer &t, std::string_view path);
};

} // namespace tessel::tok

#endif // TESSEL_COMMON_TOKENIZER_HFTOKENIZERREADER_H
