//===- PipelineWalk.cpp - One pipeline rank's walk and its stash ----------===//

#include "common/layout/PipelineWalk.h"
#include "common/schedule/ScheduleMessages.h"

#include <algorithm>

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

/// The values a rank keeps between actions, each in a buffer of the hooks' memory (none in a
/// walk without data). A value's buffer goes back to a pool after its last taker and serves the
/// next value of its size: a step stashes the same values every micro-batch, so after the first
/// one nothing is allocated.
class PipelineWalk::Stash {
public:
  void clear() {
    for (auto &[key, e] : entries_)
      recycle(e);
    entries_.clear();
    bytes_ = 0;
  }
  uint64_t peak() const { return peak_; }
  uint64_t bytes() const { return bytes_; }

  /// Makes room for value `name` of `micro`, `bytes` long, kept for `takers` takers; `data`
  /// is where it is to be written (null in a walk without data).
  bool put(int micro, const std::string &name, uint64_t bytes, int takers, WalkHooks &hooks,
           void *&data, std::string &error) {
    auto [it, fresh] = entries_.try_emplace({micro, name});
    if (!fresh) {
      error = "value '" + name + "' of micro-batch " + std::to_string(micro) +
              " arrived twice (the schedule ran its producer twice)";
      return false;
    }
    Entry &e = it->second;
    e.bytes = bytes;
    e.takers = takers;
    data = nullptr;
    if (hooks.movesData()) {
      auto pooled = pool_.find(bytes);
      if (pooled != pool_.end()) {
        e.data = std::move(pooled->second);
        pool_.erase(pooled);
      } else if (!(e.data = hooks.allocate(bytes, error))) {
        entries_.erase(it);
        error = "no memory for value '" + name + "' (" + std::to_string(bytes) +
                " bytes) in the pipeline stash" + (error.empty() ? "" : ": " + error);
        return false;
      }
      data = e.data.get();
    }
    bytes_ += bytes;
    peak_ = std::max(peak_, bytes_);
    return true;
  }

  /// Value `name` of `micro` (null in a walk without data), or null with the reason when no
  /// program or receive has provided it.
  bool find(int micro, const std::string &name, const std::string &taker, const void *&data,
            std::string &error) {
    auto it = entries_.find({micro, name});
    if (it == entries_.end()) {
      error = taker + " needs value '" + name + "', which no program or receive has " +
              "provided on this rank by then";
      return false;
    }
    data = it->second.data.get();
    return true;
  }
  /// One taker of value `name` of `micro` is done with it: dropped after its last one (once
  /// the copies reading it are finished).
  void taken(int micro, const std::string &name) {
    auto it = entries_.find({micro, name});
    Entry &e = it->second;
    if (--e.takers > 0)
      return;
    bytes_ -= e.bytes;
    recycle(e);
    entries_.erase(it);
  }

private:
  struct Entry {
    std::shared_ptr<void> data;
    uint64_t bytes = 0;
    int takers = 0;
  };

  void recycle(Entry &e) {
    if (e.data)
      pool_.emplace(e.bytes, std::move(e.data));
  }

  std::map<std::pair<int, std::string>, Entry> entries_;
  std::multimap<uint64_t, std::shared_ptr<void>> pool_;
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

uint64_t PipelineWalk::stashBytes() const { return stash_->bytes(); }

uint64_t PipelineWalk::messageBytes() const {
  uint64_t bytes = 0;
  for (const auto &[buffer, size] : messages_)
    bytes += size;
  return bytes;
}

void PipelineWalk::clear() {
  stash_->clear();
  unpacks_.clear();
  sent_.clear();
  inFlight_.clear();
  receives_ = 0;
  messagesUsed_ = 0;
}

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
  clear();
  const std::vector<Action> &actions = layout_.actions(stage_);
  const bool chunks = layout_.config().virtualStages > 1;
  for (size_t i = 0; i < actions.size();) {
    const Action &a = actions[i];
    if (!isCommunication(a.kind)) {
      hooks.beginAction(a);
      if (!perform(a, hooks, error)) {
        error = actionLabel(a, chunks) + ": " + error;
        return false;
      }
      hooks.endAction(a);
      ++i;
      continue;
    }
    // An exchange: its messages are posted one by one and started together at its end, which
    // ends the last action's time.
    const size_t end = detail::exchangeEnd(actions, i);
    if (!settleExchange(hooks, error)) {
      error = actionLabel(a, chunks) + ": " + error;
      return false;
    }
    hooks.beginExchange();
    for (; i < end; ++i) {
      hooks.beginAction(actions[i]);
      if (!perform(actions[i], hooks, error)) {
        error = actionLabel(actions[i], chunks) + ": " + error;
        return false;
      }
      if (i + 1 < end)
        hooks.endAction(actions[i]);
    }
    if (!endExchange(hooks, error)) {
      error = actionLabel(actions[end - 1], chunks) + ": " + error;
      return false;
    }
    hooks.endAction(actions[end - 1]);
  }
  return settleExchange(hooks, error);
}

