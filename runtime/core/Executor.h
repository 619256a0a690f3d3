//===- Executor.h - Runs the programs of one rank's plan --------*- C++ -*-===//
//
// Owns the rank's persistent state and its arena, as buffers of its device (device/Device.h),
// decodes every instruction of every program once (catalogue entry, the device's kernel for
// it, typed parameters, operand addresses, parameter checks against the operand sizes, the
// groups its collectives name, the events they start and end), then runs programs on demand
// by launching each instruction on the device. The host reads and writes the rank's values
// only through the copies below. Runs are deterministic: the same plan, state, inputs and step
// context give the same bits.
//
// In a world of several ranks each rank has its own Executor, given that rank's end of the
// communicator; the collectives of its programs meet the other ranks' through it.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_CORE_EXECUTOR_H
#define TESSEL_RUNTIME_CORE_EXECUTOR_H

#include "runtime/device/KernelCall.h"

#include "common/memory/MemoryProfile.h"
#include "common/plan/PlanFile.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessel::rt {

class Communicator;
class Device;
class DeviceBuffer;
struct RankContext;

/// Sets the threads the CPU kernels (and GEMM, which slices its products over them) use.
void setComputeThreads(int threads);

class Executor {
public:
  /// Checks and decodes `plan` for `rank`: a kernel this runtime lacks, a parameter that
  /// does not fit its operands, an operand count a kernel does not take, a group the plan
  /// lacks, or a `wait` for an event no collective started is an error. A plan of more than
  /// one rank needs `comm`, this rank's end of a communicator of plan.worldSize ranks; it
  /// must outlive the Executor.
  static std::unique_ptr<Executor> create(const planfile::Plan &plan, uint32_t rank,
                                          std::string &error, Communicator *comm = nullptr);
  /// The same on `device` (the CPU device above).
  static std::unique_ptr<Executor> create(const planfile::Plan &plan, uint32_t rank,
                                          std::string &error, Communicator *comm,
                                          std::unique_ptr<Device> device);
  ~Executor();

  const planfile::Plan &plan() const { return plan_; }
  uint32_t rank() const { return rank_; }
  uint64_t arenaBytes() const { return arenaBytes_; }

  Device &device() { return *device_; }

  /// A persistent tensor's index by name, or -1; whether the rank holds it (not where its
  /// pipeline stage is not among the tensor's `stages`).
  int stateIndex(const std::string &name) const;
  bool holdsState(size_t index) const { return state_[index] != nullptr; }
  /// Copies the rank's part of state tensor `index` (plan.state[index].bytes()) to `host`, or
  /// from it; false where the rank does not hold the tensor.
  bool readState(size_t index, void *host) const;
  bool writeState(size_t index, const void *host);
  /// The rank's part of state tensor `index` where the host may use it in place (a device
  /// whose buffers are host memory, between programs); null where it must be copied with
  /// readState, or the rank does not hold the tensor.
  const void *stateInHostMemory(size_t index) const;
  void *stateInHostMemory(size_t index) {
    return const_cast<void *>(static_cast<const Executor *>(this)->stateInHostMemory(index));
  }
  /// The bytes of the state tensors this rank holds.
  uint64_t stateBytes() const;

  bool hasProgram(const std::string &name) const;
  /// Copies `bytes` from `host` to input `port` of `program`; false if there is no such input
  /// or it holds fewer bytes.
  bool writeInput(const std::string &program, const std::string &port, const void *host,
                  uint64_t bytes);
  /// Output `port` of `program` after its last run, copied to the host (null if there is no
  /// such output), a 16-bit one widened to f32; the copy stays valid until the next run.
  const float *output(const std::string &program, const std::string &port) const;
  /// Where input `port` of `program` is in the device's memory, and output `port`, when it
  /// holds at least `bytes` (in the arena, or an output in a state tensor); null otherwise.
  void *inputAddress(const std::string &program, const std::string &port, uint64_t bytes);
  const void *outputAddress(const std::string &program, const std::string &port,
                            uint64_t bytes) const;

  /// Runs `program`; every collective it started is done when it returns. With
  /// `checkFinite`, runs collectives synchronously and stops at the first instruction that
  /// writes a non-finite value, naming it, with its spec location, in `error`. A failure
  /// aborts the communicator (so the other ranks' collectives fail rather than wait for this
  /// one) with "rank R: " and the error.
  bool run(const std::string &program, const StepContext &ctx, std::string &error,
           bool checkFinite = false);

