//===- MemoryProfileRenderTest.cpp - Tests of the memory profile pictures -===//
//
// memoryProfileSvg and memoryProfileTraceJson on profiles built by hand, so that what they
// draw can be checked against known bytes, peaks and marks.
//
//===----------------------------------------------------------------------===//

#include "common/memory/MemoryProfile.h"
#include "runtime/support/Json.h"

#include "test/unit/XmlCheck.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>

using tessel::memory::MemoryClass;
using tessel::memory::MemoryMark;
using tessel::memory::MemoryProfile;
using tessel::memory::memoryProfileSvg;
using tessel::memory::memoryProfileTraceJson;
using tessel::memory::MemorySample;
using tessel::rt::Json;

namespace {

using tessel::test::parseXml;

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB;

void setBytes(MemorySample &s, MemoryClass c, uint64_t bytes) {
  s.bytes[static_cast<size_t>(c)] = bytes;
}

/// Six samples of one step: parameters flat at 1 MiB, kept activations rising to 768 KiB and
/// falling, a 2 MiB temporary at the third instruction (the peak, 3.75 MiB); names and
/// locations with characters XML and JSON must escape; two marks. Measured: with resident
/// bytes at all but the first sample.
MemoryProfile sixSamples(bool measured) {
  MemoryProfile p;
  p.model = "tiny<&>\"gpt";
  p.rank = 1;
  p.stage = 1;
  p.stages = 2;
  p.measured = measured;
  p.stateBytes = 1 * MiB;
  p.arenaBytes = 3 * MiB;
  const uint64_t kept[6] = {0, 256 * KiB, 512 * KiB, 768 * KiB, 256 * KiB, 0};
  const uint64_t temporaries[6] = {0, 0, 0, 2 * MiB, 0, 0};
  const char *what[6] = {"step 1 begins", "matmul", "gelu",
                         "softmax<&>",    "matmul", "send to stage 0"};
  for (int i = 0; i < 6; ++i) {
    MemorySample s;
    s.x = i;
    setBytes(s, MemoryClass::Parameters, 1 * MiB);
    setBytes(s, MemoryClass::Kept, kept[i]);
    setBytes(s, MemoryClass::Temporaries, temporaries[i]);
    s.step = 1;
    s.micro = i == 0 ? -1 : 0;
    s.what = what[i];
    if (i >= 1 && i <= 4) {
      s.program = "forward_backward";
      s.instr = i - 1;
      s.loc = i == 3 ? "a&b.tsl:7:\"9\"" : "m.tsl:" + std::to_string(i) + ":1";
    }
    if (measured && i > 0)
      s.resident = 5 * MiB + i * 100 * KiB;
    p.samples.push_back(s);
  }
  p.marks.push_back({0, "step 1"});
  p.marks.push_back({4.5, "optimizer <step>"});
  return p;
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

size_t countOf(const std::string &text, const std::string &part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
    ++n;
  return n;
}

/// Checks what every picture must be: a well-formed standalone SVG without NaN or infinity.
/// Returns its elements.
std::vector<std::string> checkSvg(const std::string &svg) {
  std::vector<std::string> elements;
  std::string error;
  EXPECT_TRUE(parseXml(svg, elements, error)) << error;
  EXPECT_EQ(elements.empty() ? "" : elements.front(), "svg");
  EXPECT_TRUE(svg.compare(0, 5, "<?xml") == 0 || svg.compare(0, 4, "<svg") == 0);
  EXPECT_TRUE(contains(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
  const std::string tail = "</svg>\n";
  EXPECT_TRUE(svg.size() >= tail.size() &&
              svg.compare(svg.size() - tail.size(), tail.size(), tail) == 0);
  std::string lower = svg;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  EXPECT_FALSE(contains(lower, "nan")) << svg;
  EXPECT_FALSE(contains(lower, "inf")) << svg;
  return elements;
}

/// The value of attribute `name` of the first element at or after `from` that has it.
double attribute(const std::string &svg, size_t from, const std::string &name) {
  size_t at = svg.find(" " + name + "=\"", from);
  EXPECT_NE(at, std::string::npos) << name;
  if (at == std::string::npos)
    return 0;
  return std::strtod(svg.c_str() + at + name.size() + 3, nullptr);
}

TEST(MemoryProfileSvg, DrawsClassesPeakMarksAndTitle) {
  std::string svg = memoryProfileSvg(sixSamples(false));
  std::vector<std::string> elements = checkSvg(svg);

  EXPECT_TRUE(contains(svg, ">tiny&lt;&amp;&gt;&quot;gpt: rank 1 (pipeline stage 1 of 2), "
                            "predicted</text>"));
  // An area and a legend entry, with its peak, for each class ever nonzero, and no others.
  EXPECT_EQ(std::count(elements.begin(), elements.end(), "path"), 3);
  for (int c : {0, 3, 5})
    EXPECT_TRUE(contains(svg, "<path class=\"class-" + std::to_string(c) + "\"")) << c;
  EXPECT_TRUE(contains(svg, ">parameters (peak 1.00 MiB)</text>"));
  EXPECT_TRUE(contains(svg, ">kept activations (peak 768.00 KiB)</text>"));
  EXPECT_TRUE(contains(svg, ">temporaries (peak 2.00 MiB)</text>"));
  for (const char *absent : {"gradients", "optimizer state", "recomputed", "pipeline stash",
                             "pipeline messages", "resident"})
    EXPECT_FALSE(contains(svg, absent)) << absent;
  // The areas stack bottom to top in class order.
  EXPECT_LT(svg.find("class=\"class-0\""), svg.find("class=\"class-3\""));
  EXPECT_LT(svg.find("class=\"class-3\""), svg.find("class=\"class-5\""));

  // The peak: the fourth sample, 1 MiB + 768 KiB + 2 MiB.
  EXPECT_TRUE(contains(svg, ">peak 3.75 MiB at softmax&lt;&amp;&gt; "
                            "(a&amp;b.tsl:7:&quot;9&quot;)</text>"));
  EXPECT_TRUE(contains(svg, ">forward_backward, instruction 2, micro-batch 0, step 1</text>"));
  EXPECT_TRUE(contains(svg, ">allocated: 4.00 MiB</text>"));
  // The marks, escaped, and the axes.
  EXPECT_TRUE(contains(svg, ">step 1</text>"));
  EXPECT_TRUE(contains(svg, ">optimizer &lt;step&gt;</text>"));
  EXPECT_TRUE(contains(svg, ">instruction</text>"));
  EXPECT_TRUE(contains(svg, ">bytes</text>"));
  EXPECT_TRUE(contains(svg, " MiB</text>"));
}

TEST(MemoryProfileSvg, MeasuredResidentLine) {
  MemoryProfile p = sixSamples(true);
  std::string svg = memoryProfileSvg(p);
  std::vector<std::string> elements = checkSvg(svg);
  EXPECT_TRUE(contains(svg, ", measured</text>"));
  EXPECT_EQ(std::count(elements.begin(), elements.end(), "polyline"), 1);
  EXPECT_TRUE(contains(svg, ">resident (process RSS / device)</text>"));
  // Five measured points (the first sample has none).
  size_t at = svg.find("<polyline points=\"");
  ASSERT_NE(at, std::string::npos);
  size_t end = svg.find('"', at + 18);
  EXPECT_EQ(countOf(svg.substr(at, end - at), ","), 5u);
}

TEST(MemoryProfileSvg, PeakIsTheFirstOfEqualTotals) {
  MemoryProfile p = sixSamples(false);
  p.samples[1].bytes = p.samples[3].bytes;
  p.samples[1].what = "first<peak>";
  std::string svg = memoryProfileSvg(p);
  checkSvg(svg);
  EXPECT_TRUE(contains(svg, ">peak 3.75 MiB at first&lt;peak&gt; (m.tsl:1:1)</text>"));
  EXPECT_FALSE(contains(svg, "at softmax"));
}

TEST(MemoryProfileSvg, PeakLabelStaysInsideThePicture) {
  // The peak at the right edge: its label turns to the left of the marker.
  MemoryProfile p = sixSamples(false);
  std::swap(p.samples[3].bytes, p.samples[5].bytes);
  std::string svg = memoryProfileSvg(p);
  checkSvg(svg);
  size_t group = svg.find("<g class=\"peak\"");
  ASSERT_NE(group, std::string::npos);
  double width = attribute(svg, 0, "width");
  double marker = attribute(svg, svg.find("<circle", group), "cx");
  double label = attribute(svg, svg.find("<text", group), "x");
  EXPECT_LT(label, marker);
  EXPECT_GT(label, 0);
  EXPECT_TRUE(contains(svg, ">peak 3.75 MiB at send to stage 0</text>"));
  EXPECT_GT(width, marker);

  // At the left edge, to the right of it.
  std::swap(p.samples[5].bytes, p.samples[0].bytes);
  svg = memoryProfileSvg(p);
  checkSvg(svg);
  group = svg.find("<g class=\"peak\"");
  EXPECT_GT(attribute(svg, svg.find("<text", group), "x"),
            attribute(svg, svg.find("<circle", group), "cx"));
}

TEST(MemoryProfileSvg, MarkLabelsDoNotOverlap) {
  // Forty marks close together with long labels: every rule is drawn, and the labels drawn
  // in either row keep apart (at the writer's 6.5 px a character for 11px text).
  MemoryProfile p = sixSamples(false);
  p.marks.clear();
  for (int i = 0; i < 40; ++i)
    p.marks.push_back({i * 0.125, "optimizer step " + std::to_string(i)});
  std::string svg = memoryProfileSvg(p);
  checkSvg(svg);
  size_t begin = svg.find("<g class=\"marks\"");
  ASSERT_NE(begin, std::string::npos);
  std::string marks = svg.substr(begin, svg.find("</g>", begin) - begin);
  EXPECT_EQ(countOf(marks, "<line"), 40u);
  size_t labels = countOf(marks, "<text");
  EXPECT_GT(labels, 1u);
  EXPECT_LT(labels, 40u);
  std::map<double, std::vector<std::pair<double, double>>> rows; // y -> [left, right]
  for (size_t at = marks.find("<text"); at != std::string::npos; at = marks.find("<text", at + 1)) {
    double x = attribute(marks, at, "x"), y = attribute(marks, at, "y");
    size_t open = marks.find('>', at), close = marks.find("</text>", at);
    double w = 6.5 * static_cast<double>(close - open - 1);
    rows[y].emplace_back(x, x + w);
  }
  EXPECT_LE(rows.size(), 2u);
  for (auto &[y, spans] : rows) {
    std::sort(spans.begin(), spans.end());
    for (size_t k = 1; k < spans.size(); ++k)
      EXPECT_GE(spans[k].first, spans[k - 1].second) << "row at y " << y;
  }
}

TEST(MemoryProfileSvg, TimeAxis) {
  MemoryProfile p = sixSamples(false);
  p.xIsTime = true;
  for (MemorySample &s : p.samples)
    s.x *= 0.004; // 4 ms an instruction
  for (MemoryMark &m : p.marks)
    m.x *= 0.004;
  std::string svg = memoryProfileSvg(p);
  checkSvg(svg);
  EXPECT_TRUE(contains(svg, ">predicted time</text>"));
  EXPECT_TRUE(contains(svg, ">20 ms</text>"));
  EXPECT_FALSE(contains(svg, ">instruction</text>"));

  for (MemorySample &s : p.samples)
    s.x *= 1000; // 4 s an instruction
  for (MemoryMark &m : p.marks)
    m.x *= 1000;
  svg = memoryProfileSvg(p);
  checkSvg(svg);
  EXPECT_TRUE(contains(svg, ">20 s</text>"));
}

TEST(MemoryProfileSvg, DegenerateProfiles) {
  MemoryProfile empty;
  empty.model = "m";
  std::string svg = memoryProfileSvg(empty);
  checkSvg(svg);
  EXPECT_TRUE(contains(svg, ">no samples</text>"));
  EXPECT_TRUE(contains(svg, ">m: rank 0, predicted</text>"));

  MemoryProfile one = sixSamples(true);
  one.samples.resize(2);
  one.samples.erase(one.samples.begin());
  std::string oneSvg = memoryProfileSvg(one);
  checkSvg(oneSvg);
  EXPECT_TRUE(contains(oneSvg, ">peak 1.25 MiB at matmul (m.tsl:1:1)</text>"));

  MemoryProfile zeros = sixSamples(false);
  for (MemorySample &s : zeros.samples)
    s.bytes = {};
  zeros.stateBytes = zeros.arenaBytes = 0;
  std::string zeroSvg = memoryProfileSvg(zeros);
  checkSvg(zeroSvg);
  EXPECT_FALSE(contains(zeroSvg, "<path"));
  EXPECT_FALSE(contains(zeroSvg, "allocated"));
  EXPECT_TRUE(contains(zeroSvg, ">peak 0 B at step 1 begins</text>"));

  MemoryProfile sameX = sixSamples(false);
  for (MemorySample &s : sameX.samples)
    s.x = 7;
  checkSvg(memoryProfileSvg(sameX));

  MemoryProfile bad = sixSamples(true);
  bad.samples[2].x = std::numeric_limits<double>::quiet_NaN();
  bad.samples[4].x = std::numeric_limits<double>::infinity();
  bad.marks.push_back({std::numeric_limits<double>::quiet_NaN(), "nowhere"});
  std::string badSvg = memoryProfileSvg(bad);
  checkSvg(badSvg);
  EXPECT_FALSE(contains(badSvg, ">nowhere</text>"));
}

TEST(MemoryProfileSvg, LongProfilesStaySmall) {
  // 50,000 samples: merged per pixel column, with the peak kept.
  MemoryProfile p;
  p.model = "long";
  for (int i = 0; i < 50000; ++i) {
    MemorySample s;
    s.x = i;
    setBytes(s, MemoryClass::Parameters, 64 * MiB);
    setBytes(s, MemoryClass::Kept, static_cast<uint64_t>(i % 1000) * MiB);
    setBytes(s, MemoryClass::Temporaries, i == 31234 ? 2048 * MiB : (i % 7) * MiB);
    s.resident = 2000 * MiB + static_cast<uint64_t>(i % 13) * MiB;
    s.what = i == 31234 ? "the peak" : "kernel";
    p.samples.push_back(s);
  }
  std::string svg = memoryProfileSvg(p);
  checkSvg(svg);
  EXPECT_LT(svg.size(), 400000u);
  EXPECT_TRUE(contains(svg, ">peak 2.29 GiB at the peak</text>"));
}

/// Parses a memory trace, checking its shape.
Json parseTrace(const std::string &text) {
  std::string error;
  std::optional<Json> trace = Json::parse(text, "memory.json", error);
  EXPECT_TRUE(trace) << error << "\n" << text;
  if (!trace)
    return Json();
  EXPECT_TRUE(trace->isObject());
  const Json *events = trace->find("traceEvents");
  EXPECT_TRUE(events && events->isArray());
  const Json *unit = trace->find("displayTimeUnit");
  EXPECT_TRUE(unit && unit->isString() && unit->asString() == "ms");
  return *trace;
}

/// The events of process `pid` named `name` with phase `ph` ("" for any name).
std::vector<Json> eventsOf(const Json &trace, int pid, const std::string &ph,
                           const std::string &name = "") {
  std::vector<Json> found;
  if (const Json *events = trace.find("traceEvents"))
    for (const Json &e : events->items()) {
      const Json *p = e.find("pid"), *phase = e.find("ph"), *n = e.find("name");
      if (p && p->asInt() == pid && phase && phase->asString() == ph && n &&
          (name.empty() || n->asString() == name))
        found.push_back(e);
    }
  return found;
}

TEST(MemoryProfileTrace, CountersMarksAndNames) {
  std::vector<MemoryProfile> profiles = {sixSamples(false), sixSamples(true)};
  Json trace = parseTrace(memoryProfileTraceJson(profiles));

  for (int pid : {0, 1}) {
    const MemoryProfile &p = profiles[pid];
    std::vector<Json> names = eventsOf(trace, pid, "M", "process_name");
    ASSERT_EQ(names.size(), 1u);
    EXPECT_EQ(names[0].find("args")->find("name")->asString(),
              std::string("tiny<&>\"gpt: rank 1 (pipeline stage 1 of 2), ") +
                  (pid ? "measured" : "predicted"));

    // One counter event per sample, keyed by the classes ever nonzero, in class order.
    std::vector<Json> memory = eventsOf(trace, pid, "C", "memory");
    ASSERT_EQ(memory.size(), p.samples.size());
    for (size_t i = 0; i < memory.size(); ++i) {
      EXPECT_DOUBLE_EQ(memory[i].find("ts")->asDouble(), p.samples[i].x);
      const Json *args = memory[i].find("args");
      ASSERT_TRUE(args && args->isObject());
      std::vector<std::string> keys;
      for (const auto &[key, value] : args->members()) {
        keys.push_back(key);
        EXPECT_TRUE(value.isInteger()) << key;
      }
      EXPECT_EQ(keys, (std::vector<std::string>{"parameters", "kept activations", "temporaries"}));
      EXPECT_EQ(args->find("parameters")->asInt(), static_cast<int64_t>(MiB));
      EXPECT_EQ(args->find("kept activations")->asInt(),
                static_cast<int64_t>(p.samples[i].bytes[3]));
      EXPECT_EQ(args->find("temporaries")->asInt(), i == 3 ? static_cast<int64_t>(2 * MiB) : 0);
    }

    // The resident counter only where measured, at the samples measured.
    std::vector<Json> resident = eventsOf(trace, pid, "C", "resident");
    if (!p.measured) {
      EXPECT_TRUE(resident.empty());
    } else {
      ASSERT_EQ(resident.size(), 5u);
      for (size_t k = 0; k < resident.size(); ++k) {
        EXPECT_DOUBLE_EQ(resident[k].find("ts")->asDouble(), static_cast<double>(k + 1));
        EXPECT_EQ(resident[k].find("args")->find("bytes")->asInt(),
                  static_cast<int64_t>(p.samples[k + 1].resident));
      }
    }

    // The marks as process-wide instant events.
    std::vector<Json> marks = eventsOf(trace, pid, "i");
    ASSERT_EQ(marks.size(), 2u);
    EXPECT_EQ(marks[0].find("name")->asString(), "step 1");
    EXPECT_EQ(marks[1].find("name")->asString(), "optimizer <step>");
    EXPECT_DOUBLE_EQ(marks[1].find("ts")->asDouble(), 4.5);
    for (const Json &m : marks)
      EXPECT_EQ(m.find("s")->asString(), "p");
  }
}

TEST(MemoryProfileTrace, TimeInMicroseconds) {
  MemoryProfile p = sixSamples(false);
  p.xIsTime = true;
  for (MemorySample &s : p.samples)
    s.x *= 0.004;
  p.marks[1].x = 0.018;
  Json trace = parseTrace(memoryProfileTraceJson({p}));
  std::vector<Json> memory = eventsOf(trace, 0, "C", "memory");
  ASSERT_EQ(memory.size(), 6u);
  EXPECT_NEAR(memory[5].find("ts")->asDouble(), 20000, 1e-6); // 20 ms
  std::vector<Json> marks = eventsOf(trace, 0, "i");
  ASSERT_EQ(marks.size(), 2u);
  EXPECT_NEAR(marks[1].find("ts")->asDouble(), 18000, 1e-6);
}

TEST(MemoryProfileTrace, DegenerateProfiles) {
  Json none = parseTrace(memoryProfileTraceJson({}));
  EXPECT_EQ(none.find("traceEvents")->size(), 0u);

  MemoryProfile empty;
  MemoryProfile bad = sixSamples(false);
  bad.samples[2].x = std::numeric_limits<double>::quiet_NaN();
  bad.marks[0].x = -std::numeric_limits<double>::infinity();
  bad.marks[1].label = std::string("tab\there \\ \x01 \"quoted\"");
  MemoryProfile zeros = sixSamples(false);
  for (MemorySample &s : zeros.samples)
    s.bytes = {};
  Json trace = parseTrace(memoryProfileTraceJson({empty, bad, zeros}));
  EXPECT_EQ(eventsOf(trace, 0, "M", "process_name").size(), 1u);
  EXPECT_TRUE(eventsOf(trace, 0, "C").empty());
  EXPECT_EQ(eventsOf(trace, 1, "C", "memory").size(), 6u);
  EXPECT_EQ(eventsOf(trace, 1, "i")[1].find("name")->asString(), bad.marks[1].label);
  // All-zero samples still give one (empty) counter event each.
  std::vector<Json> zero = eventsOf(trace, 2, "C", "memory");
  ASSERT_EQ(zero.size(), 6u);
  EXPECT_EQ(zero[0].find("args")->size(), 0u);
}

} // namespace
