//===- Rng.h - Deterministic 64-bit random numbers --------------*- C++ -*-===//
//
// xoshiro256** (Blackman and Vigna) seeded through splitmix64: fast, 256 bits of state, and
// the same stream on every platform, so a seed names one run. Parameter init, data sampling
// and text sampling draw from it; its state goes into checkpoints so a resumed run continues
// the same stream.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_RNG_H
#define TESSEL_RUNTIME_CORE_RNG_H

#include <array>
#include <cstdint>

namespace tessel::rt {

/// A deterministic pseudo-random generator. Not for cryptography.
class Rng {
public:
  /// Seeds the four state words from successive splitmix64 outputs of `seed`.
  explicit Rng(uint64_t seed = 0);

  /// The next 64 random bits.
  uint64_t next();
  /// Uniform in [0, 1), with 53 random bits.
  double uniform();
  /// Uniform in [0, n), without modulo bias. Requires n > 0 (returns 0 for n == 0).
  uint64_t below(uint64_t n);
  /// A standard normal sample: Box-Muller in double, rounded to float. Uses two uniforms per
  /// sample and keeps no spare, so the state stays the four words below.
  float normal();

  /// The whole state, for checkpoints; setState(state()) continues the same stream.
  std::array<uint64_t, 4> state() const { return state_; }
  /// Restores a state from state(). An all-zero state (which xoshiro cannot leave) is
  /// replaced by the state of seed 0.
  void setState(const std::array<uint64_t, 4> &state);

  /// One splitmix64 step: advances `x` and returns its output.
  static uint64_t splitmix64(uint64_t &x);

private:
  std::array<uint64_t, 4> state_;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_CORE_RNG_H
