//===- MemoryProfileSvg.cpp - A rank's memory as a stacked-area SVG -------===//
//
// The classes are stacked bottom to top in MemoryClass order, so the persistent state is the
// floor the arena's buffers and the pipeline's stash rise and fall on. Each sample is the
// memory while its instruction ran, which ended at the sample's x: it is drawn as a step over
// (previous x, x], never interpolated, so a temporary that lives for one kernel shows as the
// spike it is. Labels are placed by estimated widths so that none covers another: the marks'
// labels in two staggered rows above the plot, the peak's label beside its marker on the side
// with room, the allocated line's label away from the peak's.
//
//===----------------------------------------------------------------------===//

#include "common/memory/MemoryProfile.h"

#include "common/support/SvgText.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

namespace tessel::memory {

namespace {

constexpr double kLeft = 84, kRight = 24, kTop = 72, kPlotWidth = 960, kPlotHeight = 480;
constexpr double kAxisHeight = 46; // tick labels and the axis title under the plot
constexpr double kLegendRow = 20;
constexpr double kCharWidth = 7;        // of the 12px labels, for deciding what fits
constexpr double kSmallCharWidth = 6.5; // of the 11px mark labels
// More samples than this are merged per pixel column (keeping each column's largest total),
// which keeps the peaks a reader looks for and the file small for long profiles.
constexpr size_t kMaxSegments = 2 * static_cast<size_t>(kPlotWidth);

// Tableau 10, ordered so that neighbouring layers differ in hue.
const char *const kClassColours[kMemoryClasses] = {"#4e79a7", "#f28e2b", "#76b7b2", "#e15759",
                                                   "#59a14f", "#edc948", "#b07aa1", "#9c755f"};
const char *kResidentColour = "#222222";
const char *kAllocatedColour = "#555555";
const char *kResidentName = "resident (process RSS / device)";

/// Rounds a coordinate as num writes it, so that points are compared as drawn.
double rounded(double value) { return std::isfinite(value) ? std::round(value * 100) / 100 : 0; }

/// A tick value with as many decimals as its spacing `step` needs (no "1e+04").
std::string tickFigure(double value, double step) {
  int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  decimals = std::min(decimals, 9);
  if (std::fabs(value) < step * 1e-6)
    return "0"; // not "0.0" or "-0"
  char text[48];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

const char *const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};

/// The binary unit (as a power of 1024) that shows `bytes` as 1 to 1023.
int unitOf(double bytes) {
  int u = 0;
  while (bytes >= 1024 && u < 5) {
    bytes /= 1024;
    ++u;
  }
  return u;
}

/// A sample's extent on the x axis and its bytes.
struct Segment {
  double left, right;
  std::array<uint64_t, kMemoryClasses> bytes;
  uint64_t total;
};

/// A label's box, for keeping labels apart.
struct Box {
  double x0, y0, x1, y1;
  bool overlaps(const Box &o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

/// Points of an outline with repeated points and the middle points of straight horizontal or
/// vertical runs left out: steps over many samples of equal bytes cost nothing.
class Outline {
public:
  void add(double x, double y) {
    x = rounded(x);
    y = rounded(y);
    size_t n = points_.size();
    if (n && points_[n - 1] == std::make_pair(x, y))
      return;
    if (n >= 2) {
      auto [ax, ay] = points_[n - 2];
      auto [bx, by] = points_[n - 1];
      if ((ay == by && by == y && (bx - ax) * (x - bx) >= 0) ||
          (ax == bx && bx == x && (by - ay) * (y - by) >= 0)) {
        points_[n - 1] = {x, y};
        return;
      }
    }
    points_.emplace_back(x, y);
  }
  const std::vector<std::pair<double, double>> &points() const { return points_; }

private:
  std::vector<std::pair<double, double>> points_;
};

std::string textElement(double x, double y, const std::string &attributes,
                        const std::string &text) {
  return "<text x=\"" + svg::number(x) + "\" y=\"" + svg::number(y) + "\"" + attributes + ">" +
         svg::escapeXml(text) + "</text>\n";
}

} // namespace

/// A kernel's spec location for a label: "A (called from B (called from C))", the chain of
/// calls through the standard library, as its ends "A, called from C", each file by its name
/// alone (the standard library's path is the machine's).
std::string shortLocation(const std::string &loc) {
  auto fileName = [](std::string place) {
    const size_t slash = place.rfind('/');
    return slash == std::string::npos ? place : place.substr(slash + 1);
  };
  const std::string call = " (called from ";
  const size_t first = loc.find(call);
  if (first == std::string::npos)
    return fileName(loc);
  std::string outer = loc.substr(loc.rfind(call) + call.size());
  while (!outer.empty() && outer.back() == ')')
    outer.pop_back();
  return fileName(loc.substr(0, first)) + ", called from " + fileName(outer);
}

/// `text` cut to at most `fits` characters, its middle replaced by "...".
std::string ellipsized(const std::string &text, size_t fits) {
  if (text.size() <= fits || fits < 8)
    return text;
  const size_t keep = fits - 3, head = keep / 2;
  return text.substr(0, head) + "..." + text.substr(text.size() - (keep - head));
}

std::string memoryProfileSvg(const MemoryProfile &profile) {
  const std::vector<MemorySample> &samples = profile.samples;
  const size_t n = samples.size();
  const double width = kLeft + kPlotWidth + kRight;
  const double plotRight = kLeft + kPlotWidth, plotBottom = kTop + kPlotHeight;

  // What is drawn: the classes ever nonzero (with their peaks), the resident line where
  // measured, the allocated line where known.
  std::array<uint64_t, kMemoryClasses> classPeak{};
  bool measured = false;
  size_t peak = 0;
  uint64_t peakTotal = 0;
  double top = 0;
  for (size_t i = 0; i < n; ++i) {
    const MemorySample &s = samples[i];
    for (size_t c = 0; c < kMemoryClasses; ++c)
      classPeak[c] = std::max(classPeak[c], s.bytes[c]);
    uint64_t total = s.total();
    if (i == 0 || total > peakTotal) {
      peak = i;
      peakTotal = total;
    }
    measured |= s.resident != 0;
    top = std::max({top, static_cast<double>(total), static_cast<double>(s.resident)});
  }
  // The state and the arena, and a pipeline rank's stash and message buffers at their peak:
  // the runtime keeps what they once held for the values after.
  uint64_t outsideArena = 0;
  for (const MemorySample &s : samples)
    outsideArena = std::max(outsideArena, s.bytes[static_cast<size_t>(MemoryClass::Stash)] +
                                              s.bytes[static_cast<size_t>(MemoryClass::Messages)]);
  const double allocated =
      profile.stateBytes + profile.arenaBytes == 0
          ? 0.0
          : static_cast<double>(profile.stateBytes + profile.arenaBytes + outsideArena);
  top = std::max(top, allocated);

  // The legend's entries, laid out in rows under the axis before the height is known.
  struct Entry {
    std::string text;
    const char *colour;
    bool line;
  };
  std::vector<Entry> entries;
  for (size_t c = 0; c < kMemoryClasses; ++c)
    if (classPeak[c])
      entries.push_back({std::string(memoryClassName(static_cast<MemoryClass>(c))) + " (peak " +
                             humanBytes(static_cast<double>(classPeak[c])) + ")",
                         kClassColours[c], false});
  if (measured)
    entries.push_back({kResidentName, kResidentColour, true});
  std::vector<std::pair<double, int>> entryAt; // x, row
  {
    double x = kLeft;
    int row = 0;
    for (const Entry &e : entries) {
      double w = 28 + 16 + kCharWidth * e.text.size();
      if (x > kLeft && x + w - 16 > width - kRight) {
        x = kLeft;
        ++row;
      }
      entryAt.emplace_back(x, row);
      x += w;
    }
  }
  const int legendRows = entryAt.empty() ? 0 : entryAt.back().second + 1;
  const double legendY = plotBottom + kAxisHeight;
  const double height = legendY + std::max(1, legendRows) * kLegendRow + 6;

  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + svg::number(width) +
         "\" height=\"" + svg::number(height) + "\" viewBox=\"0 0 " + svg::number(width) + " " +
         svg::number(height) + "\" font-family=\"sans-serif\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out += textElement(kLeft, 24, " class=\"title\" font-size=\"15\"", profile.title());
  const std::string frame = "<rect class=\"frame\" x=\"" + svg::number(kLeft) + "\" y=\"" +
                            svg::number(kTop) + "\" width=\"" + svg::number(kPlotWidth) +
                            "\" height=\"" + svg::number(kPlotHeight) +
                            "\" fill=\"none\" stroke=\"#999\"/>\n";
  if (n == 0) {
    out += frame;
    out += textElement(kLeft + kPlotWidth / 2, kTop + kPlotHeight / 2,
                       " font-size=\"15\" fill=\"#555\" text-anchor=\"middle\"", "no samples");
    return out + "</svg>\n";
  }

