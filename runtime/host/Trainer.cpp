//===- Trainer.cpp - The host loop ----------------------------------------===//

#include "runtime/host/Trainer.h"

#include "common/AcceleratorPeaks.h"
#include "common/Checksum.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/HfWeights.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/core/Blocks.h"
#include "runtime/core/Rng.h"
#include "runtime/device/Device.h"
#include "runtime/host/Data.h"
#include "runtime/host/KernelProfile.h"
#include "runtime/host/KernelTrace.h"
#include "runtime/host/KvDecode.h"
#include "runtime/host/MemoryTrace.h"
#include "runtime/host/Pretrained.h"
#include "runtime/host/Progress.h"
#include "runtime/host/RunRecord.h"
#include "runtime/host/Ranks.h"
#include "runtime/host/StopSignals.h"
#include "runtime/host/TextCodec.h"
#include "runtime/host/WaitLimits.h"
#include "runtime/pipeline/PipelineReport.h"
#include "runtime/support/AtomicFile.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <list>
#include <set>
#include <thread>
#include <unistd.h>

namespace tessel::rt {

namespace {

using planfile::Plan;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t configInt(const Plan &plan, const std::string &name, int64_t fallback) {
  const planfile::Attr *a = plan.findConfig(name);
  return a && std::holds_alternative<int64_t>(a->value) ? std::get<int64_t>(a->value) : fallback;
}

double configFloat(const Plan &plan, const std::string &name, double fallback) {
  const planfile::Attr *a = plan.findConfig(name);
  return a && std::holds_alternative<double>(a->value) ? std::get<double>(a->value) : fallback;
}

std::string configString(const Plan &plan, const std::string &name, const std::string &fallback) {
  const planfile::Attr *a = plan.findConfig(name);
  return a && std::holds_alternative<std::string>(a->value) ? std::get<std::string>(a->value)
                                                            : fallback;
}

/// The run's settings: the plan's `train` section with the command line on top.
struct Settings {
  std::string model;
  int64_t steps, batch, seq, vocab, accumulation, evalEvery, evalBatches, checkpointEvery, logEvery;
  uint64_t seed;
  double evalFraction; ///< Of `data`, held out to evaluate on when no evalData is named.
  std::string data, evalData, tokenizer, checkpointDir, initFrom;

  Settings(const Plan &plan, const RunOptions &o) {
    model = plan.model;
    steps = o.steps.value_or(configInt(plan, "train.steps", 1));
    batch = configInt(plan, "dims.batch", 1);
    seq = configInt(plan, "dims.seq", 1);
    vocab = configInt(plan, "dims.vocab", 256);
    accumulation = std::max<int64_t>(1, configInt(plan, "train.accumulation", 1));
    seed = static_cast<uint64_t>(o.seed.value_or(configInt(plan, "train.seed", 0)));
    evalEvery = o.evalEvery.value_or(configInt(plan, "train.eval_every", 0));
    evalBatches = std::max<int64_t>(1, configInt(plan, "train.eval_batches", 8));
    data = o.data.value_or(configString(plan, "train.data", ""));
    evalData = o.evalData.value_or(configString(plan, "train.eval_data", ""));
    // The spec's eval.fraction is held out unless validation data is named, whether or not
    // the run evaluates: turning evaluation on or off never changes what trains.
    evalFraction = evalData.empty() ? configFloat(plan, "train.eval_fraction", 0.0) : 0.0;
    checkpointEvery = o.checkpointEvery.value_or(configInt(plan, "train.checkpoint_every", 0));
    checkpointDir = o.checkpointDir.value_or(configString(plan, "train.checkpoint_dir", ""));
    logEvery = std::max<int64_t>(1, o.logEvery.value_or(configInt(plan, "train.log_every", 1)));
    tokenizer = configString(plan, "train.tokenizer", "byte");
    initFrom = o.initFrom.value_or(configString(plan, "train.init_from", ""));
  }
};

/// The shape of the whole tensor, of which each rank holds a block.
std::vector<int64_t> wholeShape(const Plan &plan, const planfile::StateTensor &t) {
  return blockOf(plan, t.shape, t.split, 0).whole;
}

/// The parameters' whole shapes: what a checkpoint holds, whatever the layout over ranks.
std::vector<std::pair<std::string, std::vector<int64_t>>> parameterShapes(const Plan &plan) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const planfile::StateTensor &t : plan.state)
    if (t.role == "param")
      out.push_back({t.name, wholeShape(plan, t)});
  return out;
}

