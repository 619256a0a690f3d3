//===- TimelineSvg.cpp - The schedule grid as an SVG ----------------------===//
//
// Ranks are rows and time runs left to right over a grey background, so idle time is what
// stays grey. Communication is drawn first and computation over it: in a measured run a
// transfer may overlap the computation it hides behind.
//
//===----------------------------------------------------------------------===//

#include "common/schedule/Timeline.h"

#include "common/support/SvgText.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace tessel::pipeline {

namespace {

constexpr double kLeft = 70, kRight = 20, kTop = 46, kRowHeight = 24, kRowGap = 6;
constexpr double kPlotWidth = 1200, kAxisHeight = 24, kLegendHeight = 30;
constexpr double kCharWidth = 7; // of the 11px labels in boxes, for deciding what fits

const char *kIdleColour = "#e6e6e6";

struct Style {
  const char *name;
  const char *colour;
};
const Style kForward = {"forward", "#4e79a7"};
const Style kBackward = {"backward (input)", "#f28e2b"};
const Style kWeight = {"weight gradient", "#59a14f"};
const Style kCommunication = {"communication", "#b07aa1"};

const Style &styleOf(Action::Kind kind) {
  switch (kind) {
  case Action::Forward:
    return kForward;
  case Action::Backward:
  case Action::BackwardInput:
    return kBackward;
  case Action::BackwardWeight:
    return kWeight;
  default:
    return kCommunication;
  }
}

std::string figure(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

} // namespace

std::string scheduleSvg(const Timeline &timeline, const std::string &title) {
  double origin = std::numeric_limits<double>::infinity();
  bool chunked = false;
  for (const TimedAction &a : timeline.actions) {
    origin = std::min(origin, a.start);
    chunked |= a.action.chunk != 0;
  }
  if (timeline.actions.empty())
    origin = 0;
  double span = timeline.makespan > 0 ? timeline.makespan : 1;
  double scale = kPlotWidth / span;
  double rowsHeight = timeline.ranks * (kRowHeight + kRowGap);
  double width = kLeft + kPlotWidth + kRight;
  double height = kTop + rowsHeight + kAxisHeight + kLegendHeight;
  auto rowY = [&](int rank) { return kTop + rank * (kRowHeight + kRowGap); };

  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + svg::number(width) +
         "\" height=\"" + svg::number(height) + "\" viewBox=\"0 0 " + svg::number(width) + " " +
         svg::number(height) + "\" font-family=\"sans-serif\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::string heading = title + ": bubble " + figure(100 * timeline.bubbleFraction) +
                        "% of rank-time (" + figure(timeline.bubbleOverIdeal) +
                        " of the compute time), makespan " + figure(timeline.makespan);
  out += "<text x=\"" + svg::number(kLeft) + "\" y=\"24\" font-size=\"15\">" +
         svg::escapeXml(heading) + "</text>\n";

  for (int r = 0; r < timeline.ranks; ++r) {
    double y = rowY(r);
    out += "<g class=\"rank\" data-rank=\"" + std::to_string(r) + "\">\n";
    out += "<text x=\"" + svg::number(kLeft - 8) + "\" y=\"" + svg::number(y + kRowHeight / 2 + 4) +
           "\" font-size=\"12\" text-anchor=\"end\">rank " + std::to_string(r) + "</text>\n";
    out += "<rect class=\"idle\" x=\"" + svg::number(kLeft) + "\" y=\"" + svg::number(y) +
           "\" width=\"" + svg::number(kPlotWidth) + "\" height=\"" + svg::number(kRowHeight) +
           "\" fill=\"" + kIdleColour + "\"/>\n";
    for (bool computePass : {false, true})
      for (const TimedAction &a : timeline.actions) {
        if (a.rank != r || isCompute(a.action.kind) != computePass || a.end <= a.start)
          continue;
        double x = kLeft + (a.start - origin) * scale;
        double w = std::max(0.5, (a.end - a.start) * scale);
        std::string label = actionLabel(a.action, chunked);
        out += "<rect x=\"" + svg::number(x) + "\" y=\"" + svg::number(y) + "\" width=\"" +
               svg::number(w) + "\" height=\"" + svg::number(kRowHeight) + "\" fill=\"" +
               styleOf(a.action.kind).colour + "\" stroke=\"white\" stroke-width=\"0.5\"><title>" +
               svg::escapeXml(label) + " [" + figure(a.start - origin) + ", " +
               figure(a.end - origin) + "]</title></rect>\n";
        std::string number = std::to_string(a.action.microbatch);
        if (chunked)
          number += "." + std::to_string(a.action.chunk);
        if (computePass && w >= kCharWidth * number.size() + 4)
          out += "<text x=\"" + svg::number(x + w / 2) + "\" y=\"" +
                 svg::number(y + kRowHeight / 2 + 4) +
                 "\" font-size=\"11\" fill=\"white\" text-anchor=\"middle\">" + number +
                 "</text>\n";
      }
    out += "</g>\n";
  }

  // The time axis.
  double axisY = kTop + rowsHeight;
  double step = svg::tickStep(span, 10);
  out += "<g class=\"axis\" font-size=\"10\" fill=\"#555\">\n";
  for (int i = 0; i * step <= span * (1 + 1e-9); ++i) {
    double x = kLeft + i * step * scale;
    out += "<line x1=\"" + svg::number(x) + "\" y1=\"" + svg::number(axisY - kRowGap) + "\" x2=\"" +
           svg::number(x) + "\" y2=\"" + svg::number(axisY) + "\" stroke=\"#555\"/>";
    out += "<text x=\"" + svg::number(x) + "\" y=\"" + svg::number(axisY + 12) +
           "\" text-anchor=\"middle\">" + figure(i * step) + "</text>\n";
  }
  out += "</g>\n";

  // The legend.
  double legendY = axisY + kAxisHeight;
  double x = kLeft;
  out += "<g class=\"legend\" font-size=\"12\">\n";
  for (const Style *style : {&kForward, &kBackward, &kWeight, &kCommunication}) {
    out += "<rect x=\"" + svg::number(x) + "\" y=\"" + svg::number(legendY) +
           "\" width=\"12\" height=\"12\" " + "fill=\"" + style->colour + "\"/><text x=\"" +
           svg::number(x + 16) + "\" y=\"" + svg::number(legendY + 10) + "\">" + style->name +
           "</text>\n";
    x += 28 + kCharWidth * std::string(style->name).size();
  }
  out += "<rect x=\"" + svg::number(x) + "\" y=\"" + svg::number(legendY) +
         "\" width=\"12\" height=\"12\" fill=\"" + kIdleColour + "\"/><text x=\"" +
         svg::number(x + 16) + "\" y=\"" + svg::number(legendY + 10) + "\">idle</text>\n";
  out += "</g>\n</svg>\n";
  return out;
}

} // namespace tessel::pipeline