  // The x range: the samples' and the marks' (a step's mark comes before its first sample's
  // end). A single sample, or samples all at one x, get a unit wide range around it.
  std::vector<double> xs(n);
  for (size_t i = 0; i < n; ++i)
    xs[i] = std::isfinite(samples[i].x) ? samples[i].x : (i ? xs[i - 1] : 0);
  double lo = *std::min_element(xs.begin(), xs.end());
  double hi = *std::max_element(xs.begin(), xs.end());
  for (const MemoryMark &m : profile.marks)
    if (std::isfinite(m.x)) {
      lo = std::min(lo, m.x);
      hi = std::max(hi, m.x);
    }
  if (!(hi - lo > 1e-9 * std::max(1.0, std::max(std::fabs(lo), std::fabs(hi))))) {
    double pad = std::max(0.5, std::fabs(lo) * 1e-6); // one that counts beside a large x
    lo -= pad;
    hi += pad;
  }
  const double xScale = kPlotWidth / (hi - lo);
  auto X = [&](double x) { return kLeft + (x - lo) * xScale; };

  // The y range: nice ticks in the binary unit of the largest value, with headroom above it
  // for the peak's marker and the allocated line's label.
  const int unit = unitOf(std::max(top, 1.0));
  const double unitBytes = std::pow(1024.0, unit);
  double yStep = svg::tickStep(std::max(top, 1.0) * 1.04 / unitBytes, 8);
  if (unit == 0)
    yStep = std::max(yStep, 1.0);
  const double yTop = std::ceil(std::max(top, 1.0) * 1.04 / unitBytes / yStep) * yStep * unitBytes;
  auto Y = [&](double bytes) { return plotBottom - bytes / yTop * kPlotHeight; };

