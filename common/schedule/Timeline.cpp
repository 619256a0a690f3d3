//===- Timeline.cpp - Timeline figures and the Chrome trace ---------------===//

#include "common/schedule/Timeline.h"

#include "common/support/JsonString.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <set>
#include <utility>

namespace tessel::pipeline {

Timeline summarizeTimeline(int ranks, std::vector<TimedAction> actions) {
  Timeline t;
  t.ranks = std::max(0, ranks);
  for (const TimedAction &a : actions)
    if (a.rank >= 0 && a.rank < t.ranks)
      t.actions.push_back(a);
  // Each rank's actions in the order they ran; a receive that ends as the computation using
  // it starts keeps its place before it.
  std::stable_sort(t.actions.begin(), t.actions.end(),
                   [](const TimedAction &x, const TimedAction &y) {
                     return x.rank != y.rank ? x.rank < y.rank : x.start < y.start;
                   });

  double first = std::numeric_limits<double>::infinity();
  double last = -first, compute = 0;
  t.peakInFlight.assign(t.ranks, 0);
  std::vector<std::set<std::pair<int, int>>> live(t.ranks); // (micro-batch, chunk) per rank
  for (const TimedAction &a : t.actions) {
    first = std::min(first, a.start);
    last = std::max(last, a.end);
    if (isCompute(a.action.kind))
      compute += a.end - a.start;
    std::pair<int, int> unit(a.action.microbatch, a.action.chunk);
    if (a.action.kind == Action::Forward)
      live[a.rank].insert(unit);
    else if (a.action.kind == Action::Backward || a.action.kind == Action::BackwardInput)
      live[a.rank].erase(unit);
    t.peakInFlight[a.rank] =
        std::max(t.peakInFlight[a.rank], static_cast<int>(live[a.rank].size()));
  }
  t.makespan = t.actions.empty() ? 0 : last - first;
  double rankTime = t.ranks * t.makespan;
  if (rankTime > 0)
    t.bubbleFraction = 1 - compute / rankTime;
  if (compute > 0)
    t.bubbleOverIdeal = (rankTime - compute) / compute;
  return t;
}

namespace {

/// Microseconds with nanosecond resolution: what the trace format counts in.
std::string microseconds(double seconds) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3f", seconds * 1e6);
  return text;
}

std::string figure(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

const char *categoryOf(Action::Kind kind) {
  if (kind == Action::Forward)
    return "forward";
  return isCompute(kind) ? "backward" : "communication";
}

} // namespace

std::string chromeTraceJson(const Timeline &timeline, const std::string &title) {
  double origin = std::numeric_limits<double>::infinity();
  bool chunked = false;
  for (const TimedAction &a : timeline.actions) {
    origin = std::min(origin, a.start);
    chunked |= a.action.chunk != 0;
  }

  std::string out = "{\"traceEvents\":[\n";
  out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":";
  appendJsonString(out, title);
  out += "}}";
  for (int r = 0; r < timeline.ranks; ++r)
    out += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" + std::to_string(r) +
           ",\"args\":{\"name\":\"rank " + std::to_string(r) + "\"}}";
  for (const TimedAction &a : timeline.actions) {
    out += ",\n{\"name\":";
    appendJsonString(out, actionLabel(a.action, chunked));
    out += std::string(",\"cat\":\"") + categoryOf(a.action.kind) +
           "\",\"ph\":\"X\",\"ts\":" + microseconds(a.start - origin) +
           ",\"dur\":" + microseconds(a.end - a.start) +
           ",\"pid\":0,\"tid\":" + std::to_string(a.rank) +
           ",\"args\":{\"microbatch\":" + std::to_string(a.action.microbatch) +
           ",\"chunk\":" + std::to_string(a.action.chunk);
    if (a.action.peer >= 0)
      out += ",\"peer\":" + std::to_string(a.action.peer);
    out += "}}";
  }
  // Perfetto shows otherData as the trace's metadata; strings display everywhere.
  out += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"title\":";
  appendJsonString(out, title);
  out += ",\"makespan_s\":\"" + figure(timeline.makespan) + "\",\"bubble_fraction\":\"" +
         figure(timeline.bubbleFraction) + "\",\"bubble_over_ideal\":\"" +
         figure(timeline.bubbleOverIdeal) + "\"}}\n";
  return out;
}

} // namespace tessel::pipeline
