//===- tessel.cpp - The Tessel driver -------------------------------------===//
//
//   tessel check model.model              report every error, or a summary
//   tessel compile model.model -o model   an executable that trains the model
//   tessel compile model.model --emit=graph|train|sharded|plan|plan-file
//   tessel run model.model [runner options]
//
// Exit codes: 0 success, 1 errors in the input, 2 usage or I/O errors.
//
//===----------------------------------------------------------------------===//

#include "ImportHf.h"
#include "MemoryPictures.h"
#include "OutOfMemory.h"
#include "PassDiagnostics.h"
#include "Tokenize.h"

#include "common/Cluster.h"
#include "common/Executable.h"
#include "common/Schedule.h"
#include "common/Timeline.h"
#include "common/Version.h"
#include "tessel/Frontend/Sema.h"
#include "tessel/IRGen/GraphGen.h"
#include "tessel/Target/Estimate.h"
#include "tessel/Target/PlanWriter.h"
#include "tessel/Pipelines/Pipelines.h"
#include "tessel/Target/StepTime.h"
#include "tessel/Target/Tune.h"
#include "tessel/Transforms/Passes.h"

#include "common/KernelCatalogue.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <sys/resource.h>

#include <iostream>
#include <sstream>

using namespace llvm;
using namespace tessel;

namespace {

cl::OptionCategory category("Tessel options");

cl::SubCommand checkCommand("check", "Check a .model file and report every error in it");
cl::SubCommand compileCommand("compile", "Compile a .model file (--emit chooses the stage)");
cl::SubCommand runCommand("run", "Compile a .model file and train it now");
cl::SubCommand generateCommand("generate",
                               "Compile a .model file and print text sampled from a checkpoint");
cl::SubCommand estimateCommand("estimate",
                               "Print the memory per rank and the communication per step that a "
                               ".model file's layout implies");
cl::SubCommand calibrateCommand("calibrate",
                                "Measure this machine (GEMM, attention, memory bandwidth, "
                                "collectives) and write it as a cluster file");
cl::opt<std::string> calibrateOutput("o", cl::desc("Write the cluster file here (default: stdout)"),
                                     cl::value_desc("file.cluster"), cl::init("-"),
                                     cl::sub(calibrateCommand));
cl::opt<int> calibrateThreads("threads",
                              cl::desc("Compute threads per rank to measure with (default: every "
                                       "core)"),
                              cl::init(0), cl::sub(calibrateCommand));
cl::opt<int> calibrateRanks("ranks",
                            cl::desc("Ranks (threads of one process) measuring at once: each "
                                     "figure is what one of them gets (default 1)"),
                            cl::init(1), cl::sub(calibrateCommand));
cl::opt<bool> calibrateQuick("quick", cl::desc("Shorter measurements (less accurate)"),
                             cl::sub(calibrateCommand));
cl::opt<bool> calibrateMpi("mpi",
                           cl::desc("Also measure the MPI communicator (2 processes under "
                                    "mpirun) as the inter-node link"),
                           cl::sub(calibrateCommand));
cl::opt<std::string> calibrateModel(
    "model",
    cl::desc("Also measure every GEMM shape this model's plan calls (written as "
             "efficiency.gemm.shapes; estimates of this model then time its GEMMs as measured)"),
    cl::value_desc("file.model"), cl::sub(calibrateCommand));
cl::SubCommand tuneCommand("tune",
                           "Search the parallel layouts of N accelerators of a cluster for the "
                           "fastest step that fits in memory");
cl::opt<std::string> tuneCluster("cluster", cl::desc("The cluster (as estimate --cluster)"),
                                 cl::value_desc("name|file.cluster"), cl::Required,
                                 cl::sub(tuneCommand));
cl::opt<int> tuneGpus("gpus", cl::desc("Accelerators to lay the model over"), cl::Required,
                      cl::sub(tuneCommand));
cl::opt<unsigned> tuneTop("top", cl::desc("Layouts to print (default 10)"), cl::init(10),
                          cl::sub(tuneCommand));
cl::opt<bool> tuneJson("json", cl::desc("Print the layouts as JSON"), cl::sub(tuneCommand));
cl::opt<std::string> tuneLayout(
    "layout",
    cl::desc("Predict this layout only, e.g. \"dp=16 tp=8 pp=8 interleaved v=2 sp zero=1 mb=1 "
             "recompute=selective\""),
    cl::sub(tuneCommand));
cl::opt<std::string> tuneWrite("write",
                               cl::desc("Write the best layout as a `parallel` section here"),
                               cl::value_desc("file"), cl::sub(tuneCommand));
cl::opt<std::string> tuneSvg("svg",
                             cl::desc("Draw the candidates (memory against step time) as an SVG"),
                             cl::value_desc("file.svg"), cl::sub(tuneCommand));
cl::SubCommand kernelsCommand("kernels",
                              "List the kernels a plan calls: operands, parameters, what each "
                              "computes (the kernel catalogue)");
cl::opt<bool> kernelsMarkdown("markdown",
                              cl::desc("Print the kernel tables of docs/plan-format.md"),
                              cl::sub(kernelsCommand));
cl::opt<bool> estimateJsonOutput("json", cl::desc("Print the estimate as JSON"),
                                 cl::sub(estimateCommand));
cl::opt<std::string> estimateTrace("trace",
                                   cl::desc("Write the predicted pipeline schedule as a Chrome "
                                            "trace (opens in Perfetto)"),
                                   cl::value_desc("file.json"), cl::sub(estimateCommand));
cl::opt<std::string> estimateCluster(
    "cluster",
    cl::desc("Predict the step time on this cluster: a .cluster file or a shipped preset "
             "(a100-80gb-sxm, h100-sxm, h200; docs/planning.md)"),
    cl::value_desc("name|file.cluster"), cl::sub(estimateCommand));
cl::opt<std::string> estimateSvg("svg", cl::desc("Write the predicted pipeline schedule as an SVG"),
                                 cl::value_desc("file.svg"), cl::sub(estimateCommand));
cl::opt<std::string> estimateMemorySvg(
    "memory-svg",
    cl::desc("Draw the predicted memory of a rank over its training steps, stacked by what it "
             "holds (one picture per pipeline stage, NAME.stage<S>.svg, unless --rank)"),
    cl::value_desc("file.svg"), cl::sub(estimateCommand));
cl::opt<std::string> estimateMemoryTrace(
    "memory-trace",
    cl::desc("Write the predicted memory profiles as a Chrome trace of counters (Perfetto)"),
    cl::value_desc("file.json"), cl::sub(estimateCommand));
cl::opt<int64_t> estimateMemoryRank("rank",
                                    cl::desc("The rank --memory-svg and --memory-trace profile "
                                             "(default: the first rank of each pipeline stage)"),
                                    cl::init(-1), cl::sub(estimateCommand));
cl::opt<int> estimateMemorySteps("memory-steps",
                                 cl::desc("Training steps the memory profile shows (default 2)"),
                                 cl::init(2), cl::sub(estimateCommand));

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<file.model>"), cl::Required,
                               cl::sub(checkCommand), cl::sub(compileCommand), cl::sub(runCommand),
                               cl::sub(generateCommand), cl::sub(estimateCommand),
                               cl::sub(tuneCommand), cl::cat(category));