  // Each sample's step: from the previous sample's x (the range's start for the first) to its
  // own; the last reaches the range's end.
  std::vector<Segment> segments(n);
  for (size_t i = 0; i < n; ++i) {
    double left = i ? xs[i - 1] : lo, right = xs[i];
    if (i + 1 == n)
      right = std::max(right, hi);
    segments[i] = {std::min(left, right), std::max(left, right), samples[i].bytes,
                   samples[i].total()};
  }
  const double peakX = X((segments[peak].left + segments[peak].right) / 2);
  if (segments.size() > kMaxSegments) {
    std::vector<Segment> merged;
    long column = -1;
    for (const Segment &s : segments) {
      long at = std::lround(std::floor(X((s.left + s.right) / 2) - kLeft));
      if (merged.empty() || at != column) {
        merged.push_back(s);
        column = at;
        continue;
      }
      Segment &m = merged.back();
      double left = std::min(m.left, s.left), right = std::max(m.right, s.right);
      if (s.total > m.total)
        m = s;
      m.left = left;
      m.right = right;
    }
    segments = std::move(merged);
  }

  // The grid and the y axis.
  out += "<g class=\"y-axis\" font-size=\"10\" fill=\"#555\">\n";
  const double yStepBytes = yStep * unitBytes;
  for (int i = 0; i * yStepBytes <= yTop * (1 + 1e-9); ++i) {
    double y = Y(i * yStepBytes);
    out += "<line x1=\"" + svg::number(kLeft) + "\" y1=\"" + svg::number(y) + "\" x2=\"" +
           svg::number(plotRight) + "\" y2=\"" + svg::number(y) + "\" stroke=\"#e6e6e6\"/>";
    out += textElement(kLeft - 6, y + 3.5, " text-anchor=\"end\"",
                       tickFigure(i * yStep, yStep) + " " + kUnits[unit]);
  }
  out += "<text transform=\"translate(16 " + svg::number(kTop + kPlotHeight / 2) +
         ") rotate(-90)\" font-size=\"12\" text-anchor=\"middle\">bytes</text>\n";
  out += "</g>\n";

