//===- PipelineWalk.h - One pipeline rank's walk and its stash --*- C++ -*-===//
//
// A pipeline rank works through its stage's action list: a computation runs its chunk's
// program on one micro-batch, a send or receive moves the values one chunk passes to its
// neighbour. Between actions the rank keeps those values in its stash, keyed by micro-batch and
// name: a program takes its inputs out of the stash and puts its outputs into it, and a value is
// dropped as soon as its last taker on the rank (a program, or the send that carries it away)
// has it, so the stash holds what the schedule has in flight and no more.
//
// This is the one statement of that walk and of the stash's bytes. The runtime walks with hooks
// that run the programs and move the data (runtime/pipeline/PipelineRank.h). Without them the walk moves
// nothing: it proves that every value is in the stash when a program asks for it, and gives the
// stash's peak before anything runs — which the runtime checks at setup, and `tessel estimate`
// reports as the activations a rank keeps.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_LAYOUT_PIPELINEWALK_H
#define TESSEL_COMMON_LAYOUT_PIPELINEWALK_H

#include "common/layout/PipelineLayout.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessel::pipeline {

/// The tags of a pipeline's transfers: negative, so they never meet a plan's own send and recv
/// kernels. A communicator pairs the k-th send and receive of a tag between two ranks, and the
/// schedule check proves each kind arrives in the order it was sent.
constexpr int64_t kActivationTag = -1;
constexpr int64_t kGradientTag = -2;
constexpr int64_t kChainTag = -3;

/// What a walk does besides keeping the stash's books. Every default does nothing and moves no
/// data: a walk with these hooks is the dry walk.
class WalkHooks {
public:
  virtual ~WalkHooks();

  /// Whether values carry data. Then the stash keeps each value's bytes (in its ports' element
  /// type) in the hooks' memory — the rank's device, so a value never leaves the device between
  /// its producer and its takers: a program's outputs are copied from its buffers into the
  /// stash, its inputs from the stash into its buffers, and messages are sent from and received
  /// into that memory.
  virtual bool movesData() const { return false; }
  /// `bytes` of the hooks' memory, freed with the pointer; null with the reason if there is
  /// none to be had.
  virtual std::shared_ptr<void> allocate(uint64_t bytes, std::string &error) { return nullptr; }
  /// Copies `bytes` within the hooks' memory; may return before the copy is done.
  virtual void copy(void *to, const void *from, uint64_t bytes) {}
  /// Waits for the copies issued so far; false with the reason if one failed.
  virtual bool finish(std::string &error) { return true; }
  /// Where input `port` of `program` is, and output `port`, in the hooks' memory, when it holds
  /// at least `bytes`; null with the reason otherwise.
  virtual void *inputAddress(const std::string &program, const std::string &port, uint64_t bytes,
                             std::string &error) {
    return nullptr;
  }
  virtual const void *outputAddress(const std::string &program, const std::string &port,
                                    uint64_t bytes, std::string &error) {
    return nullptr;
  }
  /// Output `port` of `program` after it ran, on the host as f32 (with movesData): the last
  /// chunk's host outputs.
  virtual const float *output(const std::string &program, const std::string &port) {
    return nullptr;
  }
  /// Fills host input `port` (tokens, targets) of `program` for micro-batch `micro`.
  virtual bool hostInput(const std::string &program, const planfile::Port &port, int micro,
                         std::string &error) {
    return true;
  }
  /// Runs `program` on micro-batch `micro`.
  virtual bool run(const std::string &program, int micro, std::string &error) { return true; }
  /// The last chunk's host output `port` (loss, logits) of micro-batch `micro` of a chain of
  /// `kind` ("step", "eval", "sample"); `data` is null unless values carry data.
  virtual void hostOutput(const std::string &kind, const std::string &port, int micro,
                          const float *data, int64_t elements) {}
  /// Around each exchange: the messages between two computations of a rank's list, which
  /// must be in flight together (a send over NCCL is done only once its receive runs, so two
  /// ranks that each send to the other before receiving need both messages posted at once;
  /// Schedule.h). In between, send and receive may only post their messages. endExchange
  /// starts them; with `wait` they are done, and a received message's data is there, when it
  /// returns true; without (an exchange of sends only, which the rank need not wait for) they
  /// may still be in flight until settleExchange, which the walk calls before the next
  /// exchange begins and at the end of a walk.
  virtual void beginExchange() {}
  virtual bool endExchange(bool wait, std::string &error) { return true; }
  virtual bool settleExchange(std::string &error) { return true; }
  /// Moves a message of `bytes` bytes, in the hooks' memory, to / from pipeline stage `stage`
  /// of the rank's pipeline, within an exchange.
  virtual bool send(uint32_t stage, int64_t tag, const void *data, uint64_t bytes,
                    std::string &error) {
    return true;
  }
  virtual bool receive(uint32_t stage, int64_t tag, void *data, uint64_t bytes,
                       std::string &error) {
    return true;
  }
  /// Around each action of a step's list.
  virtual void beginAction(const Action &action) {}
  virtual void endAction(const Action &action) {}
};

