//===- PipelineRank.cpp - One rank's part of a pipelined run --------------===//

#include "runtime/PipelineRank.h"

#include "runtime/Blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tessel::rt {

using pipeline::Action;

namespace {

/// The tags of the runtime's pipeline transfers: negative, so they never meet a plan's own
/// send and recv kernels. The communicator pairs the k-th send and receive of a tag between
/// two ranks, and the schedule check proves each kind arrives in the order it was sent.
constexpr int64_t kActivationTag = -1;
constexpr int64_t kGradientTag = -2;
constexpr int64_t kChainTag = -3;

std::string describe(const std::string &program, int micro) {
  return "'" + program + "' of micro-batch " + std::to_string(micro);
}

} // namespace

/// What one rank runs of a chain: its versions of the chunks' programs, and per value how many
/// takers it has on the rank (programs reading it, sends carrying it).
struct PipelineRank::RankChain {
  const PipelineChain *chain = nullptr;
  std::map<std::string, const planfile::Program *> programs;
  std::map<std::string, int> takers;

  int takersOf(const std::string &value) const {
    auto it = takers.find(value);
    return it == takers.end() ? 0 : it->second;
  }
};

/// The values a rank keeps between actions.
class PipelineRank::Stash {
public:
  void clear() {
    entries_.clear();
    bytes_ = 0;
  }
  uint64_t peak() const { return peak_; }

  /// Keeps `elements` elements of `data` (null in a walk without data) for `takers` takers.
  bool put(int micro, const std::string &name, const void *data, int64_t elements, int takers,
           std::string &error) {
    auto [it, fresh] = entries_.try_emplace({micro, name});
    if (!fresh) {
      error = "value '" + name + "' of micro-batch " + std::to_string(micro) +
              " arrived twice (the schedule ran its producer twice)";
      return false;
    }
    Entry &e = it->second;
    e.elements = elements;
    e.takers = takers;
    if (data) {
      const float *x = static_cast<const float *>(data);
      e.data.assign(x, x + elements);
    }
    bytes_ += static_cast<uint64_t>(elements) * 4;
    peak_ = std::max(peak_, bytes_);
    return true;
  }

