//===- KernelCall.h - One decoded kernel call -------------------*- C++ -*-===//
//
// The bridge between a plan instruction and a kernel. Its parameters are decoded once, at load,
// into the kernel's struct of common/KernelCatalogue.h, and its operand count and element types
// checked against the catalogue. Each kernel's handler takes that struct, states how many
// elements each operand must hold, and (unless validating) runs the kernel. Validation runs
// the same handler once at load time, so a parameter that would make a kernel read or write
// outside its buffers is refused before anything runs.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_CORE_KERNELCALL_H
#define TESSEL_RUNTIME_CORE_KERNELCALL_H

#include "common/KernelCatalogue.h"
#include "common/PlanFile.h"
#include "runtime/comm/CommMemory.h"
#include "runtime/comm/Communicator.h"
#include "runtime/core/Executor.h"

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

struct KernelCall {
  const planfile::Instr *instr = nullptr;
  std::vector<void *> in, out;
  std::vector<uint64_t> inElements, outElements;
  const StepContext *ctx = nullptr;
  RankContext *rank = nullptr;
  Communicator *comm = nullptr; ///< rank->comm: null in a world of one rank.
  /// The sub-group of a collective with `members`, found when the call is validated.
  const CommGroup *subgroup = nullptr;
  bool validating = false;
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

/// A kernel handler: validates, then (unless validating) computes, reading its parameters from
/// the struct of its kernel that `params` holds.
using KernelFn = bool (*)(KernelCall &call, const catalogue::KernelParams &params);

/// The CPU backend's handler of kernel `id`.
KernelFn cpuKernel(catalogue::KernelId id);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_CORE_KERNELCALL_H
