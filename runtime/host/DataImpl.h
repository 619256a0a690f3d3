//===- DataImpl.h - How the token data reads a token ------------*- C++ -*-===//
//
// TokenData is defined in four files by concern: Data.cpp opens the files and splits their
// tokens, DataWindows.cpp reads windows and batches of a stream, DataExamples.cpp indexes
// example files and reads their rows, and DataText.cpp turns tokens into text and back. Reading
// one token of a mapped file is what the first three share.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_DATAIMPL_H
#define TESSEL_RUNTIME_HOST_DATAIMPL_H

#include "common/data/TokenFiles.h"

#include <cstdint>

namespace tessel::rt::detail {

/// Token `i` of `tokens`, `width` bytes each (1, or 2 or 4 little-endian).
inline uint32_t tokenAt(const unsigned char *tokens, int64_t i, int width) {
  const unsigned char *p = tokens + i * width;
  return width == 1   ? p[0]
         : width == 2 ? static_cast<uint32_t>(p[0] | p[1] << 8)
                      : tokenfiles::readLe32(p);
}

} // namespace tessel::rt::detail

#endif // TESSEL_RUNTIME_HOST_DATAIMPL_H
