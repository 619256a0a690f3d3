//===- Commands.h - The tessel driver's commands and what they share -*- C++ -*-===//
//
// `tessel` is one program of several commands: check, compile, run and generate, estimate,
// calibrate, tune and kernels, each in a file of its own (Check.cpp, Compile.cpp, Run.cpp,
// Estimate.cpp, Calibrate.cpp, Tune.cpp, Kernels.cpp) that tessel.cpp's main dispatches to.
// This header declares them, the command-line options they read (all defined in Options.cpp),
// and what they share: reading the spec and lowering it to IR or a plan (Lower.cpp), and
// finding and writing files (Files.cpp).
//
// Every command returns the exit code: 0 success, 1 errors in the input, 2 usage or I/O
// errors.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TOOLS_TESSEL_COMMANDS_H
#define TESSEL_TOOLS_TESSEL_COMMANDS_H

#include "common/cluster/Cluster.h"
#include "common/plan/PlanFile.h"
#include "tessel/Frontend/Sema.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessel::driver {

//===----------------------------------------------------------------------===//
// The command line (Options.cpp)
//===----------------------------------------------------------------------===//

/// The category of the options the commands share; --help hides every option outside it.
extern llvm::cl::OptionCategory category;

extern llvm::cl::SubCommand checkCommand;
extern llvm::cl::SubCommand compileCommand;
extern llvm::cl::SubCommand runCommand;
extern llvm::cl::SubCommand generateCommand;
extern llvm::cl::SubCommand estimateCommand;
extern llvm::cl::SubCommand calibrateCommand;
extern llvm::cl::SubCommand tuneCommand;
extern llvm::cl::SubCommand kernelsCommand;

// tessel calibrate.
extern llvm::cl::opt<std::string> calibrateOutput;
extern llvm::cl::opt<int> calibrateThreads;
extern llvm::cl::opt<int> calibrateRanks;
extern llvm::cl::opt<bool> calibrateQuick;
extern llvm::cl::opt<bool> calibrateMpi;
extern llvm::cl::opt<std::string> calibrateModel;

// tessel tune.
extern llvm::cl::opt<std::string> tuneCluster;
extern llvm::cl::opt<int> tuneGpus;
extern llvm::cl::opt<unsigned> tuneTop;
extern llvm::cl::opt<bool> tuneJson;
extern llvm::cl::opt<std::string> tuneLayout;
extern llvm::cl::opt<std::string> tuneWrite;
extern llvm::cl::opt<std::string> tuneSvg;

// tessel kernels.
extern llvm::cl::opt<bool> kernelsMarkdown;

// tessel estimate.
extern llvm::cl::opt<bool> estimateJsonOutput;
extern llvm::cl::opt<std::string> estimateTrace;
extern llvm::cl::opt<std::string> estimateCluster;
extern llvm::cl::opt<std::string> estimateSvg;
extern llvm::cl::opt<std::string> estimateMemorySvg;
extern llvm::cl::opt<std::string> estimateMemoryTrace;
extern llvm::cl::opt<int64_t> estimateMemoryRank;
extern llvm::cl::opt<int> estimateMemorySteps;

// Shared by the commands that read a .model file.
extern llvm::cl::opt<std::string> inputFile;
extern llvm::cl::list<std::string> runnerArgs; ///< run, generate: the compiled model's options.
extern llvm::cl::list<std::string> importDirs;
extern llvm::cl::opt<int64_t> ranks;

enum class Fuse { On, Off };
extern llvm::cl::opt<Fuse> fuse;
extern llvm::cl::opt<Fuse> fuseLoss;
extern llvm::cl::opt<bool> timePasses;
extern llvm::cl::opt<bool> verifyEach;
extern llvm::cl::opt<int64_t> lossChunk;

