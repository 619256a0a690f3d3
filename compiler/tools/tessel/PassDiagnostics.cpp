//===- PassDiagnostics.cpp - Pass diagnostics as front-end errors ---------===//

#include "PassDiagnostics.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/Location.h"

#include <cctype>
#include <regex>

using namespace mlir;
using namespace tessel;

namespace {

/// The file locations in `loc`, innermost first: the op's text, then each block call that
/// instantiated it (GraphGen nests them as call sites).
void fileLocations(Location loc, SmallVectorImpl<FileLineColLoc> &out) {
  if (auto c = dyn_cast<CallSiteLoc>(loc)) {
    fileLocations(c.getCallee(), out);
    fileLocations(c.getCaller(), out);
  } else if (auto n = dyn_cast<NameLoc>(loc)) {
    fileLocations(n.getChildLoc(), out);
  } else if (auto f = dyn_cast<FusedLoc>(loc)) {
    if (!f.getLocations().empty())
      fileLocations(f.getLocations().front(), out);
  } else if (auto f = dyn_cast<FileLineColLoc>(loc)) {
    out.push_back(f);
  }
}

bool isWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/// The word at `loc` in its file (a name, a number), or "".
std::string wordAt(const SourceManager &sources, SourceLoc loc) {
  if (!loc.isValid() || loc.col == 0)
    return "";
  std::string_view line = sources.file(loc.file).line(loc.line);
  size_t begin = loc.col - 1, end = begin;
  while (end < line.size() && isWordChar(line[end]))
    ++end;
  return begin < end ? std::string(line.substr(begin, end - begin)) : "";
}

/// The front end's location for `loc`, underlining the word there (an operator: one column).
SourceLoc toSourceLoc(const SourceManager &sources, FileLineColLoc loc) {
  SourceLoc out;
  out.file = sources.findFile(loc.getFilename().str());
  if (out.file < 0 || loc.getLine() == 0 || loc.getLine() > sources.file(out.file).lineCount())
    return SourceLoc();
  out.line = loc.getLine();
  out.col = loc.getColumn();
  out.length = std::max<uint32_t>(1, wordAt(sources, out).size());
  return out;
}

} // namespace

std::string tessel::inUserTerms(const std::string &message) {
  // "'graph.mul' op " as MLIR prefixes an op's errors, or a quoted or bare op name anywhere.
  static const std::regex opName(R"('?\b((graph|plan|shard|sched|func)\.[a-z_]+)\b'?( op\b)?)");
  std::string out;
  auto last = message.cbegin();
  for (std::sregex_iterator it(message.begin(), message.end(), opName), end; it != end; ++it) {
    out.append(last, message.cbegin() + it->position());
    out += graph::spelling((*it)[1].str());
    last = message.cbegin() + it->position() + it->length();
  }
  out.append(last, message.cend());
  return out;
}

PassDiagnostics::PassDiagnostics(MLIRContext &context, const SourceManager &sources,
                                 tessel::DiagnosticEngine &diags)
    : ScopedDiagnosticHandler(&context), sources_(sources), diags_(diags) {
  setHandler([this](mlir::Diagnostic &diag) {
    report(diag);
    return success();
  });
}

void PassDiagnostics::report(mlir::Diagnostic &diag) {
  SmallVector<FileLineColLoc> where;
  fileLocations(diag.getLocation(), where);
  SourceLoc loc = where.empty() ? SourceLoc() : toSourceLoc(sources_, where.front());
  // One report per mistake: an op of the spec becomes many in the IR (a copy per program, per
  // layer of a block, its gradient), and each may fail the same check. The first error or
  // warning at a spec location speaks for the others, as the front end's do.
  if (loc.isValid() && diag.getSeverity() != DiagnosticSeverity::Note &&
      diag.getSeverity() != DiagnosticSeverity::Remark) {
    const auto key =
        std::make_tuple(static_cast<int>(diag.getSeverity()), loc.file, loc.line, loc.col);
    if (!reported_.insert(key).second)
      return;
  }
  std::string message = inUserTerms(diag.str());
  switch (diag.getSeverity()) {
  case DiagnosticSeverity::Error:
    diags_.error(loc, message);
    break;
  case DiagnosticSeverity::Warning:
    diags_.warning(loc, message);
    break;
  case DiagnosticSeverity::Note:
  case DiagnosticSeverity::Remark:
    diags_.note(loc, message);
    break;
  }
  // As the front end reports a mistake inside a block: a note at each call, innermost first.
  for (size_t i = 1; i < where.size(); ++i) {
    SourceLoc call = toSourceLoc(sources_, where[i]);
    std::string name = wordAt(sources_, call);
    diags_.note(call,
                name.empty() ? "in a block called here" : "in block '" + name + "' called here");
  }
  for (mlir::Diagnostic &note : diag.getNotes()) {
    SmallVector<FileLineColLoc> at;
    fileLocations(note.getLocation(), at);
    diags_.note(at.empty() ? SourceLoc() : toSourceLoc(sources_, at.front()),
                inUserTerms(note.str()));
  }
}
