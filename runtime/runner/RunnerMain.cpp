//===- RunnerMain.cpp - A compiled model's command line -------------------===//
//
// `tessel compile X.model -o X` copies this program and appends the plan; `tessel run`
// starts it with --plan. It links the runtime only, never MLIR.
//
//===----------------------------------------------------------------------===//

#include "common/Executable.h"
#include "common/PipelineLayout.h"
#include "common/PlanFile.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/Rendezvous.h"
#include "runtime/host/Ranks.h"
#include "runtime/host/Trainer.h"
#include "runtime/support/AtomicFile.h"

#include <cerrno>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

using namespace tessel;

namespace {

const char *kUsage = R"(usage: %s [options]

Trains the model compiled into this program (or the plan given with --plan), with the
settings of its train section; the options below override them.

Training:
  --steps N              optimizer steps to run (the learning-rate schedule keeps the
                         model's own step count)
  --data PATH            a text file, a directory of text files, or a uint16 .bin token file
  --seed N               seed for initialisation, data order and dropout
  --device cpu|cuda      where the ranks compute (default cpu); with cuda a process's ranks
                         take its GPUs in turn (as threads, several sharing one GPU where
                         there are more ranks than GPUs); under mpirun or torchrun each
                         process runs one rank on the GPU of its local rank, over NCCL; a
                         plan whose kernels the CUDA device does not all have yet is
                         refused at load, naming the kernel
  --threads N            CPU threads, 1 to 1024 (default: every core), shared out between
                         the ranks of a plan that has several; under mpirun, threads per
                         process (default: the cores shared by the processes on the host)
  --eval-every N         evaluate the held-out loss every N steps (0: never)
  --log-every N          print progress every N steps when output is not a terminal
  --metrics FILE         append one JSON line per step (and per evaluation) to FILE
  --peak TFLOPS          the dense peak of one rank's device, in TFLOP/s, for the MFU shown
                         with the progress and in the metrics (default: on a GPU, its
                         shipped preset's 16-bit peak; on the CPU none, so no MFU)
  --comm-timeout S       how long, beyond twice the slowest step so far, a rank waits for
                         another in a collective or a transfer before the run ends with a
                         message naming the rank that did not come (default 20; 0: no limit)
  --comm-timeout-startup S
                         the same for start-up and the first step, and for checkpoints,
                         whose length is not known beforehand (default 600; 0: no limit)
  --checkpoint-dir DIR   write checkpoints under DIR (DIR/latest names the newest)
  --checkpoint-every N   checkpoint every N steps (and always at the end when DIR is set)
  --resume PATH          continue from a checkpoint, or from the newest one in a directory
  --dump-dir DIR         write the initial weights, the batches and the first step's
                         gradients as safetensors (for comparison with other frameworks;
                         plans of one rank)
  --quiet                no progress output
  --profile              print the time spent in each kernel at the end (one table
                         per pipeline stage: its ranks run other kernels); on a GPU
                         timed on the device with CUDA events
  --trace FILE           with a pipeline: write the last step's measured schedule as a
                         Chrome trace (open it in Perfetto or chrome://tracing)
  --svg FILE             with a pipeline: draw the last step's measured schedule as an SVG
                         (one row per pipeline stage); a pipelined run also prints the
                         last step's measured bubble

Stopping: SIGTERM, SIGUSR1 (what schedulers send ahead of a preemption) and SIGINT (Ctrl-C)
stop training after the step it is in, with a checkpoint of that step (exit 0; without a
checkpoint directory nothing is saved, exit 128 + the signal). A second signal stops at once.
Under mpirun, send SIGUSR1 to mpirun: it passes the signal on to every process.

Sampling:
  --generate             print text sampled from a checkpoint instead of training
  --checkpoint PATH      the checkpoint (default: the model's checkpoint directory)
  --prompt TEXT          text to continue (default: a newline); for a model trained on
                         pre-tokenized data (tokenizer = tokens), token ids such as
                         "15496 11 995" (default: id 0)
  --tokens N             how many tokens to sample (default 200)
  --temperature T        softmax temperature (default 0.8)
  --top-k K              sample among the K likeliest tokens (default 40; 0: all)

Other:
  --plan FILE            run this plan file instead of the embedded one
  --memory               load the plan, print per rank the bytes allocated for its state
                         and its arena, and with a pipeline the most bytes it keeps between
                         pipeline programs in a step (one JSON line per rank), and exit
  --help                 show this text
)";

/// The most compute threads a run may ask for: far above any machine's cores, far below what
/// exhausts the process's stacks.
constexpr int64_t kMaxThreads = 1024;

bool parseInt(const std::string &text, int64_t &out) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno || end == text.c_str() || *end)
    return false;
  out = v;
  return true;
}

bool parseFloat(const std::string &text, double &out) {
  char *end = nullptr;
  errno = 0;
  out = std::strtod(text.c_str(), &end);
  return !errno && end != text.c_str() && !*end;
}

int usageError(const char *argv0, const std::string &message) {
  std::fprintf(stderr, "%s: error: %s\nTry '%s --help'.\n", argv0, message.c_str(), argv0);
  return 2;
}

} // namespace

/// What the executors allocate for `plan`, per rank (for checking the compiler's estimate).
static int printMemory(const char *argv0, const planfile::Plan &plan) {
  std::string error;
  auto ranks = rt::Ranks::create(plan, 1, error);
  if (!ranks) {
    std::fprintf(stderr, "%s: error: %s\n", argv0, error.c_str());
    return 1;
  }
  for (uint32_t r : ranks->localRanks()) {
    std::printf("{\"rank\": %u, \"state_bytes\": %llu, \"arena_bytes\": %llu", r,
                static_cast<unsigned long long>(ranks->executor(r).stateBytes()),
                static_cast<unsigned long long>(ranks->executor(r).arenaBytes()));
    // The values a pipeline rank keeps between its programs: the activations in flight.
    if (ranks->pipeline())
      std::printf(", \"pipeline_stash_bytes\": %llu",
                  static_cast<unsigned long long>(ranks->pipelineStashBytes(r)));
    std::printf("}\n");
  }
  return 0;
}

static int runnerMain(int argc, char **argv);

/// Ends the process once everything of ours is closed. Library teardown is skipped: under an
/// address-space limit OpenBLAS's worker threads can retry a failed buffer allocation forever,
/// and its shutdown would wait for them. Under MPI a failure ends every process of the job,
/// so none waits for this one.
[[noreturn]] static void finish(int status) {
  std::fflush(nullptr);
  if (rt::mpi::launched()) {
    if (status != 0)
      rt::mpi::abortJob(status);
    rt::mpi::finalize();
  }
  std::_Exit(status);
}

int main(int argc, char **argv) {
  // A write past the file-size limit (ulimit -f) fails with EFBIG and is reported like a full
  // disk, rather than killing the process with SIGXFSZ before it can clean up.
  std::signal(SIGXFSZ, SIG_IGN);
  // Out of memory anywhere on this thread ends the run with a message, never an abort.
  try {
    finish(runnerMain(argc, argv));
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "%s: error: out of memory\n", argv[0]);
  } catch (const std::system_error &e) {
    std::fprintf(stderr, "%s: error: %s (out of memory, or a limit on threads)\n", argv[0],
                 e.what());
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
  }
  finish(1);
}

