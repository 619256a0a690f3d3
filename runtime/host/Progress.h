//===- Progress.h - The training loop's progress line and metrics -*- C++ -*-===//
//
// What a run shows while it trains: one status line, redrawn in place on a terminal and
// printed as plain lines into a log, and a JSONL file with one record per logged step for
// plotting and comparison.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_HOST_PROGRESS_H
#define TESSEL_RUNTIME_HOST_PROGRESS_H

#include "runtime/support/Json.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

namespace tessel::rt {

/// Whether `out` is an interactive terminal that understands "\r" and "\x1b[K" (a tty whose
/// TERM is set and not "dumb").
bool streamIsTerminal(FILE *out);

/// What the progress line shows of one step; a negative gradNorm or stepSeconds is not shown.
struct StepFigures {
  double loss = 0, gradNorm = -1, lr = 0, stepSeconds = -1, tokensPerSec = 0;
};

/// "step 120/600  loss 2.3412  norm 0.8123  lr 2.91e-03  412 ms  12.3k tok/s  ETA 1m12s", as
/// llm.c and nanoGPT print a step: its loss, gradient norm and time.
class ProgressLine {
public:
  /// Monotonic seconds; tests inject their own.
  using Clock = std::function<double()>;

  /// `firstStep` is the step the run starts (or resumes) from; the ETA averages the time per
  /// step since then, measured from construction.
  ProgressLine(int64_t totalSteps, bool isTerminal, FILE *out, int64_t firstStep = 0,
               Clock clock = {});

  /// Shows the state after `step` steps: on a terminal it redraws the line in place ("\r",
  /// the line, "\x1b[K"); otherwise it prints the line and a newline (the caller decides how
  /// often).
  /// `detail` ("MFU 41.2%  mem 12.3 GiB") is shown after the rate when not empty.
  void update(int64_t step, const StepFigures &figures, const std::string &detail = "");
  /// Ends a redrawn line with a newline, so later output starts on a fresh line.
  void finish();

  /// The line's text; a negative `etaSeconds` shows "ETA --".
  static std::string formatLine(int64_t step, int64_t totalSteps, const StepFigures &figures,
                                double etaSeconds, const std::string &detail = "");
  /// "412 ms", "41.2 ms", "4.12 ms": three significant digits down to 1 ms, then µs.
  static std::string formatStepTime(double seconds);
  /// "42s", "1m12s", "2h05m".
  static std::string formatDuration(double seconds);
  /// "950", "12.3k", "1.2M", "3.4G".
  static std::string formatRate(double perSecond);

private:
  int64_t totalSteps_;
  bool isTerminal_;
  FILE *out_;
  int64_t firstStep_;
  Clock clock_;
  double start_;
  bool lineOpen_ = false;
};

/// Appends one compact JSON object per line to a file, flushed per line, so a crashed run
/// keeps every record it wrote and `tail -f` shows them as they come.
class MetricsWriter {
public:
  /// Opens `path` for appending (creating it); null with `error` naming the path on failure.
  static std::unique_ptr<MetricsWriter> open(const std::string &path, std::string &error);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter &) = delete;
  MetricsWriter &operator=(const MetricsWriter &) = delete;

  /// Writes `record` as one line and flushes it.
  bool write(const Json &record, std::string &error);
  const std::string &path() const { return path_; }

private:
  MetricsWriter(std::string path, FILE *file) : path_(std::move(path)), file_(file) {}

  std::string path_;
  FILE *file_;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_PROGRESS_H
