//===- Progress.cpp - The training loop's progress line and metrics -------===//

#include "runtime/host/Progress.h"

#include <cerrno>
#include <chrono>
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

static double steadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

ProgressLine::ProgressLine(int64_t totalSteps, bool isTerminal, FILE *out, int64_t firstStep,
                           Clock clock)
    : totalSteps_(totalSteps), isTerminal_(isTerminal), out_(out), firstStep_(firstStep),
      clock_(clock ? std::move(clock) : Clock(steadySeconds)), start_(clock_()) {}

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

std::string ProgressLine::formatLine(int64_t step, int64_t totalSteps, double loss, double lr,
                                     double tokensPerSec, double etaSeconds,
                                     const std::string &detail) {
  // The step is padded to the width of the total, so the line does not jitter.
  int width = static_cast<int>(std::to_string(totalSteps).size());
  char buffer[224];
  std::snprintf(buffer, sizeof buffer, "step %*lld/%lld  loss %.4f  lr %.2e  %s tok/s  %s%sETA %s",
                width, static_cast<long long>(step), static_cast<long long>(totalSteps), loss, lr,
                formatRate(tokensPerSec).c_str(), detail.c_str(), detail.empty() ? "" : "  ",
                etaSeconds < 0 ? "--" : formatDuration(etaSeconds).c_str());
  return buffer;
}

void ProgressLine::update(int64_t step, double loss, double lr, double tokensPerSec,
                          const std::string &detail) {
  double eta = -1;
  if (step > firstStep_) {
    double perStep = (clock_() - start_) / static_cast<double>(step - firstStep_);
    eta = perStep * static_cast<double>(totalSteps_ > step ? totalSteps_ - step : 0);
  }
  std::string line = formatLine(step, totalSteps_, loss, lr, tokensPerSec, eta, detail);
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
