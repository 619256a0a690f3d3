//===- PipelineRank.cpp - One rank's part of a pipelined run --------------===//

#include "runtime/pipeline/PipelineRank.h"

#include "runtime/comm/CommMemory.h"
#include "runtime/core/Blocks.h"
#include "runtime/device/Device.h"

#include <cmath>

namespace tessel::rt {

using pipeline::Action;

/// The walk's hooks for a run: programs run on the rank's executor, messages go through its
/// communicator to the rank of the other stage in the same pipeline, host inputs are the rank's
/// blocks of the micro-batch, and each action of a step is timed.
class PipelineRank::Run : public pipeline::WalkHooks {
public:
  Run(PipelineRank &rank, Executor &ex, Communicator &comm,
      const std::vector<MicroBatchData> &batches, const StepContext &ctx, bool checkFinite,
      PipelineRank::Clock::time_point origin)
      : rank_(rank), ex_(ex), comm_(comm), memory_(ex.device().commMemory()), batches_(batches),
        ctx_(ctx), checkFinite_(checkFinite), origin_(origin) {}

  bool movesData() const override { return true; }
  std::shared_ptr<void> allocate(uint64_t bytes, std::string &error) override {
    std::shared_ptr<void> p = memory_.allocate(bytes);
    if (!p)
      error = "the device has no " + std::to_string(bytes) + " bytes to spare";
    return p;
  }
  void copy(void *to, const void *from, uint64_t bytes) override { memory_.copy(to, from, bytes); }
  bool finish(std::string &error) override { return memory_.finish(error); }
  void *inputAddress(const std::string &program, const std::string &port, uint64_t bytes,
                     std::string &error) override {
    if (void *p = ex_.inputAddress(program, port, bytes))
      return p;
    error = "program '" + program + "' has no input '" + port + "' of " + std::to_string(bytes) +
            " bytes";
    return nullptr;
  }
  const void *outputAddress(const std::string &program, const std::string &port, uint64_t bytes,
                            std::string &error) override {
    if (const void *p = ex_.outputAddress(program, port, bytes))
      return p;
    error = "program '" + program + "' has no output '" + port + "' of " + std::to_string(bytes) +
            " bytes";
    return nullptr;
  }
  const float *output(const std::string &program, const std::string &port) override {
    return ex_.output(program, port);
  }
  bool hostInput(const std::string &program, const planfile::Port &port, int micro,
                 std::string &error) override;
  bool run(const std::string &program, int micro, std::string &error) override {
    StepContext ctx = ctx_;
    ctx.micro = micro;
    ex_.setMemoryContext(rank_.walk_.stashBytes(), rank_.walk_.messageBytes(), micro);
    return ex_.run(program, ctx, error, checkFinite_);
  }
  void hostOutput(const std::string &kind, const std::string &port, int micro, const float *data,
                  int64_t elements) override {
    if (!data)
      return;
    if (kind == "step")
      rank_.losses_[micro] = data[0];
    else
      rank_.chainOutput_.assign(data, data + elements);
  }
  // An exchange's messages go to the communicator together when it ends. A message moves as
  // 2-byte units (every element type is 2 or 4 bytes long), which a send and a receive copy
  // without reading.
  void beginExchange() override { exchange_.clear(); }
  bool send(uint32_t stage, int64_t tag, const void *data, uint64_t bytes, std::string &) override {
    exchange_.push_back(
        sendOp(peer(stage), tag, data, static_cast<int64_t>(bytes / 2), planfile::DType::BF16));
    return true;
  }
  bool receive(uint32_t stage, int64_t tag, void *data, uint64_t bytes, std::string &) override {
    exchange_.push_back(
        recvOp(peer(stage), tag, data, static_cast<int64_t>(bytes / 2), planfile::DType::BF16));
    return true;
  }
  bool endExchange(bool wait, std::string &error) override {
    if (wait)
      return comm_.exchange(exchange_, error);
    inFlight_ = comm_.startExchange(exchange_);
    return true;
  }
  bool settleExchange(std::string &error) override {
    const Communicator::Ticket ticket = inFlight_;
    inFlight_ = 0;
    return ticket == 0 || comm_.wait(ticket, error);
  }
  void beginAction(const Action &) override { start_ = seconds(); }
  void endAction(const Action &a) override {
    rank_.timed_.push_back({static_cast<int>(rank_.stage()), a, start_, seconds()});
    if (isCommunication(a.kind) && ex_.memoryTracing()) {
      // A transfer as the memory profile's point between runs, as tessel estimate's.
      ex_.setMemoryContext(rank_.walk_.stashBytes(), rank_.walk_.messageBytes(), a.microbatch);
      ex_.noteMemory(pipeline::actionLabel(a, rank_.layout_.config().virtualStages > 1));
    }
  }

private:
  uint32_t peer(uint32_t stage) const { return rank_.layout_.peerOf(rank_.walk_.rank(), stage); }
  double seconds() const {
    return std::chrono::duration<double>(PipelineRank::Clock::now() - origin_).count();
  }

