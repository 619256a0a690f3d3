//===- Checksum.h - The checksum of plans and checkpoints -------*- C++ -*-===//
//
// XXH3 (64 bits) checks plans and checkpoints: about 30 GB/s on one core, so a checkpoint's
// bytes cost a fraction of their write. FNV-1a, byte at a time (about 1 GB/s), checked the
// formats before it and still reads them; it also seeds what must never change (parameter
// initialisation, checkpoint fingerprints). Both detect corruption, not tampering.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_SUPPORT_CHECKSUM_H
#define TESSEL_COMMON_SUPPORT_CHECKSUM_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#define XXH_INLINE_ALL // xxHash as a header: nothing to link.
#include <xxhash.h>

namespace tessel {

/// XXH3, 64 bits, seed 0.
inline uint64_t xxh3_64(const void *data, size_t size) { return XXH3_64bits(data, size); }

/// FNV-1a, 64 bits.
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

#endif // TESSEL_COMMON_SUPPORT_CHECKSUM_H
