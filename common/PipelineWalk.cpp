//===- PipelineWalk.cpp - One pipeline rank's walk and its stash ----------===//

#include "common/PipelineWalk.h"

#include <algorithm>
#include <cstring>

namespace tessel::pipeline {

namespace {

std::string describe(const std::string &program, int micro) {
  return "'" + program + "' of micro-batch " + std::to_string(micro);
}

} // namespace

WalkHooks::~WalkHooks() = default;

/// What one rank runs of a chain: its versions of the chunks' programs, and per value how many
/// takers it has on the rank (programs reading it, sends carrying it).
struct PipelineWalk::RankChain {
  const PipelineChain *chain = nullptr;
  std::map<std::string, const planfile::Program *> programs;
  std::map<std::string, int> takers;

  int takersOf(const std::string &value) const {
    auto it = takers.find(value);
    return it == takers.end() ? 0 : it->second;
  }
};

/// The values a rank keeps between actions. A value's buffer goes back to a pool after its
/// last taker and serves the next value of its size: a step stashes the same values every
/// micro-batch, so after the first one no buffer is allocated (a fresh one costs a page fault
/// per 4 KiB on first touch, more than the copy into it).
class PipelineWalk::Stash {
public:
  void clear() {
    for (auto &[key, e] : entries_)
      recycle(std::move(e.data));
    entries_.clear();
    bytes_ = 0;
  }
  uint64_t peak() const { return peak_; }

  /// Makes room for `elements` elements of value `name` of `micro`, kept for `takers` takers;
  /// `data` (null in a walk without data) is where they are to be written.
  bool put(int micro, const std::string &name, int64_t elements, int takers, bool withData,
           float *&data, std::string &error) {
    auto [it, fresh] = entries_.try_emplace({micro, name});
    if (!fresh) {
      error = "value '" + name + "' of micro-batch " + std::to_string(micro) +
              " arrived twice (the schedule ran its producer twice)";
      return false;
    }
    Entry &e = it->second;
    e.elements = elements;
    e.takers = takers;
    data = nullptr;
    if (withData) {
      e.data = buffer(elements);
      data = e.data.data();
    }
    bytes_ += static_cast<uint64_t>(elements) * 4;
    peak_ = std::max(peak_, bytes_);
    return true;
  }

  /// Hands value `name` of `micro` to `use` (null in a walk without data) and drops it after
  /// its last taker.
  template <typename Use>
  bool take(int micro, const std::string &name, const std::string &taker, std::string &error,
            Use use) {
    auto it = entries_.find({micro, name});
    if (it == entries_.end()) {
      error = taker + " needs value '" + name + "', which no program or receive has " +
              "provided on this rank by then";
      return false;
    }
    Entry &e = it->second;
    if (!use(e.data.empty() ? nullptr : e.data.data(), e.elements))
      return false;
    if (--e.takers == 0) {
      bytes_ -= static_cast<uint64_t>(e.elements) * 4;
      recycle(std::move(e.data));
      entries_.erase(it);
    }
    return true;
  }

private:
  struct Entry {
    std::vector<float> data;
    int64_t elements = 0;
    int takers = 0;
  };

  std::vector<float> buffer(int64_t elements) {
    auto it = pool_.find(elements);
    if (it == pool_.end())
      return std::vector<float>(static_cast<size_t>(std::max<int64_t>(elements, 1)));
    std::vector<float> v = std::move(it->second);
    pool_.erase(it);
    return v;
  }
  void recycle(std::vector<float> &&v) {
    if (!v.empty())
      pool_.emplace(static_cast<int64_t>(v.size()), std::move(v));
  }

