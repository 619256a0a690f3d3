//===- KernelCall.h - The contract between a plan instruction and a device -*- C++ -*-===//
//
// How every device runs a plan's kernels. When a plan is loaded, each instruction's parameters
// are decoded into its kernel's struct (common/catalogue/KernelCatalogue.h), its operand count and element
// types checked against the catalogue, and then its arguments checked once, for every device
// alike, against its operands and groups (KernelArgs.h: the kernel's argument struct). A device
// implements only the launch: a KernelFn that takes the checked arguments and the operands'
// addresses, and runs the kernel on the device's own kernels. So a parameter that would make a
// kernel read or write outside its buffers is refused before anything runs, in the same words
// on every device.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_DEVICE_KERNELCALL_H
#define TESSEL_RUNTIME_DEVICE_KERNELCALL_H

#include "runtime/comm/CommMemory.h"
#include "runtime/comm/Communicator.h"

#include "common/catalogue/KernelCatalogue.h"
#include "common/plan/PlanFile.h"

#include <map>
#include <string>
#include <vector>

namespace tessel::rt {

/// What the kernels of one rank share: its place in the plan's groups, its communicator and
/// the collectives started with an `event` that no `wait` has ended yet.
struct RankContext {
  uint32_t rank = 0, worldSize = 1;
  Communicator *comm = nullptr; ///< Null in a world of one rank.
  /// Where the rank's buffers are, for the collectives' local copies (its device's); host
  /// memory where null.
  CommMemory *memory = nullptr;
  std::map<std::string, CommGroup> groups;
  /// Sub-groups that collectives with `members` run on, by their world ranks (map nodes stay
  /// put, so the instructions that use one keep a pointer to it).
  std::map<std::vector<uint32_t>, CommGroup> subgroups;
  std::map<int64_t, Communicator::Ticket> events;
  /// Runs every collective to completion, treating `event` as absent (the checking rerun
  /// reads each instruction's outputs right after it).
  bool synchronous = false;

  /// This rank's view of every group of `plan` that holds it.
  static RankContext forRank(const planfile::Plan &plan, uint32_t rank, Communicator *comm);
  /// Waits for every collective still in flight; false with the first failure's reason.
  bool drainEvents(std::string &error);
};

/// What a kernel may read about the run: the optimizer step (from 1), the micro-batch within
/// it, and the run's seed (dropout masks derive from all three; the learning rate's schedule
/// and AdamW's bias correction from the step); and the factor on cross entropy that makes the
/// loss a mean over the targets that count.
struct StepContext {
  int64_t step = 1;
  int64_t micro = 0;
  uint64_t seed = 0;
  /// The step's target positions over those of them that count (are not ignored,
  /// kernels::kIgnoredTarget), over the whole step batch: every rank and micro-batch. The
  /// plan scales each cross entropy by 1 / positions; this turns that into 1 / counted. 1
  /// where no target is ignored.
  double targetScale = 1.0;
};

/// What a device hands its kernels for the length of one launch, beyond the operands (the CUDA
/// device: its stream, scratch memory, cuBLASLt; device/cuda/CudaLaunch.h). Each device that
/// needs one derives its own; the CPU device has none.
class LaunchContext {
public:
  virtual ~LaunchContext() = default;
};

struct KernelArgs;

/// One instruction as its kernels see it: its operands' addresses (in the device's address
/// space, fixed when the plan is loaded) and element counts, and what it runs in.
struct KernelCall {
  const planfile::Instr *instr = nullptr;
  std::vector<void *> in, out;
  std::vector<uint64_t> inElements, outElements;
  const StepContext *ctx = nullptr;
  RankContext *rank = nullptr;
  Communicator *comm = nullptr; ///< rank->comm: null in a world of one rank.
  /// Set by the device for the length of one launch; null otherwise.
  LaunchContext *launch = nullptr;
  /// Set by a kernel that ends its program early (guard_finite): the executor runs nothing
  /// after it and reports where the program stopped.
  bool stop = false;
  std::string error;

  float *fin(size_t k) { return static_cast<float *>(in[k]); }
  const int32_t *ids(size_t k) { return static_cast<const int32_t *>(in[k]); }
  float *fout(size_t k) { return static_cast<float *>(out[k]); }

  /// Requires input (or output) `k` to hold at least `elements` elements.
  bool needIn(size_t k, int64_t elements);
  bool needOut(size_t k, int64_t elements);
  /// Requires the operands of a multi-tensor call (the catalogue's per-tensor operands) of
  /// n.size() tensors, tensor t of n[t] elements: `eachIns` inputs per tensor, then the call's
  /// other inputs of one element each (scalars); `eachOuts` outputs per tensor and, where the
  /// call has them (`withOptional`), `optionalOuts` more. Role r of tensor t is operand
  /// r × n.size() + t of its direction.
  bool needTensors(const std::vector<int64_t> &n, size_t eachIns, size_t eachOuts,
                   size_t optionalOuts = 0, bool *withOptional = nullptr);
  bool fail(const std::string &why);

  /// This rank's instance of group `name`; null (and an error) if the plan has none.
  const CommGroup *group(const std::string &name);
  /// This rank's index in group `name`, and the group's size (0 and an error if unknown).
  int64_t groupIndex(const std::string &name);
  int64_t groupSize(const std::string &name);
};

/// A device's launch of one kernel: runs it on the call's operands with the arguments its check
/// gave (the struct of its kernel in `args`). False with the reason in call.error where it
/// failed (a device that runs launches later reports a failure at its next synchronize).
using KernelFn = bool (*)(KernelCall &call, const KernelArgs &args);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_DEVICE_KERNELCALL_H
