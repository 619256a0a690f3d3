//===- MemoryProfile.h - One rank's memory over a training step -*- C++ -*-===//
//
// A memory profile is the bytes one rank holds at each point of its training steps, stacked
// by what they hold: the persistent state by role (parameters with their working copies,
// gradient accumulators, optimizer state), the arena's buffers by kind (activations kept for
// the backward pass, values recomputed for it, temporaries: planfile::BufferKind), and a
// pipeline rank's stash and message buffers. The plan fixes all of it — every arena buffer
// holds its value over a known span of instructions (Program::buffers) and the pipeline walk
// keeps the stash's books (PipelineWalk.h) — so `tessel estimate --memory-svg` predicts it
// exactly; the runner's --memory-trace records the same classes from what its kernels
// actually touch, with the process's resident memory (or the device's allocated memory)
// beside them, so that the two can be laid over each other.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_MEMORY_MEMORYPROFILE_H
#define TESSEL_COMMON_MEMORY_MEMORYPROFILE_H

#include "common/plan/PlanFile.h"

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessel::memory {

/// What a byte of a rank's memory holds, bottom to top as a profile stacks them.
enum class MemoryClass : uint8_t {
  Parameters,  ///< Parameters (fp32 masters) and their 16-bit working copies.
  Gradients,   ///< Gradient accumulators (state of role "grad").
  Optimizer,   ///< Optimizer state: Adam's moments, momentum.
  Kept,        ///< Forward values the backward pass reads (BufferKind::Kept).
  Recomputed,  ///< Values recomputed for the backward pass (BufferKind::Recomputed).
  Temporaries, ///< Every other arena value: temporaries, program inputs and outputs.
  Stash,       ///< A pipeline rank's stash: activations and gradients between its actions.
  Messages,    ///< A pipeline rank's buffers for packed messages.
};
constexpr size_t kMemoryClasses = 8;
/// "parameters", "gradients", "optimizer state", "kept activations", "recomputed",
/// "temporaries", "pipeline stash", "pipeline messages".
const char *memoryClassName(MemoryClass c);
/// Bytes in binary units with two decimals, as the profiles and `tessel estimate` write them:
/// "12.50 MiB", "640 B".
std::string humanBytes(double bytes);
/// The class of a state tensor's bytes by its role; of an arena buffer's by its kind.
MemoryClass classOfRole(const std::string &role);
MemoryClass classOfKind(planfile::BufferKind kind);

/// The rank's bytes at one point: after instruction `instr` of `program` ran (with what it
/// read and wrote still counted), or, with instr = -1, between programs (a pipeline transfer,
/// the start of a step).
struct MemorySample {
  double x = 0; ///< Where it is drawn: its instruction's ordinal, or predicted end in seconds.
  std::array<uint64_t, kMemoryClasses> bytes{};
  /// Measured profiles: the process's resident set (CPU) or the device's allocated memory
  /// (GPU) sampled then; 0 where not measured.
  uint64_t resident = 0;
  int step = 0;   ///< The training step, from 1.
  int micro = -1; ///< The micro-batch, or -1 (the optimizer step, a transfer).
  std::string program;
  int64_t instr = -1;
  std::string what; ///< The kernel, or the transfer ("send to stage 1").
  std::string loc;  ///< The kernel's spec location, "file:line:col", or empty.

  uint64_t total() const;
};

/// A labelled position on the x axis: a step's start, the optimizer step.
struct MemoryMark {
  double x = 0;
  std::string label;
};

struct MemoryProfile {
  std::string model;
  uint32_t rank = 0, stage = 0, stages = 1;
  bool measured = false; ///< Recorded by the runner rather than predicted.
  bool xIsTime = false;  ///< x in seconds (a cluster's predicted times), else instructions.
  std::vector<MemorySample> samples;
  std::vector<MemoryMark> marks;
  /// What the rank allocates: its arena (sized for its largest program) and its state.
  uint64_t arenaBytes = 0, stateBytes = 0;

  /// The index of the sample with the most bytes in total (the first such), or 0 if none.
  size_t peak() const;
  /// "tiny_gpt: rank 0 (pipeline stage 0 of 2), predicted".
  std::string title() const;
};

/// Per class, the bytes of the state tensors that ranks of pipeline stage `stage` hold.
std::array<uint64_t, kMemoryClasses> stateBytesByClass(const planfile::Plan &plan, uint32_t stage);

/// Per instruction of a program of `instructions` instructions, the bytes of `buffers` that
/// hold values then, by class (only Kept, Recomputed and Temporaries are nonzero): each
/// buffer from its `first` instruction to its `last` (one with first > last or past the
/// program, never). The plan's buffers give the prediction; the spans a run observes, the
/// measurement.
std::vector<std::array<uint64_t, kMemoryClasses>>
liveBytesByInstruction(size_t instructions, const std::vector<planfile::ArenaBuffer> &buffers);

/// Predicted seconds of each instruction of a program for a rank (tessel estimate --cluster).
using InstructionSeconds =
    std::function<std::vector<double>(const planfile::Program &program, uint32_t rank)>;

/// The predicted profile of world rank `rank` over `steps` training steps (each micro-batch's
/// programs, then the optimizer step; a pipeline rank through its action list, its stash and
/// messages as the runtime's walk keeps them). With `seconds`, x is predicted time; else one
/// unit per instruction (and per pipeline transfer). False with the reason for a plan without
/// buffer lifetimes (version 9 or older) or a pipeline the walk refuses.
bool predictMemoryProfile(const planfile::Plan &plan, uint32_t rank, int steps,
                          MemoryProfile &profile, std::string &error,
                          const InstructionSeconds &seconds = nullptr);

/// The profile drawn as a standalone SVG: the classes as stacked areas over x, bottom to top
/// in MemoryClass order (each in the legend only if it is ever nonzero), the measured resident
/// memory as a line where present, what the rank allocates as a dashed line (state, arena, and a
/// pipeline rank's stash and message buffers at their peak, which the runtime keeps for the
/// values after), the marks as labelled vertical rules, the peak marked and labelled with its
/// bytes, what ran there and its spec location (file names only), and the title.
std::string memoryProfileSvg(const MemoryProfile &profile);

/// Profiles in the Trace Event Format (Perfetto, chrome://tracing): per profile a process
/// named by its title with one counter track ("C" events) of the classes' bytes, one of the
/// resident memory where measured, and instant events at the marks; ts is x in microseconds
/// where x is time, else the sample's ordinal in microseconds.
std::string memoryProfileTraceJson(const std::vector<MemoryProfile> &profiles);

} // namespace tessel::memory

#endif // TESSEL_COMMON_MEMORY_MEMORYPROFILE_H
