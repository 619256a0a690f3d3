//===- DataTestSupport.h - Token files for the data tests -------*- C++ -*-===//
//
// What the Data*Test.cpp files share: the bytes of token files (bare uint16, llm.c's GPT-2 and
// Llama 3 files), counting tokens whose values give their positions, and the error of a refused
// open.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TEST_UNIT_DATATESTSUPPORT_H
#define TESSEL_TEST_UNIT_DATATESTSUPPORT_H

#include "runtime/host/Data.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::test {

/// uint16 little-endian bytes of `tokens`.
inline std::string tokenBytes(const std::vector<uint16_t> &tokens) {
  std::string bytes;
  for (uint16_t token : tokens) {
    bytes += static_cast<char>(token & 0xFF);
    bytes += static_cast<char>(token >> 8);
  }
  return bytes;
}

/// uint32 little-endian bytes of `words`.
inline std::string wordBytes(const std::vector<uint32_t> &words) {
  std::string bytes;
  for (uint32_t word : words)
    for (int i = 0; i < 4; ++i)
      bytes += static_cast<char>(word >> (8 * i));
  return bytes;
}

/// llm.c's 1024-byte header (magic, version, token count) without the tokens.
inline std::string llmcHeader(uint32_t magic, uint32_t version, int64_t count) {
  std::vector<uint32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = static_cast<uint32_t>(count);
  return wordBytes(header);
}

/// llm.c's GPT-2 token file: the header followed by uint16 tokens.
inline std::string llmcBytes(const std::vector<uint16_t> &tokens, uint32_t version = 1,
                             int64_t claimed = -1) {
  return llmcHeader(20240520, version, claimed < 0 ? int64_t(tokens.size()) : claimed) +
         tokenBytes(tokens);
}

/// llm.c's Llama 3 token file (magic 20240801, version 7): uint32 tokens.
inline std::string llama3Bytes(const std::vector<uint32_t> &tokens, uint32_t version = 7) {
  return llmcHeader(20240801, version, int64_t(tokens.size())) + wordBytes(tokens);
}

inline std::vector<uint32_t> widened(const std::vector<uint16_t> &tokens) {
  return std::vector<uint32_t>(tokens.begin(), tokens.end());
}

/// Tokens 0, 1, 2, ...: a window's values give its position.
inline std::vector<uint16_t> counting(size_t n) {
  std::vector<uint16_t> tokens(n);
  for (size_t i = 0; i < n; ++i)
    tokens[i] = static_cast<uint16_t>(i);
  return tokens;
}

inline std::string openError(const std::string &path, rt::Tokenizer kind, int64_t vocab,
                             double evalFraction, int64_t window) {
  std::string error;
  auto data = rt::TokenData::open(path, kind, vocab, evalFraction, window, error);
  EXPECT_FALSE(data) << path;
  EXPECT_FALSE(error.empty());
  return error;
}

inline std::vector<uint32_t> asTokens(const std::string &text) {
  return std::vector<uint32_t>(reinterpret_cast<const unsigned char *>(text.data()),
                               reinterpret_cast<const unsigned char *>(text.data()) + text.size());
}

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_DATATESTSUPPORT_H