static int runnerMain(int argc, char **argv) {
  rt::RunOptions o;
  std::string planPath;
  bool memory = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    bool hasValue = false;
    if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      hasValue = true;
    }
    auto next = [&](std::string &out) {
      if (hasValue) {
        out = value;
        return true;
      }
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    auto intOption = [&](std::optional<int64_t> &out, int64_t min) {
      std::string text;
      int64_t v;
      if (!next(text) || !parseInt(text, v) || v < min)
        return false;
      out = v;
      return true;
    };
    std::string text;
    bool ok = true;
    if (arg == "--help" || arg == "-h") {
      std::printf(kUsage, argv[0]);
      return 0;
    } else if (arg == "--steps") {
      ok = intOption(o.steps, 0);
    } else if (arg == "--seed") {
      ok = intOption(o.seed, 0);
    } else if (arg == "--eval-every") {
      ok = intOption(o.evalEvery, 0);
    } else if (arg == "--log-every") {
      ok = intOption(o.logEvery, 1);
    } else if (arg == "--checkpoint-every") {
      ok = intOption(o.checkpointEvery, 0);
    } else if (arg == "--threads") {
      std::optional<int64_t> t;
      ok = intOption(t, 1);
      if (ok && *t > kMaxThreads)
        return usageError(argv[0], "--threads " + std::to_string(*t) + " is more than " +
                                       std::to_string(kMaxThreads) + " (this machine has " +
                                       std::to_string(std::thread::hardware_concurrency()) +
                                       " cores)");
      if (ok)
        o.threads = static_cast<int>(*t);
    } else if (arg == "--tokens") {
      std::optional<int64_t> t;
      ok = intOption(t, 1);
      if (ok)
        o.tokens = *t;
    } else if (arg == "--top-k") {
      std::optional<int64_t> t;
      ok = intOption(t, 0);
      if (ok)
        o.topK = *t;
    } else if (arg == "--comm-timeout" || arg == "--comm-timeout-startup") {
      double &seconds = arg == "--comm-timeout" ? o.commTimeout : o.commTimeoutStartup;
      ok = next(text) && parseFloat(text, seconds) && seconds >= 0 && seconds <= 1e6;
      if (!ok)
        return usageError(argv[0], arg + " needs a number of seconds from 0 (no limit) to 1e6");
    } else if (arg == "--temperature") {
      ok = next(text) && parseFloat(text, o.temperature) && o.temperature > 0;
    } else if (arg == "--data") {
      ok = next(text);
      o.data = text;
    } else if (arg == "--checkpoint-dir") {
      ok = next(text);
      o.checkpointDir = text;
    } else if (arg == "--device") {
      ok = next(o.device);
      if (ok && o.device != "cpu" && o.device != "cuda")
        return usageError(argv[0], "--device " + o.device + ": expected cpu or cuda");
    } else if (arg == "--metrics") {
      ok = next(o.metricsPath);
    } else if (arg == "--peak") {
      char *end = nullptr;
      ok = next(text);
      if (ok) {
        o.peakFlops = std::strtod(text.c_str(), &end) * 1e12;
        ok = end && !*end && !text.empty() && std::isfinite(o.peakFlops) && o.peakFlops > 0;
      }
    } else if (arg == "--resume") {
      ok = next(o.resume);
    } else if (arg == "--dump-dir") {
      ok = next(o.dumpDir);
    } else if (arg == "--checkpoint") {
      ok = next(o.checkpoint);
    } else if (arg == "--prompt") {
      ok = next(o.prompt);
      o.promptGiven = true;
    } else if (arg == "--plan") {
      ok = next(planPath);
    } else if (arg == "--trace") {
      ok = next(o.tracePath);
    } else if (arg == "--svg") {
      ok = next(o.svgPath);
    } else if (arg == "--generate") {
      o.generate = true;
    } else if (arg == "--memory") {
      memory = true;
    } else if (arg == "--quiet") {
      o.quiet = true;
    } else if (arg == "--profile") {
      o.profile = true;
    } else {
      return usageError(argv[0], "unknown option '" + arg + "'");
    }
    if (!ok)
      return usageError(argv[0], "option '" + arg + "' needs a valid value");
  }

  std::vector<uint8_t> bytes;
  std::string error, source;
  if (!planPath.empty()) {
    std::string text;
    if (!rt::readWholeFile(planPath, planfile::kMaxPlanFileBytes, text, error)) {
      std::fprintf(stderr, "%s: error: plan: %s\n", argv[0], error.c_str());
      return 2;
    }
    bytes.assign(text.begin(), text.end());
    source = planPath;
  } else {
    bool found = false;
    if (!planfile::readEmbeddedPlan("/proc/self/exe", bytes, found, error)) {
      // Name the program as the user called it, not the kernel's alias for it.
      for (size_t at; (at = error.find("/proc/self/exe")) != std::string::npos;)
        error.replace(at, 14, argv[0]);
      std::fprintf(stderr, "%s: error: %s\n", argv[0], error.c_str());
      return 2;
    }
    if (!found)
      return usageError(argv[0], "this runner holds no plan; compile a model with "
                                 "'tessel compile X.model -o X', or pass --plan FILE");
    source = argv[0];
  }
  planfile::Plan plan;
  if (!planfile::parsePlan(bytes.data(), bytes.size(), plan, error)) {
    std::fprintf(stderr, "%s: error: %s: %s\n", argv[0], source.c_str(), error.c_str());
    return 2;
  }
  // Under mpirun or torchrun every process runs the host loop alike; the first speaks for the
  // run, and the others write no files of their own beyond their checkpoint shards. (Bad
  // torchrun variables are reported when the ranks are made.)
  uint32_t processRank = 0;
  rt::rendezvous::Place place;
  std::string ignored;
  if (rt::mpi::launched()) {
    if (!rt::mpi::initialize(error)) {
      std::fprintf(stderr, "%s: error: %s\n", argv[0], error.c_str());
      return 1;
    }
    processRank = rt::mpi::processRank();
  } else if (rt::rendezvous::launched() && rt::rendezvous::readPlace(place, ignored)) {
    processRank = place.rank;
  }
  if (processRank != 0) {
    o.quiet = true;
    o.metricsPath.clear();
    o.tracePath.clear();
    o.svgPath.clear();
    if (!std::freopen("/dev/null", "w", stdout)) {
      std::fprintf(stderr, "%s: error: cannot silence rank %u's output\n", argv[0], processRank);
      return 1;
    }
  }
  if (memory)
    return printMemory(argv[0], plan);
  if (!o.tracePath.empty() || !o.svgPath.empty()) {
    rt::PipelineConfig pipeline;
    if (o.generate || !rt::readPipelineConfig(plan, pipeline, error) || !pipeline.enabled())
      return usageError(argv[0], o.generate ? "--trace and --svg record a training step"
                                            : "--trace and --svg draw a pipeline's schedule, "
                                              "and this plan has no pipeline");
  }
  return o.generate ? rt::generate(plan, o) : rt::train(plan, o);
}