cl::list<std::string> runnerArgs(cl::Positional,
                                 cl::desc("[options of the compiled model, e.g. --steps 100 "
                                          "or --checkpoint DIR --prompt TEXT]"),
                                 cl::ZeroOrMore, cl::sub(runCommand), cl::sub(generateCommand),
                                 cl::cat(category));
cl::list<std::string> importDirs("I", cl::desc("Add a directory to search for imports"),
                                 cl::value_desc("dir"), cl::Prefix, cl::sub(checkCommand),
                                 cl::sub(compileCommand), cl::sub(runCommand),
                                 cl::sub(generateCommand), cl::sub(estimateCommand),
                                 cl::sub(tuneCommand), cl::sub(calibrateCommand),
                                 cl::cat(category));
cl::opt<int64_t> ranks("ranks",
                       cl::desc("Number of ranks the run will have; the mesh must match it"),
                       cl::init(0), cl::sub(checkCommand), cl::sub(compileCommand),
                       cl::sub(runCommand), cl::sub(generateCommand), cl::sub(estimateCommand),
                       cl::cat(category));

enum class Fuse { On, Off };
cl::opt<Fuse> fuse("fuse",
                   cl::desc("Fuse chains of elementwise ops into one kernel each (default: on)"),
                   cl::init(Fuse::On),
                   cl::values(clEnumValN(Fuse::On, "on", "fuse (-tessel-fuse-elementwise)"),
                              clEnumValN(Fuse::Off, "off", "one kernel per elementwise op")),
                   cl::sub(checkCommand), cl::sub(compileCommand), cl::sub(runCommand),
                   cl::sub(generateCommand), cl::sub(estimateCommand), cl::cat(category));
cl::opt<Fuse> fuseLoss(
    "fuse-loss",
    cl::desc("Fuse the output head's contraction with cross-entropy, computed a chunk of rows "
             "at a time so the logits never exist whole (default: on; --fuse=off turns it off "
             "too)"),
    cl::init(Fuse::On),
    cl::values(clEnumValN(Fuse::On, "on", "fuse (-tessel-fuse-linear-cross-entropy)"),
               clEnumValN(Fuse::Off, "off", "the head's logits and their gradient whole")),
    cl::sub(checkCommand), cl::sub(compileCommand), cl::sub(runCommand), cl::sub(generateCommand),
    cl::sub(estimateCommand), cl::cat(category));
cl::opt<bool> timePasses("time-passes",
                        cl::desc("Print the time each compiler pass took, to stderr (as "
                                 "mlir-opt --mlir-timing)"),
                        cl::sub(checkCommand), cl::sub(compileCommand), cl::sub(runCommand),
                        cl::sub(generateCommand), cl::sub(estimateCommand), cl::cat(category));
cl::opt<bool> verifyEach("verify-each",
                         cl::desc("Verify the IR after every compiler pass, not only after each "
                                  "stage (slower; for finding a pass that breaks the IR)"),
                         cl::sub(checkCommand), cl::sub(compileCommand), cl::sub(runCommand),
                         cl::sub(generateCommand), cl::sub(estimateCommand), cl::cat(category));
cl::opt<int64_t> lossChunk("loss-chunk",
                           cl::desc("Rows of logits the fused output head computes at a time "
                                    "(default 0: about the input's size, at least 256 rows)"),
                           cl::init(0), cl::sub(checkCommand), cl::sub(compileCommand),
                           cl::sub(runCommand), cl::sub(generateCommand), cl::sub(estimateCommand),
                           cl::cat(category));

enum class Emit { Ast, Graph, Train, Sharded, Plan, Decode, DecodePlan, PlanFile, Exe };
cl::opt<Emit> emit(
    "emit", cl::desc("What to produce (default: an executable with -o, else graph IR on stdout)"),
    cl::init(Emit::Graph),
    cl::values(clEnumValN(Emit::Ast, "ast", "the syntax tree of the file"),
               clEnumValN(Emit::Graph, "graph", "the forward computation in the graph dialect"),
               clEnumValN(Emit::Train, "train",
                          "the training functions (forward-backward, optimizer step, sampler)"),
               clEnumValN(Emit::Sharded, "sharded",
                          "the per-rank functions with their collectives (shard dialect)"),
               clEnumValN(Emit::Plan, "plan", "the memory-planned plan dialect"),
               clEnumValN(Emit::Decode, "decode",
                          "the decode programs over a KV cache (graph dialect)"),
               clEnumValN(Emit::DecodePlan, "decode-plan",
                          "the decode programs, memory-planned (plan dialect)"),
               clEnumValN(Emit::PlanFile, "plan-file", "the binary plan the runtime loads"),
               clEnumValN(Emit::Exe, "exe", "an executable that trains the model")),
    cl::sub(compileCommand), cl::cat(category));
cl::list<int64_t> decodeBatches(
    "decode-batches",
    cl::desc("Batch sizes of the decode programs, one program each (default 1,2,4,8): "
             "generation runs the smallest that holds its sequences"),
    cl::CommaSeparated, cl::sub(compileCommand), cl::sub(runCommand), cl::sub(generateCommand),
    cl::cat(category));
cl::opt<int64_t> prefillTokens("prefill",
                               cl::desc("Prompt tokens the prefill program takes at a time "
                                        "(default 256, at most the model's seq)"),
                               cl::init(256), cl::sub(compileCommand), cl::sub(runCommand),
                               cl::sub(generateCommand), cl::cat(category));
