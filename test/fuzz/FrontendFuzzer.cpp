//===- FrontendFuzzer.cpp - libFuzzer target for the .model front end -----===//
//
// Feeds arbitrary bytes through parsing, import resolution and semantic analysis. Any crash,
// sanitizer report, hang or memory blow-up is a bug: bad input must only ever produce
// diagnostics. Imports resolve against the Tessel library root so seeds that import std/ are
// analysed in full.
//
//===----------------------------------------------------------------------===//

#include "tessel/Frontend/Sema.h"

#include <sstream>

#ifndef TESSEL_LIBRARY_ROOT
#define TESSEL_LIBRARY_ROOT "."
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace tessel;
  SourceManager sources;
  DiagnosticEngine diags(sources);
  FrontendOptions options;
  options.importPaths.push_back(TESSEL_LIBRARY_ROOT);
  // Keep single inputs fast enough for the fuzzer's time budget.
  options.maxOps = 200'000;
  int id = sources.addFile(TESSEL_LIBRARY_ROOT "/examples/fuzz-input.model",
                           std::string(reinterpret_cast<const char *>(data), size));
  auto module = loadModule(id, sources, diags, options);
  if (module)
    analyze(*module, sources, diags, options);
  std::ostringstream sink;
  diags.print(sink);
  return 0;
}
