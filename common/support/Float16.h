//===- Float16.h - bf16 and f16 to and from f32 -----------------*- C++ -*-===//
//
// The 16-bit storage types of mixed precision, one element at a time. Narrowing rounds to the
// nearest value, ties to even (IEEE 754's default, as CUDA's __float2bfloat16 and
// __float2half do), keeps infinities, overflows to infinity, keeps subnormals (bf16 has f32's
// exponent range; f16's subnormals are rounded like any other value) and keeps NaN a NaN
// (quiet, with the sign and the payload's high bits). Widening is exact.
//
// Plain C++ with no dependencies: the CPU kernels convert buffers with it, the executor
// reads 16-bit outputs with it, and tests check both against each other.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_SUPPORT_FLOAT16_H
#define TESSEL_COMMON_SUPPORT_FLOAT16_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tessel {

inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float floatOfBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// bf16 is f32's upper half: widening appends sixteen zero bits.
inline float bf16ToFloat(uint16_t h) { return floatOfBits(static_cast<uint32_t>(h) << 16); }

inline uint16_t floatToBf16(float f) {
  uint32_t u = bitsOf(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: truncate and set the quiet bit
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  // Adding 0x7fff rounds the dropped half up when it is above one half; the kept half's lowest
  // bit breaks the tie towards even. A carry into the exponent is the correct rounding (up to
  // infinity past bf16's largest finite value).
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = h & 0x7c00u, mantissa = h & 0x03ffu;
  if (exponent == 0) { // zero or subnormal: mantissa × 2^-24, exact in f32
    float v = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -v : v;
  }
  if (exponent == 0x7c00u) // infinity or NaN
    return floatOfBits(sign | 0x7f800000u | (mantissa << 13));
  // Rebias the exponent from 15 to 127.
  return floatOfBits(sign | ((static_cast<uint32_t>(h & 0x7fffu) + 0x1c000u) << 13));
}

inline uint16_t floatToHalf(float f) {
  uint32_t u = bitsOf(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) // NaN
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x03ffu));
  if (a >= 0x47800000u) // 2^16 and above (and infinity): infinity
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (a < 0x38800000u) {
    // Below f16's smallest normal (2^-14): a multiple of 2^-24. Scaling by 2^24 is exact, and
    // nearbyint rounds to nearest even; 1024 is the smallest normal, whose bits it also is.
    float scaled = floatOfBits(a) * 0x1p24f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  // Normal: rebias the exponent, round the 13 dropped bits to nearest even (a carry into the
  // exponent is the correct rounding, up to infinity past 65504).
  uint32_t rounded = a + 0x0fffu + ((a >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

} // namespace tessel

#endif // TESSEL_COMMON_SUPPORT_FLOAT16_H