cl::opt<int64_t> kvBlock("kv-block", cl::desc("Positions per KV-cache block (default 16)"),
                         cl::init(16), cl::sub(compileCommand), cl::sub(runCommand),
                         cl::sub(generateCommand), cl::cat(category));
cl::opt<int64_t> kvBlocks("kv-blocks",
                          cl::desc("KV-cache blocks of each attention (default 0: enough for the "
                                   "largest decode batch at the model's whole seq)"),
                          cl::init(0), cl::sub(compileCommand), cl::sub(runCommand),
                          cl::sub(generateCommand), cl::cat(category));
cl::opt<std::string> outputFile("o", cl::desc("Write the output here (default: stdout)"),
                                cl::value_desc("file"), cl::init("-"), cl::sub(compileCommand),
                                cl::cat(category));

/// The compiled-model runner installed beside this binary.
std::string runnerPath(const char *argv0) {
  std::string exe = sys::fs::getMainExecutable(argv0, reinterpret_cast<void *>(&runnerPath));
  SmallString<256> path(sys::path::parent_path(exe));
  sys::path::append(path, "tessel-runner");
  return std::string(path);
}

/// A program installed beside this binary.
std::string siblingPath(const char *argv0, StringRef name) {
  std::string exe = sys::fs::getMainExecutable(argv0, reinterpret_cast<void *>(&siblingPath));
  SmallString<256> path(sys::path::parent_path(exe));
  sys::path::append(path, name);
  return std::string(path);
}

/// Where `std/` lives: beside an installed binary, else the source tree it was built from.
std::string libraryRoot(const char *argv0) {
  std::string exe = sys::fs::getMainExecutable(argv0, reinterpret_cast<void *>(&libraryRoot));
  SmallString<256> installed(sys::path::parent_path(sys::path::parent_path(exe)));
  sys::path::append(installed, "share", "tessel");
  if (sys::fs::is_directory(installed + "/std"))
    return std::string(installed);
  return TESSEL_LIBRARY_ROOT;
}

struct Frontend {
  SourceManager sources;
  DiagnosticEngine diags{sources};
  FrontendOptions options;
  std::unique_ptr<ParsedModule> module;
  size_t printed = 0; ///< Diagnostics printed so far; each stage prints what it added.
};

/// Parses the input and its imports; prints diagnostics. Returns false on errors.
bool load(Frontend &fe, const char *argv0) {
  fe.options.importPaths.assign(importDirs.begin(), importDirs.end());
  fe.options.importPaths.push_back(libraryRoot(argv0));
  fe.options.ranks = ranks;
  fe.module = loadModule(inputFile, fe.sources, fe.diags, fe.options);
  return fe.module != nullptr;
}

/// Prints the diagnostics not printed yet; returns 1 when there are errors, else 0.
int finish(Frontend &fe) {
  fe.diags.print(std::cerr, fe.printed);
  fe.printed = fe.diags.diagnostics().size();
  return fe.diags.hasErrors() ? 1 : 0;
}

/// Creates the directories `path` will be written in. Refuses it (printing why) when one of
/// them cannot be made, e.g. because a file of that name is in the way, so that a run that
/// would fail to write its output fails before any work.
bool prepareOutputPath(const std::string &path) {
  if (path.empty() || path == "-")
    return true;
  StringRef parent = sys::path::parent_path(path);
  if (parent.empty() || sys::fs::is_directory(parent))
    return true;
  // The nearest ancestor that exists must be a directory.
  for (StringRef up = parent; !up.empty(); up = sys::path::parent_path(up)) {
    if (!sys::fs::exists(up))
      continue;
    if (!sys::fs::is_directory(up)) {
      errs() << "tessel: error: cannot write '" << path << "': '" << up
             << "' is a file, not a directory\n";
      return false;
    }
    break;
  }
  if (std::error_code ec = sys::fs::create_directories(parent)) {
    errs() << "tessel: error: cannot write '" << path << "': cannot create '" << parent
           << "': " << ec.message() << "\n";
    return false;
  }
  return true;
}

std::string humanCount(double n) {
  const char *units[] = {"", "K", "M", "B", "T"};
  int u = 0;
  while (n >= 1000 && u < 4) {
    n /= 1000;
    ++u;
  }
  char buf[32];
  snprintf(buf, sizeof buf, u ? "%.2f%s" : "%.0f%s", n, units[u]);
  return buf;
}

int lower(const Program &program, Frontend &fe, Emit until, raw_ostream *os, planfile::Plan *plan);

int runCheck(const char *argv0) {
  Frontend fe;
  if (!load(fe, argv0)) { // The file could not be read: an I/O error, not one in the input.
    finish(fe);
    return 2;
  }
  auto program = analyze(*fe.module, fe.sources, fe.diags, fe.options);
  if (!program)
    return finish(fe);
  finish(fe); // Warnings.
  // What compile would refuse, check refuses: the layout is only known to work once the
  // passes have partitioned it, split its pipeline and planned it.
  planfile::Plan plan;
  if (int rc = lower(*program, fe, Emit::PlanFile, nullptr, &plan))
    return rc;
  double params = 0;
  size_t paramCount = 0;
  for (const Op &op : program->forward.ops) {
    if (op.name != "param")
      continue;
    double n = 1;
    for (const NamedDim &d : op.type.dims)
      n *= static_cast<double>(d.size);
    params += n;
    ++paramCount;
  }
  outs() << inputFile << ": ok: model " << program->modelName << ", " << humanCount(params)
         << " parameters in " << paramCount << " tensors, " << program->forward.ops.size()
         << " ops, " << program->layers << " layers, " << program->parallel.worldSize() << " rank"
         << (program->parallel.worldSize() == 1 ? "" : "s") << ", accumulation "
         << program->train.accumulation << "\n";
  return 0;
}

/// Whether the process runs under an address-space limit (ulimit -v). The passes then run on
/// one thread: glibc gives each thread its own 64 MiB heaps, and once the limit refuses
/// another, every allocation of that thread becomes a system call of its own, which slows
/// the compiler down a thousandfold instead of failing.
bool addressSpaceLimited() {
  struct rlimit limit;
  return getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
}

