//===- Utf8.h - UTF-8 for the tokenizers ------------------------*- C++ -*-===//
//
// Tokenizers work on valid UTF-8. Hugging Face's tokenizers take Rust strings (their Python and
// Node bindings decode bytes to text first), so a file holding invalid UTF-8 reaches them with
// each maximal invalid subpart replaced by U+FFFD, the rule of Unicode's chapter 3 ("U+FFFD
// substitution of maximal subparts") that Rust's String::from_utf8_lossy, Python's
// errors="replace" and the WHATWG decoder of JavaScript all follow. Tessel repairs its input
// the same way, so that it tokenizes a file as the reference does.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_UTF8_H
#define TESSEL_COMMON_TOKENIZER_UTF8_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessel::tok {

/// The length of the longest prefix of `text` that is valid UTF-8.
size_t validUtf8Prefix(std::string_view text);

inline bool isValidUtf8(std::string_view text) { return validUtf8Prefix(text) == text.size(); }

/// Appends `text` to `out` with each maximal invalid subpart replaced by U+FFFD.
void appendRepairedUtf8(std::string_view text, std::string &out);

/// `text` with each maximal invalid subpart replaced by U+FFFD.
std::string repairUtf8(std::string_view text);

/// The length of the well-formed UTF-8 sequence at text[i]; where there is none, minus the
/// length of the maximal invalid subpart there (at least 1).
long utf8WellFormedLength(std::string_view text, size_t i);

/// Appends code point `cp` (below 0x110000, not a surrogate) to `out` as UTF-8.
void appendUtf8(uint32_t cp, std::string &out);

/// The code point that starts at text[i] of valid UTF-8 text, and its length in `length`.
inline uint32_t decodeUtf8(std::string_view text, size_t i, size_t &length) {
  const auto b = [&](size_t k) {
    return static_cast<uint32_t>(static_cast<unsigned char>(text[k]));
  };
  uint32_t b0 = b(i);
  if (b0 < 0x80) {
    length = 1;
    return b0;
  }
  if (b0 < 0xE0) {
    length = 2;
    return ((b0 & 0x1F) << 6) | (b(i + 1) & 0x3F);
  }
  if (b0 < 0xF0) {
    length = 3;
    return ((b0 & 0x0F) << 12) | ((b(i + 1) & 0x3F) << 6) | (b(i + 2) & 0x3F);
  }
  length = 4;
  return ((b0 & 0x07) << 18) | ((b(i + 1) & 0x3F) << 12) | ((b(i + 2) & 0x3F) << 6) |
         (b(i + 3) & 0x3F);
}

/// The length of the UTF-8 sequence a valid lead byte starts.
inline size_t utf8SequenceLength(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

/// Whether `cp` has Unicode's White_Space property (Rust's char::is_whitespace, the `\s` of
/// Rust's regex crate and of Oniguruma).
inline bool isUnicodeWhiteSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

} // namespace tessel::tok

#endif // TESSEL_COMMON_TOKENIZER_UTF8_H
