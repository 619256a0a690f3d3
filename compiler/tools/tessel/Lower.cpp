//===- Lower.cpp - From a .model file to IR or a plan ---------------------===//
//
// Every command that reads a spec goes through here: load() parses it and its imports,
// finish() prints what the front end reported, and lower() runs the passes from the graph
// dialect to the stage a command asks for, with their diagnostics printed at the spec's text
// (PassDiagnostics.cpp). compileToPlan() is the three in a row, for the commands that need a
// plan and nothing before it.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "PassDiagnostics.h"

#include "tessel/IRGen/GraphGen.h"
#include "tessel/Pipelines/Pipelines.h"
#include "tessel/Target/PlanWriter.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"

#include <sys/resource.h>

#include <iostream>

using namespace llvm;

namespace tessel::driver {

namespace {

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
  if (!module)
    return 1; // The settings were refused (reported).
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
  if (!decoder)
    return 1;
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

} // namespace

bool load(Frontend &fe, const char *argv0) {
  fe.options.importPaths.assign(importDirs.begin(), importDirs.end());
  fe.options.importPaths.push_back(libraryRoot(argv0));
  fe.options.ranks = ranks;
  fe.module = loadModule(inputFile, fe.sources, fe.diags, fe.options);
  return fe.module != nullptr;
}

int finish(Frontend &fe) {
  fe.diags.print(std::cerr, fe.printed);
  fe.printed = fe.diags.diagnostics().size();
  return fe.diags.hasErrors() ? 1 : 0;
}

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

int compileToPlan(const char *argv0, planfile::Plan &plan, ParameterCounts *counts) {
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

} // namespace tessel::driver