bool PipelineWalk::chain(const std::string &kind, WalkHooks &hooks, std::string &error) {
  auto it = chains_.find(kind);
  if (it == chains_.end()) {
    error = "the plan has no " + kind + " chain";
    return false;
  }
  const RankChain &chain = *it->second;
  clear();
  const PipelineChain &c = *chain.chain;
  const int chunks = layout_.config().chunks(), p = layout_.config().stages;
  // Each message is an exchange of its own: the chain's values only flow forward.
  for (int j = 0; j < layout_.config().virtualStages; ++j) {
    const int chunk = layout_.chunkOf(stage_, j);
    if (chunk > 0) {
      if (!settleExchange(hooks, error))
        return false;
      hooks.beginExchange();
      if (!receive(chain, c.activations[chunk - 1], 0, (chunk - 1) % p, kChainTag, hooks, error) ||
          !endExchange(hooks, error))
        return false;
    }
    if (!compute(chain, c.programs[chunk][0], chunk, 0, hooks, error))
      return false;
    if (chunk + 1 < chunks) {
      hooks.beginExchange();
      if (!send(chain, c.activations[chunk], 0, (chunk + 1) % p, kChainTag, hooks, error) ||
          !endExchange(hooks, error))
        return false;
    }
  }
  return settleExchange(hooks, error);
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
  // The inputs from the stash into the program's buffers; the copies are finished before it
  // runs, and only then are the values dropped.
  std::vector<std::string> taken;
  for (const planfile::Port &in : program.inputs) {
    if (isHostInput(in.name)) {
      if (!hooks.hostInput(name, in, micro, error))
        return false;
      continue;
    }
    const void *value = nullptr;
    if (!stash_->find(micro, in.name, what, value, error))
      return false;
    if (data) {
      const uint64_t bytes = chain.chain->bytes.at(in.name);
      void *to = hooks.inputAddress(name, in.name, bytes, error);
      if (!to)
        return false;
      hooks.copy(to, value, bytes);
    }
    taken.push_back(in.name);
  }
  if (data && !hooks.finish(error))
    return false;
  for (const std::string &value : taken)
    stash_->taken(micro, value);
  if (!hooks.run(name, micro, error))
    return false;
  // The outputs into the stash, finished before the next program overwrites them.
  const bool last = chunk + 1 == layout_.config().chunks();
  for (const planfile::Port &out : program.outputs) {
    if (last && isHostOutput(out.name))
      hooks.hostOutput(chain.chain->kind, out.name, micro,
                       data ? hooks.output(name, out.name) : nullptr,
                       chain.chain->elements.at(out.name));
    int takers = chain.takersOf(out.name);
    if (takers == 0)
      continue;
    const uint64_t bytes = chain.chain->bytes.at(out.name);
    void *into = nullptr;
    if (!stash_->put(micro, out.name, bytes, takers, hooks, into, error))
      return false;
    if (data) {
      const void *from = hooks.outputAddress(name, out.name, bytes, error);
      if (!from)
        return false;
      hooks.copy(into, from, bytes);
    }
  }
  return !data || hooks.finish(error);
}

void *PipelineWalk::message(uint64_t bytes, WalkHooks &hooks, std::string &error) {
  // One buffer per packed message of an exchange, since they are all in flight at once; the
  // buffers serve every exchange after.
  if (messagesUsed_ == messages_.size())
    messages_.push_back({nullptr, 0});
  auto &[buffer, size] = messages_[messagesUsed_];
  if (!buffer || size < bytes) {
    buffer = hooks.allocate(std::max<uint64_t>(bytes, 1), error);
    size = buffer ? bytes : 0;
    if (!buffer) {
      error = "no memory for a pipeline message of " + std::to_string(bytes) + " bytes" +
              (error.empty() ? "" : ": " + error);
      return nullptr;
    }
  }
  ++messagesUsed_;
  return buffer.get();
}

