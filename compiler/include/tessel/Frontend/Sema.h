//===- Sema.h - Loading, checking and elaborating a .model file -*- C++ -*-===//
#ifndef TESSEL_FRONTEND_SEMA_H
#define TESSEL_FRONTEND_SEMA_H

#include "tessel/Frontend/AST.h"
#include "tessel/Frontend/Diagnostics.h"
#include "tessel/Frontend/Parser.h"
#include "tessel/Frontend/Program.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

struct FrontendOptions {
  /// Directories searched for `import`s after the importing file's own directory. The Tessel
  /// library root (which holds `std/`) is appended by the tools.
  std::vector<std::string> importPaths;
  /// The number of ranks the user asked for; 0 leaves the mesh size unchecked.
  int64_t ranks = 0;
  ParseLimits limits;
  /// Bounds on elaboration, so that `repeat 1000000000` is an error, not an hour of work.
  size_t maxOps = 500'000;
  int64_t maxRepeat = 100'000;
};

/// A parsed file and everything it imports, root first.
struct ParsedModule {
  std::vector<std::unique_ptr<ast::File>> files;
  const ast::File &root() const { return *files.front(); }
};

/// Reads and parses `path` and, transitively, its imports. Problems (missing files, cycles,
/// syntax errors) go to `diags`. Returns null only when the root file cannot be read.
std::unique_ptr<ParsedModule> loadModule(const std::string &path, SourceManager &sources,
                                         DiagnosticEngine &diags, const FrontendOptions &options);

/// As above, for a file already added to `sources` (used by the fuzzer and by tests that
/// compile text held in memory).
std::unique_ptr<ParsedModule> loadModule(int fileId, SourceManager &sources,
                                         DiagnosticEngine &diags, const FrontendOptions &options);

/// Checks the module and elaborates its model into a Program. Returns nothing when errors
/// were reported.
std::optional<Program> analyze(const ParsedModule &module, const SourceManager &sources,
                               DiagnosticEngine &diags, const FrontendOptions &options);

/// Writes the syntax tree of `file` in an indented, readable form (`--emit=ast`).
void printAst(const ast::File &file, const SourceManager &sources, std::ostream &os);

} // namespace tessel

#endif // TESSEL_FRONTEND_SEMA_H
