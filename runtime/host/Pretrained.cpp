//===- Pretrained.cpp - Starting a run from pretrained weights ------------===//

#include "runtime/host/Pretrained.h"

#include "runtime/checkpoint/HfWeights.h"
#include "runtime/host/Ranks.h"

#include <set>

namespace tessel::rt {

std::vector<size_t> loadedParameters(const planfile::Plan &plan) {
  std::vector<size_t> out;
  for (size_t i = 0; i < plan.state.size(); ++i)
    if (plan.state[i].role == "param" && plan.state[i].init == "load")
      out.push_back(i);
  return out;
}

bool loadPretrained(const planfile::Plan &plan, Ranks &ranks, const std::string &path,
                    PretrainedLoad &report, std::string &error) {
  auto weights = HfWeights::open(path, error);
  if (!weights)
    return false;
  std::set<std::string> used;
  std::vector<float> whole;
  for (size_t i : loadedParameters(plan)) {
    const planfile::StateTensor &t = plan.state[i];
    StoredSlice slice;
    if (t.initSlice.size() == 4)
      slice = StoredSlice{t.initSlice[0], t.initSlice[1], t.initSlice[2], t.initSlice[3]};
    else if (!t.initSlice.empty()) {
      error = "the plan gives parameter '" + t.name + "' a malformed slice of its stored tensor";
      return false;
    }
    if (!weights->read(t.name, ranks.stateShape(i), t.initSource, slice, whole, error))
      return false;
    ranks.setWholeState(i, whole.data());
    used.insert(weights->resolve(t.initSource));
    ++report.parameters;
    report.values += static_cast<double>(whole.size());
  }
  for (const std::string &name : weights->names())
    if (!used.count(name) && report.unused++ == 0)
      report.firstUnused = name;
  return true;
}

} // namespace tessel::rt
