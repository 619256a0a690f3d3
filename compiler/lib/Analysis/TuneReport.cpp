//===- TuneReport.cpp - What tessel tune prints --------------------------===//
//
// The layout search's findings as a table of the fastest layouts, as JSON, as the `parallel`
// section a spec would need for one of them, and as an SVG of every layout's memory against
// its step time.
//
//===----------------------------------------------------------------------===//

#include "tessel/Analysis/Tune.h"

#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

using namespace tessel;
namespace pf = tessel::planfile;
namespace cl = tessel::cluster;

namespace {

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / 1073741824.0);
  return buf;
}

} // namespace

std::string tessel::formatCandidates(const std::vector<Candidate> &all, size_t top,
                                     size_t overMemory, const TransformerShape &s,
                                     const cl::Cluster &c) {
  std::ostringstream os;
  char line[256];
  size_t fitting = 0;
  for (const Candidate &x : all)
    fitting += x.cost.fits;
  os << s.model << ": " << all.size() + overMemory << " layouts, " << fitting << " fit in "
     << gib(c.memory) << " of " << c.name << "\n\n";
  std::snprintf(line, sizeof line, "%-3s %-72s %10s %12s %6s %10s %8s\n", "#", "layout", "step",
                "tokens/s", "MFU", "memory", "bubble");
  os << line;
  for (size_t i = 0; i < all.size() && i < top; ++i) {
    const Candidate &x = all[i];
    std::snprintf(line, sizeof line, "%-3zu %-72s %8.3f s %12.0f %5.1f%% %10s %7.1f%%%s\n", i + 1,
                  x.layout.describe().c_str(), x.cost.step, x.cost.tokensPerSecond,
                  100 * x.cost.mfu, gib(x.cost.memory).c_str(), 100 * x.cost.bubble,
                  x.cost.fits ? "" : "  (over memory)");
    os << line;
  }
  return os.str();
}

void tessel::candidatesJson(llvm::json::OStream &j, const std::vector<Candidate> &all,
                            size_t top) {
  j.array([&] {
    for (size_t i = 0; i < all.size() && i < top; ++i) {
      const Candidate &x = all[i];
      const Layout &l = x.layout;
      j.object([&] {
        j.attribute("layout", l.describe());
        j.attribute("dp", l.dp);
        j.attribute("tp", l.tp);
        j.attribute("pp", l.pp);
        j.attribute("cp", l.cp);
        j.attribute("virtual", l.virtualStages);
        j.attribute("sp", l.sp);
        j.attribute("zero", l.zero);
        j.attribute("micro_batch", l.microBatch);
        j.attribute("schedule", pipeline::scheduleKindName(l.schedule));
        j.attribute("recompute", l.recompute);
        j.attribute("step", x.cost.step);
        j.attribute("tokens_per_second", x.cost.tokensPerSecond);
        j.attribute("mfu", x.cost.mfu);
        j.attribute("hfu", x.cost.hfu);
        j.attribute("bubble", x.cost.bubble);
        j.attribute("model_states", x.cost.modelStates);
        j.attribute("activations_per_layer", x.cost.activationsPerLayer);
        j.attribute("activations", x.cost.activations);
        j.attribute("memory", x.cost.memory);
        j.attribute("fits", x.cost.fits);
      });
    }
  });
}

