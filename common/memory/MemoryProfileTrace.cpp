//===- MemoryProfileTrace.cpp - Memory profiles as a Perfetto trace -------===//
//
// Each profile is a process of its own (pid = its index), so that Perfetto lays ranks' or
// stages' tracks one under another on a common time axis. A counter event's args become the
// counter's series, and Perfetto and chrome://tracing take only numbers there: what ran at a
// sample has no place in them, and every sample of a profile names the same classes so that
// no series starts or stops midway. Counters hold their value until the next event, which is
// what a sample means: the bytes from its instruction on.
//
//===----------------------------------------------------------------------===//

#include "common/memory/MemoryProfile.h"

#include "common/support/JsonString.h"

#include <cmath>
#include <cstdio>

namespace tessel::memory {

namespace {

/// A sample's or mark's x as the trace's timestamp: seconds to microseconds, an ordinal as
/// microseconds; with nanosecond resolution, and 0 for a non-finite x (JSON has no NaN).
std::string timestamp(double x, bool xIsTime) {
  double us = xIsTime ? x * 1e6 : x;
  if (!std::isfinite(us))
    us = 0;
  char text[64];
  std::snprintf(text, sizeof text, "%.3f", us);
  return text;
}

} // namespace

std::string memoryProfileTraceJson(const std::vector<MemoryProfile> &profiles) {
  std::string out = "{\"traceEvents\":[";
  bool first = true;
  auto begin = [&]() {
    out += first ? "\n{" : ",\n{";
    first = false;
  };
  for (size_t i = 0; i < profiles.size(); ++i) {
    const MemoryProfile &p = profiles[i];
    const std::string pid = std::to_string(i);
    begin();
    out += "\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + pid + ",\"args\":{\"name\":";
    appendJsonString(out, p.title());
    out += "}}";
    // Keeps the profiles in their given order in the viewers' list of processes.
    begin();
    out += "\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" + pid +
           ",\"args\":{\"sort_index\":" + pid + "}}";

    bool nonzero[kMemoryClasses] = {};
    for (const MemorySample &s : p.samples)
      for (size_t c = 0; c < kMemoryClasses; ++c)
        nonzero[c] |= s.bytes[c] != 0;
    for (const MemorySample &s : p.samples) {
      const std::string ts = timestamp(s.x, p.xIsTime);
      begin();
      out += "\"name\":\"memory\",\"ph\":\"C\",\"ts\":" + ts + ",\"pid\":" + pid + ",\"args\":{";
      bool firstArg = true;
      for (size_t c = 0; c < kMemoryClasses; ++c) {
        if (!nonzero[c])
          continue;
        out += firstArg ? "\"" : ",\"";
        out += std::string(memoryClassName(static_cast<MemoryClass>(c))) +
               "\":" + std::to_string(s.bytes[c]);
        firstArg = false;
      }
      out += "}}";
      // Where measured: a sample without a measurement (0) leaves the last one standing
      // rather than dropping the line to 0, and a predicted profile has no such track.
      if (s.resident) {
        begin();
        out += "\"name\":\"resident\",\"ph\":\"C\",\"ts\":" + ts + ",\"pid\":" + pid +
               ",\"args\":{\"bytes\":" + std::to_string(s.resident) + "}}";
      }
    }
    for (const MemoryMark &m : p.marks) {
      begin();
      out += "\"name\":";
      appendJsonString(out, m.label);
      out += ",\"ph\":\"i\",\"s\":\"p\",\"ts\":" + timestamp(m.x, p.xIsTime) + ",\"pid\":" + pid +
             ",\"tid\":0}";
    }
  }
  out += "\n],\"displayTimeUnit\":\"ms\"}\n";
  return out;
}

} // namespace tessel::memory
