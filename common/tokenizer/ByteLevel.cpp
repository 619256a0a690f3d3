//===- ByteLevel.cpp - GPT-2's printable spelling of bytes ----------------===//

#include "common/tokenizer/ByteLevel.h"

#include "common/tokenizer/Utf8.h"

namespace tessel::tok {

namespace {

struct Alphabet {
  std::array<uint32_t, 256> charOfByte{};
  std::array<int16_t, 512> byteOfChar{}; // every spelling is below U+0200

  Alphabet() {
    byteOfChar.fill(-1);
    auto printable = [](unsigned b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next = 256;
    for (unsigned b = 0; b < 256; ++b)
      charOfByte[b] = printable(b) ? b : next++;
    for (unsigned b = 0; b < 256; ++b)
      byteOfChar[charOfByte[b]] = static_cast<int16_t>(b);
  }
};

const Alphabet &alphabet() {
  static const Alphabet table;
  return table;
}

} // namespace

uint32_t byteLevelChar(uint8_t b) { return alphabet().charOfByte[b]; }

int byteLevelByte(uint32_t cp) { return cp < 512 ? alphabet().byteOfChar[cp] : -1; }

bool byteLevelDecode(std::string_view spelled, std::string &bytes) {
  bytes.clear();
  for (size_t i = 0; i < spelled.size();) {
    size_t length = 0;
    int b = byteLevelByte(decodeUtf8(spelled, i, length));
    if (b < 0)
      return false;
    bytes.push_back(static_cast<char>(b));
    i += length;
  }
  return true;
}

void byteLevelEncode(std::string_view bytes, std::string &out) {
  for (char c : bytes)
    appendUtf8(byteLevelChar(static_cast<uint8_t>(c)), out);
}

} // namespace tessel::tok
