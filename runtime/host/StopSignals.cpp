//===- StopSignals.cpp - Stopping a training run cleanly on a signal ------===//

#include "runtime/host/StopSignals.h"

#include <atomic>
#include <csignal>
#include <cstring>
#include <unistd.h>

namespace tessel::rt {

namespace {

constexpr int kSignals[] = {SIGTERM, SIGUSR1, SIGINT};

std::atomic<int> firstSignal{0};
std::atomic<bool> announceFirst{false}, firstAnnounced{false};
struct sigaction previous[3];

/// Writes `text` to stderr with what a signal handler may call.
void say(const char *text) {
  ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

extern "C" void onStopSignal(int signal) {
  int expected = 0;
  if (!firstSignal.compare_exchange_strong(expected, signal)) {
    // Signals arriving together may be handled on two threads at once: the first's line is
    // let out whole first.
    for (long spins = 0; !firstAnnounced.load() && spins < 100000000; ++spins) {
    }
    say("\ntessel: a second signal: stopping at once, without a checkpoint\n");
    ::_exit(128 + signal); // What a shell reports for a process the signal ended.
  }
  if (announceFirst.load()) {
    say("\ntessel: ");
    say(StopSignals::name(signal));
    say(": stopping after this step and saving a checkpoint; a second signal stops at once\n");
  }
  firstAnnounced = true;
}

} // namespace

StopSignals::StopSignals(bool announce) {
  firstSignal = 0;
  firstAnnounced = false;
  announceFirst = announce;
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (size_t i = 0; i < 3; ++i) {
    ::sigaction(kSignals[i], nullptr, &previous[i]);
    // A signal ignored from the start stays ignored (nohup, or SIGINT for a shell's
    // background job).
    if (previous[i].sa_handler != SIG_IGN)
      ::sigaction(kSignals[i], &action, nullptr);
  }
}

StopSignals::~StopSignals() {
  for (size_t i = 0; i < 3; ++i)
    ::sigaction(kSignals[i], &previous[i], nullptr);
}

int StopSignals::requested() { return firstSignal.load(); }

const char *StopSignals::name(int signal) {
  switch (signal) {
  case SIGTERM:
    return "SIGTERM";
  case SIGUSR1:
    return "SIGUSR1";
  case SIGINT:
    return "SIGINT";
  }
  return "a signal";
}

} // namespace tessel::rt
