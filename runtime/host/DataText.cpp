//===- DataText.cpp - Tokens to and from prompt text ----------------------===//
//
// The text of the byte tokenizer (each byte one token, and back) and the prompts of a
// pre-tokenized model, written as decimal token ids: what TextCodec reads and prints for
// --generate.
//
//===----------------------------------------------------------------------===//

#include "runtime/host/Data.h"

namespace tessel::rt {

std::string decodeBytes(const int32_t *tokens, int64_t count) {
  std::string text;
  text.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    if (tokens[i] >= 0 && tokens[i] < 256)
      text += static_cast<char>(tokens[i]);
    else
      text += "\xEF\xBF\xBD";
  }
  return text;
}

bool parseTokenIds(std::string_view text, std::vector<int32_t> &ids, std::string &error) {
  ids.clear();
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == ' ' || c == ',' || c == '\t' || c == '\n') {
      ++i;
      continue;
    }
    if (c < '0' || c > '9') {
      error = "'" + std::string(text) + "' is not a list of token ids: '" + std::string(1, c) +
              "' at offset " + std::to_string(i) + " (write ids as numbers, e.g. \"15496 11 995\")";
      return false;
    }
    int64_t value = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      value = value * 10 + (text[i] - '0');
      if (value > 65535) {
        error = "token id " + std::string(text.substr(i - (i > 5 ? 5 : i), 6)) +
                "... is larger than a uint16 token file can hold (65535)";
        return false;
      }
    }
    ids.push_back(static_cast<int32_t>(value));
  }
  if (ids.empty()) {
    error = "the prompt holds no token ids (write them as numbers, e.g. \"15496 11 995\")";
    return false;
  }
  return true;
}

std::vector<int32_t> encodeBytes(std::string_view text) {
  std::vector<int32_t> tokens;
  tokens.reserve(text.size());
  for (char c : text)
    tokens.push_back(static_cast<unsigned char>(c));
  return tokens;
}

} // namespace tessel::rt