  // The stacked areas: each class's top edge left to right, then its bottom edge back.
  out += "<g class=\"areas\" stroke=\"none\">\n";
  for (size_t c = 0; c < kMemoryClasses; ++c) {
    if (!classPeak[c])
      continue;
    Outline edge;
    for (const Segment &s : segments) {
      double below = 0;
      for (size_t d = 0; d < c; ++d)
        below += static_cast<double>(s.bytes[d]);
      double y = Y(below + static_cast<double>(s.bytes[c]));
      edge.add(X(s.left), y);
      edge.add(X(s.right), y);
    }
    for (size_t k = segments.size(); k-- > 0;) {
      const Segment &s = segments[k];
      double below = 0;
      for (size_t d = 0; d < c; ++d)
        below += static_cast<double>(s.bytes[d]);
      edge.add(X(s.right), Y(below));
      edge.add(X(s.left), Y(below));
    }
    std::string d;
    for (const auto &[x, y] : edge.points())
      d += (d.empty() ? "M" : " L") + svg::number(x) + " " + svg::number(y);
    out += "<path class=\"class-" + std::to_string(c) + "\" d=\"" + d + " Z\" fill=\"" +
           kClassColours[c] + "\"><title>" + memoryClassName(static_cast<MemoryClass>(c)) +
           "</title></path>\n";
  }
  out += "</g>\n";

  // The measured resident memory: a line through the samples that have it; of many, each
  // pixel column's highest and lowest, in order.
  if (measured) {
    std::vector<std::pair<double, double>> all, points;
    for (size_t i = 0; i < n; ++i)
      if (samples[i].resident)
        all.emplace_back(X(xs[i]), Y(static_cast<double>(samples[i].resident)));
    if (all.size() <= kMaxSegments)
      points = all;
    else
      for (size_t i = 0, j; i < all.size(); i = j) {
        double column = std::floor(all[i].first);
        size_t high = i, low = i;
        for (j = i; j < all.size() && std::floor(all[j].first) == column; ++j) {
          if (all[j].second < all[high].second)
            high = j;
          if (all[j].second > all[low].second)
            low = j;
        }
        points.push_back(all[std::min(high, low)]);
        if (high != low)
          points.push_back(all[std::max(high, low)]);
      }
    out += "<g class=\"resident\">\n<polyline points=\"";
    for (size_t k = 0; k < points.size(); ++k)
      out += (k ? " " : "") + svg::number(points[k].first) + "," + svg::number(points[k].second);
    out += std::string("\" fill=\"none\" stroke=\"") + kResidentColour +
           "\" stroke-width=\"1.5\" stroke-linejoin=\"round\"><title>" + kResidentName +
           "</title></polyline>\n";
    if (points.size() == 1)
      out += "<circle cx=\"" + svg::number(points[0].first) + "\" cy=\"" +
             svg::number(points[0].second) + "\" r=\"2\" fill=\"" + kResidentColour + "\"/>\n";
    out += "</g>\n";
  }
  out += frame;

  // The x axis: instructions, or predicted time in ms or s.
  {
    double unitSeconds = 1;
    const char *suffix = "";
    std::string name = "instruction";
    if (profile.xIsTime) {
      unitSeconds = hi - lo < 2 ? 1e-3 : 1;
      suffix = hi - lo < 2 ? " ms" : " s";
      name = profile.measured ? "time" : "predicted time";
    }
    double step = svg::tickStep((hi - lo) / unitSeconds, 10);
    if (!profile.xIsTime)
      step = std::max(step, 1.0); // instructions are whole
    out += "<g class=\"x-axis\" font-size=\"10\" fill=\"#555\">\n";
    // At most a dozen ticks: the bound only guards against x values too large for their
    // differences to count.
    const double first = std::ceil(lo / unitSeconds / step - 1e-9);
    for (int i = 0; i < 24; ++i) {
      double k = first + i;
      if (k * step * unitSeconds > hi + (hi - lo) * 1e-9)
        break;
      double x = X(k * step * unitSeconds);
      out += "<line x1=\"" + svg::number(x) + "\" y1=\"" + svg::number(plotBottom) + "\" x2=\"" +
             svg::number(x) + "\" y2=\"" + svg::number(plotBottom + 5) + "\" stroke=\"#555\"/>";
      out += textElement(x, plotBottom + 16, " text-anchor=\"middle\"",
                         tickFigure(k * step, step) + suffix);
    }
    out += textElement(kLeft + kPlotWidth / 2, plotBottom + 34,
                       " font-size=\"12\" fill=\"black\" text-anchor=\"middle\"", name);
    out += "</g>\n";
  }