/// Whether all `n` values are finite. Tests the exponent bits, so the loop vectorises and a
/// pass over every parameter costs little beside a training step.
bool allFinite(const float *x, size_t n) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

/// Compute threads in all: --threads, or every core, shared with the other processes of an
/// MPI job on this host. (Each process taking every core put processes x cores threads on the
/// cores, which spent most of a run waiting for each other.)
int computeThreads(const RunOptions &o) {
  if (o.threads > 0)
    return o.threads;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned sharing = mpi::launched() ? std::max(1u, mpi::processesOnThisHost()) : 1u;
  return static_cast<int>(std::max(1u, cores / sharing));
}

/// Names and shapes of the parameters, hashed: two models with the same fingerprint can
/// exchange checkpoints.
std::string fingerprint(const Plan &plan) {
  std::string names;
  for (const auto &[name, shape] : parameterShapes(plan))
    names += name + formatShape(shape) + ";";
  return hex64(fnv1a64(names.data(), names.size()));
}

Json rngToJson(const Rng &rng) {
  Json a = Json::array();
  for (uint64_t s : rng.state())
    a.push(std::to_string(s));
  return a;
}

bool rngFromJson(const Json *j, Rng &rng) {
  if (!j || !j->isArray() || j->size() != 4)
    return false;
  std::array<uint64_t, 4> state;
  for (size_t i = 0; i < 4; ++i) {
    const Json &x = j->items()[i];
    if (!x.isString() || x.asString().empty() || x.asString().size() > 20)
      return false;
    unsigned __int128 value = 0;
    for (char c : x.asString()) {
      if (c < '0' || c > '9')
        return false;
      value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (value > UINT64_MAX)
      return false;
    state[i] = static_cast<uint64_t>(value);
  }
  // xoshiro never reaches the all-zero state: such a state was not written by a run.
  if (state == std::array<uint64_t, 4>{})
    return false;
  rng.setState(state);
  return true;
}

/// After the host sets the parameters, their 16-bit working copies (mixed precision) are made
/// again from them; a plan without working copies has nothing to run.
bool refreshWorkingCopies(Ranks &ranks, std::string &error) {
  if (!ranks.firstExecutor().hasProgram(planfile::kWorkingCopiesProgram))
    return true;
  std::string why;
  if (ranks.run(planfile::kWorkingCopiesProgram, StepContext{}, why))
    return true;
  error = "making the parameters' working copies failed: " + why;
  return false;
}

/// Loads `path`, checks it belongs to `plan`'s model, and copies its (whole) tensors into the
/// ranks' state: parameters, and the optimizer state too when `withOptimizer`.
/// `sameModel`: the checkpoint must be of the plan's model (a resume or sampling); without it,
/// of any model whose parameters have the same names and shapes (pretrained weights).
std::unique_ptr<LoadedCheckpoint> loadState(const Plan &plan, Ranks &ranks, const std::string &path,
                                            bool withOptimizer, std::string &error,
                                            bool sameModel = true) {
  auto ck = loadCheckpoint(path, error);
  if (!ck)
    return nullptr;
  if (!checkCompatible(*ck, parameterShapes(plan), sameModel ? plan.model : ck->model, error)) {
    if (error.find(ck->path) == std::string::npos)
      error = "cannot use " + ck->path + ": " + error;
    return nullptr;
  }
  // Each local rank reads its own block of each tensor it holds, from whichever shards
  // overlap it: the checkpoint's layout need not be this run's.
  for (size_t i = 0; i < plan.state.size(); ++i) {
    const planfile::StateTensor &t = plan.state[i];
    if (!t.checkpointed() || (t.role != "param" && !withOptimizer))
      continue;
    const StoredTensor *x = ck->find(t.name);
    if (!x) {
      error = "checkpoint " + ck->path + " lacks '" + t.name + "'";
      return nullptr;
    }
    const std::vector<int64_t> &shape = ranks.stateShape(i);
    // 16-bit floats are read widened (a checkpoint written in BF16 by another tool).
    const bool floats = x->dtype == DType::F32 || x->dtype == DType::BF16 || x->dtype == DType::F16;
    if (!floats || x->shape != shape) {
      error = "checkpoint " + ck->path + ": '" + t.name + "' is " + dtypeName(x->dtype) + " " +
              formatShape(x->shape) + ", the model needs F32 (or BF16, F16) " + formatShape(shape);
      return nullptr;
    }
    std::vector<float> block;
    for (uint32_t r : ranks.localRanks()) {
      Executor &ex = ranks.executor(r);
      if (!ex.holdsState(i))
        continue;
      const Block &b = ranks.stateBlock(i, r);
      // Into the state where it is host memory; else through a host copy.
      if (auto *in = static_cast<float *>(ex.stateInHostMemory(i))) {
        if (!ck->readBlock(t.name, b.offset, b.local, in, error))
          return nullptr;
        continue;
      }
      block.resize(static_cast<size_t>(b.localElements()));
      if (!ck->readBlock(t.name, b.offset, b.local, block.data(), error))
        return nullptr;
      ex.writeState(i, block.data());
    }
  }
  if (!refreshWorkingCopies(ranks, error))
    return nullptr;
  return ck;
}

/// The stream a parameter's initial values are drawn from: a function of the seed and the
/// parameter's full name alone, so that neither the plan's order of its state (which a pipeline
/// changes) nor the layout, stage or rank changes a model's starting point.
Rng parameterRng(uint64_t seed, const std::string &name) {
  uint64_t key = seed;
  uint64_t mixed = Rng::splitmix64(key) ^ fnv1a64(name.data(), name.size());
  return Rng(mixed);
}

class Session {
public:
  Session(const Plan &plan, const RunOptions &options)
      : plan_(plan), options_(options), s_(plan, options), dataRng_(0) {}

  int run();

private:
  bool setUp();
  /// Draws every parameter from its init; `resuming`: only those a checkpoint does not hold.
  void initialiseParameters(bool resuming);
  bool restore(const std::string &path);
  /// Sets the parameters from the pretrained weights at `path` (Pretrained.h); with `path`
  /// empty, only checks that the spec loads no parameter.
  bool startFrom(const std::string &path);
  bool save(int64_t step);
  bool saveCheckpoint(int64_t step);
  /// The signal that asked this run to stop (StopSignals.h), agreed between the processes so
  /// that all stop after the same step: 0 for none, -1 when they cannot agree (reported).
  int agreedStopSignal();
  /// Ends the run after step `step` as `signal` asked: saves a checkpoint where there is a
  /// directory for it; the exit status.
  int stopAfter(int64_t step, int signal);
  /// Draws micro-batch `micro` of `step` into tokens_ and targets_; `counted`: the targets of
  /// all its rows (every process's) that count.
  bool sampleMicroBatch(int64_t step, int64_t micro, int64_t &counted);
  /// Draws every micro-batch of `step`, in order, into stepBatches_, and sets targetScale_.
  bool sampleStep(int64_t step);
  bool writeInputs(const std::string &program);
  /// The context of micro-batch `micro` of `step`.
  StepContext stepContext(int64_t step, int64_t micro) const {
    return StepContext{step, micro, s_.seed, targetScale_};
  }
  int forwardBackward(int64_t step, double &loss);
  int pipelineForwardBackward(int64_t step, double &loss);
  /// The loss of the batch in tokens_ and targets_, whose rows hold `counted` targets that
  /// count.
  bool evalBatch(int64_t counted, double &loss);
  bool writePipelineReport();
  /// --trace without a pipeline: starts recording the kernels every local rank runs, or stops
  /// and keeps what they ran (the last step, from its forward-backward passes to its optimizer
  /// step).
  void traceKernels(bool on);
  /// Writes what traceKernels recorded, every process's ranks in one file.
  bool writeKernelTrace();
  bool tracingKernels() const {
    return (options_.traceKernels || !options_.tracePath.empty()) && !ranks_->pipeline();
  }
  /// The mean held-out loss; false (with a message) when evaluation fails to run.
  bool evaluate(double &mean);
  bool dumpTensors(const std::string &file, const std::string &role);
  int reportNonFinite(int64_t step, int64_t micro, const std::string &what);
  /// After the optimizer step stopped at its guard (the gradient norm is not finite): names
  /// the gradient that is not finite, or says that the norm overflowed.
  int reportNonFiniteGradients(int64_t step);
  /// Whether some parameter or optimizer state is not finite; if so, reports that the
  /// optimizer's update of step `step` made it so. Every process calls it.
  bool reportNonFiniteUpdate(int64_t step);
  /// What the host finds in the accumulated gradients when their norm is not finite.
  struct GradientSummary {
    std::string nonFinite; ///< The first parameter with a non-finite gradient, or "".
    double largest = 0;    ///< The largest magnitude, and the parameter holding it.
    std::string largestIn;
    double norm = 0; ///< The global norm, in double.
  };
  GradientSummary summarizeGradients();
  /// Every process's `mine`, in process order. Every process calls it.
  bool gatherIntegers(int64_t mine, std::vector<int64_t> &all, std::string &error);
  /// Whether `ok` holds on every process; false with a reason if not. Every process calls it.
  bool agree(bool ok, std::string &error);
  /// Under MPI: whether every process opened the same data (its token count and fingerprint);
  /// if not, says which ranks read what. Every process calls it.
  bool checkSameData();
  /// Every process's `mine`, in process order, each as long as it was given.
  bool gatherTexts(const std::string &mine, std::vector<std::string> &all, std::string &error);
  /// The first parameter or optimizer state tensor that holds a non-finite value on some rank,
  /// or "" when every value is finite.
  std::string firstNonFiniteState();
  void reportIntactCheckpoint();
  bool error(const std::string &message) {
    progress_.reset();
    // Under MPI every process may report; each names its rank but the first.
    if (ranks_ && !ranks_->isMainProcess())
      std::fprintf(stderr, "tessel: error: rank %u: %s\n", ranks_->processIndex(), message.c_str());
    else
      std::fprintf(stderr, "tessel: error: %s\n", message.c_str());
    return false;
  }

  const Plan &plan_;
  const RunOptions &options_;
  Settings s_;
  std::unique_ptr<Ranks> ranks_;
  std::unique_ptr<WaitLimits> waitLimits_;
  std::unique_ptr<TokenData> data_;
  std::unique_ptr<TokenData> evalData_; ///< Separate validation data, when named.
  /// What evaluation reads: the validation data, or the part of the data held out.
  const TokenData &evaluationData() const { return evalData_ ? *evalData_ : *data_; }
  std::unique_ptr<MetricsWriter> metrics_;
  std::unique_ptr<ProgressLine> progress_;
  Rng dataRng_;
  int64_t startStep_ = 0;
  int64_t lastSaved_ = -1;
  double lastSaveSeconds_ = 0; ///< How long the last checkpoint took to write.
  std::string lastCheckpoint_; ///< The newest good checkpoint: resumed from or saved.
  /// The last optimizer step's gradient norm and learning rate, for messages.
  float lastGradNorm_ = 0, lastLr_ = 0;
  std::vector<RankTrace> kernelTrace_; ///< --trace without a pipeline: the last step's calls.
  std::unique_ptr<MemoryTrace> memoryTrace_; ///< --memory-trace.
  std::vector<int32_t> tokens_, targets_;
  /// The rows of tokens_ and targets_ this process's ranks take, the only ones it reads.
  std::vector<bool> dataRows_;
  std::vector<MicroBatchData> stepBatches_; ///< The step's micro-batches.
  /// The step's target positions over those that count (StepContext::targetScale).
  double targetScale_ = 1.0;
  std::vector<std::pair<std::string, std::vector<int32_t>>> dumpedBatches_;
  /// The MFU's numerator and denominator: the plan's model FLOPs per step (the compiler's
  /// count, `flops.model`) and the dense peak of all the run's devices together; 0 where
  /// either is unknown (a plan of an older compiler; the CPU without --peak).
  double stepFlops_ = 0, runPeak_ = 0;

  void findPeak();
  /// "MFU 41.2%  mem 12.3/80.0 GiB" for the progress line, as far as the run knows them, and
  /// the same figures into `record` when it is given.
  std::string deviceFigures(double stepSeconds, Json *record) const;
};

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

bool Session::restore(const std::string &path) {
  std::string err;
  const double loadStart = now();
  auto ck = loadState(plan_, *ranks_, path, /*withOptimizer=*/true, err);
  if (!ck)
    return error(err);
  const double loadSeconds = now() - loadStart;
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
  const double start = now();
  if (HfWeights::looksLike(path)) {
    PretrainedLoad report;
    if (!loadPretrained(plan_, *ranks_, path, report, err))
      return error(err);
    if (!options_.quiet) {
      std::printf("initialised %zu parameters (%.1fM values) from %s in %.2f s", report.parameters,
                  report.values / 1e6, path.c_str(), now() - start);
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
                now() - start);
  return true;
}

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

bool Session::save(int64_t step) {
  // A checkpoint's writes take as long as the disk makes them.
  waitLimits_->unknownPart("a checkpoint");
  const double start = now();
  const bool saved = saveCheckpoint(step);
  lastSaveSeconds_ = now() - start;
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
  double runStart = now();
  StopSignals signals(/*announce=*/ranks_->isMainProcess());
  for (int64_t step = startStep_ + 1; step <= s_.steps; ++step) {
    double stepStart = now();
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
    double stepTime = now() - stepStart;
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
      m.set("elapsed_s", now() - runStart);
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
                now() - runStart);
    if (lastSaved_ >= 0)
      std::printf("; checkpoint of step %lld in %s (saved in %.2f s)",
                  static_cast<long long>(lastSaved_), s_.checkpointDir.c_str(), lastSaveSeconds_);
    std::printf("\n");
  }
  return 0;
}

} // namespace

