//===- Rng.cpp - Deterministic 64-bit random numbers ----------------------===//

#include "runtime/core/Rng.h"

#include <cmath>

namespace tessel::rt {

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t Rng::splitmix64(uint64_t &x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Rng::Rng(uint64_t seed) {
  for (uint64_t &word : state_)
    word = splitmix64(seed);
}

void Rng::setState(const std::array<uint64_t, 4> &state) {
  if (state[0] == 0 && state[1] == 0 && state[2] == 0 && state[3] == 0) {
    *this = Rng(0);
    return;
  }
  state_ = state;
}

uint64_t Rng::next() {
  uint64_t *s = state_.data();
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

uint64_t Rng::below(uint64_t n) {
  if (n == 0)
    return 0;
  // Lemire's multiply-and-reject: the high word of x * n is uniform once the low word avoids
  // the 2^64 mod n values that would favour some results.
  unsigned __int128 product = static_cast<unsigned __int128>(next()) * n;
  uint64_t low = static_cast<uint64_t>(product);
  if (low < n) {
    uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      product = static_cast<unsigned __int128>(next()) * n;
      low = static_cast<uint64_t>(product);
    }
  }
  return static_cast<uint64_t>(product >> 64);
}

float Rng::normal() {
  // 1 - uniform() lies in (0, 1], so the logarithm is finite.
  double u1 = 1.0 - uniform();
  double u2 = uniform();
  double radius = std::sqrt(-2.0 * std::log(u1));
  return static_cast<float>(radius * std::cos(2.0 * M_PI * u2));
}

} // namespace tessel::rt
