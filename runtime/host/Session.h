//===- Session.h - One training run, private to runtime/host ----*- C++ -*-===//
//
// A training run (Trainer.h's train): its settings, ranks, data, progress and checkpoints. Its
// work is split by concern: Trainer.cpp sets it up and runs the steps, SessionBatches.cpp feeds
// the programs, SessionCheckpoints.cpp saves and restores, SessionChecks.cpp checks what the
// processes agree on and reports non-finite values.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_SESSION_H
#define TESSEL_RUNTIME_HOST_SESSION_H

#include "common/plan/PlanFile.h"
#include "runtime/core/Executor.h"
#include "runtime/core/Rng.h"
#include "runtime/host/Data.h"
#include "runtime/host/KernelTrace.h"
#include "runtime/host/MemoryTrace.h"
#include "runtime/host/Progress.h"
#include "runtime/host/Ranks.h"
#include "runtime/host/RunRecord.h"
#include "runtime/host/RunSettings.h"
#include "runtime/host/Trainer.h"
#include "runtime/host/WaitLimits.h"
#include "runtime/support/Json.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessel::rt {

using planfile::Plan;

class Session {
public:
  Session(const Plan &plan, const RunOptions &options)
      : plan_(plan), options_(options), s_(plan, options), dataRng_(0) {}

  int run();

private:
  bool setUp();
  /// Draws every parameter from its init; `resuming`: only those a checkpoint does not hold.
  void initialiseParameters(bool resuming);
  bool restore(const std::string &path);
  /// Sets the parameters from the pretrained weights at `path` (Pretrained.h); with `path`
  /// empty, only checks that the spec loads no parameter.
  bool startFrom(const std::string &path);
  bool save(int64_t step);
  bool saveCheckpoint(int64_t step);
  /// The signal that asked this run to stop (StopSignals.h), agreed between the processes so
  /// that all stop after the same step: 0 for none, -1 when they cannot agree (reported).
  int agreedStopSignal();
  /// Ends the run after step `step` as `signal` asked: saves a checkpoint where there is a
  /// directory for it; the exit status.
  int stopAfter(int64_t step, int signal);
  /// Draws micro-batch `micro` of `step` into tokens_ and targets_; `counted`: the targets of
  /// all its rows (every process's) that count.
  bool sampleMicroBatch(int64_t step, int64_t micro, int64_t &counted);
  /// Draws every micro-batch of `step`, in order, into stepBatches_, and sets targetScale_.
  bool sampleStep(int64_t step);
  bool writeInputs(const std::string &program);
  /// The context of micro-batch `micro` of `step`.
  StepContext stepContext(int64_t step, int64_t micro) const {
    return StepContext{step, micro, s_.seed, targetScale_};
  }
  int forwardBackward(int64_t step, double &loss);
  int pipelineForwardBackward(int64_t step, double &loss);
  /// The loss of the batch in tokens_ and targets_, whose rows hold `counted` targets that
  /// count.
  bool evalBatch(int64_t counted, double &loss);
  bool writePipelineReport();
  /// --trace without a pipeline: starts recording the kernels every local rank runs, or stops
  /// and keeps what they ran (the last step, from its forward-backward passes to its optimizer
  /// step).
  void traceKernels(bool on);
  /// Writes what traceKernels recorded, every process's ranks in one file.
  bool writeKernelTrace();
  bool tracingKernels() const {
    return (options_.traceKernels || !options_.tracePath.empty()) && !ranks_->pipeline();
  }
  /// The mean held-out loss; false (with a message) when evaluation fails to run.
  bool evaluate(double &mean);
  bool dumpTensors(const std::string &file, const std::string &role);
  int reportNonFinite(int64_t step, int64_t micro, const std::string &what);
  /// After the optimizer step stopped at its guard (the gradient norm is not finite): names
  /// the gradient that is not finite, or says that the norm overflowed.
  int reportNonFiniteGradients(int64_t step);
  /// Whether some parameter or optimizer state is not finite; if so, reports that the
  /// optimizer's update of step `step` made it so. Every process calls it.
  bool reportNonFiniteUpdate(int64_t step);
  /// What the host finds in the accumulated gradients when their norm is not finite.
  struct GradientSummary {
    std::string nonFinite; ///< The first parameter with a non-finite gradient, or "".
    double largest = 0;    ///< The largest magnitude, and the parameter holding it.
    std::string largestIn;
    double norm = 0; ///< The global norm, in double.
  };
  GradientSummary summarizeGradients();
  /// Every process's `mine`, in process order. Every process calls it.
  bool gatherIntegers(int64_t mine, std::vector<int64_t> &all, std::string &error);
  /// Whether `ok` holds on every process; false with a reason if not. Every process calls it.
  bool agree(bool ok, std::string &error);
  /// Under MPI: whether every process opened the same data (its token count and fingerprint);
  /// if not, says which ranks read what. Every process calls it.
  bool checkSameData();
  /// Every process's `mine`, in process order, each as long as it was given.
  bool gatherTexts(const std::string &mine, std::vector<std::string> &all, std::string &error);
  /// The first parameter or optimizer state tensor that holds a non-finite value on some rank,
  /// or "" when every value is finite.
  std::string firstNonFiniteState();
  void reportIntactCheckpoint();
  bool error(const std::string &message) {
    progress_.reset();
    // Under MPI every process may report; each names its rank but the first.
    if (ranks_ && !ranks_->isMainProcess())
      std::fprintf(stderr, "tessel: error: rank %u: %s\n", ranks_->processIndex(), message.c_str());
    else
      std::fprintf(stderr, "tessel: error: %s\n", message.c_str());
    return false;
  }