int train(const Plan &plan, const RunOptions &options) { return Session(plan, options).run(); }

namespace {

/// The prompts of a generation: --prompt-file's lines (empty lines skipped), else --prompt or
/// --chat's turn. Each has a codec of its own (one tokenizer, loaded once), which decodes its
/// sample.
struct Prompt {
  std::string text;
  std::unique_ptr<TextCodec> codec;
  std::vector<int32_t> ids;
};

bool readPrompts(const Settings &s, const RunOptions &options, const std::string &tokenizerPath,
                 std::vector<Prompt> &prompts, std::string &err) {
  std::vector<std::string> texts;
  if (!options.promptFile.empty()) {
    std::FILE *f = std::fopen(options.promptFile.c_str(), "rb");
    if (!f) {
      err = "cannot read " + options.promptFile + ": " + std::strerror(errno);
      return false;
    }
    std::string line;
    for (int c; (c = std::fgetc(f)) != EOF;) {
      if (c != '\n') {
        line += static_cast<char>(c);
        continue;
      }
      if (!line.empty() && line.back() == '\r')
        line.pop_back();
      if (!line.empty())
        texts.push_back(line);
      line.clear();
    }
    std::fclose(f);
    if (!line.empty())
      texts.push_back(line);
    if (texts.empty()) {
      err = options.promptFile + " holds no prompt (one a line)";
      return false;
    }
  } else {
    texts.push_back(options.prompt);
  }
  std::unique_ptr<TextCodec> codec = TextCodec::create(s.tokenizer, tokenizerPath, s.vocab, err);
  if (!codec)
    return false;
  for (size_t i = 0; i < texts.size(); ++i) {
    Prompt p;
    p.text = texts[i];
    p.codec = codec->fresh();
    const bool given = options.promptGiven || !options.promptFile.empty();
    if (!(options.chat ? p.codec->encodeChat(p.text, options.system, options.chatTemplate, p.ids,
                                             err)
                       : p.codec->encodePrompt(p.text, given, p.ids, err)))
      return false;
    for (int32_t t : p.ids)
      if (t < 0 || t >= s.vocab) {
        err = (texts.size() > 1 ? "prompt " + std::to_string(i + 1) : std::string("the prompt")) +
              " has token " + std::to_string(t) + ", outside the vocabulary of " +
              std::to_string(s.vocab);
        return false;
      }
    prompts.push_back(std::move(p));
  }
  return true;
}

/// Loads the weights generation samples with into `ranks`, which run `plan` (the training plan
/// or its decode plan: both name the parameters alike).
bool loadGenerationWeights(const Plan &plan, const Settings &s, const RunOptions &options,
                           Ranks &ranks, std::string &err) {
  // A checkpoint of this model, or pretrained weights (--init-from), the command line's
  // before the spec's.
  std::string source = !options.checkpoint.empty() ? options.checkpoint
                       : options.initFrom          ? *options.initFrom
                       : !s.checkpointDir.empty()  ? s.checkpointDir
                                                   : s.initFrom;
  if (source.empty()) {
    err = "--generate needs --checkpoint DIR or --init-from DIR (or a checkpoint directory or "
          "init_from in the model's train section)";
    return false;
  }
  const bool pretrained = source != options.checkpoint && source != s.checkpointDir;
  PretrainedLoad report;
  return pretrained && HfWeights::looksLike(source)
             ? loadPretrained(plan, ranks, source, report, err) && refreshWorkingCopies(ranks, err)
             : loadState(plan, ranks, source, /*withOptimizer=*/false, err,
                         /*sameModel=*/!pretrained) != nullptr;
}

/// Generation with the plan's decode programs: prompts prefilled into a paged KV cache, then
/// one token per sequence per step.
int generateWithCache(const Plan &plan, const Settings &s, const RunOptions &options,
                      std::vector<Prompt> &prompts) {
  std::string err;
  const Plan &decoder = *plan.decoder;
  auto ranks = Ranks::create(decoder, computeThreads(options), err, options.device);
  if (!ranks) {
    std::fprintf(stderr, "tessel: error: the decode plan cannot run: %s\n", err.c_str());
    return 1;
  }
  WaitLimits waitLimits(*ranks, options.commTimeout, options.commTimeoutStartup, "decode step");
  waitLimits.unknownPart("start-up and the first decode step");
  auto engine = KvDecoder::create(*ranks, err);
  if (!engine || !loadGenerationWeights(decoder, s, options, *ranks, err)) {
    std::fprintf(stderr, "tessel: error: %s\n", err.c_str());
    return 1;
  }
  if (options.profile)
    enableKernelProfile(*ranks);
  std::vector<DecodeRequest> requests;
  for (const Prompt &p : prompts)
    requests.push_back({p.ids, options.tokens});
  const bool streaming = prompts.size() == 1;
  std::vector<std::string> outputs(prompts.size());
  // Each prompt is echoed, so that its output reads as one text; a chat prints the answer.
  const bool given = options.promptGiven || !options.promptFile.empty();
  for (size_t i = 0; i < prompts.size(); ++i)
    if (!options.chat)
      outputs[i] = prompts[i].codec->echo(prompts[i].text, given, prompts[i].ids);
  if (streaming) {
    std::fwrite(outputs[0].data(), 1, outputs[0].size(), stdout);
    std::fflush(stdout);
  }
  Sampling sampling{options.temperature, options.topK, options.topP,
                    static_cast<uint64_t>(options.seed.value_or(static_cast<int64_t>(s.seed)))};
  const int64_t batch = options.batch > 0 ? options.batch : static_cast<int64_t>(prompts.size());
  double lastStep = now();
  auto ends = [&](int32_t id) { return prompts[0].codec->endsSample(id); };
  auto emit = [&](size_t i, int32_t id) {
    const std::string text = prompts[i].codec->append(id);
    if (streaming) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    } else {
      outputs[i] += text;
    }
    const double t = now();
    waitLimits.regularPartTook(t - lastStep);
    lastStep = t;
  };
  if (!engine->run(requests, batch, sampling, ends, emit, err)) {
    std::fprintf(stderr, "\ntessel: error: %s\n", err.c_str());
    return 1;
  }
  if (streaming)
    std::printf("\n");
  else
    for (const std::string &o : outputs) {
      std::fwrite(o.data(), 1, o.size(), stdout);
      std::fputc('\n', stdout);
    }
  if (!options.quiet) {
    const DecodeStats &st = engine->stats();
    std::fprintf(stderr,
                 "generated %lld tokens for %zu prompt%s (%lld prompt tokens): first token after "
                 "%.3f s; prefill %.0f tokens/s, decode %.1f tokens/s over %lld steps; KV cache "
                 "%.2f MiB at its peak\n",
                 static_cast<long long>(st.newTokens), prompts.size(),
                 prompts.size() == 1 ? "" : "s", static_cast<long long>(st.promptTokens),
                 st.firstTokenSeconds,
                 st.prefillSeconds > 0 ? st.promptTokens / st.prefillSeconds : 0.0,
                 st.decodeSeconds > 0 ? (st.newTokens - static_cast<double>(prompts.size())) /
                                            st.decodeSeconds
                                      : 0.0,
                 static_cast<long long>(st.decodeSteps),
                 static_cast<double>(st.peakBlocks) * engine->geometry().block *
                     engine->geometry().cacheBytesPerToken / (1 << 20));
  }
  // The generated text is the standard output; the profile goes beside the statistics.
  if (options.profile)
    printKernelProfile(*ranks, stderr);
  return 0;
}

} // namespace

