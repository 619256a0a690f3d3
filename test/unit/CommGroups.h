//===- CommGroups.h - Groups and worlds for the collective tests -*- C++ -*-===//
#ifndef TESSEL_TEST_UNIT_COMMGROUPS_H
#define TESSEL_TEST_UNIT_COMMGROUPS_H

#include "runtime/comm/Communicator.h"

#include <functional>
#include <thread>
#include <vector>

namespace tessel::test {

/// Rank `rank`'s view of the group of every rank 0 .. size - 1.
inline rt::CommGroup worldGroup(uint32_t size, uint32_t rank) {
  rt::CommGroup g;
  for (uint32_t r = 0; r < size; ++r)
    g.ranks.push_back(r);
  g.index = rank;
  return g;
}

/// Runs body(rank, comm) on one thread per rank of a fresh world of LocalCommunicators and
/// joins them.
inline void onRanks(uint32_t size, const std::function<void(uint32_t, rt::Communicator &)> &body) {
  auto comms = rt::LocalCommunicator::createWorld(size);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < size; ++r)
    threads.emplace_back([&, r] { body(r, *comms[r]); });
  for (std::thread &t : threads)
    t.join();
}

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_COMMGROUPS_H
