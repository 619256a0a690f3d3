//===- ModelState.cpp - A model's parameters and state on the host --------===//

#include "runtime/host/ModelState.h"

#include "common/support/Checksum.h"
#include "runtime/core/Blocks.h"

#include <array>
#include <cstring>

namespace tessel::rt {

std::vector<int64_t> wholeShape(const planfile::Plan &plan, const planfile::StateTensor &t) {
  return blockOf(plan, t.shape, t.split, 0).whole;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> parameterShapes(const planfile::Plan &plan) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const planfile::StateTensor &t : plan.state)
    if (t.role == "param")
      out.push_back({t.name, wholeShape(plan, t)});
  return out;
}

bool allFinite(const float *x, size_t n) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}


std::string fingerprint(const planfile::Plan &plan) {
  std::string names;
  for (const auto &[name, shape] : parameterShapes(plan))
    names += name + formatShape(shape) + ";";
  return hex64(fnv1a64(names.data(), names.size()));
}

Json rngToJson(const Rng &rng) {
  Json a = Json::array();
  for (uint64_t s : rng.state())
    a.push(std::to_string(s));
  return a;
}

bool rngFromJson(const Json *j, Rng &rng) {
  if (!j || !j->isArray() || j->size() != 4)
    return false;
  std::array<uint64_t, 4> state;
  for (size_t i = 0; i < 4; ++i) {
    const Json &x = j->items()[i];
    if (!x.isString() || x.asString().empty() || x.asString().size() > 20)
      return false;
    unsigned __int128 value = 0;
    for (char c : x.asString()) {
      if (c < '0' || c > '9')
        return false;
      value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (value > UINT64_MAX)
      return false;
    state[i] = static_cast<uint64_t>(value);
  }
  // xoshiro never reaches the all-zero state: such a state was not written by a run.
  if (state == std::array<uint64_t, 4>{})
    return false;
  rng.setState(state);
  return true;
}

bool refreshWorkingCopies(Ranks &ranks, std::string &error) {
  if (!ranks.firstExecutor().hasProgram(planfile::kWorkingCopiesProgram))
    return true;
  std::string why;
  if (ranks.run(planfile::kWorkingCopiesProgram, StepContext{}, why))
    return true;
  error = "making the parameters' working copies failed: " + why;
  return false;
}

std::unique_ptr<LoadedCheckpoint> loadState(const planfile::Plan &plan, Ranks &ranks,
                                            const std::string &path, bool withOptimizer,
                                            std::string &error, bool sameModel) {
  auto ck = loadCheckpoint(path, error);
  if (!ck)
    return nullptr;
  if (!checkCompatible(*ck, parameterShapes(plan), sameModel ? plan.model : ck->model, error)) {
    if (error.find(ck->path) == std::string::npos)
      error = "cannot use " + ck->path + ": " + error;
    return nullptr;
  }
  // Each local rank reads its own block of each tensor it holds, from whichever shards
  // overlap it: the checkpoint's layout need not be this run's.
  for (size_t i = 0; i < plan.state.size(); ++i) {
    const planfile::StateTensor &t = plan.state[i];
    if (!t.checkpointed() || (t.role != "param" && !withOptimizer))
      continue;
    const StoredTensor *x = ck->find(t.name);
    if (!x) {
      error = "checkpoint " + ck->path + " lacks '" + t.name + "'";
      return nullptr;
    }
    const std::vector<int64_t> &shape = ranks.stateShape(i);
    // 16-bit floats are read widened (a checkpoint written in BF16 by another tool).
    const bool floats = x->dtype == DType::F32 || x->dtype == DType::BF16 || x->dtype == DType::F16;
    if (!floats || x->shape != shape) {
      error = "checkpoint " + ck->path + ": '" + t.name + "' is " + dtypeName(x->dtype) + " " +
              formatShape(x->shape) + ", the model needs F32 (or BF16, F16) " + formatShape(shape);
      return nullptr;
    }
    std::vector<float> block;
    for (uint32_t r : ranks.localRanks()) {
      Executor &ex = ranks.executor(r);
      if (!ex.holdsState(i))
        continue;
      const Block &b = ranks.stateBlock(i, r);
      // Into the state where it is host memory; else through a host copy.
      if (auto *in = static_cast<float *>(ex.stateInHostMemory(i))) {
        if (!ck->readBlock(t.name, b.offset, b.local, in, error))
          return nullptr;
        continue;
      }
      block.resize(static_cast<size_t>(b.localElements()));
      if (!ck->readBlock(t.name, b.offset, b.local, block.data(), error))
        return nullptr;
      ex.writeState(i, block.data());
    }
  }
  if (!refreshWorkingCopies(ranks, error))
    return nullptr;
  return ck;
}

Rng parameterRng(uint64_t seed, const std::string &name) {
  uint64_t key = seed;
  uint64_t mixed = Rng::splitmix64(key) ^ fnv1a64(name.data(), name.size());
  return Rng(mixed);
}

} // namespace tessel::rt