/// The work of lower(), in `context`, whose diagnostics lower() collects.
int lowerModule(mlir::MLIRContext &context, const Program &program, Frontend &fe, Emit until,
                raw_ostream *os, planfile::Plan *plan) {
  auto module = emitGraphModule(context, program, fe.sources);
  if (failed(mlir::verify(*module))) {
    errs() << "tessel: internal error: the emitted graph IR does not verify\n";
    return 2;
  }
  if (until == Emit::Graph) {
    if (os)
      module->print(*os);
    return 0;
  }
  // The three stages run as three pass managers, each verified once at its end: verifying after
  // every pass (--verify-each) costs more than the passes themselves on a large model.
  mlir::DefaultTimingManager timing;
  timing.setEnabled(timePasses);
  timing.setOutput(mlir::createOutputStrategy(mlir::DefaultTimingManager::OutputFormat::Text,
                                              llvm::errs()));
  mlir::TimingScope timingRoot = timing.getRootScope();
  // Kept until the report is printed: it names each pass's timer by the pass's address.
  std::vector<std::unique_ptr<mlir::PassManager>> stages;
  // Returns the exit code: 1 when a pass reported an error (at the spec's locations).
  auto runStage = [&](llvm::function_ref<void(mlir::OpPassManager &)> build) {
    mlir::PassManager &pm = *stages.emplace_back(std::make_unique<mlir::PassManager>(&context));
    pm.enableVerifier(verifyEach);
    pm.enableTiming(timingRoot);
    build(pm);
    if (failed(pm.run(*module)))
      return 1;
    if (verifyEach)
      return 0;
    mlir::TimingScope verifying = timingRoot.nest("Verify");
    if (failed(mlir::verify(*module))) {
      errs() << "tessel: internal error: the IR after the passes does not verify (rerun with "
                "--verify-each to find the pass)\n";
      return 2;
    }
    return 0;
  };
  DecoderPipelineOptions decoderOptions;
  if (!decodeBatches.empty())
    decoderOptions.batches.assign(decodeBatches.begin(), decodeBatches.end());
  decoderOptions.prefill = prefillTokens;
  decoderOptions.block = kvBlock;
  decoderOptions.cacheBlocks = kvBlocks;
  decoderOptions.fuseElementwise = fuse == Fuse::On;
  if (until == Emit::Decode || until == Emit::DecodePlan) {
    if (int rc = runStage([&](mlir::OpPassManager &pm) {
          if (until == Emit::Decode)
            buildDecoderDerivation(pm, decoderOptions);
          else
            buildDecoderPipeline(pm, decoderOptions);
        }))
      return rc;
    if (os)
      module->print(*os);
    return 0;
  }
  if (int rc = runStage(buildTrainingPipeline))
    return rc;
  if (until != Emit::Train)
    if (int rc = runStage(buildShardingPipeline))
      return rc;
  if (until != Emit::Train && until != Emit::Sharded)
    if (int rc = runStage([](mlir::OpPassManager &pm) {
          buildPlanPipeline(pm, PlanPipelineOptions{fuse == Fuse::On,
                                                    fuse == Fuse::On && fuseLoss == Fuse::On,
                                                    lossChunk});
        }))
      return rc;
  if (until == Emit::Train || until == Emit::Sharded || until == Emit::Plan) {
    if (os)
      module->print(*os);
    return 0;
  }
  auto translated = translateToPlanFile(*module);
  if (failed(translated))
    return 1;
  *plan = std::move(*translated);

  // The decode programs, from the front end's graph again, in a module of their own.
  auto decoder = emitGraphModule(context, program, fe.sources);
  module = std::move(decoder);
  if (int rc = runStage([&](mlir::OpPassManager &pm) { buildDecoderPipeline(pm, decoderOptions); }))
    return rc;
  if (auto refused = (*module)->getAttrOfType<mlir::StringAttr>("tessel.decode_refused")) {
    plan->decoderRefused = refused.str();
    return 0;
  }
  auto decodePlan = translateToPlanFile(*module);
  if (failed(decodePlan))
    return 1;
  plan->decoder = std::make_shared<planfile::Plan>(std::move(*decodePlan));
  return 0;
}

/// Lowers the analysed program through every stage up to `until`; prints IR stages to `os`
/// unless it is null. The passes' errors and warnings are printed as the front end's are, at
/// the spec's text and in its terms. Returns the exit code; fills `plan` when `until` is past
/// the plan dialect.
int lower(const Program &program, Frontend &fe, Emit until, raw_ostream *os, planfile::Plan *plan) {
  mlir::MLIRContext context;
  context.printOpOnDiagnostic(false);
  if (addressSpaceLimited())
    context.disableMultithreading();
  PassDiagnostics diagnostics(context, fe.sources, fe.diags);
  int rc = lowerModule(context, program, fe, until, os, plan);
  int errors = finish(fe);
  return rc ? rc : errors;
}

/// Writes `bytes` to `path` through a temporary file, so an interrupted write never leaves
/// a half-written executable or plan behind.
bool writeOutput(const std::string &path, const std::vector<uint8_t> &bytes, bool executable) {
  std::string tmp = path + ".tmp";
  {
    std::error_code ec;
    raw_fd_ostream out(tmp, ec, sys::fs::OF_None);
    if (ec) {
      errs() << "tessel: error: cannot write '" << path << "': " << ec.message() << "\n";
      return false;
    }
    out.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
    out.close();
    if (out.has_error()) {
      errs() << "tessel: error: cannot write '" << path << "': " << out.error().message() << "\n";
      sys::fs::remove(tmp);
      return false;
    }
  }
  if (executable)
    sys::fs::setPermissions(tmp, sys::fs::perms::all_read | sys::fs::perms::all_exe |
                                     sys::fs::perms::owner_write);
  if (std::error_code ec = sys::fs::rename(tmp, path)) {
    errs() << "tessel: error: cannot write '" << path << "': " << ec.message() << "\n";
    sys::fs::remove(tmp);
    return false;
  }
  return true;
}

/// The runner with `plan` appended: one file that trains the model.
bool buildExecutable(const char *argv0, const planfile::Plan &plan, std::vector<uint8_t> &bytes) {
  std::string runner = runnerPath(argv0);
  auto buffer = MemoryBuffer::getFile(runner, /*IsText=*/false);
  if (!buffer) {
    errs() << "tessel: error: cannot read the runner '" << runner
           << "': " << buffer.getError().message() << "\n";
    return false;
  }
  bytes.assign((*buffer)->getBufferStart(), (*buffer)->getBufferEnd());
  planfile::appendEmbeddedPlan(bytes, planfile::serializePlan(plan));
  return true;
}

