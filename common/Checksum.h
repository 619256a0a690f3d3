//===- Checksum.h - The checksum of plans and checkpoints -------*- C++ -*-===//
#ifndef TESSEL_COMMON_CHECKSUM_H
#define TESSEL_COMMON_CHECKSUM_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tessel {

/// FNV-1a, 64 bits: fast, and enough to detect corruption (not tampering).
inline uint64_t fnv1a64(const void *data, size_t size) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  uint64_t h = 14695981039346656037ull; // The standard offset basis.
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

inline std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

} // namespace tessel

#endif // TESSEL_COMMON_CHECKSUM_H
