//===- RandomValues.h - Reproducible random inputs for kernel tests -*- C++ -*-===//
#ifndef TESSEL_TEST_UNIT_RANDOMVALUES_H
#define TESSEL_TEST_UNIT_RANDOMVALUES_H

#include <cstdint>
#include <random>
#include <vector>

namespace tessel::test {

/// `n` floats drawn uniformly from [lo, hi), the same for the same seed.
inline std::vector<float> randomFloats(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_RANDOMVALUES_H
