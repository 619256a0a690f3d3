//===- PipelineAction.cpp - One step of a pipeline rank's schedule --------===//

#include "common/schedule/PipelineAction.h"

namespace tessel::pipeline {

bool isCompute(Action::Kind kind) {
  switch (kind) {
  case Action::Forward:
  case Action::Backward:
  case Action::BackwardInput:
  case Action::BackwardWeight:
    return true;
  default:
    return false;
  }
}

bool isCommunication(Action::Kind kind) { return !isCompute(kind); }

std::string actionLabel(const Action &action, bool withChunk) {
  const char *prefix = "?";
  switch (action.kind) {
  case Action::Forward:
    prefix = "F";
    break;
  case Action::Backward:
  case Action::BackwardInput:
    prefix = "B";
    break;
  case Action::BackwardWeight:
    prefix = "W";
    break;
  case Action::SendActivation:
    prefix = "send act ";
    break;
  case Action::RecvActivation:
    prefix = "recv act ";
    break;
  case Action::SendGrad:
    prefix = "send grad ";
    break;
  case Action::RecvGrad:
    prefix = "recv grad ";
    break;
  }
  std::string label = prefix + std::to_string(action.microbatch);
  if (withChunk)
    label += "." + std::to_string(action.chunk);
  return label;
}

} // namespace tessel::pipeline
