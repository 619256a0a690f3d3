//===- ExecutorState.h - Element access to a rank's state in tests -*- C++ -*-===//
//
// Tests set and read single elements of a rank's state; the executor offers only whole-tensor
// copies to and from its device, so these copy the tensor each time.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TEST_UNIT_EXECUTORSTATE_H
#define TESSEL_TEST_UNIT_EXECUTORSTATE_H

#include "runtime/core/Executor.h"

#include <vector>

namespace tessel::rt {

/// Element `e` of state tensor `i` of the rank (NaN where it does not hold the tensor).
inline float stateAt(const Executor &ex, size_t i, size_t e) {
  std::vector<float> v(ex.plan().state[i].bytes() / 4, __builtin_nanf(""));
  ex.readState(i, v.data());
  return v.at(e);
}

/// Sets element `e` of state tensor `i` of the rank.
inline void setStateAt(Executor &ex, size_t i, size_t e, float x) {
  std::vector<float> v(ex.plan().state[i].bytes() / 4);
  ex.readState(i, v.data());
  v.at(e) = x;
  ex.writeState(i, v.data());
}

} // namespace tessel::rt

#endif // TESSEL_TEST_UNIT_EXECUTORSTATE_H
