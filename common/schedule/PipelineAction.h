//===- PipelineAction.h - One step of a pipeline rank's schedule -*- C++ -*-===//
//
// The unit of a pipeline schedule: a rank's list of actions says what it computes and what it
// sends and receives, in order. Both the compiler (which writes schedules into the IR) and the
// runtime (which runs them and records what happened) speak in these actions, so this header
// depends on nothing.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_COMMON_SCHEDULE_PIPELINEACTION_H
#define TESSEL_COMMON_SCHEDULE_PIPELINEACTION_H

#include <string>

namespace tessel::pipeline {

/// One action of a rank. Model chunk `chunk` of rank r is global virtual stage chunk * p + r
/// (Megatron-LM's interleaving), so with one chunk per rank the stage is the rank.
struct Action {
  enum Kind {
    Forward,        ///< F: the chunk's forward pass.
    Backward,       ///< B: the whole backward pass (input and weight gradients).
    BackwardInput,  ///< B of zero-bubble schedules: the gradient of the chunk's input only.
    BackwardWeight, ///< W: the weight gradients, which nothing downstream waits for.
    SendActivation, ///< The chunk's output to the next virtual stage.
    RecvActivation, ///< The chunk's input from the previous virtual stage.
    SendGrad,       ///< The gradient of the chunk's input to the previous virtual stage.
    RecvGrad,       ///< The gradient of the chunk's output from the next virtual stage.
  };
  Kind kind;
  int microbatch;
  /// The model chunk on this rank: for a send the chunk that produced the data, for a receive
  /// the chunk that consumes it.
  int chunk = 0;
  /// The rank at the other end of a send or receive; -1 for computations.
  int peer = -1;

  bool operator==(const Action &other) const {
    return kind == other.kind && microbatch == other.microbatch && chunk == other.chunk &&
           peer == other.peer;
  }
  bool operator!=(const Action &other) const { return !(*this == other); }
};

/// F, B, B (input) and W: the actions that occupy a rank's compute.
bool isCompute(Action::Kind kind);
/// Sends and receives.
bool isCommunication(Action::Kind kind);

/// A short name for traces and errors: "F3", "B3", "W3", "send act 3", "recv grad 3", with
/// ".chunk" after the micro-batch when `withChunk` ("B3.1").
std::string actionLabel(const Action &action, bool withChunk);

} // namespace tessel::pipeline

#endif // TESSEL_COMMON_SCHEDULE_PIPELINEACTION_H
