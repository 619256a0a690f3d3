//===- ProgressTest.cpp - Tests of the progress line and metrics file ------===//

#include "runtime/host/Progress.h"
#include "test/unit/ScratchDir.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

using namespace tessel::rt;
using tessel::test::readFile;
using tessel::test::ScratchDir;

namespace {

/// A FILE* whose contents the test can read back.
class Capture {
public:
  Capture() : file_(open_memstream(&buffer_, &size_)) {}
  ~Capture() {
    std::fclose(file_);
    std::free(buffer_);
  }
  FILE *file() { return file_; }
  std::string text() {
    std::fflush(file_);
    return std::string(buffer_, size_);
  }

private:
  char *buffer_ = nullptr;
  size_t size_ = 0;
  FILE *file_;
};

TEST(Progress, FormatDuration) {
  EXPECT_EQ(ProgressLine::formatDuration(0), "0s");
  EXPECT_EQ(ProgressLine::formatDuration(42.4), "42s");
  EXPECT_EQ(ProgressLine::formatDuration(59.4), "59s");
  EXPECT_EQ(ProgressLine::formatDuration(72), "1m12s");
  EXPECT_EQ(ProgressLine::formatDuration(605), "10m05s");
  EXPECT_EQ(ProgressLine::formatDuration(3599.4), "59m59s");
  EXPECT_EQ(ProgressLine::formatDuration(3600), "1h00m");
  EXPECT_EQ(ProgressLine::formatDuration(7500), "2h05m");
  EXPECT_EQ(ProgressLine::formatDuration(100 * 3600), "100h00m");
  EXPECT_EQ(ProgressLine::formatDuration(-1), "--");
  EXPECT_EQ(ProgressLine::formatDuration(1.0 / 0.0), "--");
}

TEST(Progress, FormatRate) {
  EXPECT_EQ(ProgressLine::formatRate(0), "0");
  EXPECT_EQ(ProgressLine::formatRate(950), "950");
  EXPECT_EQ(ProgressLine::formatRate(999.7), "1.0k");
  EXPECT_EQ(ProgressLine::formatRate(12345), "12.3k");
  EXPECT_EQ(ProgressLine::formatRate(999960), "1.0M");
  EXPECT_EQ(ProgressLine::formatRate(1.5e6), "1.5M");
  EXPECT_EQ(ProgressLine::formatRate(3.4e9), "3.4G");
}

TEST(Progress, FormatLine) {
  EXPECT_EQ(ProgressLine::formatLine(120, 600, {2.34118, 0.81234, 2.91e-3, 0.4123, 12345}, 72),
            "step 120/600  loss 2.3412  norm 0.8123  lr 2.91e-03  412 ms  12.3k tok/s  ETA 1m12s");
  // The step is padded to the total's width; an unknown ETA shows "--"; a norm or step time
  // not given is left out.
  EXPECT_EQ(ProgressLine::formatLine(7, 600, {10.5, -1, 0, -1, 800}, -1),
            "step   7/600  loss 10.5000  lr 0.00e+00  800 tok/s  ETA --");
  // The device's figures go between the rate and the ETA.
  EXPECT_EQ(ProgressLine::formatLine(7, 600, {10.5, -1, 0, -1, 800}, -1,
                                     "MFU 41.2%  mem 1.0/80.0 GiB"),
            "step   7/600  loss 10.5000  lr 0.00e+00  800 tok/s  MFU 41.2%  mem 1.0/80.0 GiB  "
            "ETA --");
}

TEST(Progress, StepTimeInMillisecondsOrMicroseconds) {
  EXPECT_EQ(ProgressLine::formatStepTime(1.234), "1234 ms");
  EXPECT_EQ(ProgressLine::formatStepTime(0.04123), "41.2 ms");
  EXPECT_EQ(ProgressLine::formatStepTime(0.004123), "4.12 ms");
  EXPECT_EQ(ProgressLine::formatStepTime(0.000412), "412 us");
}

TEST(Progress, TerminalRedrawsOneLine) {
  Capture out;
  double now = 100;
  ProgressLine progress(100, true, out.file(), 0, [&] { return now; });
  now = 110; // 10 steps in 10 s: 1 s per step
  progress.update(10, {3.5, -1, 1e-3, -1, 2048});
  now = 120;
  progress.update(20, {3.25, -1, 1e-3, -1, 2048});
  progress.finish();
  progress.finish(); // a second finish adds nothing
  EXPECT_EQ(out.text(), "\rstep  10/100  loss 3.5000  lr 1.00e-03  2.0k tok/s  ETA 1m30s\x1b[K"
                        "\rstep  20/100  loss 3.2500  lr 1.00e-03  2.0k tok/s  ETA 1m20s\x1b[K"
                        "\n");
}

TEST(Progress, LogPrintsPlainLines) {
  Capture out;
  double now = 0;
  // Resumed at step 300: the ETA averages only the steps run since.
  ProgressLine progress(600, false, out.file(), 300, [&] { return now; });
  progress.update(300, {2.0, -1, 3e-4, -1, 0}); // no step run yet: no estimate
  now = 10;
  progress.update(310, {2.0, -1, 3e-4, -1, 1.5e6});
  now = 2910;
  progress.update(600, {1.5, -1, 3e-5, -1, 1.5e6});
  progress.finish();
  EXPECT_EQ(out.text(), "step 300/600  loss 2.0000  lr 3.00e-04  0 tok/s  ETA --\n"
                        "step 310/600  loss 2.0000  lr 3.00e-04  1.5M tok/s  ETA 4m50s\n"
                        "step 600/600  loss 1.5000  lr 3.00e-05  1.5M tok/s  ETA 0s\n");
}

TEST(Progress, RealClockGivesAnEstimate) {
  Capture out;
  ProgressLine progress(10, false, out.file());
  progress.update(1, {1.0, -1, 1.0, -1, 1.0});
  EXPECT_NE(out.text().find("ETA 0s"), std::string::npos) << out.text();
}

TEST(Progress, MemoryStreamIsNotATerminal) {
  Capture out;
  EXPECT_FALSE(streamIsTerminal(out.file()));
  EXPECT_FALSE(streamIsTerminal(nullptr));
}

TEST(Metrics, AppendsOneFlushedJsonObjectPerLine) {
  ScratchDir dir;
  std::string path = dir / "metrics.jsonl";
  std::string error;
  {
    auto metrics = MetricsWriter::open(path, error);
    ASSERT_TRUE(metrics) << error;
    EXPECT_EQ(metrics->path(), path);
    Json record = Json::object();
    record.set("step", 1);
    record.set("loss", 2.5);
    record.set("note", "a \"quoted\"\nline");
    ASSERT_TRUE(metrics->write(record, error)) << error;
    // Flushed: readable before the writer closes.
    EXPECT_EQ(readFile(path), "{\"step\":1,\"loss\":2.5,\"note\":\"a \\\"quoted\\\"\\nline\"}\n");
  }
  {
    auto metrics = MetricsWriter::open(path, error); // appends, keeping earlier lines
    ASSERT_TRUE(metrics) << error;
    Json record = Json::object();
    record.set("step", 2);
    record.set("loss", 0.1);
    ASSERT_TRUE(metrics->write(record, error)) << error;
  }
  std::istringstream lines(readFile(path));
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    std::optional<Json> record = Json::parse(line, path, error);
    ASSERT_TRUE(record) << error;
    EXPECT_EQ(record->find("step")->asInt(), ++count);
  }
  EXPECT_EQ(count, 2);
}

TEST(Metrics, OpenFailureNamesThePath) {
  ScratchDir dir;
  std::string error;
  EXPECT_FALSE(MetricsWriter::open(dir / "missing/metrics.jsonl", error));
  EXPECT_EQ(error, "cannot open metrics file " + (dir / "missing/metrics.jsonl") +
                       ": No such file or directory");
}

} // namespace
