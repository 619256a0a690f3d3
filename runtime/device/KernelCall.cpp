//===- KernelCall.cpp - Operand checks and a rank's groups ----------------===//

#include "runtime/device/KernelCall.h"

#include <optional>

namespace tessel::rt {

//===----------------------------------------------------------------------===//
// KernelCall
//===----------------------------------------------------------------------===//

bool KernelCall::fail(const std::string &why) {
  if (error.empty())
    error = why;
  return false;
}

/// Requires operand `k` of a direction whose element counts are `counts` (`role`: "input" or
/// "output") to hold at least `elements` elements.
static bool needOperand(KernelCall &c, const char *role, const std::vector<uint64_t> &counts,
                        size_t k, int64_t elements) {
  if (k >= counts.size() || elements < 0 || static_cast<uint64_t>(elements) > counts[k])
    return c.fail(std::string(role) + " " + std::to_string(k) + " needs " +
                  std::to_string(elements) + " elements but its buffer holds " +
                  std::to_string(k < counts.size() ? counts[k] : 0));
  return c.error.empty();
}

bool KernelCall::needIn(size_t k, int64_t elements) {
  return needOperand(*this, "input", inElements, k, elements);
}

bool KernelCall::needOut(size_t k, int64_t elements) {
  return needOperand(*this, "output", outElements, k, elements);
}

bool KernelCall::needTensors(const std::vector<int64_t> &n, size_t eachIns, size_t eachOuts,
                             size_t optionalOuts, bool *withOptional) {
  const size_t k = n.size();
  const bool optional = optionalOuts && out.size() == (eachOuts + optionalOuts) * k;
  if (withOptional)
    *withOptional = optional;
  if (k == 0 || in.size() < eachIns * k || (out.size() != eachOuts * k && !optional))
    return fail("has " + std::to_string(in.size()) + " inputs and " + std::to_string(out.size()) +
                " outputs for the " + std::to_string(k) + " tensors of its `n`");
  for (size_t t = 0; t < k; ++t) {
    for (size_t r = 0; r < eachIns; ++r)
      if (!needIn(r * k + t, n[t]))
        return false;
    for (size_t r = 0; r < eachOuts + (optional ? optionalOuts : 0); ++r)
      if (!needOut(r * k + t, n[t]))
        return false;
  }
  for (size_t i = eachIns * k; i < in.size(); ++i)
    if (!needIn(i, 1))
      return false;
  return error.empty();
}

const CommGroup *KernelCall::group(const std::string &name) {
  if (rank) {
    auto it = rank->groups.find(name);
    if (it != rank->groups.end())
      return &it->second;
  }
  fail("the plan has no group '" + name + "' holding this rank");
  return nullptr;
}

int64_t KernelCall::groupIndex(const std::string &name) {
  const CommGroup *g = group(name);
  return g ? g->index : 0;
}

int64_t KernelCall::groupSize(const std::string &name) {
  const CommGroup *g = group(name);
  return g ? g->size() : 0;
}

//===----------------------------------------------------------------------===//
// RankContext
//===----------------------------------------------------------------------===//

RankContext RankContext::forRank(const planfile::Plan &plan, uint32_t rank, Communicator *comm) {
  RankContext r;
  r.rank = rank;
  r.worldSize = plan.worldSize;
  r.comm = comm;
  for (const planfile::Group &g : plan.groups) {
    std::optional<planfile::GroupInstance> instance = plan.findGroup(g.name, rank);
    r.groups[g.name] = CommGroup{std::move(instance->ranks), instance->index};
  }
  return r;
}

bool RankContext::drainEvents(std::string &error) {
  bool ok = true;
  for (const auto &[event, ticket] : events) {
    std::string why;
    if (!comm->wait(ticket, why) && ok) {
      error = "collective of event " + std::to_string(event) + ": " + why;
      ok = false;
    }
  }
  events.clear();
  return ok;
}

} // namespace tessel::rt