std::string tessel::parallelSection(const Layout &l, const TransformerShape &s) {
  std::ostringstream os;
  os << "# " << l.describe() << "\n# with train { batch = " << s.batch
     << ", micro_batch = " << l.microBatch << " }: " << l.microbatches(s)
     << " micro-batches per step\nparallel {\n  mesh {";
  const char *sep = " ";
  for (auto [name, size] :
       {std::pair<const char *, int>{"dp", l.dp}, {"pp", l.pp}, {"cp", l.cp}, {"tp", l.tp}})
    if (size > 1) {
      os << sep << name << " = " << size;
      sep = ", ";
    }
  os << " }\n  shard {";
  sep = " ";
  auto shard = [&](const char *text) {
    os << sep << text;
    sep = ", ";
  };
  if (l.dp > 1)
    shard("batch = dp");
  if (l.cp > 1)
    shard("seq = cp");
  if (l.tp > 1) {
    shard("heads = tp");
    shard("ffn = tp");
    shard("vocab = tp");
  }
  os << " }\n";
  if (l.sp)
    os << "  sequence_parallel = true\n";
  os << "  zero = " << l.zero << "\n";
  if (l.pp > 1) {
    os << "  pipeline { schedule = " << pipeline::scheduleKindName(l.schedule);
    if (l.virtualStages > 1)
      os << ", virtual = " << l.virtualStages;
    os << ", microbatches = " << l.microbatches(s) << " }\n";
  }
  os << "  recompute = " << l.recompute << "\n  overlap = true\n}\n";
  return os.str();
}

std::string tessel::candidatesSvg(const std::vector<Candidate> &all, const std::string &title,
                                  double memoryLimit) {
  // Memory (x) against predicted step time (y) of every candidate; the best is marked.
  const double width = 760, height = 480, left = 80, right = 30, top = 50, bottom = 60;
  double maxMemory = memoryLimit, minStep = 1e300, maxStep = 0;
  for (const Candidate &x : all) {
    maxMemory = std::max(maxMemory, x.cost.memory);
    minStep = std::min(minStep, x.cost.step);
    maxStep = std::max(maxStep, x.cost.step);
  }
  if (all.empty() || !(maxStep > 0))
    minStep = 0, maxStep = 1;
  if (maxStep <= minStep)
    maxStep = minStep * 1.1 + 1e-9;
  double plotW = width - left - right, plotH = height - top - bottom;
  auto px = [&](double memory) { return left + plotW * memory / maxMemory; };
  auto py = [&](double step) { return top + plotH * (1 - (step - minStep) / (maxStep - minStep)); };
  std::ostringstream os;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg "
                "xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" "
                "fill=\"white\"/>\n",
                width, height);
  os << buf;
  std::string escaped;
  for (char ch : title)
    escaped += ch == '<' ? "&lt;" : ch == '&' ? "&amp;" : std::string(1, ch);
  std::snprintf(buf, sizeof buf, "<text x=\"%.0f\" y=\"28\" font-size=\"15\">%s</text>\n", left,
                escaped.c_str());
  os << buf;
  std::snprintf(buf, sizeof buf,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                "stroke=\"#888\"/>\n",
                left, top, plotW, plotH);
  os << buf;
  // The memory limit.
  std::snprintf(buf, sizeof buf,
                "<line class=\"limit\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                "stroke=\"#c00\" stroke-dasharray=\"4 3\"/>\n",
                px(memoryLimit), top, px(memoryLimit), top + plotH);
  os << buf;
  for (size_t i = 0; i < all.size(); ++i) {
    const Candidate &x = all[i];
    std::snprintf(buf, sizeof buf,
                  "<circle class=\"candidate\" cx=\"%.1f\" cy=\"%.1f\" r=\"%s\" "
                  "fill=\"%s\" fill-opacity=\"0.6\"><title>%s: %.3f s, %.1f GiB</title></circle>\n",
                  px(x.cost.memory), py(x.cost.step), i == 0 ? "6" : "2.5",
                  i == 0 ? "#d62728" : "#1f77b4", x.layout.describe().c_str(), x.cost.step,
                  x.cost.memory / 1073741824.0);
    os << buf;
  }
  std::snprintf(buf, sizeof buf,
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">memory per "
                "rank, 0 to %.1f GiB (dashed: the limit)</text>\n",
                left + plotW / 2, height - 20, maxMemory / 1073741824.0);
  os << buf;
  std::snprintf(buf, sizeof buf,
                "<text x=\"20\" y=\"%.1f\" font-size=\"12\" transform=\"rotate(-90 20 %.1f)\" "
                "text-anchor=\"middle\">step %.3f s to %.3f s</text>\n",
                top + plotH / 2, top + plotH / 2, minStep, maxStep);
  os << buf;
  os << "</svg>\n";
  return os.str();
}
