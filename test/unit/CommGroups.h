//===- CommGroups.h - Communicator groups for the collective tests -*- C++ -*-===//
#ifndef TESSEL_TEST_UNIT_COMMGROUPS_H
#define TESSEL_TEST_UNIT_COMMGROUPS_H

#include "runtime/comm/Communicator.h"

namespace tessel::test {

/// Rank `rank`'s view of the group of every rank 0 .. size - 1.
inline rt::CommGroup worldGroup(uint32_t size, uint32_t rank) {
  rt::CommGroup g;
  for (uint32_t r = 0; r < size; ++r)
    g.ranks.push_back(r);
  g.index = rank;
  return g;
}

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_COMMGROUPS_H
