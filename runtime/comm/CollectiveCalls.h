//===- CollectiveCalls.h - Plan kernels that communicate --------*- C++ -*-===//
//
// The handlers of the collective and transfer kernels (docs/plan-format.md) and of `wait`.
// Each checks its parameters against its operands and its group at load; at run time it hands
// the operation to the rank's communicator, and either waits for it or, with an `event`,
// leaves it in flight until the `wait` for that event. On a group of one rank the operation
// is a local copy and needs no communicator.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_COMM_COLLECTIVECALLS_H
#define TESSEL_RUNTIME_COMM_COLLECTIVECALLS_H

#include "runtime/core/KernelCall.h"

namespace tessel::rt {

bool run(KernelCall &c, const catalogue::AllReduce &p);
bool run(KernelCall &c, const catalogue::AllGather &p);
bool run(KernelCall &c, const catalogue::ReduceScatter &p);
bool run(KernelCall &c, const catalogue::AllToAll &p);
bool run(KernelCall &c, const catalogue::Broadcast &p);
bool run(KernelCall &c, const catalogue::Send &p);
bool run(KernelCall &c, const catalogue::Recv &p);
bool run(KernelCall &c, const catalogue::Wait &p);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_COMM_COLLECTIVECALLS_H
