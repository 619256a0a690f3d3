//===- SessionChecks.cpp - What a training run's processes check ----------===//

#include "runtime/host/Session.h"

#include "common/support/Checksum.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/host/ModelState.h"
#include "runtime/host/Progress.h"
#include "runtime/host/Ranks.h"
#include "runtime/host/Trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace tessel::rt {

bool Session::gatherIntegers(int64_t mine, std::vector<int64_t> &all, std::string &error) {
  std::vector<char> bytes;
  if (!ranks_->gatherFromProcesses(&mine, sizeof mine, bytes, error))
    return false;
  all.resize(ranks_->processCount());
  std::memcpy(all.data(), bytes.data(), all.size() * sizeof mine);
  return true;
}

bool Session::agree(bool ok, std::string &error) {
  std::vector<int64_t> all;
  if (!gatherIntegers(ok ? 1 : 0, all, error))
    return false;
  for (uint32_t p = 0; p < all.size(); ++p)
    if (!all[p]) {
      if (ok)
        error = "the process of rank " + std::to_string(p) + " failed";
      return false;
    }
  return true;
}

bool Session::checkSameData() {
  if (ranks_->processCount() == 1)
    return true;
  std::string mine = std::to_string(data_->totalTokens()) + " tokens, fingerprint " +
                     hex64(data_->fingerprint());
  if (evalData_)
    mine += "; eval data " + std::to_string(evalData_->totalTokens()) + " tokens, fingerprint " +
            hex64(evalData_->fingerprint());
  const std::string read = s_.data + (s_.evalData.empty() ? "" : " and " + s_.evalData);
  std::vector<std::string> data, paths;
  std::string err;
  if (!gatherTexts(mine, data, err) || !gatherTexts(read, paths, err))
    return error(err);
  auto describe = [&](uint32_t p) { return paths[p] + " (" + data[p] + ")"; };
  std::string differing;
  for (uint32_t p = 1; p < data.size(); ++p)
    if (data[p] != data[0])
      differing += (differing.empty() ? "" : "; ") + std::string("rank ") + std::to_string(p) +
                   " reads " + describe(p);
  if (differing.empty())
    return true;
  return error("the processes do not read the same data: rank 0 reads " + describe(0) + ", but " +
               differing + "; every process must train on the same data");
}

bool Session::gatherTexts(const std::string &mine, std::vector<std::string> &all,
                          std::string &error) {
  std::vector<int64_t> lengths;
  std::vector<char> texts;
  if (!gatherIntegers(static_cast<int64_t>(mine.size()), lengths, error))
    return false;
  // Gathered as records of the longest length; each is cut back to its own.
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::string padded = mine;
  padded.resize(static_cast<size_t>(longest), ' ');
  if (!ranks_->gatherFromProcesses(padded.data(), padded.size(), texts, error))
    return false;
  all.clear();
  for (uint32_t p = 0; p < ranks_->processCount(); ++p)
    all.emplace_back(texts.data() + p * longest, static_cast<size_t>(lengths[p]));
  return true;
}

bool Session::dumpTensors(const std::string &file, const std::string &role) {
  std::vector<TensorView> views;
  std::vector<std::vector<float>> scratch(plan_.state.size());
  for (size_t i = 0; i < plan_.state.size(); ++i) {
    const planfile::StateTensor &t = plan_.state[i];
    if (t.role == role)
      views.push_back({role == "param" ? t.name : t.of, DType::F32, ranks_->stateShape(i),
                       ranks_->wholeState(i, scratch[i])});
  }
  std::string err;
  if (!writeSafetensors(options_.dumpDir + "/" + file, views, {}, err))
    return error(err);
  return true;
}

std::string Session::firstNonFiniteState() {
  // The first tensor, in the plan's order, with a non-finite value in a block of this
  // process's ranks; then the first over all processes.
  int64_t first = static_cast<int64_t>(plan_.state.size());
  for (size_t i = 0; i < plan_.state.size() && first == static_cast<int64_t>(plan_.state.size());
       ++i) {
    const planfile::StateTensor &t = plan_.state[i];
    if (!t.checkpointed())
      continue;
    for (uint32_t r : ranks_->localRanks()) {
      std::vector<float> block(static_cast<size_t>(t.bytes() / 4));
      if (ranks_->executor(r).readState(i, block.data()) &&
          !allFinite(block.data(), block.size())) {
        first = static_cast<int64_t>(i);
        break;
      }
    }
  }
  std::vector<int64_t> all;
  std::string err;
  if (!gatherIntegers(first, all, err))
    return "an unknown tensor (" + err + ")";
  first = *std::min_element(all.begin(), all.end());
  if (first >= static_cast<int64_t>(plan_.state.size()))
    return "";
  const planfile::StateTensor &t = plan_.state[static_cast<size_t>(first)];
  return t.role == "param" ? "parameter '" + t.name + "'"
                           : "optimizer state '" + t.name + "' (of '" + t.of + "')";
}