  /// Copies value `name` of `micro` to `dest` (unless null) and drops it after its last taker.
  bool take(int micro, const std::string &name, void *dest, const std::string &taker,
            std::string &error) {
    auto it = entries_.find({micro, name});
    if (it == entries_.end()) {
      error = taker + " needs value '" + name + "', which no program or receive has " +
              "provided on this rank by then";
      return false;
    }
    Entry &e = it->second;
    if (dest && !e.data.empty())
      std::memcpy(dest, e.data.data(), static_cast<size_t>(e.elements) * 4);
    if (--e.takers == 0) {
      bytes_ -= static_cast<uint64_t>(e.elements) * 4;
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
  std::map<std::pair<int, std::string>, Entry> entries_;
  uint64_t bytes_ = 0, peak_ = 0;
};

PipelineRank::PipelineRank(const PipelineLayout &layout, const planfile::Plan &plan, uint32_t rank)
    : layout_(layout), plan_(plan), rank_(rank), stage_(plan.pipelineStage(rank)),
      stash_(std::make_unique<Stash>()) {}

PipelineRank::~PipelineRank() = default;

std::unique_ptr<PipelineRank> PipelineRank::create(const PipelineLayout &layout,
                                                   const planfile::Plan &plan, uint32_t rank,
                                                   std::string &error) {
  std::unique_ptr<PipelineRank> pr(new PipelineRank(layout, plan, rank));
  const PipelineConfig &config = layout.config();
  auto forRank = [&](const PipelineChain &chain) {
    auto rc = std::make_unique<RankChain>();
    rc->chain = &chain;
    for (int j = 0; j < config.virtualStages; ++j) {
      const int c = layout.chunkOf(pr->stage_, j);
      for (const std::string &name : chain.programs[c]) {
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
  pr->step_ = forRank(layout.step());
  for (const char *kind : {"eval", "sample"})
    if (const PipelineChain *chain = layout.chain(kind))
      pr->chains_[kind] = forRank(*chain);

  // The walk without data: every value is there when it is needed, and the stash's peak.
  Run dry;
  if (!pr->walkStep(dry, Clock::now(), error))
    return nullptr;
  for (const auto &[kind, chain] : pr->chains_)
    if (!pr->walkChain(*chain, dry, error))
      return nullptr;
  pr->timed_.clear();
  return pr;
}

uint64_t PipelineRank::peakStashBytes() const { return stash_->peak(); }

bool PipelineRank::runStep(Executor &ex, Communicator &comm, int64_t step, uint64_t seed,
                           const std::vector<MicroBatchData> &batches, Clock::time_point origin,
                           std::string &error, bool checkFinite) {
  Run run;
  run.checkFinite = checkFinite;
  run.ex = &ex;
  run.comm = &comm;
  run.batches = &batches;
  run.ctx = StepContext{step, 0, seed};
  losses_.assign(batches.size(), NAN);
  if (walkStep(run, origin, error))
    return true;
  comm.abort("rank " + std::to_string(rank_) + ": " + error);
  return false;
}

bool PipelineRank::runChain(const PipelineChain &chain, Executor &ex, Communicator &comm,
                            const StepContext &ctx, const MicroBatchData &data,
                            std::string &error) {
  const std::vector<MicroBatchData> batches{data};
  Run run;
  run.ex = &ex;
  run.comm = &comm;
  run.batches = &batches;
  run.ctx = ctx;
  chainOutput_.clear();
  if (walkChain(*chains_.at(chain.kind), run, error))
    return true;
  comm.abort("rank " + std::to_string(rank_) + ": " + error);
  return false;
}

bool PipelineRank::walkStep(const Run &run, Clock::time_point origin, std::string &error) {
  stash_->clear();
  timed_.clear();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - origin).count(); };
  for (const Action &a : layout_.actions(stage_)) {
    double start = seconds();
    if (!perform(a, run, error)) {
      error = actionLabel(a, layout_.config().virtualStages > 1) + ": " + error;
      return false;
    }
    timed_.push_back({static_cast<int>(stage_), a, start, seconds()});
  }
  return true;
}

bool PipelineRank::walkChain(const RankChain &chain, const Run &run, std::string &error) {
  stash_->clear();
  const PipelineChain &c = *chain.chain;
  const int chunks = layout_.config().chunks(), p = layout_.config().stages;
  for (int j = 0; j < layout_.config().virtualStages; ++j) {
    const int chunk = layout_.chunkOf(stage_, j);
    if (chunk > 0 &&
        !receive(chain, c.activations[chunk - 1], 0, (chunk - 1) % p, kChainTag, run, error))
      return false;
    if (!compute(chain, c.programs[chunk][0], chunk, 0, run, error))
      return false;
    if (chunk + 1 < chunks &&
        !send(chain, c.activations[chunk], 0, (chunk + 1) % p, kChainTag, run, error))
      return false;
  }
  return true;
}

bool PipelineRank::perform(const Action &a, const Run &run, std::string &error) {
  const PipelineChain &chain = *step_->chain;
  const int c = layout_.chunkOf(stage_, a.chunk);
  const uint32_t peer = static_cast<uint32_t>(a.peer);
  switch (a.kind) {
  case Action::Forward:
    return compute(*step_, chain.programs[c][0], c, a.microbatch, run, error);
  case Action::Backward:
  case Action::BackwardInput:
    return compute(*step_, chain.programs[c][1], c, a.microbatch, run, error);
  case Action::BackwardWeight:
    return compute(*step_, chain.programs[c][2], c, a.microbatch, run, error);
  case Action::SendActivation:
    return send(*step_, chain.activations[c], a.microbatch, peer, kActivationTag, run, error);
  case Action::RecvActivation:
    return receive(*step_, chain.activations[c - 1], a.microbatch, peer, kActivationTag, run,
                   error);
  case Action::SendGrad:
    return send(*step_, chain.gradients[c], a.microbatch, peer, kGradientTag, run, error);
  case Action::RecvGrad:
    return receive(*step_, chain.gradients[c + 1], a.microbatch, peer, kGradientTag, run, error);
  }
  return true;
}

bool PipelineRank::compute(const RankChain &chain, const std::string &name, int chunk, int micro,
                           const Run &run, std::string &error) {
  const planfile::Program &program = *chain.programs.at(name);
  const std::string what = describe(name, micro);
  for (const planfile::Port &in : program.inputs) {
    if (isHostInput(in.name)) {
      if (run.ex && !copyHostInput(in, name, (*run.batches)[micro], *run.ex, error))
        return false;
      continue;
    }
    if (!stash_->take(micro, in.name, run.ex ? run.ex->input(name, in.name) : nullptr, what, error))
      return false;
  }
  if (run.ex) {
    StepContext ctx = run.ctx;
    ctx.micro = micro;
    if (!run.ex->run(name, ctx, error, run.checkFinite))
      return false;
  }
  const bool last = chunk + 1 == layout_.config().chunks();
  for (const planfile::Port &out : program.outputs) {
    const float *data = run.ex ? run.ex->output(name, out.name) : nullptr;
    const int64_t elements = chain.chain->elements.at(out.name);
    if (last && isHostOutput(out.name) && data) {
      if (chain.chain->kind == "step")
        losses_[micro] = data[0];
      else
        chainOutput_.assign(data, data + elements);
    }
    int takers = chain.takersOf(out.name);
    if (takers > 0 && !stash_->put(micro, out.name, data, elements, takers, error))
      return false;
  }
  return true;
}

bool PipelineRank::send(const RankChain &chain, const std::vector<std::string> &ports, int micro,
                        uint32_t toStage, int64_t tag, const Run &run, std::string &error) {
  // One message per send, its values in name order: the receiver cuts it up the same way.
  const std::string what = "the send to stage " + std::to_string(toStage);
  const int64_t n = chain.chain->messageElements(ports);
  // Never empty, so that even a message of no values has a buffer to point at.
  message_.resize(static_cast<size_t>(std::max<int64_t>(n, 1)));
  size_t at = 0;
  for (const std::string &value : ports) {
    if (!stash_->take(micro, value, run.ex ? message_.data() + at : nullptr, what, error))
      return false;
    at += static_cast<size_t>(chain.chain->elements.at(value));
  }
  if (!run.comm)
    return true;
  return run.comm->send(layout_.peerOf(rank_, toStage), tag, message_.data(), n, error);
}

bool PipelineRank::receive(const RankChain &chain, const std::vector<std::string> &ports, int micro,
                           uint32_t fromStage, int64_t tag, const Run &run, std::string &error) {
  const int64_t n = chain.chain->messageElements(ports);
  message_.resize(static_cast<size_t>(std::max<int64_t>(n, 1)));
  if (run.comm && !run.comm->recv(layout_.peerOf(rank_, fromStage), tag, message_.data(), n, error))
    return false;
  size_t at = 0;
  for (const std::string &value : ports) {
    const int64_t elements = chain.chain->elements.at(value);
    if (!stash_->put(micro, value, run.ex ? message_.data() + at : nullptr, elements,
                     chain.takersOf(value), error))
      return false;
    at += static_cast<size_t>(elements);
  }
  return true;
}

bool PipelineRank::copyHostInput(const planfile::Port &port, const std::string &program,
                                 const MicroBatchData &data, Executor &ex, std::string &error) {
  const std::vector<int32_t> &whole = port.name == "tokens" ? data.tokens : data.targets;
  Block b = blockOf(plan_, port.shape, port.split, rank_);
  void *dest = ex.input(program, port.name);
  if (!dest || b.wholeElements() != static_cast<int64_t>(whole.size()) ||
      static_cast<uint64_t>(b.localElements()) * 4 > port.buffer.bytes) {
    error = "input '" + port.name + "' of '" + program + "' holds " +
            std::to_string(b.wholeElements()) + " elements in all, not the " +
            std::to_string(whole.size()) + " the run feeds it";
    return false;
  }
  copyFromWhole(b, whole.data(), dest);
  return true;
}

} // namespace tessel::rt
