//===- ByteLevel.h - GPT-2's printable spelling of bytes --------*- C++ -*-===//
//
// Byte-level vocabularies spell each byte as a printable character so that tokens are text:
// the bytes of '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves (as code points), and
// the other 68 bytes, in order, for U+0100 onward (so a space is 'Ġ', U+0120, and a newline
// 'Ċ', U+010A). This is GPT-2's bytes_to_unicode, which every byte-level tokenizer shares.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_BYTELEVEL_H
#define TESSEL_COMMON_TOKENIZER_BYTELEVEL_H

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessel::tok {

/// The character that spells byte `b`.
uint32_t byteLevelChar(uint8_t b);

/// The byte that character `cp` spells, or -1 when `cp` is not in the alphabet.
int byteLevelByte(uint32_t cp);

/// The bytes that byte-level text `spelled` stands for, in `bytes`; false (with `bytes`
/// unspecified) when a character of it is outside the alphabet. `spelled` is valid UTF-8.
bool byteLevelDecode(std::string_view spelled, std::string &bytes);

/// Appends the byte-level spelling of `bytes` to `out`.
void byteLevelEncode(std::string_view bytes, std::string &out);

} // namespace tessel::tok

#endif // TESSEL_COMMON_TOKENIZER_BYTELEVEL_H
