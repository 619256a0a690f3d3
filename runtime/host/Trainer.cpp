//===- Trainer.cpp - Setting up and running a training run ----------------===//

#include "runtime/host/Session.h"

#include "runtime/host/Trainer.h"
#include "common/cluster/AcceleratorPeaks.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/core/Rng.h"
#include "runtime/device/Device.h"
#include "runtime/host/Data.h"
#include "runtime/host/KernelProfile.h"
#include "runtime/host/KernelTrace.h"
#include "runtime/host/MemoryTrace.h"
#include "runtime/host/ModelState.h"
#include "runtime/host/Progress.h"
#include "runtime/host/Ranks.h"
#include "runtime/host/RunRecord.h"
#include "runtime/host/RunSettings.h"
#include "runtime/host/StopSignals.h"
#include "runtime/host/WaitLimits.h"
#include "runtime/pipeline/PipelineReport.h"
#include "runtime/support/AtomicFile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

namespace tessel::rt {

void Session::findPeak() {
  if (const planfile::Attr *f = plan_.findConfig("flops.model"))
    if (const double *v = std::get_if<double>(&f->value))
      stepFlops_ = *v;
  // Ranks sharing a device share its peak: count the devices of this process's ranks, and
  // every process is taken to have as many.
  std::set<std::string> devices;
  for (uint32_t r : ranks_->localRanks())
    devices.insert(ranks_->executor(r).device().name());
  double perDevice = options_.peakFlops;
  if (perDevice <= 0) {
    std::string model = ranks_->firstExecutor().device().model();
    if (auto preset = cluster::presetForDevice(model))
      perDevice = preset->peak16;
  }
  runPeak_ = perDevice * static_cast<double>(devices.size() * ranks_->processCount());
}

std::string Session::deviceFigures(double stepSeconds, Json *record) const {
  std::string out;
  char buffer[96];
  if (stepFlops_ > 0 && runPeak_ > 0 && stepSeconds > 0) {
    double mfu = stepFlops_ / stepSeconds / runPeak_;
    std::snprintf(buffer, sizeof buffer, "MFU %.1f%%", 100 * mfu);
    out = buffer;
    if (record)
      record->set("mfu", mfu);
  }
  uint64_t used = 0, total = 0;
  if (ranks_->firstExecutor().device().memoryInUse(used, total)) {
    const double gib = 1024.0 * 1024.0 * 1024.0;
    std::snprintf(buffer, sizeof buffer, "%smem %.1f/%.1f GiB", out.empty() ? "" : "  ",
                  static_cast<double>(used) / gib, static_cast<double>(total) / gib);
    out += buffer;
    if (record)
      record->set("device_memory_gib", static_cast<double>(used) / gib);
  }
  return out;
}

bool Session::setUp() {
  std::string err;
  if (!options_.dumpDir.empty() && plan_.worldSize > 1)
    return error("--dump-dir writes the tensors of a run on one rank; this plan has " +
                 std::to_string(plan_.worldSize) + " ranks (compile the model without a " +
                 "parallel layout to compare it with other frameworks)");
  ranks_ = Ranks::create(plan_, computeThreads(options_), err, options_.device);
  if (!ranks_)
    return error("the plan cannot run: " + err);
  waitLimits_ = std::make_unique<WaitLimits>(*ranks_, options_.commTimeout,
                                             options_.commTimeoutStartup, "step");
  waitLimits_->unknownPart("start-up and the first step");
  if (options_.profile)
    enableKernelProfile(*ranks_);
  findPeak();
  const PipelineLayout *pipeline = ranks_->pipeline();
  for (const char *program : {"forward_backward", "optimizer_step"})
    if ((!pipeline || std::string(program) == "optimizer_step") &&
        !ranks_->firstExecutor().hasProgram(program))
      return error(std::string("the plan has no '") + program + "' program");
  if (pipeline && pipeline->config().microbatches != s_.accumulation)
    return error("the plan's pipeline runs " + std::to_string(pipeline->config().microbatches) +
                 " micro-batches per step but trains with " + std::to_string(s_.accumulation));
  if (!pipeline && !options_.svgPath.empty())
    return error("--svg draws a pipeline's schedule; this plan has no pipeline");
  // Every output is made writable now, so that no stretch of training is lost to a path.
  if (!options_.metricsPath.empty() &&
      !prepareOutputFile(options_.metricsPath, "metrics file", err))
    return error(err);
  for (const std::string *path : {&options_.tracePath, &options_.svgPath})
    if (!path->empty() && !prepareOutputFile(*path, "schedule picture", err))
      return error(err);
  if (!options_.memoryTracePath.empty() && plan_.version < 10)
    return error("--memory-trace places what the kernels touch in the plan's buffers, which a "
                 "plan of version " + std::to_string(plan_.version) +
                 " does not record: compile the model again");
  if (!options_.memoryTracePath.empty() &&
      !prepareOutputFile(options_.memoryTracePath, "memory trace", err))
    return error(err);
  if (!options_.dumpDir.empty() && !prepareOutputDirectory(options_.dumpDir, "dump directory", err))
    return error(err);
  if (s_.data.empty())
    return error("no training data: set `data` in the train section or pass --data FILE");
  Tokenizer kind = s_.tokenizer == "byte" ? Tokenizer::Byte : Tokenizer::Tokens;
  data_ = TokenData::open(s_.data, kind, s_.vocab, s_.evalFraction, s_.seq + 1, err);
  if (!data_)
    return error(err);
  if (!s_.evalData.empty()) {
    evalData_ = TokenData::openEvaluation(s_.evalData, kind, s_.vocab, s_.seq + 1, err);
    if (!evalData_)
      return error(err);
  }
  if (s_.evalEvery > 0 && !evaluationData().hasEval())
    return error("evaluation every " + std::to_string(s_.evalEvery) +
                 " steps: there is nothing to evaluate on: the spec holds no data out "
                 "(eval.fraction = 0) and no --eval-data names validation data");
  if (!checkSameData())
    return false;
  tokens_.assign(static_cast<size_t>(s_.batch * s_.seq), 0);
  targets_.assign(tokens_.size(), 0);
  dataRows_ = ranks_->dataRows(s_.batch);
  if (!options_.metricsPath.empty()) {
    metrics_ = MetricsWriter::open(options_.metricsPath, err);
    if (!metrics_)
      return error(err);
  }
  dataRng_ = Rng(s_.seed ^ 0xD1B54A32D192ED03ull);
  initialiseParameters(/*resuming=*/!options_.resume.empty());
  // A resume makes the working copies from the weights it loads; a fresh run from these.
  if (!options_.resume.empty()) {
    if (!restore(options_.resume))
      return false;
  } else if (!startFrom(s_.initFrom) || !refreshWorkingCopies(*ranks_, err)) {
    return err.empty() ? false : error(err);
  }
  // After the resume, which may read from the same directory and must not find it made.
  if (!s_.checkpointDir.empty() &&
      !prepareOutputDirectory(s_.checkpointDir, "checkpoint directory", err))
    return error(err);
  if (metrics_) {
    RunFacts facts;
    facts.seed = s_.seed;
    facts.steps = s_.steps;
    facts.device = ranks_->firstExecutor().device().name();
    facts.deviceModel = ranks_->firstExecutor().device().model();
    facts.processes = ranks_->processCount();
    facts.threadsPerRank = ranks_->threadsPerRank();
    if (!options_.resume.empty()) {
      facts.resumedFrom = lastCheckpoint_;
      facts.resumedStep = startStep_;
    }
    if (!metrics_->write(runRecord(plan_, options_, facts), err))
      return error(err);
  }
  return true;
}

void Session::initialiseParameters(bool resuming) {
  std::vector<float> whole;
  for (size_t i = 0; i < plan_.state.size(); ++i) {
    const planfile::StateTensor &t = plan_.state[i];
    // The state starts zeroed (Device::allocate): what is not a parameter stays so, and a
    // resume loads every parameter.
    if (t.role != "param" || (resuming && t.checkpointed()))
      continue;
    size_t n = static_cast<size_t>(shapeElements(ranks_->stateShape(i)));
    whole.assign(n, 0.0f);
    float *x = whole.data();
    Rng rng = parameterRng(s_.seed, t.name);
    for (size_t e = 0; e < n; ++e) {
      if (t.init == "normal")
        x[e] = static_cast<float>(t.initA + t.initB * rng.normal());
      else if (t.init == "uniform")
        x[e] = static_cast<float>(t.initA + (t.initB - t.initA) * rng.uniform());
      else if (t.init == "ones")
        x[e] = 1.0f;
      else if (t.init == "constant")
        x[e] = static_cast<float>(t.initA);
      else
        x[e] = 0.0f;
    }
    ranks_->setWholeState(i, x);
  }
}

bool Session::writePipelineReport() {
  const PipelineLayout *pipeline = ranks_->pipeline();
  if (!pipeline || s_.steps == startStep_)
    return true;
  pipeline::Timeline timeline = ranks_->lastTimeline();
  if (!options_.quiet)
    std::printf("%s\n",
                describeMeasuredPipeline(plan_, pipeline->config(), timeline, s_.steps).c_str());
  std::string err;
  if (!writeTimelinePictures(plan_, pipeline->config(), timeline, s_.steps, options_.tracePath,
                             options_.svgPath, err))
    return error(err);
  return true;
}

void Session::traceKernels(bool on) {
  for (uint32_t rank : ranks_->localRanks()) {
    Executor &executor = ranks_->executor(rank);
    executor.enableTracing(on);
    if (!on)
      kernelTrace_.push_back({rank, executor.takeTrace()});
  }
}

bool Session::writeKernelTrace() {
  if (!tracingKernels())
    return true;
  // Each process's clock starts its own ranks' step at 0; the step's collectives keep the
  // processes close in time, but their clocks are not compared.
  double origin = std::numeric_limits<double>::infinity();
  size_t calls = 0;
  for (const RankTrace &r : kernelTrace_) {
    calls += r.spans.size();
    for (const Executor::TraceSpan &span : r.spans)
      origin = std::min(origin, span.start);
  }
  std::vector<std::string> fragments{kernelTraceEvents(kernelTrace_, calls ? origin : 0)};
  std::string err;
  if (ranks_->processCount() > 1 && !gatherTexts(fragments[0], fragments, err))
    return error(err);
  if (!ranks_->isMainProcess() || options_.tracePath.empty())
    return true;
  const std::string title = plan_.model + ": step " + std::to_string(s_.steps) + ", " +
                            std::to_string(ranks_->size()) +
                            (ranks_->size() == 1 ? " rank" : " ranks") + " on " +
                            ranks_->firstExecutor().device().model();
  if (!writeFileAtomically(options_.tracePath, kernelTraceJson(fragments, title), err))
    return error(err);
  if (!options_.quiet)
    std::printf("trace: the kernels of step %lld (%zu calls on this process's ranks) in %s\n",
                static_cast<long long>(s_.steps), calls, options_.tracePath.c_str());
  return true;
}

int Session::run() {
  if (!setUp())
    return 1;
  if (!options_.dumpDir.empty() && !dumpTensors("init.safetensors", "param"))
    return 1;
  if (!options_.quiet) {
    double params = 0;
    for (const auto &[name, shape] : parameterShapes(plan_))
      params += static_cast<double>(shapeElements(shape));
    std::string ranks;
    if (ranks_->size() > 1)
      ranks = " per rank; " + std::to_string(ranks_->size()) + " ranks" +
              (ranks_->processCount() > 1 ? " as MPI processes, " : ", ") +
              std::to_string(ranks_->threadsPerRank()) +
              (ranks_->threadsPerRank() == 1 ? " thread" : " threads") + " each";
    std::printf(
        "training %s: %.2fM parameters, %lld steps of %lld x %lld tokens%s, arena %.1f MiB%s\n",
        plan_.model.c_str(), params / 1e6, static_cast<long long>(s_.steps),
        static_cast<long long>(s_.batch * s_.accumulation), static_cast<long long>(s_.seq),
        s_.accumulation > 1 ? (" (" + std::to_string(s_.accumulation) + " micro-batches)").c_str()
                            : "",
        static_cast<double>(ranks_->firstExecutor().arenaBytes()) / (1 << 20), ranks.c_str());
    auto files = [](const TokenData &d) {
      return d.sources().size() > 1 ? " (" + std::to_string(d.sources().size()) + " files)"
                                    : std::string();
    };
    // Examples: how many, and those a row of seq + 1 tokens cuts or leaves without a target.
    auto examples = [&](const TokenData &d, std::string text) {
      if (d.longExamples() > 0)
        text += "; " + std::to_string(d.longExamples()) + " longer than seq + 1 = " +
                std::to_string(s_.seq + 1) + " tokens are cut";
      if (d.untrainedExamples() > 0)
        text += "; " + std::to_string(d.untrainedExamples()) +
                " have no trained token within it and count nothing";
      return text;
    };
    if (data_->hasExamples())
      std::printf("data: %s%s: %s\n", s_.data.c_str(), files(*data_).c_str(),
                  examples(*data_, std::to_string(data_->exampleCount()) + " examples, " +
                                       std::to_string(data_->trainExamples()) +
                                       " for training and " +
                                       std::to_string(data_->exampleCount() -
                                                      data_->trainExamples()) +
                                       " held out")
                      .c_str());
    else
      std::printf("data: %s%s: %lld tokens for training, %lld held out\n", s_.data.c_str(),
                  files(*data_).c_str(), static_cast<long long>(data_->trainTokens()),
                  static_cast<long long>(data_->evalTokens()));
    if (evalData_ && evalData_->hasExamples())
      std::printf("eval data: %s%s: %s\n", s_.evalData.c_str(), files(*evalData_).c_str(),
                  examples(*evalData_, std::to_string(evalData_->exampleCount()) + " examples")
                      .c_str());
    else if (evalData_)
      std::printf("eval data: %s%s: %lld tokens\n", s_.evalData.c_str(),
                  files(*evalData_).c_str(), static_cast<long long>(evalData_->evalTokens()));
    std::fflush(stdout);
  }
  bool terminal = streamIsTerminal(stdout);
  if (!options_.quiet)
    progress_ = std::make_unique<ProgressLine>(s_.steps, terminal, stdout, startStep_);

  std::string err;
  if (!options_.memoryTracePath.empty())
    memoryTrace_ = std::make_unique<MemoryTrace>(plan_, *ranks_, startStep_ + 1,
                                                 std::min<int64_t>(2, s_.steps - startStep_),
                                                 options_.memoryTracePath);
  double runStart = hostSeconds();
  StopSignals signals(/*announce=*/ranks_->isMainProcess());
  for (int64_t step = startStep_ + 1; step <= s_.steps; ++step) {
    double stepStart = hostSeconds();
    double loss = 0;
    const bool traced = tracingKernels() && step == s_.steps;
    if (traced)
      traceKernels(true);
    const bool memoryTraced = memoryTrace_ && memoryTrace_->traces(step);
    if (memoryTraced)
      memoryTrace_->beginStep(step);
    if (int status = forwardBackward(step, loss))
      return status;
    if (!options_.dumpDir.empty() && step == startStep_ + 1 &&
        !dumpTensors("grads.safetensors", "grad"))
      return 1;
    // The step's programs compute the gradient norm, reduced over the mesh, and stop before
    // any update when it is not finite; the host reads scalars only.
    if (!ranks_->run("optimizer_step", StepContext{step, 0, s_.seed}, err)) {
      error("step " + std::to_string(step) + ": " + err);
      return 1;
    }
    if (traced)
      traceKernels(false);
    if (memoryTraced)
      memoryTrace_->endStep(step);
    float gradNorm = ranks_->output("optimizer_step", "grad_norm")[0];
    if (!std::isfinite(gradNorm))
      return reportNonFiniteGradients(step);
    float lr = ranks_->output("optimizer_step", "lr")[0];
    lastGradNorm_ = gradNorm;
    lastLr_ = lr;
    double stepTime = hostSeconds() - stepStart;
    waitLimits_->regularPartTook(stepTime);
    double tokensPerSec =
        static_cast<double>(s_.batch * s_.seq * s_.accumulation) / std::max(stepTime, 1e-9);

    if (metrics_) {
      Json m = Json::object();
      m.set("step", step);
      m.set("loss", loss);
      m.set("lr", static_cast<double>(lr));
      m.set("grad_norm", static_cast<double>(gradNorm));
      m.set("tokens_per_s", tokensPerSec);
      m.set("step_time_s", stepTime);
      deviceFigures(stepTime, &m);
      m.set("elapsed_s", hostSeconds() - runStart);
      if (!metrics_->write(m, err))
        return error(err), 1;
    }
    if (progress_ &&
        (terminal || step % s_.logEvery == 0 || step == startStep_ + 1 || step == s_.steps))
      progress_->update(step, {loss, gradNorm, lr, stepTime, tokensPerSec},
                        deviceFigures(stepTime, nullptr));

    if (const int signal = agreedStopSignal())
      return signal < 0 ? 1 : stopAfter(step, signal);
    bool last = step == s_.steps;
    if (s_.evalEvery > 0 && (step % s_.evalEvery == 0 || last)) {
      double evalLoss = 0;
      if (!evaluate(evalLoss))
        return 1;
      if (!std::isfinite(evalLoss)) {
        if (reportNonFiniteUpdate(step))
          return 1;
        progress_.reset();
        std::fprintf(stderr,
                     "tessel: error: step %lld: the evaluation loss is %g although the training "
                     "loss was %g; nothing was saved for this step\n",
                     static_cast<long long>(step), evalLoss, loss);
        reportIntactCheckpoint();
        return 1;
      }
      if (progress_) {
        progress_->finish();
        std::printf("step %lld: eval loss %.4f\n", static_cast<long long>(step), evalLoss);
        std::fflush(stdout);
      }
      if (metrics_) {
        Json m = Json::object();
        m.set("step", step);
        m.set("eval_loss", evalLoss);
        if (!metrics_->write(m, err))
          return error(err), 1;
      }
    }
    if (!s_.checkpointDir.empty() &&
        ((s_.checkpointEvery > 0 && step % s_.checkpointEvery == 0) || last)) {
      if (!save(step))
        return 1;
    }
  }
  // A run of no steps saves the weights it starts from (an imported model as a checkpoint).
  if (s_.steps == 0 && startStep_ == 0 && !s_.checkpointDir.empty() && !save(0))
    return 1;
  if (progress_)
    progress_->finish();
  if (!options_.dumpDir.empty()) {
    std::vector<TensorView> views;
    for (const auto &[name, values] : dumpedBatches_)
      views.push_back({name, DType::I32, {s_.batch, s_.seq}, values.data()});
    if (!writeSafetensors(options_.dumpDir + "/batches.safetensors", views, {}, err))
      return error(err), 1;
  }
  if (!writePipelineReport() || !writeKernelTrace())
    return 1;
  if (memoryTrace_ && !memoryTrace_->write(options_.quiet, err))
    return error(err), 1;
  if (options_.profile)
    printKernelProfile(*ranks_, stdout);
  if (!options_.quiet) {
    std::printf("done: %lld steps in %.1f s", static_cast<long long>(s_.steps - startStep_),
                hostSeconds() - runStart);
    if (lastSaved_ >= 0)
      std::printf("; checkpoint of step %lld in %s (saved in %.2f s)",
                  static_cast<long long>(lastSaved_), s_.checkpointDir.c_str(), lastSaveSeconds_);
    std::printf("\n");
  }
  return 0;
}

int train(const Plan &plan, const RunOptions &options) { return Session(plan, options).run(); }

} // namespace tessel::rt