/// One line on what was written: programs (each once per pipeline stage), kernel calls, the
/// arena's peak and the state.
void printPlanSummary(const planfile::Plan &plan, StringRef path) {
  size_t calls = 0;
  const planfile::Program *peak = nullptr;
  for (const planfile::Program &p : plan.programs) {
    calls += p.instrs.size();
    if (!peak || p.arenaBytes > peak->arenaBytes)
      peak = &p;
  }
  uint64_t state = 0;
  bool working = false;
  for (const planfile::StateTensor &t : plan.state) {
    state += t.bytes();
    working |= t.role == "working";
  }
  auto mib = [](uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
  outs() << "wrote " << path << ": " << plan.programs.size() << " programs for " << plan.worldSize
         << (plan.worldSize == 1 ? " rank, " : " ranks, ") << calls << " kernel calls; arena ";
  outs() << format("%.1f", peak ? mib(peak->arenaBytes) : 0.0) << " MiB at the peak of '"
         << (peak ? peak->name : "") << "', state " << format("%.1f", mib(state))
         << " MiB (parameters, " << (working ? "their 16-bit working copies, " : "")
         << "gradients, optimizer)\n";
  // What --generate runs: the decode programs and their cache, or why there are none.
  if (!plan.decoder) {
    outs() << "  generation recomputes the whole window for each token: "
           << (plan.decoderRefused.empty() ? "no decode programs" : plan.decoderRefused) << "\n";
    return;
  }
  std::vector<std::string> batches;
  int64_t prefill = 0;
  uint64_t cache = 0;
  for (const planfile::Program &p : plan.decoder->programs)
    if (StringRef(p.name).starts_with("decode_b"))
      batches.push_back(p.name.substr(8));
    else if (p.name == "prefill" && !p.inputs.empty() && !p.inputs[0].shape.empty())
      prefill = p.inputs[0].shape.back();
  for (const planfile::StateTensor &t : plan.decoder->state)
    if (t.role == "kv_cache")
      cache += t.bytes();
  outs() << "  generation: a KV cache of " << format("%.1f", mib(cache))
         << " MiB a rank, prefill " << prefill << " tokens at a time, decode programs for "
         << join(batches, ", ") << " sequences\n";
}

int runCompile(const char *argv0) {
  if (!prepareOutputPath(outputFile))
    return 2;
  Frontend fe;
  if (!load(fe, argv0)) { // The file could not be read: an I/O error, not one in the input.
    finish(fe);
    return 2;
  }
  Emit what = emit;
  if (!emit.getNumOccurrences() && outputFile != "-")
    what = Emit::Exe;
  if (what == Emit::Ast) {
    if (fe.diags.hasErrors())
      return finish(fe);
    std::string error;
    auto output = mlir::openOutputFile(outputFile, &error);
    if (!output) {
      errs() << "tessel: error: cannot write '" << outputFile << "': " << error << "\n";
      return 2;
    }
    std::ostringstream text;
    for (const auto &file : fe.module->files)
      printAst(*file, fe.sources, text);
    output->os() << text.str();
    output->keep();
    return finish(fe);
  }
  auto program = analyze(*fe.module, fe.sources, fe.diags, fe.options);
  if (!program)
    return finish(fe);
  finish(fe);

  if (what == Emit::PlanFile || what == Emit::Exe) {
    if (outputFile == "-") {
      errs() << "tessel: error: --emit=" << (what == Emit::Exe ? "exe" : "plan-file")
             << " writes a binary file; name it with -o\n";
      return 2;
    }
    planfile::Plan plan;
    if (int rc = lower(*program, fe, what, nullptr, &plan))
      return rc;
    std::vector<uint8_t> bytes;
    if (what == Emit::Exe) {
      if (!buildExecutable(argv0, plan, bytes))
        return 2;
    } else {
      bytes = planfile::serializePlan(plan);
    }
    if (!writeOutput(outputFile, bytes, what == Emit::Exe))
      return 2;
    printPlanSummary(plan, outputFile);
    return 0;
  }

  std::string error;
  auto output = mlir::openOutputFile(outputFile, &error);
  if (!output) {
    errs() << "tessel: error: cannot write '" << outputFile << "': " << error << "\n";
    return 2;
  }
  if (int rc = lower(*program, fe, what, &output->os(), nullptr))
    return rc;
  output->keep();
  return 0;
}

/// Loads, checks and compiles the input file into `plan`; returns the exit code on failure.
int compileToPlan(const char *argv0, planfile::Plan &plan, ParameterCounts *counts = nullptr) {
  Frontend fe;
  if (!load(fe, argv0)) {
    finish(fe);
    return 2;
  }
  auto program = analyze(*fe.module, fe.sources, fe.diags, fe.options);
  if (!program)
    return finish(fe);
  finish(fe);
  if (counts)
    *counts = countParameters(*program);
  return lower(*program, fe, Emit::PlanFile, nullptr, &plan);
}

/// Reads the cluster `spec` names: a file, or a preset of the library's clusters/ folder.
/// Prints why and returns false when there is none or it is malformed.
bool loadCluster(const char *argv0, const std::string &spec, cluster::Cluster &out) {
  std::string path = spec;
  if (!sys::fs::exists(path)) {
    SmallString<256> preset(libraryRoot(argv0));
    sys::path::append(preset, "clusters", spec + ".cluster");
    if (!sys::fs::exists(preset)) {
      errs() << "tessel: error: no cluster '" << spec << "': neither a file nor a preset in "
             << sys::path::parent_path(preset) << "\n";
      return false;
    }
    path = std::string(preset);
  }
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    errs() << "tessel: error: cannot read '" << path << "': " << buffer.getError().message()
           << "\n";
    return false;
  }
  std::string error;
  if (!cluster::parseCluster((*buffer)->getBuffer().str(), path, out, error)) {
    errs() << error << "\n";
    return false;
  }
  return true;
}