int generate(const Plan &plan, const RunOptions &options) {
  std::string err;
  Settings s(plan, options);
  // The prompt first: a mistake in it is found before any weights are read. A pretrained
  // model's tokenizer is found beside its weights.
  std::string tokenizerPath = options.tokenizer;
  if (tokenizerPath.empty() && s.tokenizer == "tokens") {
    const std::string from = options.initFrom ? *options.initFrom : s.initFrom;
    std::error_code ec;
    for (const char *file : {"tokenizer.json", "tokenizer.model"})
      if (tokenizerPath.empty() && !from.empty() &&
          std::filesystem::exists(std::filesystem::path(from) / file, ec))
        tokenizerPath = from;
  }
  std::vector<Prompt> prompts;
  if (!readPrompts(s, options, tokenizerPath, prompts, err)) {
    std::fprintf(stderr, "tessel: error: %s\n", err.c_str());
    return 1;
  }
  if (plan.decoder && !options.noKvCache)
    return generateWithCache(plan, s, options, prompts);
  if (prompts.size() > 1) {
    std::fprintf(stderr, "tessel: error: --prompt-file generates with the plan's KV cache%s\n",
                 options.noKvCache ? "; leave out --no-kv-cache"
                 : plan.decoderRefused.empty()
                     ? ", which this plan lacks (compile the model again)"
                     : (", which this model has none of: " + plan.decoderRefused).c_str());
    return 1;
  }
  if (!options.noKvCache && !options.quiet)
    std::fprintf(stderr, "note: generating without a KV cache, the whole window for each token: %s\n",
                 plan.decoderRefused.empty() ? "the plan has no decode programs (compile the "
                                               "model again)"
                                             : plan.decoderRefused.c_str());
  std::vector<int32_t> &context = prompts[0].ids;
  TextCodec *codec = prompts[0].codec.get();
  // Every rank samples: the sample program is SPMD like the others, its logits replicated.
  auto ranks = Ranks::create(plan, computeThreads(options), err, options.device);
  if (!ranks) {
    std::fprintf(stderr, "tessel: error: the plan cannot run: %s\n", err.c_str());
    return 1;
  }
  WaitLimits waitLimits(*ranks, options.commTimeout, options.commTimeoutStartup,
                        "sampled token");
  waitLimits.unknownPart("start-up and the first sampled token");
  const PipelineLayout *pipeline = ranks->pipeline();
  if (pipeline ? !pipeline->chain("sample") : !ranks->firstExecutor().hasProgram("sample")) {
    std::fprintf(stderr, "tessel: error: the plan has no '%s' program\n",
                 pipeline ? "sample.0" : "sample");
    return 1;
  }
  if (!loadGenerationWeights(plan, s, options, *ranks, err)) {
    std::fprintf(stderr, "tessel: error: %s\n", err.c_str());
    return 1;
  }
  if (options.profile)
    enableKernelProfile(*ranks);

  // The prompt is echoed, so the output reads as one continuous text (or list of ids).
  // In a chat only the answer is printed.
  const std::string echo =
      options.chat ? std::string() : codec->echo(options.prompt, options.promptGiven, context);
  std::fwrite(echo.data(), 1, echo.size(), stdout);
  Rng rng(options.seed.value_or(static_cast<int64_t>(s.seed)));
  std::vector<float> probs(static_cast<size_t>(s.vocab));
  std::vector<int32_t> window(static_cast<size_t>(s.seq));
  std::vector<float> chained; // A pipeline's logits, from its last stage.
  // The window starts at the last `seq` tokens of a longer prompt; a sequence that outgrows
  // it goes on from its last half, as generation with the KV cache does (KvDecode.h), so that
  // both draw the same tokens.
  size_t start = context.size() > static_cast<size_t>(s.seq) ? context.size() - s.seq : 0;
  for (int64_t n = 0; n < options.tokens; ++n) {
    const double tokenStart = now();
    if (context.size() - start > static_cast<size_t>(s.seq))
      start = context.size() - static_cast<size_t>(std::max<int64_t>(1, s.seq / 2));
    int64_t len = static_cast<int64_t>(context.size() - start);
    std::fill(window.begin(), window.end(), 0);
    std::copy(context.end() - len, context.end(), window.begin());
    const StepContext ctx{1, 0, s.seed};
    bool ok = pipeline ? ranks->runForwardChain("sample", ctx, {window, {}}, chained, err)
                       : ranks->writeInput("sample", "tokens", window.data(),
                                           static_cast<int64_t>(window.size()), err) &&
                             ranks->run("sample", ctx, err);
    if (ok && pipeline && static_cast<int64_t>(chained.size()) < s.seq * s.vocab) {
      err = "the last chunk's logits hold " + std::to_string(chained.size()) + " values, not " +
            std::to_string(s.seq * s.vocab);
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "\ntessel: error: %s\n", err.c_str());
      return 1;
    }
    const float *logits =
        (pipeline ? chained.data() : ranks->output("sample", "logits")) + (len - 1) * s.vocab;
    const int32_t next = sampleToken(logits, s.vocab, options.temperature, options.topK,
                                     options.topP, rng, probs);
    context.push_back(next);
    if (codec->endsSample(next))
      break;
    const std::string text = codec->append(next);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    waitLimits.regularPartTook(now() - tokenStart);
  }
  std::printf("\n");
  if (options.profile)
    printKernelProfile(*ranks, stderr);
  return 0;
}

} // namespace tessel::rt