  std::map<std::pair<int, std::string>, Entry> entries_;
  std::multimap<int64_t, std::vector<float>> pool_;
  uint64_t bytes_ = 0, peak_ = 0;
};

PipelineWalk::PipelineWalk(const PipelineLayout &layout, const planfile::Plan &plan, uint32_t rank)
    : layout_(layout), rank_(rank), stage_(plan.pipelineStage(rank)),
      stash_(std::make_unique<Stash>()) {
  const PipelineConfig &config = layout.config();
  auto forRank = [&](const PipelineChain &chain) {
    auto rc = std::make_unique<RankChain>();
    rc->chain = &chain;
    for (int j = 0; j < config.virtualStages; ++j) {
      const int c = layout.chunkOf(stage_, j);
      for (const std::string &name : chain.programs[c]) {
        // PipelineLayout::create checked that every rank of the stage has the program.
        const planfile::Program *p = plan.findProgram(name, rank);
        rc->programs[name] = p;
        for (const planfile::Port &in : p->inputs)
          if (!isHostInput(in.name))
            ++rc->takers[in.name];
      }
      if (c + 1 < config.chunks())
        for (const std::string &value : chain.activations[c])
          ++rc->takers[value];
      if (c > 0)
        for (const std::string &value : chain.gradients[c])
          ++rc->takers[value];
    }
    return rc;
  };
  step_ = forRank(layout.step());
  for (const char *kind : {"eval", "sample"})
    if (const PipelineChain *chain = layout.chain(kind))
      chains_[kind] = forRank(*chain);
}

PipelineWalk::~PipelineWalk() = default;

uint64_t PipelineWalk::peakStashBytes() const { return stash_->peak(); }

bool PipelineWalk::check(std::string &error) {
  WalkHooks dry;
  if (!step(dry, error))
    return false;
  for (const auto &[kind, chain] : chains_)
    if (!this->chain(kind, dry, error))
      return false;
  return true;
}

bool PipelineWalk::step(WalkHooks &hooks, std::string &error) {
  stash_->clear();
  for (const Action &a : layout_.actions(stage_)) {
    hooks.beginAction(a);
    if (!perform(a, hooks, error)) {
      error = actionLabel(a, layout_.config().virtualStages > 1) + ": " + error;
      return false;
    }
    hooks.endAction(a);
  }
  return true;
}

bool PipelineWalk::chain(const std::string &kind, WalkHooks &hooks, std::string &error) {
  auto it = chains_.find(kind);
  if (it == chains_.end()) {
    error = "the plan has no " + kind + " chain";
    return false;
  }
  const RankChain &chain = *it->second;
  stash_->clear();
  const PipelineChain &c = *chain.chain;
  const int chunks = layout_.config().chunks(), p = layout_.config().stages;
  for (int j = 0; j < layout_.config().virtualStages; ++j) {
    const int chunk = layout_.chunkOf(stage_, j);
    if (chunk > 0 &&
        !receive(chain, c.activations[chunk - 1], 0, (chunk - 1) % p, kChainTag, hooks, error))
      return false;
    if (!compute(chain, c.programs[chunk][0], chunk, 0, hooks, error))
      return false;
    if (chunk + 1 < chunks &&
        !send(chain, c.activations[chunk], 0, (chunk + 1) % p, kChainTag, hooks, error))
      return false;
  }
  return true;
}

bool PipelineWalk::perform(const Action &a, WalkHooks &hooks, std::string &error) {
  const PipelineChain &chain = *step_->chain;
  const int c = layout_.chunkOf(stage_, a.chunk);
  const uint32_t peer = static_cast<uint32_t>(a.peer);
  switch (a.kind) {
  case Action::Forward:
    return compute(*step_, chain.programs[c][0], c, a.microbatch, hooks, error);
  case Action::Backward:
  case Action::BackwardInput:
    return compute(*step_, chain.programs[c][1], c, a.microbatch, hooks, error);
  case Action::BackwardWeight:
    return compute(*step_, chain.programs[c][2], c, a.microbatch, hooks, error);
  case Action::SendActivation:
    return send(*step_, chain.activations[c], a.microbatch, peer, kActivationTag, hooks, error);
  case Action::RecvActivation:
    return receive(*step_, chain.activations[c - 1], a.microbatch, peer, kActivationTag, hooks,
                   error);
  case Action::SendGrad:
    return send(*step_, chain.gradients[c], a.microbatch, peer, kGradientTag, hooks, error);
  case Action::RecvGrad:
    return receive(*step_, chain.gradients[c + 1], a.microbatch, peer, kGradientTag, hooks, error);
  }
  return true;
}

bool PipelineWalk::compute(const RankChain &chain, const std::string &name, int chunk, int micro,
                           WalkHooks &hooks, std::string &error) {
  const planfile::Program &program = *chain.programs.at(name);
  const std::string what = describe(name, micro);
  const bool data = hooks.movesData();
  for (const planfile::Port &in : program.inputs) {
    if (isHostInput(in.name)) {
      if (!hooks.hostInput(name, in, micro, error))
        return false;
      continue;
    }
    // Straight from the stash into the program's input: no copy in between.
    if (!stash_->take(micro, in.name, what, error, [&](const float *values, int64_t elements) {
          return !values || hooks.writeInput(name, in.name, values, elements, error);
        }))
      return false;
  }
  if (!hooks.run(name, micro, error))
    return false;
  const bool last = chunk + 1 == layout_.config().chunks();
  for (const planfile::Port &out : program.outputs) {
    const int64_t elements = chain.chain->elements.at(out.name);
    if (last && isHostOutput(out.name))
      hooks.hostOutput(chain.chain->kind, out.name, micro,
                       data ? hooks.output(name, out.name) : nullptr, elements);
    int takers = chain.takersOf(out.name);
    float *into = nullptr;
    if (takers > 0 && (!stash_->put(micro, out.name, elements, takers, data, into, error) ||
                       (into && !hooks.readOutput(name, out.name, into, elements, error))))
      return false;
  }
  return true;
}

float *PipelineWalk::message(int64_t n, const WalkHooks &hooks) {
  if (!hooks.movesData())
    return nullptr;
  // Never empty, so that even a message of no values has a buffer to point at.
  message_.resize(static_cast<size_t>(std::max<int64_t>(n, 1)));
  return message_.data();
}

bool PipelineWalk::send(const RankChain &chain, const std::vector<std::string> &ports, int micro,
                        uint32_t toStage, int64_t tag, WalkHooks &hooks, std::string &error) {
  // One message per send, its values in name order: the receiver cuts it up the same way.
  const std::string what = "the send to stage " + std::to_string(toStage);
  const int64_t n = chain.chain->messageElements(ports);
  float *buffer = message(n, hooks);
  size_t at = 0;
  for (const std::string &value : ports) {
    if (!stash_->take(micro, value, what, error, [&](const float *values, int64_t elements) {
          if (values)
            std::memcpy(buffer + at, values, static_cast<size_t>(elements) * 4);
          at += static_cast<size_t>(elements);
          return true;
        }))
      return false;
  }
  return hooks.send(toStage, tag, buffer, n, error);
}

bool PipelineWalk::receive(const RankChain &chain, const std::vector<std::string> &ports, int micro,
                           uint32_t fromStage, int64_t tag, WalkHooks &hooks, std::string &error) {
  const int64_t n = chain.chain->messageElements(ports);
  float *buffer = message(n, hooks);
  if (!hooks.receive(fromStage, tag, buffer, n, error))
    return false;
  size_t at = 0;
  for (const std::string &value : ports) {
    const int64_t elements = chain.chain->elements.at(value);
    float *into = nullptr;
    if (!stash_->put(micro, value, elements, chain.takersOf(value), buffer != nullptr, into, error))
      return false;
    if (into)
      std::memcpy(into, buffer + at, static_cast<size_t>(elements) * 4);
    at += static_cast<size_t>(elements);
  }
  return true;
}

bool peakStashBytes(const PipelineLayout &layout, const planfile::Plan &plan, uint32_t rank,
                    uint64_t &peak, std::string &error) {
  PipelineWalk walk(layout, plan, rank);
  if (!walk.check(error))
    return false;
  peak = walk.peakStashBytes();
  return true;
}

} // namespace tessel::pipeline