  // The marks: rules over the plot, their labels in two rows above it. A label goes in the
  // first row where it clears the labels drawn there and the rules that rise through it to
  // the row above; else it is left out, and its rule keeps it as a tooltip.
  if (!profile.marks.empty()) {
    std::vector<const MemoryMark *> marks;
    for (const MemoryMark &m : profile.marks)
      if (std::isfinite(m.x) && m.x >= lo - (hi - lo) * 1e-9 && m.x <= hi + (hi - lo) * 1e-9)
        marks.push_back(&m);
    std::stable_sort(marks.begin(), marks.end(),
                     [](const MemoryMark *a, const MemoryMark *b) { return a->x < b->x; });
    const double rowY[2] = {kTop - 26, kTop - 12};
    std::vector<std::pair<double, double>> rowLabels[2]; // left, right
    std::vector<double> tallRules;                       // the x of rules up to the first row
    auto clear = [](const std::vector<std::pair<double, double>> &labels, double left,
                    double right) {
      for (const auto &[l, r] : labels)
        if (left < r + 8 && l < right + 8)
          return false;
      return true;
    };
    out += "<g class=\"marks\" font-size=\"11\" fill=\"#333\">\n";
    for (const MemoryMark *m : marks) {
      double x = X(m->x);
      double w = kSmallCharWidth * m->label.size();
      double left = std::max(4.0, x + 3 + w <= width - 4 ? x + 3 : x - 3 - w);
      int row = -1;
      if (clear(rowLabels[0], left, left + w) && clear(rowLabels[1], x, x))
        row = 0;
      else if (clear(rowLabels[1], left, left + w) &&
               std::none_of(tallRules.begin(), tallRules.end(),
                            [&](double r) { return r > left - 2 && r < left + w + 2; }))
        row = 1;
      double ruleTop = row < 0 ? kTop : rowY[row] - 9;
      out += "<line x1=\"" + svg::number(x) + "\" y1=\"" + svg::number(ruleTop) + "\" x2=\"" +
             svg::number(x) + "\" y2=\"" + svg::number(plotBottom) +
             "\" stroke=\"#666\" stroke-width=\"0.75\" stroke-dasharray=\"3,3\"><title>" +
             svg::escapeXml(m->label) + "</title></line>\n";
      if (row >= 0) {
        out += textElement(left, rowY[row], "", m->label);
        rowLabels[row].emplace_back(left, left + w);
        if (row == 0)
          tallRules.push_back(x);
      }
    }
    out += "</g>\n";
  }