/// The walks of one rank of a pipelined plan.
class PipelineWalk {
public:
  /// The walks of world rank `rank` of `plan` (its stage's action list, its versions of the
  /// programs); `layout` and `plan` must outlive it.
  PipelineWalk(const PipelineLayout &layout, const planfile::Plan &plan, uint32_t rank);
  ~PipelineWalk();

  uint32_t rank() const { return rank_; }
  uint32_t stage() const { return stage_; }

  /// Walks the rank's actions of one training step. An error names the action that failed.
  bool step(WalkHooks &hooks, std::string &error);
  /// Walks the rank's chunks of the "eval" or "sample" chain on one batch, in ascending order:
  /// receive from the previous chunk, run, send to the next.
  bool chain(const std::string &kind, WalkHooks &hooks, std::string &error);
  /// The dry walk of the step and of every chain the plan has: false with the first value that
  /// a program or a send would need before it is produced or received.
  bool check(std::string &error);

  /// The most bytes the stash held at once, over every walk so far.
  uint64_t peakStashBytes() const;
  /// The bytes the stash holds now (during a hook, as the walk stands then), and those of the
  /// buffers for packed messages, which the rank keeps for the exchanges after (counted in a
  /// walk without data too, as the runtime would allocate them).
  uint64_t stashBytes() const;
  uint64_t messageBytes() const;

  struct RankChain;
  class Stash;

private:
  /// Empties the stash and forgets an exchange a failed walk left behind.
  void clear();
  bool perform(const Action &action, WalkHooks &hooks, std::string &error);
  bool compute(const RankChain &chain, const std::string &program, int chunk, int micro,
               WalkHooks &hooks, std::string &error);
  bool send(const RankChain &chain, const std::vector<std::string> &ports, int micro,
            uint32_t toStage, int64_t tag, WalkHooks &hooks, std::string &error);
  bool receive(const RankChain &chain, const std::vector<std::string> &ports, int micro,
               uint32_t fromStage, int64_t tag, WalkHooks &hooks, std::string &error);
  /// A buffer of the hooks' memory for a message of `bytes` that is not one stashed value,
  /// its own for the rest of the exchange.
  void *message(uint64_t bytes, WalkHooks &hooks, std::string &error);
  /// The same in a walk without data: the buffer's size is counted, nothing is allocated.
  void countMessage(uint64_t bytes);
  /// Ends the exchange (hooks.endExchange): one with receives is waited for, its messages cut
  /// up into their values; one of sends only is left in flight. The sent values leave the
  /// stash once their exchange is done.
  bool endExchange(WalkHooks &hooks, std::string &error);
  /// Waits for an exchange left in flight and drops the values it carried.
  bool settleExchange(WalkHooks &hooks, std::string &error);

  const PipelineLayout &layout_;
  uint32_t rank_, stage_;
  std::unique_ptr<RankChain> step_;
  std::map<std::string, std::unique_ptr<RankChain>> chains_;
  std::unique_ptr<Stash> stash_;
  /// Buffers for packed messages with their sizes; the first `messagesUsed_` belong to the
  /// exchange in progress.
  std::vector<std::pair<std::shared_ptr<void>, uint64_t>> messages_;
  size_t messagesUsed_ = 0;
  /// What the exchange in progress finishes at its end.
  struct Unpack {
    void *to;
    const char *from;
    uint64_t bytes;
  };
  std::vector<Unpack> unpacks_;
  int receives_ = 0;                              ///< Receives of the exchange in progress.
  std::vector<std::pair<int, std::string>> sent_; ///< (micro-batch, value) of its sends.
  /// The values of an exchange of sends left in flight.
  std::vector<std::pair<int, std::string>> inFlight_;
};

/// The most bytes world rank `rank` of `plan` keeps in its stash: the dry walk of its step and
/// chains, as the runtime walks them at setup. False with the reason when the walk fails.
bool peakStashBytes(const PipelineLayout &layout, const planfile::Plan &plan, uint32_t rank,
                    uint64_t &peak, std::string &error);

} // namespace tessel::pipeline

#endif // TESSEL_COMMON_LAYOUT_PIPELINEWALK_H
