//===- Run.cpp - tessel run and tessel generate ---------------------------===//
//
// `tessel run FILE.model [OPTIONS]` compiles the model to a temporary plan and trains it with the
// runner installed beside tessel; `tessel generate` does the same with --generate, to sample
// text from a checkpoint. Options after the model file that tessel does not know are passed to
// the runner.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"

using namespace llvm;

namespace tessel::driver {

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

} // namespace tessel::driver