/// The stages `tessel compile --emit` stops at, in pipeline order.
enum class Emit { Ast, Graph, Train, Sharded, Plan, Decode, DecodePlan, PlanFile, Exe };
extern llvm::cl::opt<Emit> emit;
extern llvm::cl::list<int64_t> decodeBatches;
extern llvm::cl::opt<int64_t> prefillTokens;
extern llvm::cl::opt<int64_t> kvBlock;
extern llvm::cl::opt<int64_t> kvBlocks;
extern llvm::cl::opt<std::string> outputFile;

//===----------------------------------------------------------------------===//
// Reading and lowering the spec (Lower.cpp)
//===----------------------------------------------------------------------===//

struct Frontend {
  SourceManager sources;
  DiagnosticEngine diags{sources};
  FrontendOptions options;
  std::unique_ptr<ParsedModule> module;
  size_t printed = 0; ///< Diagnostics printed so far; each stage prints what it added.
};

/// Parses the input and its imports; prints diagnostics. Returns false on errors.
bool load(Frontend &fe, const char *argv0);
/// Prints the diagnostics not printed yet; returns 1 when there are errors, else 0.
int finish(Frontend &fe);
/// Lowers the analysed program through every stage up to `until`; prints IR stages to `os`
/// unless it is null. The passes' errors and warnings are printed as the front end's are, at
/// the spec's text and in its terms. Returns the exit code; fills `plan` when `until` is past
/// the plan dialect.
int lower(const Program &program, Frontend &fe, Emit until, llvm::raw_ostream *os,
          planfile::Plan *plan);
/// Loads, checks and compiles the input file into `plan`; returns the exit code on failure.
int compileToPlan(const char *argv0, planfile::Plan &plan, ParameterCounts *counts = nullptr);

//===----------------------------------------------------------------------===//
// Files (Files.cpp)
//===----------------------------------------------------------------------===//

/// The compiled-model runner installed beside this binary.
std::string runnerPath(const char *argv0);
/// A program installed beside this binary.
std::string siblingPath(const char *argv0, llvm::StringRef name);
/// Where `std/` lives: beside an installed binary, else the source tree it was built from.
std::string libraryRoot(const char *argv0);
/// Creates the directories `path` will be written in. Refuses it (printing why) when one of
/// them cannot be made, e.g. because a file of that name is in the way, so that a run that
/// would fail to write its output fails before any work.
bool prepareOutputPath(const std::string &path);
/// Writes `bytes` to `path` through a temporary file, so an interrupted write never leaves
/// a half-written executable or plan behind.
bool writeOutput(const std::string &path, const std::vector<uint8_t> &bytes, bool executable);
/// Reads the cluster `spec` names: a file, or a preset of the library's clusters/ folder.
/// Prints why and returns false when there is none or it is malformed.
bool loadCluster(const char *argv0, const std::string &spec, cluster::Cluster &out);

//===----------------------------------------------------------------------===//
// The commands
//===----------------------------------------------------------------------===//

/// tessel check: every error of the input, or a one-line summary of the model.
int runCheck(const char *argv0);
/// tessel compile: a stage's IR, the plan file or an executable that trains the model.
int runCompile(const char *argv0);
/// tessel run and generate: compiles the model to a temporary plan and runs the runner on it
/// with `extraArgs` first.
int runRun(const char *argv0, llvm::ArrayRef<llvm::StringRef> extraArgs);
/// The command line with the runner's options of `tessel run` and `tessel generate` moved
/// behind a "--", where the parser takes every argument as positional (a runner argument).
/// Options after the model file that tessel does not know are the runner's, so that
/// `tessel run X.model --steps 150` needs no "--". Returns false (having said why) for an
/// option before the model file that neither knows.
bool separateRunnerArgs(int argc, char **argv, std::vector<const char *> &out);
/// tessel estimate: the memory per rank and communication per step the layout implies.
int runEstimate(const char *argv0);
/// tessel calibrate: this machine, measured, as a cluster file.
int runCalibrate(const char *argv0);
/// tessel tune: the fastest layouts of the model that fit a cluster's memory.
int runTune(const char *argv0);
/// tessel kernels: the kernel catalogue.
int runKernels();

} // namespace tessel::driver

#endif // TESSEL_TOOLS_TESSEL_COMMANDS_H