  const Plan &plan_;
  const RunOptions &options_;
  Settings s_;
  std::unique_ptr<Ranks> ranks_;
  std::unique_ptr<WaitLimits> waitLimits_;
  std::unique_ptr<TokenData> data_;
  std::unique_ptr<TokenData> evalData_; ///< Separate validation data, when named.
  /// What evaluation reads: the validation data, or the part of the data held out.
  const TokenData &evaluationData() const { return evalData_ ? *evalData_ : *data_; }
  std::unique_ptr<MetricsWriter> metrics_;
  std::unique_ptr<ProgressLine> progress_;
  Rng dataRng_;
  int64_t startStep_ = 0;
  int64_t lastSaved_ = -1;
  double lastSaveSeconds_ = 0; ///< How long the last checkpoint took to write.
  std::string lastCheckpoint_; ///< The newest good checkpoint: resumed from or saved.
  /// The last optimizer step's gradient norm and learning rate, for messages.
  float lastGradNorm_ = 0, lastLr_ = 0;
  std::vector<RankTrace> kernelTrace_; ///< --trace without a pipeline: the last step's calls.
  std::unique_ptr<MemoryTrace> memoryTrace_; ///< --memory-trace.
  std::vector<int32_t> tokens_, targets_;
  /// The rows of tokens_ and targets_ this process's ranks take, the only ones it reads.
  std::vector<bool> dataRows_;
  std::vector<MicroBatchData> stepBatches_; ///< The step's micro-batches.
  /// The step's target positions over those that count (StepContext::targetScale).
  double targetScale_ = 1.0;
  std::vector<std::pair<std::string, std::vector<int32_t>>> dumpedBatches_;
  /// The MFU's numerator and denominator: the plan's model FLOPs per step (the compiler's
  /// count, `flops.model`) and the dense peak of all the run's devices together; 0 where
  /// either is unknown (a plan of an older compiler; the CPU without --peak).
  double stepFlops_ = 0, runPeak_ = 0;

  void findPeak();
  /// "MFU 41.2%  mem 12.3/80.0 GiB" for the progress line, as far as the run knows them, and
  /// the same figures into `record` when it is given.
  std::string deviceFigures(double stepSeconds, Json *record) const;
};


} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_SESSION_H
