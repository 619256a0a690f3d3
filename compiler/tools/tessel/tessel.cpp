//===- tessel.cpp - The Tessel driver -------------------------------------===//
//
//   tessel check model.model              report every error, or a summary
//   tessel compile model.model -o model   an executable that trains the model
//   tessel compile model.model --emit=graph|train|sharded|plan|plan-file
//   tessel run model.model [runner options]
//
// Exit codes: 0 success, 1 errors in the input, 2 usage or I/O errors.
//
// This file parses the command line and hands it to the command it names; each command is a
// file of its own (Commands.h lists them), and import-hf and tokenize are ImportHf.cpp's and
// Tokenize.cpp's.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "ImportHf.h"
#include "OutOfMemory.h"
#include "Tokenize.h"

#include "common/support/Version.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace tessel;
using namespace tessel::driver;

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
  if (kernelsCommand)
    return runKernels();
  errs() << "tessel: no command given; try 'tessel --help'\n";
  return 2;
}