  // The peak: a marker on the top of the stack, its label beside it on the side with room and
  // above it unless that leaves the plot.
  Box peakBox{0, 0, 0, 0};
  {
    const MemorySample &s = samples[peak];
    double py = Y(static_cast<double>(peakTotal));
    std::string line1 = "peak " + humanBytes(static_cast<double>(peakTotal));
    if (!s.what.empty())
      line1 += " at " + s.what;
    if (!s.loc.empty())
      line1 += " (" + shortLocation(s.loc) + ")";
    std::string line2 = s.program;
    if (s.instr >= 0)
      line2 += (line2.empty() ? "instruction " : ", instruction ") + std::to_string(s.instr);
    if (s.micro >= 0)
      line2 += (line2.empty() ? "micro-batch " : ", micro-batch ") + std::to_string(s.micro);
    if (s.step > 0)
      line2 += (line2.empty() ? "step " : ", step ") + std::to_string(s.step);
    int lines = line2.empty() ? 1 : 2;
    const size_t fits = static_cast<size_t>((width - 16) / kCharWidth);
    line1 = ellipsized(line1, fits);
    line2 = ellipsized(line2, fits);
    double w = kCharWidth * std::max(line1.size(), line2.size());
    double left = peakX + 8;
    if (left + w > plotRight)
      left = peakX - 8 - w;
    left = std::max(4.0, std::min(left, width - 4 - w));
    double first = py - 8 - 14 * (lines - 1);
    if (first - 12 < kTop + 2)
      first = py + 18;
    peakBox = {left - 3, first - 12, left + w + 3, first + 14 * (lines - 1) + 4};
    out += "<g class=\"peak\" font-size=\"12\">\n";
    out += "<rect x=\"" + svg::number(peakBox.x0) + "\" y=\"" + svg::number(peakBox.y0) +
           "\" width=\"" + svg::number(peakBox.x1 - peakBox.x0) + "\" height=\"" +
           svg::number(peakBox.y1 - peakBox.y0) + "\" fill=\"white\" fill-opacity=\"0.85\"/>\n";
    out += "<circle cx=\"" + svg::number(peakX) + "\" cy=\"" + svg::number(py) +
           "\" r=\"3.5\" fill=\"#222\" stroke=\"white\" stroke-width=\"1.5\"/>\n";
    out += textElement(left, first, "", line1);
    if (lines == 2)
      out += textElement(left, first + 14, " fill=\"#444\"", line2);
    out += "</g>\n";
  }

  // What the rank allocates: a dashed line, its label at the end of the line away from the
  // peak's label, above the line or else below it.
  if (allocated > 0) {
    double y = Y(allocated);
    std::string label = "allocated: " + humanBytes(allocated);
    double w = kCharWidth * label.size();
    bool peakLeft = peakX < kLeft + kPlotWidth / 2;
    double farLeft = peakLeft ? plotRight - 4 - w : kLeft + 4;
    double nearLeft = peakLeft ? kLeft + 4 : plotRight - 4 - w;
    double chosenLeft = farLeft, chosenBase = y - 4;
    for (double left : {farLeft, nearLeft}) {
      bool placed = false;
      for (double base : {y - 4, y + 14}) {
        Box box{left, base - 11, left + w, base + 3};
        if (!box.overlaps(peakBox) && base - 11 >= kTop && base + 3 <= plotBottom) {
          chosenLeft = left;
          chosenBase = base;
          placed = true;
          break;
        }
      }
      if (placed)
        break;
    }
    out += "<g class=\"allocated\" font-size=\"12\">\n";
    out += "<line x1=\"" + svg::number(kLeft) + "\" y1=\"" + svg::number(y) + "\" x2=\"" +
           svg::number(plotRight) + "\" y2=\"" + svg::number(y) + "\" stroke=\"" +
           kAllocatedColour + "\" stroke-width=\"1.25\" stroke-dasharray=\"6,4\"/>\n";
    out += "<rect x=\"" + svg::number(chosenLeft - 2) + "\" y=\"" + svg::number(chosenBase - 11) +
           "\" width=\"" + svg::number(w + 4) +
           "\" height=\"14\" fill=\"white\" fill-opacity=\"0.7\"/>";
    out += textElement(chosenLeft, chosenBase, std::string(" fill=\"") + kAllocatedColour + "\"",
                       label);
    out += "</g>\n";
  }

  // The legend.
  out += "<g class=\"legend\" font-size=\"12\">\n";
  for (size_t k = 0; k < entries.size(); ++k) {
    const Entry &e = entries[k];
    double x = entryAt[k].first, y = legendY + entryAt[k].second * kLegendRow;
    if (e.line)
      out += "<line x1=\"" + svg::number(x) + "\" y1=\"" + svg::number(y + 6) + "\" x2=\"" +
             svg::number(x + 12) + "\" y2=\"" + svg::number(y + 6) + "\" stroke=\"" + e.colour +
             "\" stroke-width=\"2\"/>";
    else
      out += "<rect x=\"" + svg::number(x) + "\" y=\"" + svg::number(y) +
             "\" width=\"12\" height=\"12\" fill=\"" + e.colour + "\"/>";
    out += textElement(x + 16, y + 10, "", e.text);
  }
  out += "</g>\n</svg>\n";
  return out;
}

} // namespace tessel::memory
