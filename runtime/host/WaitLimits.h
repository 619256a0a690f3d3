//===- WaitLimits.h - How long the ranks wait for one another ---*- C++ -*-===//
//
// Each part of a run gives the ranks' communication a wait limit (Communicator.h), so that a
// rank that is alive but silent (a stopped process, a hung driver or kernel, a lost host)
// ends the run with a message naming it instead of hanging it. Steps are regular, so a step's
// operations may wait twice the slowest step so far plus a grace (--comm-timeout); the parts
// whose length the run cannot know beforehand (start-up with its loading, the first step, a
// checkpoint's writes, the first sampled token) get a longer limit (--comm-timeout-startup),
// as NCCL's watchdog gives every collective the same long one.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_WAITLIMITS_H
#define TESSEL_RUNTIME_HOST_WAITLIMITS_H

#include <string>
#include <utility>

namespace tessel::rt {

class Ranks;

class WaitLimits {
public:
  /// `grace` and `startup` in seconds, 0 for no limit; `regular` names the regular part
  /// ("step", "sampled token").
  WaitLimits(Ranks &ranks, double grace, double startup, std::string regular)
      : ranks_(ranks), grace_(grace), startup_(startup), regular_(std::move(regular)) {}

  /// The ranks are about to do `what` ("start-up and the first step", "a checkpoint"), whose
  /// length is not known: the start-up limit.
  void unknownPart(const std::string &what);
  /// A regular part took `seconds` (a step, a sampled token); from now on the limit is twice
  /// the slowest so far plus the grace.
  void regularPartTook(double seconds);
  /// Back to the regular parts after an unknown one, with the limit they had (the start-up one
  /// until a regular part has been timed).
  void regularParts();

private:
  Ranks &ranks_;
  double grace_, startup_;
  std::string regular_;
  double slowest_ = -1; ///< The slowest regular part so far; -1 before the first.
  std::string unknown_ = "start-up";
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_WAITLIMITS_H
