//===- HostMemory.cpp - What a plan asks of this machine's memory ---------===//

#include "runtime/core/HostMemory.h"

#include "runtime/device/Device.h"

#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <sys/resource.h>
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
  const uint32_t stage = plan.pipelineStage(rank);
  for (const planfile::Program &p : plan.programs)
    if (p.stage == stage)
      arena = std::max(arena, p.arenaBytes);
  for (const planfile::StateTensor &t : plan.state)
    if (t.heldBy(stage))
      state += t.bytes();
  return arena + state;
}

bool fitsInMemory(uint64_t bytes, const std::string &what, std::string &error) {
  uint64_t physical = physicalMemoryBytes();
  if (physical == 0 || bytes <= physical)
    return true;
  error = "running " + what + " needs " + formatBytes(bytes) +
          " for state and arenas; this machine has " +
          formatBytes(physical) + " of memory";
  return false;
}

bool fitsInMemoryOf(const Device &device, uint64_t bytes, const std::string &what,
                    std::string &error) {
  uint64_t used = 0, total = 0;
  if (!device.memoryInUse(used, total))
    return fitsInMemory(bytes, what, error);
  const uint64_t free = total > used ? total - used : 0;
  if (bytes <= free)
    return true;
  error = "running " + what + " needs " + formatBytes(bytes) + " for state and arenas; " +
          device.name() + " has " + formatBytes(free) + " free of " + formatBytes(total);
  return false;
}

/// Field `field` (0: the mapped size, 1: the resident set) of /proc/self/statm, in bytes, read
/// without allocating: under a tight address-space limit a buffered stream could fail to.
/// False when it cannot be read.
static bool statmBytes(int field, uint64_t &bytes) {
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  char text[128];
  ssize_t got = -1;
  if (fd >= 0) {
    do
      got = ::read(fd, text, sizeof text - 1);
    while (got < 0 && errno == EINTR);
    ::close(fd);
  }
  if (got <= 0 || text[0] < '0' || text[0] > '9')
    return false;
  text[got] = '\0';
  char *at = text;
  uint64_t pages = std::strtoull(at, &at, 10);
  for (int f = 0; f < field; ++f)
    pages = std::strtoull(at, &at, 10);
  bytes = pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return true;
}

/// This process's mapped address space now. Unreadable: the whole limit (refuse), since a
/// measure of 0 would pass a run the limit cannot hold.
static uint64_t addressSpaceInUse(uint64_t limit) {
  uint64_t bytes = 0;
  return statmBytes(0, bytes) ? bytes : limit;
}

uint64_t residentBytes() {
  uint64_t bytes = 0;
  return statmBytes(1, bytes) ? bytes : 0;
}

bool fitsInAddressSpace(uint64_t bytes, int computeThreads, int otherThreads,
                        const std::string &what, std::string &error) {
  struct rlimit limit;
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
    return true;
  // glibc reserves 64 MiB of address space for the malloc heap of each thread that allocates
  // (up to 8 per core), a thread's stack is 8 MiB, and OpenBLAS's GEMM buffer is 128 MiB for
  // each thread that calls it.
  constexpr uint64_t kThread = (64 + 8) << 20, kBlasBuffer = 128 << 20;
  const uint64_t threadBytes = static_cast<uint64_t>(computeThreads) * (kThread + kBlasBuffer) +
                               (static_cast<uint64_t>(otherThreads) + 1) * kThread;
  const uint64_t inUse = addressSpaceInUse(limit.rlim_cur);
  const uint64_t left = limit.rlim_cur > inUse ? limit.rlim_cur - inUse : 0;
  if (bytes + threadBytes <= left)
    return true;
  error = "running " + what + " needs about " + formatBytes(bytes + threadBytes) +
          " of address space (" +
          formatBytes(bytes) + " of state and arenas, " + formatBytes(threadBytes) + " for " +
          std::to_string(computeThreads) + " compute and " + std::to_string(otherThreads + 1) +
          " other threads' buffers, heaps and stacks) but the address-space limit (ulimit "
          "-v) of " +
          formatBytes(limit.rlim_cur) + " leaves " + formatBytes(left) +
          "; raise the limit, or run fewer ranks or threads";
  return false;
}

} // namespace tessel::rt
