//===- Source.h - Source files and locations in them ------------*- C++ -*-===//
//
// The front end keeps every file it reads (the model, its imports) so that diagnostics can
// quote the offending line long after parsing, and so that IR locations name the user's text.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_FRONTEND_SOURCE_H
#define TESSEL_FRONTEND_SOURCE_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

/// A position in a source file: 1-based line and column; `length` is the number of characters
/// the caret underline covers (at least 1).
struct SourceLoc {
  int file = -1;
  uint32_t line = 0;
  uint32_t col = 0;
  uint32_t length = 1;

  bool isValid() const { return file >= 0; }
};

/// One file's path and text.
class SourceFile {
public:
  SourceFile(std::string path, std::string text);

  const std::string &path() const { return path_; }
  const std::string &text() const { return text_; }
  /// The text of 1-based line `line`, without its newline; empty when out of range.
  std::string_view line(uint32_t line) const;
  uint32_t lineCount() const { return static_cast<uint32_t>(lineStarts_.size()); }

private:
  std::string path_;
  std::string text_;
  std::vector<size_t> lineStarts_;
};

/// Owns every file read during one compilation.
class SourceManager {
public:
  /// Adds a file that is already in memory and returns its id.
  int addFile(std::string path, std::string text);
  /// Reads a file from disk. Returns its id, or -1 with `error` set.
  int readFile(const std::string &path, std::string &error);
  /// The id of an already loaded file with this canonical path, or -1.
  int findFile(const std::string &path) const;

  const SourceFile &file(int id) const { return *files_.at(id); }
  size_t size() const { return files_.size(); }

private:
  std::vector<std::unique_ptr<SourceFile>> files_;
};

} // namespace tessel

#endif // TESSEL_FRONTEND_SOURCE_H
