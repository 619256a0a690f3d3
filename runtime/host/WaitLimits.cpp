//===- WaitLimits.cpp - How long the ranks wait for one another -----------===//

#include "runtime/host/WaitLimits.h"
#include "runtime/host/Ranks.h"

#include <algorithm>
#include <cstdio>

namespace tessel::rt {

namespace {

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, s < 10 ? "%.2f s" : "%.0f s", s);
  return text;
}

} // namespace

void WaitLimits::unknownPart(const std::string &what) {
  unknown_ = what;
  ranks_.setWaitLimit(
      {startup_, startup_ > 0 ? "--comm-timeout-startup " + seconds(startup_) + ", for " + what
                              : std::string()});
}

void WaitLimits::regularPartTook(double seconds) {
  slowest_ = std::max(slowest_, seconds);
  regularParts();
}

void WaitLimits::regularParts() {
  if (slowest_ < 0) {
    unknownPart(unknown_);
    return;
  }
  if (grace_ <= 0) {
    ranks_.setWaitLimit({});
    return;
  }
  ranks_.setWaitLimit({grace_ + 2 * slowest_, "--comm-timeout " + seconds(grace_) +
                                                  " after twice the slowest " + regular_ + " so far, " +
                                                  seconds(slowest_)});
}

} // namespace tessel::rt
