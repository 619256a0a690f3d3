//===- RunnerMain.cpp - A compiled model's command line -------------------===//
//
// `tessel compile X.model -o X` copies this program and appends the plan; `tessel run`
// starts it with --plan. It links the runtime only, never MLIR.
//
//===----------------------------------------------------------------------===//

#include "common/layout/PipelineLayout.h"
#include "common/plan/Executable.h"
#include "common/plan/PlanFile.h"
#include "common/support/Checksum.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/Rendezvous.h"
#include "runtime/host/Ranks.h"
#include "runtime/host/RecipeOverrides.h"
#include "runtime/host/Trainer.h"
#include "runtime/support/AtomicFile.h"
#include "runtime/support/CommandLine.h"

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

using namespace tessel;

namespace {

/// The most compute threads a run may ask for: far above any machine's cores, far below what
/// exhausts the process's stacks.
constexpr int64_t kMaxThreads = 1024;
constexpr int64_t kMany = std::numeric_limits<int64_t>::max();
constexpr double kLarge = std::numeric_limits<double>::max();

/// The runner's options, in the help's order.
void declareOptions(rt::cli::Parser &p, rt::RunOptions &o, rt::RecipeOverrides &recipe,
                    std::string &planPath, bool &memory) {
  constexpr auto Above = rt::cli::Parser::Interval::AboveMin;
  constexpr auto Below = rt::cli::Parser::Interval::BelowMax;
  p.section("Training");
  p.integer("steps", o.steps, 0, kMany, "N",
            "optimizer steps to run (the learning-rate schedule keeps the model's own step "
            "count; --decay-steps changes it)");
  p.text("data", o.data, "PATH",
         "training data: a text file or a directory of them (the byte tokenizer); a .bin token "
         "file (nanoGPT's uint16, llm.c's versions 1 and 7), a directory of .bin shards, or a "
         "pattern naming them in quotes (\"fineweb_train_*.bin\")");
  p.text("eval-data", o.evalData, "PATH",
         "validation data, in the forms --data takes (nanoGPT's val.bin, llm.c's "
         "\"fineweb_val_*.bin\"); without it evaluation reads the part of --data the spec "
         "holds out (eval.fraction)");
  p.integer("seed", o.seed, 0, kMany, "N", "seed for initialisation, data order and dropout");
  p.choice("device", o.device, {"cpu", "cuda"},
           "where the ranks compute (default cpu); with cuda a process's ranks take its GPUs in "
           "turn (as threads, several sharing one GPU where there are more ranks than GPUs); "
           "under mpirun or torchrun each process runs one rank on the GPU of its local rank, "
           "over NCCL; a plan whose kernels the CUDA device does not all have yet is refused at "
           "load, naming the kernel");
  p.integer("threads", o.threads, 1, static_cast<int>(kMaxThreads), "N",
            "CPU threads, 1 to 1024 (default: every core), shared out between the ranks of a "
            "plan that has several; under mpirun, threads per process (default: the cores "
            "shared by the processes on the host)");
  p.integer("eval-every", o.evalEvery, 0, kMany, "N",
            "evaluate every N steps (0: never), on --eval-data or on the part of the data the "
            "spec holds out; this changes when evaluation runs, never what trains");
  p.integer("log-every", o.logEvery, 1, kMany, "N",
            "print progress every N steps when output is not a terminal");
  p.text("metrics", o.metricsPath, "FILE",
         "append to FILE a record of the run (Tessel's version, the plan, the recipe and its "
         "overrides, the layout, the device), then one JSON line per step and per evaluation");
  p.custom("peak", "TFLOPS",
           "the dense peak of one rank's device, in TFLOP/s, for the MFU shown with the "
           "progress and in the metrics (default: on a GPU, its shipped preset's 16-bit peak; "
           "on the CPU none, so no MFU)",
           [&o](const std::string &v, std::string &why) {
             char *end = nullptr;
             double t = std::strtod(v.c_str(), &end);
             if (v.empty() || *end || !std::isfinite(t) || t <= 0 || t > 1e9 ||
                 v.find_first_not_of("0123456789.eE+-") != std::string::npos)
               return why = "expected a number of TFLOP/s above 0", false;
             o.peakFlops = t * 1e12;
             return true;
           });
  p.number("comm-timeout", o.commTimeout, 0, 1e6, "S",
           "how long, beyond twice the slowest step so far, a rank waits for another in a "
           "collective or a transfer before the run ends with a message naming the rank that "
           "did not come (default 20; 0: no limit)");
  p.number("comm-timeout-startup", o.commTimeoutStartup, 0, 1e6, "S",
           "the same for start-up and the first step, and for checkpoints, whose length is not "
           "known beforehand (default 600; 0: no limit)");
  p.text("checkpoint-dir", o.checkpointDir, "DIR",
         "write checkpoints under DIR (DIR/latest names the newest)");
  p.integer("checkpoint-every", o.checkpointEvery, 0, kMany, "N",
            "checkpoint every N steps (and always at the end when DIR is set)");
  p.text("resume", o.resume, "PATH",
         "continue from a checkpoint, or from the newest one in a directory");
  p.text("init-from", o.initFrom, "PATH",
         "start from pretrained weights with a fresh optimizer: a Hugging Face model folder "
         "(the parameters the spec loads with load(\"name\")) or a Tessel checkpoint (every "
         "parameter by name); overrides the spec's train.init_from");
  p.text("dump-dir", o.dumpDir, "DIR",
         "write the initial weights, the batches and the first step's gradients as "
         "safetensors (for comparison with other frameworks; plans of one rank)");
  p.flag("quiet", o.quiet, "no progress output");
  p.flag("profile", o.profile,
         "print the time spent in each kernel at the end of training or generation (one table "
         "per pipeline stage: its ranks run other kernels); on a GPU timed on the device with "
         "CUDA events");
  p.text("trace", o.tracePath, "FILE",
         "write the last step as a Chrome trace (open it in Perfetto or chrome://tracing): "
         "with a pipeline its measured schedule; without, every kernel and collective each "
         "rank ran, timed on the device where it has timers");
  p.text("memory-trace", o.memoryTracePath, "FILE",
         "write the memory of each of this process's ranks over the first two steps as a "
         "Chrome trace of counters, by what it holds (parameters, gradients, optimizer state, "
         "kept activations, recomputed values, temporaries, pipeline stash and messages) as "
         "the kernels touch it, with the resident memory beside; `tessel estimate "
         "--memory-trace` predicts the same samples");
  p.text("svg", o.svgPath, "FILE",
         "with a pipeline: draw the last step's measured schedule as an SVG (one row per "
         "pipeline stage); a pipelined run also prints the last step's measured bubble");
  p.paragraph("Stopping: SIGTERM, SIGUSR1 (what schedulers send ahead of a preemption) and "
              "SIGINT (Ctrl-C) stop training after the step it is in, with a checkpoint of that "
              "step (exit 0; without a checkpoint directory nothing is saved, exit 128 + the "
              "signal). A second signal stops at once. Under mpirun, send SIGUSR1 to mpirun: it "
              "passes the signal on to every process.");

  p.section("Recipe (each replaces the train section's number; the plan is not recompiled)");
  p.number("lr", recipe.lr, 0, kLarge, "LR", "the peak learning rate", Above);
  p.number("min-lr", recipe.minLr, 0, kLarge, "LR", "the schedule's final learning rate");
  p.integer("warmup", recipe.warmup, 0, kMany, "N", "warmup steps");
  p.integer("decay-steps", recipe.decaySteps, 1, kMany, "N",
            "the steps over which the schedule decays to --min-lr (default: the spec's steps)");
  p.number("weight-decay", recipe.weightDecay, 0, kLarge, "WD",
           "the weight decay of the parameters the spec decays");
  p.number("beta1", recipe.beta1, 0, 1, "B", "AdamW's first-moment decay, below 1", Below);
  p.number("beta2", recipe.beta2, 0, 1, "B", "AdamW's second-moment decay, below 1", Below);
  p.number("eps", recipe.eps, 0, 1, "EPS", "AdamW's epsilon", Above);
  p.number("momentum", recipe.momentum, 0, 1, "M", "SGD's momentum");
  p.number("clip", recipe.clip, 0, kLarge, "NORM",
           "the gradient norm clipped to (the spec must clip)", Above);
  p.paragraph("The batch, the micro-batch, the precision and the layout shape the plan: change "
              "them in the spec and recompile.");

  p.section("Sampling");
  p.flag("generate", o.generate, "print text sampled from a checkpoint instead of training");
  p.text("checkpoint", o.checkpoint, "PATH",
         "the checkpoint (default: the model's checkpoint directory)");
  p.custom("prompt", "TEXT",
           "text to continue (default: a newline); for a model trained on pre-tokenized data "
           "(tokenizer = tokens), token ids such as \"15496 11 995\" (default: id 0)",
           [&o](const std::string &v, std::string &) {
             o.prompt = v;
             o.promptGiven = true;
             return true;
           });
  p.text("prompt-file", o.promptFile, "FILE",
         "prompts to continue, one a line, generated together; the outputs are printed in the "
         "prompts' order");
  p.integer("batch", o.batch, 1, kMany, "B",
            "sequences generated at once (default: all of them, up to the largest decode "
            "program the plan has)");
  p.flag("no-kv-cache", o.noKvCache,
         "recompute the whole window for every token instead of keeping keys and values in the "
         "plan's KV cache (slower; for comparison)");
  p.integer("tokens", o.tokens, 1, kMany, "N", "how many tokens to sample (default 200)");
  p.number("temperature", o.temperature, 0, kLarge, "T", "softmax temperature (default 0.8)",
           Above);
  p.integer("top-k", o.topK, 0, kMany, "K",
            "sample among the K likeliest tokens (default 40; 0: all)");
  p.number("top-p", o.topP, 0, 1, "P",
           "then among the likeliest of those whose probabilities add up to P (default 1: all)",
           Above);
  p.text("tokenizer", o.tokenizer, "PATH",
         "encode the prompt and decode the sample with this tokenizer (a tokenizer.json, a "
         "SentencePiece .model, or a folder with one); default: the tokenizer beside the "
         "pretrained weights the spec starts from, if any; sampling stops at its end-of-sequence "
         "token");
  p.flag("chat", o.chat,
         "take the prompt as a user's turn: render it with the chat template and its generation "
         "prompt, and print the answer");
  p.text("system", o.system, "TEXT", "with --chat: a system turn before the user's");
  p.text("chat-template", o.chatTemplate, "NAME|FILE",
         "with --chat: a built-in template or a file holding one (a .jinja file or a "
         "tokenizer_config.json); default: the tokenizer's own");

  p.section("Export");
  p.text("export-hf", o.exportHf, "DIR",
         "write --checkpoint (default: the newest in the model's checkpoint directory) as the "
         "Hugging Face folder the spec loads from (--init-from or train.init_from): its tensors "
         "with the trained values, its config and tokenizer files; DIR must be new or empty");
  p.choice("export-dtype", o.exportDtype, {"f32", "bf16", "f16"},
           "the exported weights' type (default: each tensor's type in the source folder)");
  p.custom("max-shard-size", "SIZE",
           "past this many bytes of weights the export is sharded with an index (default 5GB; "
           "units B, KB, MB, GB)",
           [&o](const std::string &v, std::string &why) {
             size_t used = 0;
             double n = 0;
             try {
               n = std::stod(v, &used);
             } catch (...) {
               used = 0;
             }
             const std::string unit = v.substr(used);
             const double scale = unit == "GB"   ? 1e9
                                  : unit == "MB" ? 1e6
                                  : unit == "KB" ? 1e3
                                  : unit == "B" || unit.empty() ? 1
                                                                : 0;
             if (used == 0 || scale == 0 || !(n * scale >= 1) || n * scale > 1e15) {
               why = "a size such as 5GB, 500MB or 1000000";
               return false;
             }
             o.maxShardBytes = static_cast<uint64_t>(n * scale);
             return true;
           });

  p.section("Other");
  p.text("plan", planPath, "FILE", "run this plan file instead of the embedded one");
  p.flag("memory", memory,
         "load the plan, print per rank the bytes allocated for its state and its arena, and "
         "with a pipeline the most bytes it keeps between pipeline programs in a step (one JSON "
         "line per rank), and exit");
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

/// Where a run's plan came from, and its fingerprint (XXH3 of its bytes, as 16 hex digits).
struct LoadedPlan {
  std::string source, fingerprint;
};

/// Reads and parses the plan: the file `planPath`, else the one embedded in this program.
/// Returns 0, or the exit status with the reason in `error` (3: a usage error).
static int loadPlan(const char *argv0, const std::string &planPath, planfile::Plan &plan,
                    LoadedPlan &loaded, std::string &error) {
  std::vector<uint8_t> bytes;
  if (!planPath.empty()) {
    std::string text;
    if (!rt::readWholeFile(planPath, planfile::kMaxPlanFileBytes, text, error))
      return error = "plan: " + error, 2;
    bytes.assign(text.begin(), text.end());
    loaded.source = planPath;
  } else {
    bool found = false;
    if (!planfile::readEmbeddedPlan("/proc/self/exe", bytes, found, error)) {
      // Name the program as the user called it, not the kernel's alias for it.
      for (size_t at; (at = error.find("/proc/self/exe")) != std::string::npos;)
        error.replace(at, 14, argv0);
      return 2;
    }
    if (!found)
      return error = "this runner holds no plan; compile a model with 'tessel compile "
                     "X.model -o X', or pass --plan FILE",
             3;
    loaded.source = argv0;
  }
  if (!planfile::parsePlan(bytes.data(), bytes.size(), plan, error))
    return error = loaded.source + ": " + error, 2;
  loaded.fingerprint = hex64(xxh3_64(bytes.data(), bytes.size()));
  return 0;
}

/// What --version adds to the version line: the plan this program runs.
static std::string planSummary(const char *argv0, const std::string &planPath) {
  planfile::Plan plan;
  LoadedPlan loaded;
  std::string error;
  if (loadPlan(argv0, planPath, plan, loaded, error))
    return "plan: none (" + error + ")\n";
  return "plan: model " + plan.model + ", " + std::to_string(plan.worldSize) + " rank" +
         (plan.worldSize == 1 ? "" : "s") + ", fingerprint " + loaded.fingerprint + " (" +
         loaded.source + ")\n";
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
  rt::RecipeOverrides recipe;
  std::string planPath;
  bool memory = false;
  rt::cli::Parser parser(argv[0], "[options]",
                         "Trains the model compiled into this program (or the plan given with "
                         "--plan), with the settings of its train section; the options below "
                         "override them.");
  declareOptions(parser, o, recipe, planPath, memory);
  parser.versionDetails([&] { return planSummary(argv[0], planPath); });
  if (std::optional<int> exit = parser.parse(argc, argv))
    return *exit;
  o.commandLine = parser.given();

  std::string error;
  planfile::Plan plan;
  LoadedPlan loaded;
  if (int status = loadPlan(argv[0], planPath, plan, loaded, error)) {
    if (status == 3)
      return parser.usageError(error);
    std::fprintf(stderr, "%s: error: %s\n", argv[0], error.c_str());
    return status;
  }
  if (!rt::applyRecipeOverrides(plan, recipe, error))
    return parser.usageError(error);
  o.planSource = loaded.source;
  o.planFingerprint = loaded.fingerprint;
  o.recipeOverrides = recipe.entries();
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
  // Every process records its ranks' kernels for --trace; the first writes the file.
  o.traceKernels = !o.tracePath.empty();
  if (processRank != 0) {
    o.quiet = true;
    o.metricsPath.clear();
    o.tracePath.clear();
    o.svgPath.clear();
    o.memoryTracePath.clear();
    if (!std::freopen("/dev/null", "w", stdout)) {
      std::fprintf(stderr, "%s: error: cannot silence rank %u's output\n", argv[0], processRank);
      return 1;
    }
  }
  if (memory)
    return printMemory(argv[0], plan);
  if (!o.resume.empty() && o.initFrom)
    return parser.usageError("--resume continues a run (its weights, optimizer and step); "
                             "--init-from starts a new one from weights: give one of them");
  if ((o.chat || !o.system.empty() || !o.chatTemplate.empty()) && !o.generate)
    return parser.usageError("--chat, --system and --chat-template shape what --generate "
                             "samples");
  if ((!o.system.empty() || !o.chatTemplate.empty()) && !o.chat)
    return parser.usageError("--system and --chat-template go with --chat");
  if (o.batch > 0 && !o.generate)
    return parser.usageError("--batch is how many sequences --generate samples at once; the "
                             "training batch shapes the plan: change it in the spec and "
                             "recompile");
  if ((!o.promptFile.empty() || o.noKvCache) && !o.generate)
    return parser.usageError("--prompt-file and --no-kv-cache shape what --generate samples");
  if (!o.promptFile.empty() && (o.promptGiven || o.chat))
    return parser.usageError("--prompt-file gives the prompts: leave out --prompt and --chat");
  if (o.chat && !o.promptGiven)
    return parser.usageError("--chat needs the user's turn: give it with --prompt");
  if (o.generate && (!o.tracePath.empty() || !o.svgPath.empty() || !o.memoryTracePath.empty()))
    return parser.usageError("--trace, --svg and --memory-trace record training steps");
  if (!o.svgPath.empty()) {
    rt::PipelineConfig pipeline;
    if (!rt::readPipelineConfig(plan, pipeline, error) || !pipeline.enabled())
      return parser.usageError("--svg draws a pipeline's schedule, and this plan has no "
                               "pipeline (--trace records any plan's kernels)");
  }
  if (!o.exportHf.empty()) {
    if (o.generate || !o.resume.empty())
      return parser.usageError("--export-hf writes a checkpoint out; it neither trains nor "
                               "samples");
    return rt::exportHuggingFace(plan, o);
  }
  return o.generate ? rt::generate(plan, o) : rt::train(plan, o);
}
