//===- TokenFileWriter.h - Writing token files -------------------*- C++ -*-===//
//
// The files `tessel tokenize` writes, in the formats of common/data/TokenFiles.h: llm.c's token
// streams (documents one after another) and Tessel's example files (one row per example, with a
// loss mask). Either is written to a temporary file beside its path and renamed over it when
// whole, so an interrupted run leaves no partial file under the name.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TOOLS_TOKENFILEWRITER_H
#define TESSEL_TOOLS_TOKENFILEWRITER_H

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

class TokenFileWriter {
public:
  enum class Kind { Stream, Examples };
  /// `wide`: uint32 ids (a vocabulary over 65536), else uint16. `padId` fills an example
  /// file's rows past their examples.
  TokenFileWriter(std::string path, bool wide, Kind kind, uint32_t padId = 0);
  ~TokenFileWriter();

  bool open(std::string &error);
  /// A stream's next document.
  bool append(const std::vector<uint32_t> &ids, std::string &error);
  /// An example file's next example: `trained[i]` is 1 where ids[i] is a trained target
  /// (trained[0] is 0).
  bool appendExample(const std::vector<uint32_t> &ids, const std::vector<uint8_t> &trained,
                     std::string &error);
  bool finish(std::string &error);

  uint64_t count() const { return count_; }
  uint64_t examples() const { return starts_.empty() ? 0 : starts_.size() - 1; }
  const std::string &path() const { return path_; }

private:
  void encode(const std::vector<uint32_t> &ids);

  std::string path_;
  bool wide_;
  Kind kind_;
  uint32_t padId_;
  std::optional<llvm::sys::fs::TempFile> temp_;
  std::unique_ptr<llvm::raw_fd_ostream> out_;
  std::string bytes_;            ///< Encoded ids: a stream's last document, or every example's.
  std::vector<uint64_t> starts_; ///< An example file's starts, and its mask.
  std::vector<uint8_t> mask_;
  uint64_t count_ = 0;
};

} // namespace tessel

#endif // TESSEL_TOOLS_TOKENFILEWRITER_H
