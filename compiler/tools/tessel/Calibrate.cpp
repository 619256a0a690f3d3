//===- Calibrate.cpp - tessel calibrate -----------------------------------===//
//
// `tessel calibrate` measures this machine as a cluster file: GEMM, attention and memory
// bandwidth, and the collectives between ranks. The measuring is tessel-calibrate's, a program
// installed beside tessel, since the kernels and communicators it times are the runtime's,
// which the compiler does not link; with --model, it also times the GEMM shapes of a model's
// plan.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <cstdio>

using namespace llvm;

namespace tessel::driver {

namespace {

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

} // namespace

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

} // namespace tessel::driver
