//===- AtomicFile.h - Whole-file reads and crash-safe writes ----*- C++ -*-===//
//
// A file written here is either the old one or the complete new one, even if the process or
// the machine dies mid-write: the bytes go to `<path>.tmp-<pid>`, are fsynced, renamed over
// `<path>`, and the directory is fsynced so the rename itself is durable. Checkpoints use the
// same idea for whole directories.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_SUPPORT_ATOMICFILE_H
#define TESSEL_RUNTIME_SUPPORT_ATOMICFILE_H

#include <cstddef>
#include <functional>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessel::rt {

/// What a file of this mode is, in words ("a FIFO (named pipe)"), for refusals.
const char *fileKindOf(unsigned mode);

/// Opens `path` for reading without blocking on a FIFO, and requires a regular file of at most
/// `maxBytes`: a FIFO, a device, a directory or a file past the limit is refused with what it
/// is, before anything is read. The descriptor (to close), or -1 with the reason naming the
/// path; `bytes` is the file's size.
int openRegularFile(const std::string &path, uint64_t maxBytes, uint64_t &bytes,
                    std::string &error);

/// Reads the whole regular file at `path`, of at most `maxBytes`, into `out` (openRegularFile's
/// checks first). Errors name the path ("cannot open X: reason").
bool readWholeFile(const std::string &path, uint64_t maxBytes, std::string &out,
                   std::string &error);

/// Writes all `size` bytes to `fd`, retrying short writes and EINTR; on failure `error` is the
/// system's reason (without a path).
bool writeAll(int fd, const void *data, size_t size, std::string &error);

/// Produces a file's contents into `fd` (with writeAll); on failure sets `error` to a reason
/// without the path, which the caller adds.
using FileProducer = std::function<bool(int fd, std::string &error)>;

/// Writes `<path>.tmp-<pid>` with `produce`, fsyncs it, renames it over `path` and fsyncs the
/// directory. On failure the temporary file is removed, `path` is untouched, and `error` names
/// the path.
bool writeFileAtomically(const std::string &path, const FileProducer &produce, std::string &error);
bool writeFileAtomically(const std::string &path, std::string_view bytes, std::string &error);

/// fsyncs a directory, making renames and creations inside it durable.
bool fsyncDirectory(const std::string &dir, std::string &error);

/// Puts the complete directory `tempDir` in place of `finalDir` (a sibling of it): a plain
/// rename when `finalDir` does not exist; otherwise the two are swapped atomically
/// (renameat2 RENAME_EXCHANGE, or two renames where the file system lacks it) and the old
/// contents are deleted. The parent directory is fsynced. When the rename fails, `tempDir`
/// and `finalDir` are left as they were; when only the final fsync fails, `finalDir` already
/// holds the new contents.
bool replaceDirectoryAtomically(const std::string &tempDir, const std::string &finalDir,
                                std::string &error);

/// ".tmp-<pid>": the suffix of this process's temporary files and directories.
std::string tempSuffix();

/// Removes the temporary files and directories in `dir` (names ending in ".tmp-<pid>") that
/// writes interrupted by a crash or a kill left behind: those of processes that no longer run.
/// Returns how many were removed.
int removeStaleTemporaries(const std::string &dir);

/// The directory holding `path` ("." for a bare name).
std::string parentDirectory(const std::string &path);

/// Makes `dir` usable for output before any work: creates it and its parents, and checks it is
/// a writable directory. `what` names it in the error ("checkpoint directory", ...).
bool prepareOutputDirectory(const std::string &dir, const std::string &what, std::string &error);

/// Makes `path` writable as an output file before any work: creates its parent directories and
/// refuses a path that is a directory or whose parent is not a writable directory.
bool prepareOutputFile(const std::string &path, const std::string &what, std::string &error);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_SUPPORT_ATOMICFILE_H