void PipelineWalk::countMessage(uint64_t bytes) {
  if (messagesUsed_ == messages_.size())
    messages_.push_back({nullptr, 0});
  uint64_t &size = messages_[messagesUsed_].second;
  size = std::max(size, bytes);
  ++messagesUsed_;
}

bool PipelineWalk::send(const RankChain &chain, const std::vector<std::string> &ports, int micro,
                        uint32_t toStage, int64_t tag, WalkHooks &hooks, std::string &error) {
  // One message per send, its values in name order: the receiver cuts it up the same way. A
  // message of one value goes straight from the stash; several are packed first.
  const std::string what = "the send to stage " + std::to_string(toStage);
  const uint64_t bytes = chain.chain->messageBytes(ports);
  const bool data = hooks.movesData();
  std::vector<const void *> values;
  for (const std::string &value : ports) {
    const void *at = nullptr;
    if (!stash_->find(micro, value, what, at, error))
      return false;
    values.push_back(at);
  }
  const void *message = values.size() == 1 ? values[0] : nullptr;
  if (data && values.size() != 1) {
    char *packed = static_cast<char *>(this->message(bytes, hooks, error));
    if (!packed)
      return false;
    uint64_t at = 0;
    for (size_t i = 0; i < ports.size(); ++i) {
      const uint64_t n = chain.chain->bytes.at(ports[i]);
      hooks.copy(packed + at, values[i], n);
      at += n;
    }
    if (!hooks.finish(error))
      return false;
    message = packed;
  } else if (values.size() != 1) {
    countMessage(bytes);
  }
  if (!hooks.send(toStage, tag, message, bytes, error))
    return false;
  // The values stay in the stash until the exchange is done: the send reads them until then.
  for (const std::string &value : ports)
    sent_.emplace_back(micro, value);
  return true;
}

bool PipelineWalk::receive(const RankChain &chain, const std::vector<std::string> &ports, int micro,
                           uint32_t fromStage, int64_t tag, WalkHooks &hooks, std::string &error) {
  ++receives_;
  const uint64_t bytes = chain.chain->messageBytes(ports);
  std::vector<void *> values;
  for (const std::string &value : ports) {
    void *into = nullptr;
    if (!stash_->put(micro, value, chain.chain->bytes.at(value), chain.takersOf(value), hooks, into,
                     error))
      return false;
    values.push_back(into);
  }
  if (!hooks.movesData()) {
    if (values.size() != 1)
      countMessage(bytes);
    return hooks.receive(fromStage, tag, nullptr, bytes, error);
  }
  if (values.size() == 1)
    return hooks.receive(fromStage, tag, values[0], bytes, error);
  char *packed = static_cast<char *>(message(bytes, hooks, error));
  if (!packed || !hooks.receive(fromStage, tag, packed, bytes, error))
    return false;
  // Cut up once the exchange is done and the message is there.
  uint64_t at = 0;
  for (size_t i = 0; i < ports.size(); ++i) {
    const uint64_t n = chain.chain->bytes.at(ports[i]);
    unpacks_.push_back({values[i], packed + at, n});
    at += n;
  }
  return true;
}

bool PipelineWalk::endExchange(WalkHooks &hooks, std::string &error) {
  if (receives_ == 0) {
    // Sends only: the rank computes on while they wait for their receives.
    messagesUsed_ = 0;
    inFlight_ = std::move(sent_);
    sent_.clear();
    return hooks.endExchange(/*wait=*/false, error);
  }
  receives_ = 0;
  if (!hooks.endExchange(/*wait=*/true, error))
    return false;
  for (const Unpack &u : unpacks_)
    hooks.copy(u.to, u.from, u.bytes);
  const bool copied = unpacks_.empty() || hooks.finish(error);
  unpacks_.clear();
  for (const auto &[micro, value] : sent_)
    stash_->taken(micro, value);
  sent_.clear();
  messagesUsed_ = 0;
  return copied;
}

bool PipelineWalk::settleExchange(WalkHooks &hooks, std::string &error) {
  if (!hooks.settleExchange(error))
    return false;
  for (const auto &[micro, value] : inFlight_)
    stash_->taken(micro, value);
  inFlight_.clear();
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
