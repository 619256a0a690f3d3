//===- SessionBatches.cpp - A training run's batches and programs ---------===//

#include "runtime/host/Session.h"

#include "runtime/host/Data.h"
#include "runtime/host/Trainer.h"

#include <cmath>
#include <cstring>

namespace tessel::rt {

bool Session::writeInputs(const std::string &program) {
  std::string err;
  const int64_t n = static_cast<int64_t>(tokens_.size());
  if (!ranks_->writeInput(program, "tokens", tokens_.data(), n, err) ||
      (ranks_->hasInput(program, "targets") &&
       !ranks_->writeInput(program, "targets", targets_.data(), n, err)))
    return error(err);
  return true;
}

bool Session::sampleMicroBatch(int64_t step, int64_t micro, int64_t &counted) {
  std::string err;
  if (!data_->trainBatch(dataRng_, dataRows_, tokens_.data(), targets_.data(), s_.seq, err,
                         &counted))
    return error("step " + std::to_string(step) + ": " + err);
  if (!options_.dumpDir.empty()) {
    std::string suffix = "." + std::to_string(step) + "." + std::to_string(micro);
    dumpedBatches_.push_back({"tokens" + suffix, tokens_});
    dumpedBatches_.push_back({"targets" + suffix, targets_});
  }
  return true;
}

/// StepContext::targetScale of a batch of `positions` targets, `counted` of which count. A
/// batch none of whose targets counts has loss 0 and no gradient, whatever the factor; one
/// whose targets all count keeps the plan's factor exactly.
static double targetScaleOf(int64_t positions, int64_t counted) {
  return counted == positions || counted == 0
             ? 1.0
             : static_cast<double>(positions) / static_cast<double>(counted);
}

bool Session::sampleStep(int64_t step) {
  // The micro-batches are drawn in order before any runs: the loss is the mean over the
  // targets of the whole step that count, which all of them hold.
  stepBatches_.assign(static_cast<size_t>(s_.accumulation), {});
  int64_t counted = 0, positions = 0;
  for (int64_t micro = 0; micro < s_.accumulation; ++micro) {
    int64_t n = 0;
    if (!sampleMicroBatch(step, micro, n))
      return false;
    counted += n;
    positions += static_cast<int64_t>(dataRows_.size()) * s_.seq;
    stepBatches_[micro] = MicroBatchData{tokens_, targets_};
  }
  targetScale_ = targetScaleOf(positions, counted);
  return true;
}

int Session::forwardBackward(int64_t step, double &loss) {
  if (ranks_->pipeline())
    return pipelineForwardBackward(step, loss);
  std::string err;
  loss = 0;
  if (!sampleStep(step))
    return 1;
  for (int64_t micro = 0; micro < s_.accumulation; ++micro) {
    tokens_ = stepBatches_[micro].tokens;
    targets_ = stepBatches_[micro].targets;
    if (!writeInputs("forward_backward"))
      return 1;
    if (!ranks_->run("forward_backward", stepContext(step, micro), err)) {
      error("step " + std::to_string(step) + ": " + err);
      return 1;
    }
    float l = ranks_->output("forward_backward", "loss")[0];
    if (!std::isfinite(l))
      return reportNonFinite(step, micro, "the loss is " + std::to_string(l));
    loss += l;
  }
  loss /= static_cast<double>(s_.accumulation);
  return 0;
}

int Session::pipelineForwardBackward(int64_t step, double &loss) {
  // The micro-batches are drawn in the order a run without a pipeline draws them, so both see
  // the same data and, summed in the same order, the same mean loss.
  if (!sampleStep(step))
    return 1;
  std::string err;
  std::vector<float> losses;
  if (!ranks_->runPipelineStep(stepContext(step, 0), stepBatches_, losses, err)) {
    error("step " + std::to_string(step) + ": " + err);
    return 1;
  }
  loss = 0;
  for (int64_t micro = 0; micro < s_.accumulation; ++micro) {
    if (!std::isfinite(losses[micro]))
      return reportNonFinite(step, micro, "the loss is " + std::to_string(losses[micro]));
    loss += losses[micro];
  }
  loss /= static_cast<double>(s_.accumulation);
  return 0;
}

bool Session::evalBatch(int64_t counted, double &loss) {
  std::string err;
  const StepContext ctx{1, 0, s_.seed,
                        targetScaleOf(static_cast<int64_t>(tokens_.size()), counted)};
  if (ranks_->pipeline()) {
    std::vector<float> out;
    if (!ranks_->runForwardChain("eval", ctx, {tokens_, targets_}, out, err) ||
        out.empty())
      return error("evaluation failed: " +
                   (err.empty() ? std::string("the last chunk has no loss") : err));
    loss = out[0];
    return true;
  }
  if (!writeInputs("eval") || !ranks_->run("eval", ctx, err))
    return error("evaluation failed: " + err);
  loss = ranks_->output("eval", "loss")[0];
  return true;
}

bool Session::evaluate(double &mean) {
  // The evaluation set is eval.batches batches of the spec's `batch` sequences, whatever the
  // layout: a pass takes s_.batch of them (a micro-batch over the data ranks), so a layout
  // that accumulates makes more, smaller passes over the same windows. Passes are equal in
  // size, so the mean of their losses is the mean over all the windows; over examples, whose
  // passes count different numbers of targets, each pass's mean weighs as many as it counts.
  const int64_t passes = s_.evalBatches * s_.accumulation, windows = passes * s_.batch;
  const bool weighted = evaluationData().hasExamples();
  double sum = 0, weights = 0;
  std::string err;
  for (int64_t b = 0; b < passes; ++b) {
    int64_t counted = 0;
    if (!evaluationData().evalBatch(b * s_.batch, windows, dataRows_, tokens_.data(),
                                    targets_.data(), s_.seq, err, &counted))
      return error("evaluation: " + err);
    double loss = 0;
    if (!evalBatch(counted, loss))
      return false;
    const double weight = weighted ? static_cast<double>(counted) : 1.0;
    sum += loss * weight;
    weights += weight;
  }
  mean = weights > 0 ? sum / weights : 0.0;
  return true;
}

} // namespace tessel::rt
