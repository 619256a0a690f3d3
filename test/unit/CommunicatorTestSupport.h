//===- CommunicatorTestSupport.h - Values for collective tests --*- C++ -*-===//
//
// What the Communicator*Test.cpp files share: random values for a collective's buffers, and
// bitwise equality of the results.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TEST_UNIT_COMMUNICATORTESTSUPPORT_H
#define TESSEL_TEST_UNIT_COMMUNICATORTESTSUPPORT_H

#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tessel::test {

using Floats = std::vector<float>;

/// Values for a collective's buffers, the same for the same seed.
inline Floats randomFloats(size_t n, uint32_t seed) {
  return tessel::test::randomFloats(n, -3.0f, 3.0f, seed);
}

/// Bitwise equality of float vectors, naming the first difference.
inline void expectSameBits(const Floats &got, const Floats &want, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
        << what << ": element " << i << " is " << got[i] << ", want " << want[i];
}

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_COMMUNICATORTESTSUPPORT_H
