//===- Trainer.h - The host loop --------------------------------*- C++ -*-===//
//
// Trains a plan: initialises or restores the state, feeds batches, runs the forward-backward
// program once per micro-batch (or, with a pipeline, the step's schedule over all its
// micro-batches) and the optimizer step once per step, evaluates, logs, checkpoints, and stops
// cleanly (with the last good checkpoint intact) on bad input or a non-finite loss
// (Trainer.cpp and the Session*.cpp files beside it, Session.h). Also samples text from a
// trained model (Generate.cpp).
//
// A plan of several ranks runs them as threads (Ranks.h). The host loop is the same: it deals
// in whole tensors (batches, initial weights, checkpoints) and each rank takes its block, so a
// run over any layout sees the data and starts from the weights of the one-rank run, and its
// checkpoints resume under any other layout.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_TRAINER_H
#define TESSEL_RUNTIME_HOST_TRAINER_H

#include "common/plan/PlanFile.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel::rt {

/// Settings from the command line; each unset one falls back to the plan's `train` section.
struct RunOptions {
  std::optional<int64_t> steps, seed, evalEvery, checkpointEvery, logEvery;
  std::optional<std::string> data, evalData, checkpointDir;
  /// Pretrained weights to start from (a Hugging Face folder or a Tessel checkpoint), with a
  /// fresh optimizer; overrides the spec's train.init_from ("" there: none).
  std::optional<std::string> initFrom;
  int threads = 0;            ///< 0: every core; shared out between the ranks.
  std::string device = "cpu"; ///< Where the ranks compute: cpu or cuda.
  std::string metricsPath;    ///< JSON lines; "" for none.
  /// Dense peak FLOP/s of one rank's device for the MFU; 0: the shipped preset of the GPU's
  /// model (common/cluster/AcceleratorPeaks.h), none on the CPU.
  double peakFlops = 0;
  std::string resume;         ///< A checkpoint or run directory to continue from.
  std::string dumpDir; ///< Parity dumps: initial weights, batches, step-1 gradients (one rank).
  /// How long the ranks may wait for one another (WaitLimits.h): a step's operations twice
  /// the slowest step plus `commTimeout` seconds; start-up, the first step and checkpoints
  /// `commTimeoutStartup`. 0: no limit.
  double commTimeout = 20, commTimeoutStartup = 600;
  bool quiet = false;
  bool profile = false; ///< Print the time spent in each kernel at the end.
  /// A pipelined run's last step as a Chrome trace and as an SVG; "" for none.
  std::string tracePath, svgPath;
  /// The first steps' memory on each rank (MemoryTrace.h), as a Chrome trace; "" for none.
  std::string memoryTracePath;
  /// Without a pipeline, record the last step's kernels for the trace: set on every process
  /// of a run whose first process writes tracePath.
  bool traceKernels = false;

  // What the run record at the head of the metrics names (RunRecord.h).
  std::string planSource, planFingerprint;  ///< Where the plan came from; XXH3 of its bytes.
  std::vector<std::string> commandLine;     ///< The options given, as "--name=VALUE".
  std::vector<planfile::Attr> recipeOverrides; ///< The recipe numbers the options replaced.

  // Export (--export-hf): the checkpoint `checkpoint` names, as the Hugging Face folder the
  // spec loads from.
  std::string exportHf;
  std::string exportDtype; ///< "f32", "bf16", "f16"; "": each tensor's dtype in the source.
  uint64_t maxShardBytes = 5'000'000'000ull;

  // Generation.
  bool generate = false;
  std::string checkpoint; ///< The weights to sample with.
  std::string prompt = "\n";
  bool promptGiven = false; ///< --prompt was given (without it a token model starts from id 0).
  int64_t tokens = 200;
  double temperature = 0.8;
  int64_t topK = 40;
  /// Nucleus sampling: the likeliest tokens whose probabilities add up to topP (1: all).
  double topP = 1.0;
  /// The tokenizer prompts are encoded and samples decoded with; "": a pretrained model's own
  /// (beside the weights --init-from names), else the spec's byte or token-id text.
  std::string tokenizer;
  /// --chat: the prompt is a user's turn, after --system's, rendered with --chat-template (or
  /// the tokenizer's template).
  bool chat = false;
  std::string system, chatTemplate;
  /// Prompts, one a line, generated together (KvDecode.h), their outputs printed in order.
  std::string promptFile;
  /// Sequences generated at once (0: every prompt, up to the largest decode program).
  int64_t batch = 0;
  /// Recompute the whole window for every token with the `sample` program instead of using
  /// the plan's decode programs and their KV cache.
  bool noKvCache = false;
};

/// Exit status: 0 done, 1 a failure in the data, a checkpoint or the numbers.
int train(const planfile::Plan &plan, const RunOptions &options);
int generate(const planfile::Plan &plan, const RunOptions &options);
/// Writes a checkpoint as a Hugging Face folder (Pretrained.h); exit status as train's.
int exportHuggingFace(const planfile::Plan &plan, const RunOptions &options);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_TRAINER_H
