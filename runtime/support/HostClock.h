//===- HostClock.h - Seconds on the host's steady clock --------*- C++ -*-===//
//
// The one clock the host loop, generation and the progress line time themselves with.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_SUPPORT_HOSTCLOCK_H
#define TESSEL_RUNTIME_SUPPORT_HOSTCLOCK_H

#include <chrono>

namespace tessel::rt {

/// Seconds on the host's steady clock, from an arbitrary origin.
inline double hostSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_SUPPORT_HOSTCLOCK_H