/// Compiles the model to a plan and prints what it needs per rank.
int runEstimate(const char *argv0) {
  if (!prepareOutputPath(estimateTrace) || !prepareOutputPath(estimateSvg) ||
      !prepareOutputPath(estimateMemorySvg) || !prepareOutputPath(estimateMemoryTrace))
    return 2;
  if (estimateMemorySteps < 1 || estimateMemorySteps > 100) {
    errs() << "tessel: error: --memory-steps must be 1 to 100, not " << estimateMemorySteps << "\n";
    return 2;
  }
  cluster::Cluster cluster;
  if (!estimateCluster.empty() && !loadCluster(argv0, estimateCluster, cluster))
    return 1;
  planfile::Plan plan;
  ParameterCounts counts;
  if (int rc = compileToPlan(argv0, plan, &counts))
    return rc;
  PlanEstimate e = estimatePlan(plan);
  if (counts.expert > 0) {
    e.activeParameterCount = counts.active;
    e.expertParameterCount = counts.expert;
    for (const ParameterCounts::Routing &r : counts.routings)
      e.routing += (e.routing.empty() ? "top " : ", top ") + std::to_string(r.k) + " of " +
                   std::to_string(r.experts) + " " + r.dim;
  }
  StepPrediction prediction;
  if (!estimateCluster.empty())
    prediction = predictStep(plan, cluster);
  if (estimateJsonOutput) {
    // One document: the estimate's members, and the prediction as one more.
    llvm::json::OStream j(outs(), 2);
    j.object([&] {
      estimateJsonMembers(j, e);
      if (!estimateCluster.empty()) {
        j.attributeBegin("prediction");
        predictionJson(j, prediction);
        j.attributeEnd();
        j.attribute("kv_cache_tokens", kvCacheTokens(e, cluster.memory));
      }
    });
    outs() << "\n";
  } else {
    outs() << formatEstimate(e);
    if (!estimateCluster.empty())
      outs() << formatPrediction(prediction, e.worldSize)
             << formatKvCacheFit(e, cluster.memory, cluster.name);
  }
  auto write = [&](const std::string &path, const std::string &text) {
    std::vector<uint8_t> bytes(text.begin(), text.end());
    return writeOutput(path, bytes, false);
  };
  if (!estimateMemorySvg.empty() || !estimateMemoryTrace.empty()) {
    MemoryPictureOptions options;
    options.svg = estimateMemorySvg;
    options.trace = estimateMemoryTrace;
    options.rank = estimateMemoryRank;
    options.steps = estimateMemorySteps;
    options.cluster = estimateCluster.empty() ? nullptr : &cluster;
    std::vector<MemoryPicture> pictures;
    std::string error;
    if (!memoryPictures(plan, options, pictures, error)) {
      errs() << "tessel: error: " << error << "\n";
      return 2;
    }
    for (const MemoryPicture &picture : pictures) {
      if (!write(picture.path, picture.text))
        return 2;
      // On stderr, so that --json's document stays alone on stdout.
      errs() << "wrote " << picture.summary << "\n";
    }
  }
  if (estimateTrace.empty() && estimateSvg.empty())
    return 0;
  // The predicted timeline: the schedule's action lists under unit costs (forward 1,
  // backward 2), as the bubble above.
  pipeline::ScheduleKind kind;
  if (e.schedule.empty() || !pipeline::parseScheduleKind(e.schedule, kind)) {
    errs() << "tessel: error: --trace and --svg draw a pipeline schedule, but the mesh of '"
           << inputFile << "' has no pp axis\n";
    return 2;
  }
  std::string error;
  int p = static_cast<int>(e.stages), m = static_cast<int>(e.microbatches),
      v = static_cast<int>(e.virtualStages);
  auto lists = pipeline::buildSchedule(kind, p, m, v, error);
  // With a cluster, the step-time model's timeline: each stage's predicted forward, backward
  // and transfer times, in seconds.
  pipeline::Timeline timeline = estimateCluster.empty()
                                    ? pipeline::simulate(kind, p, m, v, lists, pipeline::Costs())
                                    : prediction.timeline;
  std::string title = e.model + ": " + e.schedule + ", " + std::to_string(p) + " stages, " +
                      std::to_string(m) + " micro-batches" +
                      (v > 1 ? ", " + std::to_string(v) + " virtual" : std::string()) +
                      (estimateCluster.empty() ? " (predicted, unit costs)"
                                               : " (predicted on " + cluster.name + ")");
  if (!estimateTrace.empty() && !write(estimateTrace, pipeline::chromeTraceJson(timeline, title)))
    return 2;
  if (!estimateSvg.empty() && !write(estimateSvg, pipeline::scheduleSvg(timeline, title)))
    return 2;
  return 0;
}

/// Runs `args` (args[0] the program) with its standard output into `out`; returns false
/// (having said why) when it cannot be started or fails.
bool capture(ArrayRef<StringRef> args, std::string &out) {
  SmallString<128> path;
  if (std::error_code ec = sys::fs::createTemporaryFile("tessel-calibrate", "txt", path)) {
    errs() << "tessel: error: cannot create a temporary file: " << ec.message() << "\n";
    return false;
  }
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(path), std::nullopt};
  std::string error;
  int rc = sys::ExecuteAndWait(args[0], args, std::nullopt, redirects, 0, 0, &error);
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/true);
  if (buffer)
    out = (*buffer)->getBuffer().str();
  sys::fs::remove(path);
  if (rc != 0) {
    errs() << "tessel: error: '" << args[0] << "' "
           << (rc < 0 ? "could not run: " + error : "failed with status " + std::to_string(rc))
           << "\n";
    return false;
  }
  return true;
}

