//===- PassDiagnostics.h - Pass diagnostics as front-end errors -*- C++ -*-===//
//
// The passes report problems as MLIR diagnostics on ops whose locations are the spec's text.
// The driver routes them into the front end's DiagnosticEngine, so that they print like every
// other error in a .model file: file:line:col, the quoted line and a caret, a note at each
// block call that instantiated the op, and ops named as the spec writes them (`*`, `mean`),
// never as the IR does ('graph.mul').
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TOOLS_PASSDIAGNOSTICS_H
#define TESSEL_TOOLS_PASSDIAGNOSTICS_H

#include "tessel/Frontend/Diagnostics.h"

#include "mlir/IR/Diagnostics.h"

#include <set>
#include <string>
#include <tuple>

namespace tessel {

/// While alive, every diagnostic emitted in `context` goes to `diags` instead of stderr.
class PassDiagnostics : public mlir::ScopedDiagnosticHandler {
public:
  PassDiagnostics(mlir::MLIRContext &context, const SourceManager &sources,
                  DiagnosticEngine &diags);

private:
  void report(mlir::Diagnostic &diag);

  const SourceManager &sources_;
  DiagnosticEngine &diags_;
  /// The severity and spec location (file, line, column) of each error and warning reported.
  std::set<std::tuple<int, int, uint32_t, uint32_t>> reported_;
};

/// `message` with IR op names replaced by the spec's spelling: "'graph.mul' op reads ..."
/// becomes "`*` reads ...".
std::string inUserTerms(const std::string &message);

} // namespace tessel

#endif // TESSEL_TOOLS_PASSDIAGNOSTICS_H
