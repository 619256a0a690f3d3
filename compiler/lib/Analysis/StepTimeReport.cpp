//===- StepTimeReport.cpp - The step-time prediction as text and JSON -----===//
//
// `tessel estimate --cluster` prints the prediction for a reader (the step, its throughput and
// utilisation, and where the slowest rank's step goes) or, with --json, as one object with
// every figure and the time of each kernel.
//
//===----------------------------------------------------------------------===//

#include "tessel/Analysis/StepTime.h"

#include "llvm/Support/JSON.h"

#include <cstdio>
#include <sstream>

using namespace tessel;

namespace {

std::string seconds(double s) {
  char buf[32];
  if (s >= 1)
    std::snprintf(buf, sizeof buf, "%.3f s", s);
  else if (s >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  return buf;
}

} // namespace

std::string tessel::formatPrediction(const StepPrediction &p, double worldSize) {
  std::ostringstream os;
  char line[200];
  os << "\npredicted step on " << p.cluster << ":\n";
  std::snprintf(line, sizeof line,
                "  step %s, %.0f tokens/s, MFU %.1f%%, HFU %.1f%%, %.1f TFLOP/s per accelerator "
                "(%g ranks)\n",
                seconds(p.step).c_str(), p.tokensPerSecond, 100 * p.mfu, 100 * p.hfu,
                p.flopsPerRank / 1e12, worldSize);
  os << line;
  const StepBreakdown &b = p.breakdown;
  auto row = [&](const std::string &what, double t) {
    std::snprintf(line, sizeof line, "  %-24s %12s %6.1f%%\n", what.c_str(), seconds(t).c_str(),
                  p.step > 0 ? 100 * t / p.step : 0.0);
    os << line;
  };
  os << "  breakdown of the slowest rank's step:\n";
  row("compute", b.compute);
  row("recompute", b.recompute);
  for (const auto &[g, t] : b.exposed)
    row("exposed comm " + g, t);
  if (p.pipelined)
    row("pipeline bubble", b.bubble);
  row("optimizer", b.optimizer);
  std::snprintf(line, sizeof line, "  (communication hidden behind compute: %s)\n",
                seconds(b.hidden).c_str());
  os << line;
  return os.str();
}

void tessel::predictionJson(llvm::json::OStream &j, const StepPrediction &p) {
  const StepBreakdown &b = p.breakdown;
  j.object([&] {
    j.attribute("cluster", p.cluster);
    j.attribute("step", p.step);
    j.attribute("tokens", p.tokens);
    j.attribute("tokens_per_second", p.tokensPerSecond);
    j.attribute("model_flops", p.modelFlops);
    j.attribute("hardware_flops", p.hardwareFlops);
    j.attribute("mfu", p.mfu);
    j.attribute("hfu", p.hfu);
    j.attribute("flops_per_rank", p.flopsPerRank);
    j.attributeObject("breakdown", [&] {
      j.attribute("compute", b.compute);
      j.attribute("recompute", b.recompute);
      j.attribute("bubble", b.bubble);
      j.attribute("optimizer", b.optimizer);
      j.attribute("hidden", b.hidden);
      j.attributeObject("exposed", [&] {
        for (const auto &[group, seconds] : b.exposed)
          j.attribute(group, seconds);
      });
    });
    j.attribute("kernels_rank", static_cast<int64_t>(p.kernelsRank));
    j.attributeObject("kernels", [&] {
      for (const auto &[name, k] : p.kernels)
        j.attributeObject(name, [&] {
          j.attribute("seconds", k.seconds);
          j.attribute("calls", k.calls);
        });
    });
  });
}