/// Measures this machine with tessel-calibrate (beside this binary: the runtime's kernels and
/// communicators, which the compiler does not link) and writes the cluster file.
int runCalibrate(const char *argv0) {
  if (!prepareOutputPath(calibrateOutput))
    return 2;
  std::string tool = siblingPath(argv0, "tessel-calibrate");
  std::vector<std::string> words = {tool};
  if (calibrateThreads > 0)
    words.insert(words.end(), {"--threads", std::to_string(calibrateThreads)});
  if (calibrateRanks > 1)
    words.insert(words.end(), {"--ranks", std::to_string(calibrateRanks)});
  if (calibrateQuick)
    words.push_back("--quick");
  // With --model: the model's plan, in a temporary file that tessel-calibrate reads.
  SmallString<128> planPath;
  llvm::scope_exit removePlan([&] {
    if (!planPath.empty())
      sys::fs::remove(planPath);
  });
  if (!calibrateModel.empty()) {
    inputFile.setValue(calibrateModel);
    planfile::Plan plan;
    if (int rc = compileToPlan(argv0, plan))
      return rc;
    if (std::error_code ec = sys::fs::createTemporaryFile("tessel-calibrate", "plan", planPath)) {
      errs() << "tessel: error: cannot create a temporary plan file: " << ec.message() << "\n";
      return 2;
    }
    if (!writeOutput(std::string(planPath), planfile::serializePlan(plan), false))
      return 2;
    words.insert(words.end(), {"--plan", std::string(planPath)});
  }
  std::vector<StringRef> args(words.begin(), words.end());
  std::string text;
  if (!capture(args, text))
    return 2;
  cluster::Cluster measured;
  std::string error;
  if (!cluster::parseCluster(text, tool, measured, error)) {
    errs() << "tessel: internal error: tessel-calibrate wrote a bad cluster file: " << error
           << "\n";
    return 2;
  }
  std::string note = "Measured by `tessel calibrate` on this machine with the CPU backend's "
                     "kernels and communicators.\n";
  if (!calibrateModel.empty())
    note += "efficiency.gemm.shapes: the GEMM calls of " +
            sys::path::filename(calibrateModel).str() + "'s plan.\n";
  note += "intra: the local communicator (ranks as threads of one process); ";
  if (calibrateMpi) {
    auto mpirun = sys::findProgramByName("mpirun");
    std::string line;
    if (!mpirun) {
      errs() << "tessel: error: --mpi needs mpirun on the PATH\n";
      return 2;
    }
    std::vector<StringRef> mpiArgs = {
        *mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "2", tool, "--mpi"};
    if (!capture(mpiArgs, line))
      return 2;
    double latency = 0, bandwidth = 0;
    if (std::sscanf(line.c_str(), "mpi %lf %lf", &latency, &bandwidth) != 2) {
      errs() << "tessel: error: tessel-calibrate --mpi printed '" << line << "'\n";
      return 2;
    }
    measured.inter = {bandwidth, latency};
    note += "inter: the MPI communicator between 2 processes.";
  } else {
    note += "inter: the same (one host; --mpi measures the MPI communicator).";
  }
  std::string file = cluster::formatCluster(measured, note);
  std::vector<uint8_t> bytes(file.begin(), file.end());
  if (calibrateOutput == "-") {
    outs() << file;
    return 0;
  }
  return writeOutput(calibrateOutput, bytes, false) ? 0 : 2;
}

/// Searches the layouts of --gpus accelerators of --cluster for the model (compiled once with
/// its own layout, for its dims and parameter count) and prints the fastest.
int runTune(const char *argv0) {
  if (!prepareOutputPath(tuneWrite) || !prepareOutputPath(tuneSvg))
    return 2;
  if (tuneGpus < 1) {
    errs() << "tessel: error: --gpus must be positive\n";
    return 2;
  }
  cluster::Cluster cluster;
  if (!loadCluster(argv0, tuneCluster, cluster))
    return 1;
  Layout only;
  std::string error;
  if (!tuneLayout.empty() && !parseLayout(tuneLayout, only, error)) {
    errs() << "tessel: error: --layout: " << error << "\n";
    return 2;
  }
  planfile::Plan plan;
  if (int rc = compileToPlan(argv0, plan))
    return rc;
  TransformerShape shape;
  if (!readTransformerShape(plan, estimatePlan(plan).parameterCount, shape, error)) {
    errs() << "tessel: error: " << inputFile << ": " << error << "\n";
    return 1;
  }
  std::vector<Candidate> candidates;
  size_t overMemory = 0;
  if (!tuneLayout.empty()) {
    if (only.dp * only.tp * only.pp * only.cp != tuneGpus) {
      errs() << "tessel: error: --layout " << only.describe() << " has "
             << only.dp * only.tp * only.pp * only.cp << " ranks, not --gpus " << tuneGpus << "\n";
      return 2;
    }
    LayoutCost cost = evaluateLayout(shape, only, cluster, error);
    if (!error.empty()) {
      errs() << "tessel: error: --layout " << only.describe() << ": " << error << "\n";
      return 1;
    }
    candidates.push_back({only, cost});
  } else {
    candidates = searchLayouts(shape, cluster, tuneGpus, overMemory);
  }
  if (candidates.empty()) {
    errs() << "tessel: error: no layout of " << tuneGpus << " accelerators can run " << shape.model
           << (overMemory ? " within their memory" : "") << "\n";
    return 1;
  }
  if (tuneJson) {
    llvm::json::OStream j(outs(), 2);
    candidatesJson(j, candidates, tuneTop);
    outs() << "\n";
  } else {
    outs() << formatCandidates(candidates, tuneTop, overMemory, shape, cluster);
  }
  if (!tuneJson) {
    const Candidate &best = candidates.front();
    StepPrediction p;
    p.cluster = cluster.name;
    p.step = best.cost.step;
    p.tokensPerSecond = best.cost.tokensPerSecond;
    p.mfu = best.cost.mfu;
    p.hfu = best.cost.hfu;
    p.flopsPerRank = best.cost.hfu * cluster.peak(shape.elementBytes);
    p.breakdown = best.cost.breakdown;
    p.pipelined = best.layout.pp > 1;
    outs() << "\nbest: " << best.layout.describe() << "\n" << formatPrediction(p, tuneGpus);
  }
  if (!tuneSvg.empty()) {
    std::string svg =
        candidatesSvg(candidates,
                      shape.model + " on " + std::to_string(tuneGpus) + " x " + cluster.name +
                          ": " + std::to_string(candidates.size()) + " layouts that fit",
                      cluster.memory);
    if (!writeOutput(tuneSvg, std::vector<uint8_t>(svg.begin(), svg.end()), false))
      return 2;
  }
  if (!tuneWrite.empty()) {
    std::string text = parallelSection(candidates.front().layout, shape);
    if (!writeOutput(tuneWrite, std::vector<uint8_t>(text.begin(), text.end()), false))
      return 2;
  }
  return 0;
}