  PipelineRank &rank_;
  Executor &ex_;
  Communicator &comm_;
  CommMemory &memory_; ///< The rank's device memory, where the stash keeps its values.
  const std::vector<MicroBatchData> &batches_;
  StepContext ctx_;
  bool checkFinite_;
  PipelineRank::Clock::time_point origin_;
  double start_ = 0;
  std::vector<CommOp> exchange_;      ///< The messages of the exchange in progress.
  Communicator::Ticket inFlight_ = 0; ///< An exchange of sends left in flight; 0 if none.
};

bool PipelineRank::Run::hostInput(const std::string &program, const planfile::Port &port, int micro,
                                  std::string &error) {
  const MicroBatchData &data = batches_[micro];
  const std::vector<int32_t> &whole = port.name == "tokens" ? data.tokens : data.targets;
  Block b = blockOf(rank_.plan_, port.shape, port.split, rank_.walk_.rank());
  std::vector<int32_t> local(static_cast<size_t>(b.localElements()));
  if (b.wholeElements() == static_cast<int64_t>(whole.size()))
    copyFromWhole(b, whole.data(), local.data());
  if (b.wholeElements() != static_cast<int64_t>(whole.size()) ||
      !ex_.writeInput(program, port.name, local.data(), local.size() * sizeof(int32_t))) {
    error = "input '" + port.name + "' of '" + program + "' holds " +
            std::to_string(b.wholeElements()) + " elements in all, not the " +
            std::to_string(whole.size()) + " the run feeds it";
    return false;
  }
  return true;
}

PipelineRank::PipelineRank(const PipelineLayout &layout, const planfile::Plan &plan, uint32_t rank)
    : layout_(layout), plan_(plan), walk_(layout, plan, rank) {}

PipelineRank::~PipelineRank() = default;

std::unique_ptr<PipelineRank> PipelineRank::create(const PipelineLayout &layout,
                                                   const planfile::Plan &plan, uint32_t rank,
                                                   std::string &error) {
  std::unique_ptr<PipelineRank> pr(new PipelineRank(layout, plan, rank));
  // The walk without data: every value is there when it is needed, and the stash's peak.
  if (!pr->walk_.check(error))
    return nullptr;
  return pr;
}

uint64_t PipelineRank::peakStashBytes() const { return walk_.peakStashBytes(); }

bool PipelineRank::runStep(Executor &ex, Communicator &comm, const StepContext &step,
                           const std::vector<MicroBatchData> &batches, Clock::time_point origin,
                           std::string &error, bool checkFinite) {
  Run run(*this, ex, comm, batches, step, checkFinite, origin);
  losses_.assign(batches.size(), NAN);
  timed_.clear();
  ex.setMemoryContext(walk_.stashBytes(), walk_.messageBytes(), -1);
  if (walk_.step(run, error)) {
    // What the rank holds outside the arena until the next step: its message buffers.
    ex.setMemoryContext(walk_.stashBytes(), walk_.messageBytes(), -1);
    return true;
  }
  comm.abort("rank " + std::to_string(walk_.rank()) + ": " + error);
  return false;
}

bool PipelineRank::runChain(const PipelineChain &chain, Executor &ex, Communicator &comm,
                            const StepContext &ctx, const MicroBatchData &data,
                            std::string &error) {
  const std::vector<MicroBatchData> batches{data};
  Run run(*this, ex, comm, batches, ctx, false, Clock::now());
  chainOutput_.clear();
  if (walk_.chain(chain.kind, run, error))
    return true;
  comm.abort("rank " + std::to_string(walk_.rank()) + ": " + error);
  return false;
}

} // namespace tessel::rt
