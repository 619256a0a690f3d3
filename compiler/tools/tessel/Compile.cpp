//===- Compile.cpp - tessel compile ---------------------------------------===//
//
// `tessel compile FILE.model` writes what `--emit` names: the syntax tree, the IR of a stage, the
// binary plan the runtime loads or, the default with -o, an executable that trains the model
// (the runner with the plan appended), followed by a line on what the plan holds.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"

#include "common/plan/Executable.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "mlir/Support/FileUtilities.h"

#include <sstream>

using namespace llvm;

namespace tessel::driver {

namespace {

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

} // namespace

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

} // namespace tessel::driver