Session::GradientSummary Session::summarizeGradients() {
  // Over the blocks this process's ranks speak for (each block of each gradient once), then
  // over the processes: the host never assembles a whole gradient.
  struct Partial {
    double squares = 0, largest = 0;
    int64_t nonFinite = -1, largestIn = -1; // State indices.
  } mine;
  for (size_t i = 0; i < plan_.state.size(); ++i) {
    const planfile::StateTensor &t = plan_.state[i];
    if (t.role != "grad")
      continue;
    std::vector<float> host(static_cast<size_t>(t.bytes() / 4));
    for (uint32_t r : ranks_->localRanks()) {
      if (!ranks_->executor(r).readState(i, host.data()))
        continue;
      const float *g = host.data();
      const size_t n = host.size();
      if (!allFinite(g, n)) {
        if (mine.nonFinite < 0)
          mine.nonFinite = static_cast<int64_t>(i);
        continue;
      }
      if (!ranks_->ownsBlock(i, r))
        continue;
      for (size_t e = 0; e < n; ++e) {
        double x = std::fabs(static_cast<double>(g[e]));
        mine.squares += x * x;
        if (x > mine.largest) {
          mine.largest = x;
          mine.largestIn = static_cast<int64_t>(i);
        }
      }
    }
  }
  GradientSummary sum;
  std::vector<char> all;
  std::string err;
  if (!ranks_->gatherFromProcesses(&mine, sizeof mine, all, err)) {
    sum.nonFinite = "an unknown parameter (" + err + ")";
    return sum;
  }
  int64_t nonFinite = -1, largestIn = -1;
  double squares = 0;
  for (uint32_t p = 0; p < ranks_->processCount(); ++p) {
    Partial theirs;
    std::memcpy(&theirs, all.data() + p * sizeof theirs, sizeof theirs);
    squares += theirs.squares;
    if (theirs.nonFinite >= 0 && (nonFinite < 0 || theirs.nonFinite < nonFinite))
      nonFinite = theirs.nonFinite;
    if (theirs.largest > sum.largest) {
      sum.largest = theirs.largest;
      largestIn = theirs.largestIn;
    }
  }
  if (nonFinite >= 0)
    sum.nonFinite = plan_.state[static_cast<size_t>(nonFinite)].of;
  if (largestIn >= 0)
    sum.largestIn = plan_.state[static_cast<size_t>(largestIn)].of;
  sum.norm = std::sqrt(squares);
  return sum;
}

int Session::reportNonFinite(int64_t step, int64_t micro, const std::string &what) {
  progress_.reset();
  // Weights the last update made non-finite are where it came from (the state is not checked
  // after each update: the next step's loss or a checkpoint finds it).
  if (step > startStep_ + 1 && reportNonFiniteUpdate(step - 1))
    return 1;
  // Every process knows the same: the first speaks. Under MPI the checking rerun below ends
  // every process once a rank finds the value (that rank names it), so the step is said first.
  const bool speaks = ranks_->isMainProcess();
  const bool processes = ranks_->processCount() > 1;
  if (processes && speaks) {
    std::fprintf(stderr,
                 "tessel: error: step %lld: %s; the step is run again with every kernel's "
                 "output checked to find where it started\n",
                 static_cast<long long>(step), what.c_str());
    reportIntactCheckpoint();
  }
  std::string where;
  // Rerun the micro-batch (a pipeline: the whole step, whose micro-batches run together in
  // pieces on several stages) checking every kernel's output to find where it started.
  if (ranks_->pipeline()) {
    std::string err;
    std::vector<float> losses;
    if (!ranks_->runPipelineStep(stepContext(step, 0), stepBatches_, losses, err,
                                 /*checkFinite=*/true))
      where = "; " + err;
  } else if (writeInputs("forward_backward")) {
    std::string err;
    if (!ranks_->run("forward_backward", stepContext(step, micro), err, true))
      where = "; " + err;
  }
  if (!processes) {
    std::fprintf(stderr, "tessel: error: step %lld: %s%s\n", static_cast<long long>(step),
                 what.c_str(), where.c_str());
    reportIntactCheckpoint();
  }
  return 1;
}

int Session::reportNonFiniteGradients(int64_t step) {
  // Every rank stopped at the guard, so parameters, moments and gradients are as the
  // backward pass left them: find which gradient is not finite (read off the device only
  // now, on the way out).
  GradientSummary grads = summarizeGradients();
  if (!grads.nonFinite.empty())
    return reportNonFinite(step, s_.accumulation - 1,
                           "the gradient of '" + grads.nonFinite + "' is not finite");
  progress_.reset();
  if (ranks_->isMainProcess()) {
    std::fprintf(stderr,
                 "tessel: error: step %lld: the gradients are finite but their norm, %g, "
                 "does not fit in f32 (the largest gradient, %g, is in '%s')\n",
                 static_cast<long long>(step), grads.norm, grads.largest, grads.largestIn.c_str());
    reportIntactCheckpoint();
  }
  return 1;
}

bool Session::reportNonFiniteUpdate(int64_t step) {
  std::string bad = firstNonFiniteState();
  if (bad.empty())
    return false;
  progress_.reset();
  if (ranks_->isMainProcess()) {
    std::fprintf(stderr,
                 "tessel: error: step %lld: the optimizer's update made %s non-finite "
                 "although the gradients were finite (gradient norm %g, learning rate %g); "
                 "lower the learning rate or clip the gradients\n",
                 static_cast<long long>(step), bad.c_str(), static_cast<double>(lastGradNorm_),
                 static_cast<double>(lastLr_));
    reportIntactCheckpoint();
  }
  return true;
}

} // namespace tessel::rt
