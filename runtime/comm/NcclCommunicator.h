//===- NcclCommunicator.h - Ranks as one GPU per process, over NCCL -*- C++ -*-===//
//
// The communicator of a run of one process per GPU (--device cuda under mpirun or torchrun):
// NCCL's unique id handed from rank 0 to the others (over MPI, or the torchrun rendezvous of
// Rendezvous.h), one sub-communicator per group of the plan split from the world with
// ncclCommSplit, and every operation enqueued on the communicator's own CUDA stream. A
// collective kernel first orders that stream after the kernels launched before it
// (orderAfter: a CUDA event, no host wait), so the reduction of a gradient bucket runs while
// the backward kernels after it do; its ticket is an event recorded after the operation, and
// waiting for it waits on the host.
//
// NCCL's library is opened with dlopen when the first communicator is created, so a runner
// starts, and runs on the CPU, where there is none. Operations on host memory (the host loop
// sharing rank 0's outputs, pipeline stages passing activations) go through device memory and
// are done when start returns.
//
// Status: a world of one has run on an H200 (every collective, host staging); between GPUs it
// has not run yet. Unlike LocalCommunicator and MpiCommunicator, NCCL's
// sums do not add in group-index order, so the bits differ from theirs (not the values beyond
// f32 rounding), and a bf16 or f16 sum is rounded to its type at each step of NCCL's ring or
// tree rather than once at the end (so its error grows with the group's size). NCCL pairs sends
// with receives by order, not by tag: the tags named at creation (the pipeline's) each get a
// copy of the world, so their messages pair in order per tag, as the schedule check proves them
// to; a plan's own sends between two ranks must be issued in the order of their receives. A
// send is not buffered: it is done once its receive runs, so two ranks that send to each other
// post both messages in one exchange (an NCCL group); the pipeline schedules are proven to run
// that way (common/schedule/Schedule.h), and MPI runs their exchanges the same way on the CPU.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_COMM_NCCLCOMMUNICATOR_H
#define TESSEL_RUNTIME_COMM_NCCLCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessel::rt::nccl {

/// Whether this runtime was built with NCCL's header (the library is opened at run time).
bool available();

/// Hands NCCL's unique id from rank 0 to every rank: `id` holds it on rank 0 and receives it on
/// the others (its size is the same on every rank). False with the reason.
using IdExchange = std::function<bool(std::vector<char> &id, std::string &error)>;

/// This process's end of a world of `size` processes, as rank `rank`, on CUDA GPU `device`.
/// Every process calls it at the same point with the same number of `splits` in the same
/// order: each is one ncclCommSplit of the world, into the instances of one group (or the
/// subgroups that a collective's `members` picks from them), this rank's given (nullopt where
/// the rank takes part in none). An operation on a group no split made fails, naming it.
/// Sends and receives with one of `tags` go over a copy of the world of their own (NCCL pairs
/// them by order, not tag), the others over the world. Null with the reason.
std::unique_ptr<Communicator>
createCommunicator(int device, uint32_t rank, uint32_t size, const IdExchange &exchange,
                   const std::vector<std::optional<CommGroup>> &splits,
                   const std::vector<int64_t> &tags, std::string &error);

} // namespace tessel::rt::nccl

#endif // TESSEL_RUNTIME_COMM_NCCLCOMMUNICATOR_H
