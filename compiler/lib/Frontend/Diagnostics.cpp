//===- Diagnostics.cpp - Located errors for the spec language -------------===//

#include "tessel/Frontend/Diagnostics.h"

#include <algorithm>
#include <sstream>

namespace tessel {

void DiagnosticEngine::report(Severity severity, SourceLoc loc, std::string message,
                              std::string hint) {
  if (severity == Severity::Error)
    ++errors_;
  if (severity != Severity::Note) {
    droppingNotes_ = errors_ > kMaxRecordedErrors;
    if (droppingNotes_)
      return;
  } else if (droppingNotes_) {
    return;
  }
  diags_.push_back({severity, loc, std::move(message), std::move(hint)});
}

void DiagnosticEngine::error(SourceLoc loc, std::string message, std::string hint) {
  report(Severity::Error, loc, std::move(message), std::move(hint));
}

void DiagnosticEngine::warning(SourceLoc loc, std::string message, std::string hint) {
  report(Severity::Warning, loc, std::move(message), std::move(hint));
}

void DiagnosticEngine::note(SourceLoc loc, std::string message) {
  report(Severity::Note, loc, std::move(message), "");
}

// Control characters would garble the terminal when a binary file is quoted.
static std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text)
    out.push_back(c == '\t' ? ' ' : (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c));
  return out;
}

std::string DiagnosticEngine::format(const Diagnostic &diag) const {
  static const char *kinds[] = {"error", "warning", "note"};
  std::ostringstream os;
  const char *kind = kinds[static_cast<int>(diag.severity)];
  if (!diag.loc.isValid()) {
    os << "tessel: " << kind << ": " << diag.message << "\n";
  } else {
    const SourceFile &file = sources_.file(diag.loc.file);
    os << file.path() << ":" << diag.loc.line << ":" << diag.loc.col << ": " << kind << ": "
       << diag.message << "\n";
    std::string_view line = file.line(diag.loc.line);
    // Very long lines (minified or generated input) are cut around the column.
    size_t start = 0;
    constexpr size_t kWidth = 160;
    if (line.size() > kWidth && diag.loc.col > kWidth / 2)
      start = std::min<size_t>(diag.loc.col - 1 - kWidth / 2, line.size());
    std::string shown = printable(line.substr(start, kWidth));
    std::string number = std::to_string(diag.loc.line);
    os << " " << number << " | " << (start ? "..." : "") << shown << "\n";
    os << " " << std::string(number.size(), ' ') << " | " << (start ? "   " : "");
    size_t col = diag.loc.col >= 1 + start ? diag.loc.col - 1 - start : 0;
    col = std::min(col, shown.size());
    size_t len = std::max<uint32_t>(1, diag.loc.length);
    len = std::min(len, std::max<size_t>(1, shown.size() - std::min(col, shown.size())));
    os << std::string(col, ' ') << "^" << std::string(len - 1, '~') << "\n";
  }
  if (!diag.hint.empty())
    os << "hint: " << diag.hint << "\n";
  return os.str();
}

void DiagnosticEngine::print(std::ostream &os) const {
  for (const Diagnostic &d : diags_)
    os << format(d);
  if (errors_ > kMaxRecordedErrors)
    os << "tessel: " << errors_ << " errors in all; only the first " << kMaxRecordedErrors
       << " are shown\n";
}

static size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closestMatch(const std::string &name, const std::vector<std::string> &candidates) {
  std::string best;
  size_t bestDistance = std::max<size_t>(1, name.size() / 3) + 1;
  for (const std::string &c : candidates) {
    if (c == name || c.size() > name.size() + 8)
      continue;
    // The lengths differ by no more than the edit distance: skip what cannot come closer.
    size_t gap = c.size() > name.size() ? c.size() - name.size() : name.size() - c.size();
    if (gap >= bestDistance)
      continue;
    size_t d = editDistance(name, c);
    if (d < bestDistance) {
      bestDistance = d;
      best = c;
    }
  }
  return best;
}

} // namespace tessel
