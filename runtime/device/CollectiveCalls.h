//===- CollectiveCalls.h - Plan kernels that communicate --------*- C++ -*-===//
//
// The collective and transfer kernels (docs/plan-format.md) and `wait`, which every device
// shares: each is checked once at load against its operands and its group (its arguments are
// the communicator's operation without its buffers), and at its launch hands the operation to
// the rank's communicator, and either waits for it or, with an `event`, leaves it in flight
// until the `wait` for that event. On a group of one rank the operation is a local copy and
// needs no communicator. A device that orders its own work (the CUDA device's streams) runs
// these after the kernels that write their inputs.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_DEVICE_COLLECTIVECALLS_H
#define TESSEL_RUNTIME_DEVICE_COLLECTIVECALLS_H

#include "runtime/device/KernelArgs.h"

namespace tessel::rt {

bool check(KernelCall &c, const catalogue::AllReduce &p, args::AllReduce &a);
bool check(KernelCall &c, const catalogue::AllGather &p, args::AllGather &a);
bool check(KernelCall &c, const catalogue::ReduceScatter &p, args::ReduceScatter &a);
bool check(KernelCall &c, const catalogue::AllToAll &p, args::AllToAll &a);
bool check(KernelCall &c, const catalogue::Broadcast &p, args::Broadcast &a);
bool check(KernelCall &c, const catalogue::Send &p, args::Send &a);
bool check(KernelCall &c, const catalogue::Recv &p, args::Recv &a);
bool check(KernelCall &c, const catalogue::Wait &p, args::Wait &a);

/// Runs (or starts) a checked collective or transfer on the call's operands.
bool launchCollective(KernelCall &c, const args::Collective &a);
/// Ends the collective started with the wait's event, if it is still in flight.
bool launchWait(KernelCall &c, const args::Wait &a);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_DEVICE_COLLECTIVECALLS_H
