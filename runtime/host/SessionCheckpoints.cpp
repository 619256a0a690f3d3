//===- SessionCheckpoints.cpp - Saving and restoring a training run -------===//

#include "runtime/host/Session.h"

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/HfWeights.h"
#include "runtime/core/Blocks.h"
#include "runtime/host/ModelState.h"
#include "runtime/host/Pretrained.h"
#include "runtime/host/Progress.h"
#include "runtime/host/Ranks.h"
#include "runtime/host/RunSettings.h"
#include "runtime/host/StopSignals.h"
#include "runtime/host/Trainer.h"

#include <cstdio>
#include <cstring>
#include <list>
#include <unistd.h>

namespace tessel::rt {

bool Session::restore(const std::string &path) {
  std::string err;
  const double loadStart = hostSeconds();
  auto ck = loadState(plan_, *ranks_, path, /*withOptimizer=*/true, err);
  if (!ck)
    return error(err);
  const double loadSeconds = hostSeconds() - loadStart;
  if (!rngFromJson(ck->extra.find("data_rng"), dataRng_))
    return error("checkpoint " + ck->path + " has no valid data position ('data_rng')");
  // What the run wrote beside the step must agree with it (see save()).
  auto integer = [&](const char *field, int64_t &out) {
    const Json *j = ck->extra.find(field);
    if (!j || !j->isInteger() || j->asInt() < 0)
      return error("checkpoint " + ck->path + " has no valid '" + field + "'");
    out = j->asInt();
    return true;
  };
  int64_t optimizerStep, tokensSeen, seed;
  if (!integer("optimizer_step", optimizerStep) || !integer("tokens_seen", tokensSeen) ||
      !integer("seed", seed))
    return false;
  if (optimizerStep != ck->step)
    return error("checkpoint " + ck->path + " is at step " + std::to_string(ck->step) +
                 " but its optimizer at step " + std::to_string(optimizerStep));
  if (static_cast<uint64_t>(seed) != s_.seed)
    return error("checkpoint " + ck->path + " was trained with seed " + std::to_string(seed) +
                 ", this run has seed " + std::to_string(s_.seed) +
                 " (dropout and data order follow the seed: pass --seed " + std::to_string(seed) +
                 " to continue it)");
  startStep_ = ck->step;
  lastCheckpoint_ = ck->path;
  if (startStep_ >= s_.steps)
    return error("checkpoint " + ck->path + " is at step " + std::to_string(startStep_) +
                 ", which leaves none of the " + std::to_string(s_.steps) +
                 " steps to run; pass a larger --steps");
  if (!options_.quiet) {
    // What this process read of the checkpoint: only its ranks' blocks, checked chunk by chunk.
    double stored = 0;
    for (const auto *tensors : {&ck->params, &ck->optimizer})
      for (const auto &[name, tensor] : *tensors)
        stored += static_cast<double>(shapeElements(tensor.shape) * dtypeSize(tensor.dtype));
    std::printf("resumed from %s at step %lld (loaded in %.2f s, reading %.1f of its %.1f MB)\n",
                ck->path.c_str(), static_cast<long long>(startStep_), loadSeconds,
                static_cast<double>(ck->bytesChecked()) / 1e6, stored / 1e6);
  }
  return true;
}

bool Session::startFrom(const std::string &path) {
  const std::vector<size_t> loaded = loadedParameters(plan_);
  if (path.empty()) {
    if (loaded.empty())
      return true;
    const planfile::StateTensor &t = plan_.state[loaded.front()];
    return error("parameter '" + t.name + "' is loaded from '" + t.initSource +
                 "' (load in the spec), but no weights are named: pass --init-from DIR (a "
                 "Hugging Face model folder or a Tessel checkpoint) or set train.init_from");
  }
  std::string err;
  const double start = hostSeconds();
  if (HfWeights::looksLike(path)) {
    PretrainedLoad report;
    if (!loadPretrained(plan_, *ranks_, path, report, err))
      return error(err);
    if (!options_.quiet) {
      std::printf("initialised %zu parameters (%.1fM values) from %s in %.2f s", report.parameters,
                  report.values / 1e6, path.c_str(), hostSeconds() - start);
      if (report.unused)
        std::printf("; %zu stored tensors unread ('%s'%s)", report.unused,
                    report.firstUnused.c_str(), report.unused > 1 ? ", ..." : "");
      std::printf("\n");
    }
    return true;
  }
  // A Tessel checkpoint: every parameter by its own name, whatever the spec's initialisers;
  // its optimizer state, step and data position are left behind (that is --resume).
  auto ck = loadState(plan_, *ranks_, path, /*withOptimizer=*/false, err, /*sameModel=*/false);
  if (!ck)
    return error(err);
  if (!options_.quiet)
    std::printf("initialised the parameters from %s (step %lld of model '%s') in %.2f s; the "
                "optimizer starts afresh\n",
                ck->path.c_str(), static_cast<long long>(ck->step), ck->model.c_str(),
                hostSeconds() - start);
  return true;
}

bool Session::save(int64_t step) {
  // A checkpoint's writes take as long as the disk makes them.
  waitLimits_->unknownPart("a checkpoint");
  const double start = hostSeconds();
  const bool saved = saveCheckpoint(step);
  lastSaveSeconds_ = hostSeconds() - start;
  waitLimits_->regularParts();
  return saved;
}

bool Session::saveCheckpoint(int64_t step) {
  // Each rank writes the blocks it speaks for; the first process writes the manifest once
  // every shard is on disk. The checkpoint does not depend on the layout it was trained with:
  // loading reshards.
  const std::string failed =
      "checkpoint at step " + std::to_string(step) + " failed" +
      (lastCheckpoint_.empty() ? std::string() : " (" + lastCheckpoint_ + " is intact)") + ": ";
  CheckpointContents c;
  c.model = plan_.model;
  c.fingerprint = fingerprint(plan_);
  c.step = step;
  std::vector<CheckpointShard> shards;
  for (uint32_t r : ranks_->localRanks())
    shards.push_back(CheckpointShard{r, {}, {}});
  std::list<std::vector<float>> hostBlocks; // A list: the blocks never move.
  std::string bad;
  for (size_t i = 0; i < plan_.state.size(); ++i) {
    const planfile::StateTensor &t = plan_.state[i];
    if (!t.checkpointed())
      continue;
    CheckpointTensor whole{t.name, DType::F32, ranks_->stateShape(i)};
    (t.role == "param" ? c.params : c.optimizerState).push_back(whole);
    for (size_t k = 0; k < shards.size(); ++k) {
      const uint32_t r = shards[k].rank;
      Executor &ex = ranks_->executor(r);
      if (!ex.holdsState(i) || !ranks_->ownsBlock(i, r))
        continue;
      const Block &b = ranks_->stateBlock(i, r);
      // The block where it is, in host memory; else copied off the device, to stay until the
      // shards are written.
      const float *data = static_cast<const float *>(ex.stateInHostMemory(i));
      if (!data) {
        std::vector<float> &host = hostBlocks.emplace_back(static_cast<size_t>(b.localElements()));
        ex.readState(i, host.data());
        data = host.data();
      }
      if (bad.empty() && !allFinite(data, static_cast<size_t>(b.localElements())))
        bad = t.name;
      TensorBlock block{t.name, DType::F32, b.offset, b.local, data};
      (t.role == "param" ? shards[k].params : shards[k].optimizerState).push_back(block);
    }
  }
  std::string err;
  if (!agree(bad.empty(), err)) {
    // The state was finite when it was loaded: an optimizer update made it otherwise.
    if (reportNonFiniteUpdate(step))
      return false;
    return error(
        "step " + std::to_string(step) + ": " +
        (bad.empty() ? err : "'" + bad + "' holds a non-finite value") +
        "; no checkpoint is saved" +
        (lastCheckpoint_.empty() ? std::string() : " (" + lastCheckpoint_ + " is intact)"));
  }
  Json extra = Json::object();
  extra.set("data_rng", rngToJson(dataRng_));
  extra.set("seed", static_cast<int64_t>(s_.seed));
  extra.set("tokens_seen", step * s_.batch * s_.seq * s_.accumulation);
  extra.set("optimizer_step", step);
  c.extra = extra;

  // The temporary directory is named after the first process, which makes it.
  std::vector<std::string> tokens;
  if (!gatherTexts(std::to_string(::getpid()), tokens, err))
    return error(failed + err);
  const std::string token = tokens[0];
  bool ok = !ranks_->isMainProcess() || beginCheckpoint(s_.checkpointDir, step, token, err);
  if (!agree(ok, err))
    return error(failed + err);
  const std::string tempDir = checkpointTempDir(s_.checkpointDir, step, token);
  std::string described = "[";
  for (const CheckpointShard &shard : shards) {
    Json description;
    if (!writeShard(tempDir, shard, description, err)) {
      ok = false;
      break;
    }
    described += (described.size() > 1 ? "," : "") + description.compact();
  }
  described += "]";
  std::vector<std::string> texts;
  if (!agree(ok, err) || !gatherTexts(described, texts, err)) {
    // Every rank has stopped writing shards: the partial ones go, not to keep a disk full.
    if (ranks_->isMainProcess())
      abandonCheckpoint(tempDir);
    return error(failed + err);
  }
  if (ranks_->isMainProcess()) {
    std::vector<Json> all;
    for (const std::string &text : texts) {
      std::optional<Json> list = Json::parse(text, "a shard description", err);
      if (!list)
        return error(failed + "a rank's shard description: " + err);
      for (const Json &d : list->items())
        all.push_back(d);
    }
    ok = commitCheckpoint(s_.checkpointDir, tempDir, c, all, err);
  }
  if (!agree(ok, err))
    return error(ranks_->isMainProcess() ? err : failed + err);
  lastSaved_ = step;
  lastCheckpoint_ = s_.checkpointDir + "/" + checkpointName(step);
  return true;
}

int Session::agreedStopSignal() {
  const int64_t mine = StopSignals::requested();
  if (ranks_->processCount() == 1)
    return static_cast<int>(mine);
  std::vector<int64_t> all;
  std::string err;
  if (!gatherIntegers(mine, all, err))
    return error(err), -1;
  for (int64_t theirs : all)
    if (theirs)
      return static_cast<int>(theirs);
  return 0;
}

int Session::stopAfter(int64_t step, int signal) {
  if (progress_)
    progress_->finish();
  const std::string by = StopSignals::name(signal);
  if (metrics_) {
    Json m = Json::object();
    m.set("step", step);
    m.set("stopped_by", by);
    std::string err;
    if (!metrics_->write(m, err))
      return error(err), 1;
  }
  if (s_.checkpointDir.empty()) {
    if (ranks_->isMainProcess())
      std::fprintf(stderr,
                   "tessel: stopped after step %lld by %s; there is no checkpoint directory "
                   "(--checkpoint-dir), so nothing was saved\n",
                   static_cast<long long>(step), by.c_str());
    return 128 + signal;
  }
  if (lastSaved_ != step && !save(step))
    return 1;
  if (ranks_->isMainProcess())
    std::fprintf(stderr,
                 "tessel: stopped after step %lld by %s; checkpoint of step %lld in %s "
                 "(continue with --resume %s)\n",
                 static_cast<long long>(step), by.c_str(), static_cast<long long>(step),
                 s_.checkpointDir.c_str(), s_.checkpointDir.c_str());
  return 0;
}

void Session::reportIntactCheckpoint() {
  if (!lastCheckpoint_.empty())
    std::fprintf(stderr,
                 "tessel: the checkpoint %s is intact; nothing was saved after the "
                 "failure\n",
                 lastCheckpoint_.c_str());
}

} // namespace tessel::rt
