//===- HostMemory.cpp - What a plan asks of this machine's memory ---------===//

#include "runtime/HostMemory.h"

#include <algorithm>
#include <cstdio>
#include <unistd.h>

namespace tessel::rt {

uint64_t physicalMemoryBytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && pageSize > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize)
                                   : 0;
}

std::string formatBytes(uint64_t bytes) {
  static const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024)
    return std::to_string(bytes) + " bytes";
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

uint64_t rankAllocationBytes(const planfile::Plan &plan, uint32_t rank) {
  uint64_t arena = 0, state = 0;
  for (const planfile::Program &p : plan.programs)
    if (p.rank == rank)
      arena = std::max(arena, p.arenaBytes);
  const uint32_t stage = plan.pipelineStage(rank);
  for (const planfile::StateTensor &t : plan.state)
    if (t.heldBy(stage))
      state += t.bytes();
  return arena + state;
}

bool fitsInMemory(uint64_t bytes, const std::string &what, std::string &error) {
  uint64_t physical = physicalMemoryBytes();
  if (physical == 0 || bytes <= physical)
    return true;
  error = what + " needs " + formatBytes(bytes) + " for its state and arena; this machine has " +
          formatBytes(physical) + " of memory";
  return false;
}

} // namespace tessel::rt
