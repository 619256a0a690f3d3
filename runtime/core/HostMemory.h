//===- HostMemory.h - What a plan asks of this machine's memory -*- C++ -*-===//
//
// A plan states every byte its ranks allocate (state and arena), so a plan that cannot fit is
// refused before anything is allocated, with the figures, instead of failing inside an
// allocation or being killed by the kernel later.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_CORE_HOSTMEMORY_H
#define TESSEL_RUNTIME_CORE_HOSTMEMORY_H

#include "common/plan/PlanFile.h"

#include <cstdint>
#include <string>

namespace tessel::rt {

class Device;

/// The machine's physical memory, or 0 when it cannot be read.
uint64_t physicalMemoryBytes();

/// This process's resident set now (the second field of /proc/self/statm), or 0 when it
/// cannot be read.
uint64_t residentBytes();

/// "1.5 GiB", "640.0 KiB", "12 bytes".
std::string formatBytes(uint64_t bytes);

/// The bytes rank `rank` of `plan` allocates: the state its pipeline stage holds and its largest
/// arena. Requires a validated plan.
uint64_t rankAllocationBytes(const planfile::Plan &plan, uint32_t rank);

/// Checks that `bytes` for `what` fit in this machine's memory; otherwise `error` gives both.
bool fitsInMemory(uint64_t bytes, const std::string &what, std::string &error);

/// Checks that `bytes` for `what` fit in what `device` has free: a GPU's memory (what the
/// driver reports free now, so ranks sharing one GPU are checked as each allocates), or this
/// machine's memory for a device that computes in it.
bool fitsInMemoryOf(const Device &device, uint64_t bytes, const std::string &what,
                    std::string &error);

/// Under an address-space limit (`ulimit -v`), checks that what is left of it holds `bytes` of
/// state and arenas and what the threads to come reserve beside them: each of
/// `computeThreads` OpenBLAS's buffer (it retries a failed allocation forever, so it must
/// never meet the limit), a stack and a malloc heap; each of `otherThreads` (communication
/// workers) a stack and a malloc heap; and one more of those for the threads of the libraries.
/// Without a limit it always holds.
bool fitsInAddressSpace(uint64_t bytes, int computeThreads, int otherThreads,
                        const std::string &what, std::string &error);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_CORE_HOSTMEMORY_H