  /// Where the last run ended early, when a `guard_finite` found a value that was not finite
  /// ("kernel 'guard_finite' (from LOC), instruction N of 'PROGRAM'"); empty when the run went
  /// to the end. Outputs computed before that point are valid; the others are not.
  const std::string &stoppedAt() const { return stoppedAt_; }

  /// Times every kernel call from now on, on the device where it has timers (a GPU), else on
  /// the host; `profile()` sums seconds and calls per kernel.
  void enableProfiling() { profiling_ = true; }
  struct KernelTime {
    std::string kernel;
    double seconds = 0;
    int64_t calls = 0;
    bool recomputed = false; ///< Calls that recompute in the backward pass, counted apart.
  };
  std::vector<KernelTime> profile() const;

  /// While on, records when each kernel call ran (--trace), on the device's timers where it
  /// has them (placed from the run's first launch), else on the host's clock. Times are
  /// seconds of traceClock().
  void enableTracing(bool on) { tracing_ = on; }
  struct TraceSpan {
    std::string kernel, program;
    uint32_t stream = 0;
    bool recomputed = false;
    double start = 0, end = 0;
  };
  /// The calls recorded since the last take.
  std::vector<TraceSpan> takeTrace() { return std::move(trace_); }
  /// Seconds of the host's steady clock since a point common to every rank of the process.
  static double traceClock();

  /// While on (--memory-trace), records the rank's memory at each instruction of each run: the
  /// state it holds by class, the bytes of the program's arena buffers that hold values then
  /// as the operands its kernels are given show (ArenaObserver.h), what setMemoryContext
  /// says is held besides, and the resident memory (the device's in use on a GPU, else the
  /// process's resident set).
  void enableMemoryTrace(bool on);
  bool memoryTracing() const { return memoryTracing_; }
  /// What the runs from now on hold outside the arena (a pipeline rank's stash and message
  /// buffers) and the micro-batch they run.
  void setMemoryContext(uint64_t stash, uint64_t messages, int micro);
  /// Records a point between runs: a pipeline transfer, a step's start.
  void noteMemory(const std::string &what);
  /// The samples recorded since the last take (x left 0 and step left 0: the caller places
  /// them), and the operands no buffer of the plan explained.
  std::vector<memory::MemorySample> takeMemorySamples() { return std::move(memorySamples_); }
  const std::vector<std::string> &memoryFaults() const { return memoryFaults_; }

  struct Decoded;
  struct DecodedProgram;

private:
  Executor(const planfile::Plan &plan, uint32_t rank);
  const DecodedProgram *find(const std::string &name) const;
  const planfile::Port *outputPort(const std::string &program, const std::string &port) const;

  bool runInstructions(const DecodedProgram &p, const StepContext &ctx, std::string &error,
                       bool checkFinite);

  planfile::Plan plan_;
  uint32_t rank_;
  std::unique_ptr<RankContext> rankContext_;
  std::unique_ptr<Device> device_;
  uint64_t arenaBytes_ = 0;
  std::unique_ptr<DeviceBuffer> arena_;
  std::vector<std::unique_ptr<DeviceBuffer>> state_; ///< Null where the rank does not hold it.
  /// output()'s copies, by (program, port); `fresh` until the next run, the vector kept so
  /// that the next copy reuses its memory.
  struct HostOutput {
    std::vector<float> values;
    bool fresh = false;
  };
  mutable std::map<std::pair<std::string, std::string>, HostOutput> hostOutputs_;
  std::vector<std::unique_ptr<DecodedProgram>> programs_;
  bool profiling_ = false, tracing_ = false;
  std::vector<KernelTime> times_;
  std::vector<TraceSpan> trace_;
  /// Device timers of this run's launches, read into times_[index] (when profiling) and
  /// trace_[span] (when tracing, else -1) once the run synchronized.
  struct PendingTimer {
    int64_t timer;
    size_t index;
    int64_t span;
  };
  std::vector<PendingTimer> pendingTimers_;
  bool memoryTracing_ = false;
  /// The state this rank holds, by class: the same in every sample.
  std::array<uint64_t, memory::kMemoryClasses> memoryState_{};
  uint64_t contextStash_ = 0, contextMessages_ = 0;
  int contextMicro_ = -1;
  std::vector<memory::MemorySample> memorySamples_;
  std::vector<std::string> memoryFaults_;
  /// A sample with the rank's state and the context, and the resident memory now.
  memory::MemorySample memorySample() const;
  /// With device timers and tracing: a timer at the run's start, and the host's clock then.
  int64_t originTimer_ = -1;
  double originHost_ = 0;
  std::string stoppedAt_;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_CORE_EXECUTOR_H
