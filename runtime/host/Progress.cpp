//===- Progress.cpp - The training loop's progress line and metrics -------===//

#include "runtime/host/Progress.h"

#include "runtime/support/HostClock.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace tessel::rt {

bool streamIsTerminal(FILE *out) {
  if (!out || !::isatty(::fileno(out)))
    return false;
  const char *term = std::getenv("TERM");
  return term && *term && std::strcmp(term, "dumb") != 0;
}

ProgressLine::ProgressLine(int64_t totalSteps, bool isTerminal, FILE *out, int64_t firstStep,
                           Clock clock)
    : totalSteps_(totalSteps), isTerminal_(isTerminal), out_(out), firstStep_(firstStep),
      clock_(clock ? std::move(clock) : Clock(hostSeconds)), start_(clock_()) {}

std::string ProgressLine::formatDuration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds))
    return "--";
  long long total = std::llround(seconds);
  char buffer[48];
  if (total < 60)
    std::snprintf(buffer, sizeof buffer, "%llds", total);
  else if (total < 3600)
    std::snprintf(buffer, sizeof buffer, "%lldm%02llds", total / 60, total % 60);
  else
    std::snprintf(buffer, sizeof buffer, "%lldh%02lldm", total / 3600, total % 3600 / 60);
  return buffer;
}

std::string ProgressLine::formatRate(double perSecond) {
  char buffer[32];
  if (!std::isfinite(perSecond) || perSecond < 999.5)
    std::snprintf(buffer, sizeof buffer, "%.0f", perSecond);
  else if (perSecond < 999.95e3)
    std::snprintf(buffer, sizeof buffer, "%.1fk", perSecond / 1e3);
  else if (perSecond < 999.95e6)
    std::snprintf(buffer, sizeof buffer, "%.1fM", perSecond / 1e6);
  else
    std::snprintf(buffer, sizeof buffer, "%.1fG", perSecond / 1e9);
  return buffer;
}

std::string ProgressLine::formatStepTime(double seconds) {
  char buffer[32];
  const double ms = seconds * 1e3;
  if (ms >= 100)
    std::snprintf(buffer, sizeof buffer, "%.0f ms", ms);
  else if (ms >= 10)
    std::snprintf(buffer, sizeof buffer, "%.1f ms", ms);
  else if (ms >= 1)
    std::snprintf(buffer, sizeof buffer, "%.2f ms", ms);
  else
    std::snprintf(buffer, sizeof buffer, "%.0f us", ms * 1e3);
  return buffer;
}

std::string ProgressLine::formatLine(int64_t step, int64_t totalSteps, const StepFigures &f,
                                     double etaSeconds, const std::string &detail) {
  // The step is padded to the width of the total, so the line does not jitter.
  const int width = static_cast<int>(std::to_string(totalSteps).size());
  char buffer[96];
  std::snprintf(buffer, sizeof buffer, "step %*lld/%lld  loss %.4f", width,
                static_cast<long long>(step), static_cast<long long>(totalSteps), f.loss);
  std::string line = buffer;
  if (f.gradNorm >= 0) {
    std::snprintf(buffer, sizeof buffer, "  norm %.4f", f.gradNorm);
    line += buffer;
  }
  std::snprintf(buffer, sizeof buffer, "  lr %.2e", f.lr);
  line += buffer;
  if (f.stepSeconds >= 0)
    line += "  " + formatStepTime(f.stepSeconds);
  line += "  " + formatRate(f.tokensPerSec) + " tok/s  ";
  if (!detail.empty())
    line += detail + "  ";
  return line + "ETA " + (etaSeconds < 0 ? "--" : formatDuration(etaSeconds));
}

void ProgressLine::update(int64_t step, const StepFigures &figures, const std::string &detail) {
  double eta = -1;
  if (step > firstStep_) {
    double perStep = (clock_() - start_) / static_cast<double>(step - firstStep_);
    eta = perStep * static_cast<double>(totalSteps_ > step ? totalSteps_ - step : 0);
  }
  std::string line = formatLine(step, totalSteps_, figures, eta, detail);
  if (isTerminal_) {
    std::fprintf(out_, "\r%s\x1b[K", line.c_str());
    lineOpen_ = true;
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

void ProgressLine::finish() {
  if (!lineOpen_)
    return;
  std::fputc('\n', out_);
  std::fflush(out_);
  lineOpen_ = false;
}

std::unique_ptr<MetricsWriter> MetricsWriter::open(const std::string &path, std::string &error) {
  FILE *file = std::fopen(path.c_str(), "a");
  if (!file) {
    error = "cannot open metrics file " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  return std::unique_ptr<MetricsWriter>(new MetricsWriter(path, file));
}

MetricsWriter::~MetricsWriter() { std::fclose(file_); }

bool MetricsWriter::write(const Json &record, std::string &error) {
  std::string line = record.compact();
  line += '\n';
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    error = "cannot write metrics file " + path_ + ": " + std::strerror(errno);
    std::clearerr(file_);
    return false;
  }
  return true;
}

} // namespace tessel::rt
