//===- KernelTrace.cpp - A training step's kernels as a Chrome trace ------===//

#include "runtime/host/KernelTrace.h"

#include "common/catalogue/KernelCatalogue.h"
#include "common/support/JsonString.h"

#include <cstdio>

namespace tessel::rt {

namespace {

std::string microseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", seconds * 1e6);
  return text;
}

/// The category Perfetto colours an event by: the catalogue's family of the kernel.
const char *categoryOf(const std::string &kernel) {
  const catalogue::KernelInfo *info = catalogue::findKernel(kernel);
  if (!info)
    return "compute";
  switch (info->family) {
  case catalogue::Family::Compute:
    return "compute";
  case catalogue::Family::Collective:
    return "collective";
  case catalogue::Family::Control:
    return "control";
  }
  return "compute";
}

} // namespace

std::string kernelTraceEvents(const std::vector<RankTrace> &ranks, double origin) {
  std::string out;
  auto next = [&out] {
    if (!out.empty())
      out += ",\n";
  };
  for (const RankTrace &r : ranks) {
    const std::string pid = std::to_string(r.rank);
    next();
    out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + pid +
           ",\"args\":{\"name\":\"rank " + pid + "\"}},\n{\"name\":\"process_sort_index\","
           "\"ph\":\"M\",\"pid\":" + pid + ",\"args\":{\"sort_index\":" + pid + "}}";
    std::vector<bool> named;
    for (const Executor::TraceSpan &s : r.spans) {
      if (s.stream >= named.size())
        named.resize(s.stream + 1, false);
      if (!named[s.stream]) {
        named[s.stream] = true;
        out += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + pid +
               ",\"tid\":" + std::to_string(s.stream) + ",\"args\":{\"name\":\"stream " +
               std::to_string(s.stream) + "\"}}";
      }
      out += ",\n{\"name\":";
      appendJsonString(out, s.kernel + (s.recomputed ? " (recomputed)" : ""));
      out += std::string(",\"cat\":\"") + categoryOf(s.kernel) +
             "\",\"ph\":\"X\",\"ts\":" + microseconds(s.start - origin) +
             ",\"dur\":" + microseconds(s.end - s.start) + ",\"pid\":" + pid +
             ",\"tid\":" + std::to_string(s.stream) + ",\"args\":{\"program\":";
      appendJsonString(out, s.program);
      out += "}}";
    }
  }
  return out;
}

std::string kernelTraceJson(const std::vector<std::string> &fragments, const std::string &title) {
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  for (const std::string &f : fragments) {
    if (f.empty())
      continue;
    out += (first ? "" : ",\n") + f;
    first = false;
  }
  out += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"title\":";
  appendJsonString(out, title);
  out += "}}\n";
  return out;
}

} // namespace tessel::rt