/// Compiles the model to a temporary plan and runs the runner on it with `extraArgs` first.
int runRun(const char *argv0, ArrayRef<StringRef> extraArgs) {
  planfile::Plan plan;
  if (int rc = compileToPlan(argv0, plan))
    return rc;
  SmallString<128> planPath;
  if (std::error_code ec = sys::fs::createTemporaryFile("tessel", "plan", planPath)) {
    errs() << "tessel: error: cannot create a temporary plan file: " << ec.message() << "\n";
    return 2;
  }
  if (!writeOutput(std::string(planPath), planfile::serializePlan(plan), false))
    return 2;
  std::string runner = runnerPath(argv0);
  std::vector<StringRef> args = {runner, "--plan", planPath};
  args.insert(args.end(), extraArgs.begin(), extraArgs.end());
  for (const std::string &a : runnerArgs)
    args.push_back(a);
  std::string error;
  int rc = sys::ExecuteAndWait(runner, args, std::nullopt, {}, 0, 0, &error);
  sys::fs::remove(planPath);
  if (rc < 0) {
    errs() << "tessel: error: cannot run '" << runner << "': " << error << "\n";
    return 2;
  }
  return rc;
}

/// The command line with the runner's options of `tessel run` and `tessel generate` moved
/// behind a "--", where the parser takes every argument as positional (a runner argument).
/// Options after the model file that tessel does not know are the runner's, so that
/// `tessel run X.model --steps 150` needs no "--". Returns false (having said why) for an
/// option before the model file that neither knows.
bool separateRunnerArgs(int argc, char **argv, std::vector<const char *> &out) {
  out.assign(argv, argv + argc);
  if (argc < 2 || (StringRef(argv[1]) != "run" && StringRef(argv[1]) != "generate"))
    return true;
  auto &known =
      cl::getRegisteredOptions(StringRef(argv[1]) == "run" ? runCommand : generateCommand);
  // The option `arg` names, if tessel has it for this command ("--ranks=4", "-Idir").
  auto tesselOption = [&](StringRef arg) -> cl::Option * {
    StringRef name = arg.ltrim('-').split('=').first;
    if (auto it = known.find(name); it != known.end())
      return it->second;
    for (auto &[key, option] : known)
      if (option->getFormattingFlag() == cl::Prefix && !key.empty() && name.starts_with(key))
        return option;
    return nullptr;
  };
  std::vector<const char *> tessel = {argv[0], argv[1]}, runner;
  bool seenModel = false;
  for (int i = 2; i < argc; ++i) {
    StringRef arg = argv[i];
    if (arg == "--") {
      runner.insert(runner.end(), argv + i + 1, argv + argc);
      break;
    }
    bool isOption = arg.size() > 1 && arg.starts_with("-");
    if (!isOption) {
      (seenModel ? runner : tessel).push_back(argv[i]);
      seenModel = true;
      continue;
    }
    // --help and --version are tessel's wherever they are.
    StringRef name = arg.ltrim('-');
    if (name.starts_with("help") || name == "version") {
      tessel.push_back(argv[i]);
      continue;
    }
    cl::Option *option = tesselOption(arg);
    if (!option && seenModel) {
      runner.push_back(argv[i]);
      continue;
    }
    if (!option) {
      errs() << "tessel: error: unknown option '" << arg << "' for 'tessel " << argv[1]
             << "'; options of the compiled model go after the file: tessel " << argv[1]
             << " FILE.model " << arg << " ...\n";
      return false;
    }
    tessel.push_back(argv[i]);
    // "--ranks 4": the value is the next argument, not the model file.
    bool joined = arg.contains('=') || (option->getFormattingFlag() == cl::Prefix &&
                                        name.size() > option->ArgStr.size());
    if (!joined && option->getValueExpectedFlag() == cl::ValueRequired && i + 1 < argc)
      tessel.push_back(argv[++i]);
  }
  out = tessel;
  if (!runner.empty()) {
    out.push_back("--");
    out.insert(out.end(), runner.begin(), runner.end());
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  installOutOfMemoryHandlers();
  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter([](raw_ostream &os) { os << versionLine() << "\n"; });
  std::vector<const char *> args;
  if (!separateRunnerArgs(argc, argv, args))
    return 2;
  // With an error stream given, a bad command line returns false instead of exiting with 1,
  // which is the code for errors in the input.
  if (!cl::ParseCommandLineOptions(
          static_cast<int>(args.size()), args.data(),
          "Tessel: parallel transformer training from one .model file\n\n"
          "  tessel check FILE.model               check a model and its parallel layout\n"
          "  tessel compile FILE.model --emit=ast  print the syntax tree\n"
          "  tessel compile FILE.model --emit=graph  print the forward graph IR\n"
          "  tessel compile FILE.model --emit=sharded  print the per-rank IR with collectives\n"
          "  tessel estimate FILE.model [--json]    memory per rank and communication per step\n"
          "  tessel estimate FILE.model --svg S.svg --trace T.json  draw the pipeline schedule\n"
          "  tessel estimate FILE.model --memory-svg M.svg  draw a step's memory by what it holds\n"
          "  tessel compile FILE.model -o FILE     write an executable that trains the model\n"
          "  tessel run FILE.model [OPTIONS]       compile and train now (OPTIONS as ./FILE "
          "--help)\n"
          "  tessel generate FILE.model --checkpoint DIR [--prompt TEXT]  sample text\n"
          "  tessel estimate FILE.model --cluster h100-sxm  predicted step time, MFU\n"
          "  tessel calibrate -o cpu.cluster       measure this machine as a cluster file\n"
          "  tessel tune FILE.model --cluster h100-sxm --gpus 1024  the fastest layouts\n"
          "  tessel kernels [--markdown]           the kernels a plan calls\n"
          "  tessel import-hf DIR -o NAME.model    a spec that starts from a Hugging Face "
          "model\n"
          "  tessel tokenize --tokenizer DIR IN... -o OUT.bin  text to a token file\n\n"
          "  tessel <command> --help shows a command's options.\n",
          &errs()))
    return 2;
  if (checkCommand)
    return runCheck(argv[0]);
  if (compileCommand)
    return runCompile(argv[0]);
  if (runCommand)
    return runRun(argv[0], {});
  if (generateCommand)
    return runRun(argv[0], {"--generate"});
  if (estimateCommand)
    return runEstimate(argv[0]);
  if (calibrateCommand)
    return runCalibrate(argv[0]);
  if (tuneCommand)
    return runTune(argv[0]);
  if (importHfRequested())
    return runImportHf();
  if (tokenizeRequested())
    return runTokenize();
  if (kernelsCommand) {
    outs() << (kernelsMarkdown ? catalogue::markdownTable() : catalogue::textTable());
    return 0;
  }
  errs() << "tessel: no command given; try 'tessel --help'\n";
  return 2;
}
