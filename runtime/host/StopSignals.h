//===- StopSignals.h - Stopping a training run cleanly on a signal --*- C++ -*-===//
//
// A preempted or interrupted job keeps its work: SIGTERM (what schedulers and `kill` send),
// SIGUSR1 (what Slurm and others send ahead of a preemption) and SIGINT (Ctrl-C) ask a
// training run to stop after the step it is in. Every rank finishes that step, the run writes
// a checkpoint and exits 0 (without a checkpoint directory it saves nothing and exits with
// 128 + the signal). A second signal ends the process at once, with 128 + the signal, as if
// it had not been caught. Under MPI the processes agree at each step's end whether any of
// them was asked, so they all stop after the same step.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_STOPSIGNALS_H
#define TESSEL_RUNTIME_HOST_STOPSIGNALS_H

namespace tessel::rt {

/// While one lives, SIGTERM, SIGUSR1 and SIGINT ask the run to stop (those not ignored when
/// it was made: a job started under nohup or in a shell's background keeps ignoring what it
/// ignored); the handlers before it are restored when it goes. `announce`: the first signal prints a line to stderr (the
/// process that speaks for the run).
class StopSignals {
public:
  explicit StopSignals(bool announce);
  ~StopSignals();
  StopSignals(const StopSignals &) = delete;
  StopSignals &operator=(const StopSignals &) = delete;

  /// The first signal that asked to stop, or 0.
  static int requested();
  /// "SIGTERM", "SIGUSR1", "SIGINT".
  static const char *name(int signal);
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_STOPSIGNALS_H
