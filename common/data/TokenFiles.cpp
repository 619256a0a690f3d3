//===- TokenFiles.cpp - The token files Tessel reads and writes -----------===//

#include "common/data/TokenFiles.h"

#include <cstring>

namespace tessel::tokenfiles {

uint32_t readLe32(const unsigned char *b) {
  return static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
         static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24;
}

uint64_t readLe64(const unsigned char *b) {
  return static_cast<uint64_t>(readLe32(b)) | static_cast<uint64_t>(readLe32(b + 4)) << 32;
}

void writeLe32(uint32_t value, unsigned char *b) {
  for (int i = 0; i < 4; ++i)
    b[i] = static_cast<unsigned char>(value >> (8 * i));
}

void writeLe64(uint64_t value, unsigned char *b) {
  writeLe32(static_cast<uint32_t>(value), b);
  writeLe32(static_cast<uint32_t>(value >> 32), b + 4);
}

ExampleLayout exampleLayout(int width, uint32_t padId, uint64_t examples, uint64_t tokens) {
  ExampleLayout l;
  l.width = width;
  l.padId = padId;
  l.examples = examples;
  l.tokens = tokens;
  l.startsOffset = kHeaderBytes;
  l.tokensOffset = l.startsOffset + static_cast<size_t>(examples + 1) * 8;
  l.maskOffset = l.tokensOffset + static_cast<size_t>(tokens) * static_cast<size_t>(width);
  l.fileBytes = l.maskOffset + static_cast<size_t>(tokens);
  return l;
}

void writeExampleHeader(const ExampleLayout &l, unsigned char *header) {
  std::memset(header, 0, kHeaderBytes);
  writeLe32(kExampleMagic, header);
  writeLe32(kExampleVersion, header + 4);
  writeLe32(static_cast<uint32_t>(l.width), header + 8);
  writeLe32(l.padId, header + 12);
  writeLe64(l.examples, header + 16);
  writeLe64(l.tokens, header + 24);
}

bool readExampleHeader(const unsigned char *data, size_t size, ExampleLayout &layout,
                       std::string &error) {
  if (size < kHeaderBytes) {
    error = "starts like a Tessel example file but its " + std::to_string(size) +
            " bytes are too few for the 1024-byte header";
    return false;
  }
  const uint32_t version = readLe32(data + 4), width = readLe32(data + 8);
  if (version != kExampleVersion) {
    error = "is a Tessel example file of version " + std::to_string(version) +
            "; this build reads version " + std::to_string(kExampleVersion);
    return false;
  }
  if (width != 2 && width != 4) {
    error = "is a Tessel example file whose header gives tokens of " + std::to_string(width) +
            " bytes; they are 2 or 4";
    return false;
  }
  const uint64_t examples = readLe64(data + 16), tokens = readLe64(data + 24);
  // Bounds before arithmetic: no count whose layout overflows passes.
  if (examples > size / 8 || tokens > size) {
    error = "is a Tessel example file whose header gives " + std::to_string(examples) +
            " examples of " + std::to_string(tokens) + " tokens, more than its " +
            std::to_string(size) + " bytes hold";
    return false;
  }
  layout = exampleLayout(static_cast<int>(width), readLe32(data + 12), examples, tokens);
  if (layout.fileBytes != size) {
    error = "is a Tessel example file whose header gives " + std::to_string(examples) +
            " examples of " + std::to_string(tokens) + " tokens (" +
            std::to_string(layout.fileBytes) + " bytes) but it has " + std::to_string(size) +
            " bytes";
    return false;
  }
  return true;
}

} // namespace tessel::tokenfiles
