//===- KernelProfile.h - Time in each kernel, as a table -------*- C++ -*-===//
//
// `--profile`: after training or generation, the time each kernel took over the run, one
// table per group of local ranks that ran the same kernels (the dp and tp ranks of a plan run
// the same programs; each pipeline stage its own).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_KERNELPROFILE_H
#define TESSEL_RUNTIME_HOST_KERNELPROFILE_H

#include <cstdio>

namespace tessel::rt {

class Ranks;

/// Turns on the executors' kernel timers of every local rank.
void enableKernelProfile(Ranks &ranks);

/// Writes the tables of what the local ranks' executors timed to `out`.
void printKernelProfile(Ranks &ranks, std::FILE *out);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_KERNELPROFILE_H
