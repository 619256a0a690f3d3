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

// Control characters and bytes that are not UTF-8 would garble the terminal when a binary
// file is quoted. Each such byte becomes one character, so byte offsets are kept.
static std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool whole = n > 0 && i + n <= text.size();
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (size_t k = 1; whole && k < n; ++k) {
      unsigned char cc = static_cast<unsigned char>(text[i + k]);
      whole = (cc & 0xc0) == 0x80;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 either.
    if (whole && ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
                  cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)))
      whole = false;
    if (!whole) {
      out.push_back('?');
      ++i;
    } else if (n == 1) {
      out.push_back(c == '\t' ? ' ' : (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c));
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

// The number of characters (not bytes) in `text`: the columns it takes on a terminal.
static size_t displayWidth(std::string_view text) {
  size_t n = 0;
  for (unsigned char c : text)
    n += (c & 0xc0) != 0x80;
  return n;
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
    // Columns are bytes and lengths characters; a character such as 'é' takes one terminal
    // column, so the caret is placed by characters.
    size_t pad = displayWidth(std::string_view(shown).substr(0, col));
    size_t width = std::min<size_t>(std::max<uint32_t>(1, diag.loc.length),
                                    displayWidth(std::string_view(shown).substr(col)));
    width = std::max<size_t>(1, width);
    os << std::string(pad, ' ') << "^" << std::string(width - 1, '~') << "\n";
  }
  if (!diag.hint.empty())
    os << "hint: " << diag.hint << "\n";
  return os.str();
}

void DiagnosticEngine::print(std::ostream &os, size_t first) const {
  for (size_t i = first; i < diags_.size(); ++i)
    os << format(diags_[i]);
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
