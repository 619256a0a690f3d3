//===- KernelProfile.cpp - Time in each kernel, as a table ----------------===//

#include "runtime/host/KernelProfile.h"

#include "runtime/core/Executor.h"
#include "runtime/host/Ranks.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tessel::rt {

void enableKernelProfile(Ranks &ranks) {
  for (uint32_t rank : ranks.localRanks())
    ranks.executor(rank).enableProfiling();
}

void printKernelProfile(Ranks &ranks, std::FILE *out) {
  // Ranks whose kernels were called the same number of times ran the same programs.
  std::vector<std::pair<std::vector<uint32_t>, std::vector<Executor::KernelTime>>> groups;
  for (uint32_t rank : ranks.localRanks()) {
    std::vector<Executor::KernelTime> times = ranks.executor(rank).profile();
    auto sameCalls = [&](const std::vector<Executor::KernelTime> &other) {
      if (other.size() != times.size())
        return false;
      std::map<std::pair<std::string, bool>, int64_t> calls;
      for (const Executor::KernelTime &t : other)
        calls[{t.kernel, t.recomputed}] = t.calls;
      for (const Executor::KernelTime &t : times) {
        auto it = calls.find({t.kernel, t.recomputed});
        if (it == calls.end() || it->second != t.calls)
          return false;
      }
      return true;
    };
    auto group = std::find_if(groups.begin(), groups.end(),
                              [&](const auto &g) { return sameCalls(g.second); });
    if (group == groups.end())
      groups.push_back({{rank}, std::move(times)});
    else
      group->first.push_back(rank);
  }
  for (const auto &[members, times] : groups) {
    // The first rank's times stand for its group: they run the same kernels at once.
    if (groups.size() > 1) {
      std::string names;
      for (uint32_t r : members)
        names += (names.empty() ? "" : ", ") + std::to_string(r);
      std::fprintf(out, "%s %s:\n", members.size() > 1 ? "ranks" : "rank", names.c_str());
    }
    double total = 0, recomputed = 0;
    for (const Executor::KernelTime &t : times)
      total += t.seconds;
    // Milliseconds: a small model's kernels take microseconds each.
    std::fprintf(out, "%-32s %12s %8s %7s\n", "kernel", "ms", "calls", "share");
    for (const Executor::KernelTime &t : times) {
      std::fprintf(out, "%-32s %12.3f %8lld %6.1f%%\n",
                   (t.kernel + (t.recomputed ? " (recomputed)" : "")).c_str(), 1e3 * t.seconds,
                   static_cast<long long>(t.calls), 100 * t.seconds / std::max(total, 1e-12));
      if (t.recomputed)
        recomputed += t.seconds;
    }
    // What recompute = selective or full costs: the kernels that compute again in the
    // backward pass what the forward pass computed.
    if (recomputed > 0)
      std::fprintf(out, "recomputation: %.3f ms of %.3f ms in kernels (%.1f%%)\n",
                   1e3 * recomputed, 1e3 * total, 100 * recomputed / std::max(total, 1e-12));
  }
}

} // namespace tessel::rt
