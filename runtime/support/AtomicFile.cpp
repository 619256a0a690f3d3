//===- AtomicFile.cpp - Whole-file reads and crash-safe writes ------------===//

#include "runtime/support/AtomicFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <csignal>
#include <sys/stat.h>
#include <vector>
#include <unistd.h>

namespace tessel::rt {

namespace {
/// Closes a file descriptor when it goes out of scope.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0)
      ::close(fd);
  }
};
} // namespace

std::string tempSuffix() { return ".tmp-" + std::to_string(::getpid()); }

int removeStaleTemporaries(const std::string &dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec)
    return 0;
  std::vector<fs::path> stale;
  for (const fs::directory_entry &entry : it) {
    std::string name = entry.path().filename().string();
    size_t at = name.rfind(".tmp-");
    if (at == std::string::npos || at + 5 == name.size() || name.size() - at > 5 + 10)
      continue;
    std::string digits = name.substr(at + 5);
    if (digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    long pid = std::stol(digits);
    // kill(pid, 0) fails with ESRCH exactly when no process has that id. This process's own
    // temporaries are its writers' business (they replace them as they go).
    if (pid > 0 && pid != static_cast<long>(::getpid()) &&
        ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      stale.push_back(entry.path());
  }
  int removed = 0;
  for (const fs::path &path : stale)
    if (fs::remove_all(path, ec) > 0 && !ec)
      ++removed;
  return removed;
}

std::string parentDirectory(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

bool prepareOutputDirectory(const std::string &dir, const std::string &what, std::string &error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    error = "cannot create " + what + " " + dir + ": " + ec.message();
    return false;
  }
  if (!fs::is_directory(dir, ec)) {
    error = what + " " + dir + " is not a directory";
    return false;
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    error = "cannot write to " + what + " " + dir + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

bool prepareOutputFile(const std::string &path, const std::string &what, std::string &error) {
  namespace fs = std::filesystem;
  if (path.empty() || path.back() == '/') {
    error = what + " '" + path + "' names no file";
    return false;
  }
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    error = what + " " + path + " is a directory";
    return false;
  }
  std::string dir = parentDirectory(path);
  if (!prepareOutputDirectory(dir, "the directory of " + what, error))
    return false;
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0) {
    error = "cannot write " + what + " " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

const char *fileKindOf(unsigned mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISFIFO(mode))
    return "a FIFO (named pipe)";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

int openRegularFile(const std::string &path, uint64_t maxBytes, uint64_t &bytes,
                    std::string &error) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer; nothing is read from one.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open " + path + ": " + std::strerror(errno);
    return -1;
  }
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    error = "cannot read " + path + ": " + std::strerror(errno);
  } else if (!S_ISREG(info.st_mode)) {
    error = "cannot read " + path + ": it is " + fileKindOf(info.st_mode) +
            ", not a regular file";
  } else if (static_cast<uint64_t>(info.st_size) > maxBytes) {
    error = "cannot read " + path + ": it is " + std::to_string(info.st_size) +
            " bytes, over the " + std::to_string(maxBytes) + " such a file may hold";
  } else {
    bytes = static_cast<uint64_t>(info.st_size);
    // Reads block again, as on any regular file.
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
  }
  ::close(fd);
  return -1;
}

bool readWholeFile(const std::string &path, uint64_t maxBytes, std::string &out,
                   std::string &error) {
  uint64_t bytes = 0;
  int fd = openRegularFile(path, maxBytes, bytes, error);
  if (fd < 0)
    return false;
  FdCloser closer{fd};
  out.clear();
  out.reserve(static_cast<size_t>(bytes));
  char buffer[1 << 16];
  while (true) {
    ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      error = "cannot read " + path + ": " + std::strerror(errno);
      return false;
    }
    if (got == 0)
      return true;
    // A file that grows while it is read stops at the limit too.
    if (out.size() + static_cast<size_t>(got) > maxBytes) {
      error = "cannot read " + path + ": it grew past the " + std::to_string(maxBytes) +
              " bytes such a file may hold";
      return false;
    }
    out.append(buffer, static_cast<size_t>(got));
  }
}

bool writeAll(int fd, const void *data, size_t size, std::string &error) {
  const char *bytes = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t wrote = ::write(fd, bytes, size);
    if (wrote < 0 && errno == EINTR)
      continue;
    if (wrote < 0) {
      error = std::strerror(errno);
      return false;
    }
    bytes += wrote;
    size -= static_cast<size_t>(wrote);
  }
  return true;
}

bool fsyncDirectory(const std::string &dir, std::string &error) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open directory " + dir + ": " + std::strerror(errno);
    return false;
  }
  FdCloser closer{fd};
  if (::fsync(fd) != 0 && errno != EINVAL) { // Some file systems cannot sync directories.
    error = "cannot sync directory " + dir + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

bool writeFileAtomically(const std::string &path, const FileProducer &produce, std::string &error) {
  std::string temp = path + tempSuffix();
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = "cannot create " + temp + ": " + std::strerror(errno);
    return false;
  }
  std::string reason;
  bool ok = produce(fd, reason);
  if (ok && ::fsync(fd) != 0) {
    reason = std::string("fsync failed: ") + std::strerror(errno);
    ok = false;
  }
  if (::close(fd) != 0 && ok) {
    reason = std::string("close failed: ") + std::strerror(errno);
    ok = false;
  }
  if (ok && ::rename(temp.c_str(), path.c_str()) != 0) {
    reason = "cannot rename " + temp + " to it: " + std::strerror(errno);
    ok = false;
  }
  if (!ok) {
    ::unlink(temp.c_str());
    error = "cannot write " + path + ": " + reason;
    return false;
  }
  return fsyncDirectory(parentDirectory(path), error);
}

bool writeFileAtomically(const std::string &path, std::string_view bytes, std::string &error) {
  return writeFileAtomically(
      path,
      [&](int fd, std::string &reason) { return writeAll(fd, bytes.data(), bytes.size(), reason); },
      error);
}

bool replaceDirectoryAtomically(const std::string &tempDir, const std::string &finalDir,
                                std::string &error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(finalDir, ec))) {
    if (::rename(tempDir.c_str(), finalDir.c_str()) != 0) {
      error = "cannot rename " + tempDir + " to " + finalDir + ": " + std::strerror(errno);
      return false;
    }
    return fsyncDirectory(parentDirectory(finalDir), error);
  }
  // The destination exists (the same step saved again): swap the two, so that at every moment
  // `finalDir` is one complete version, then delete the old one from its new place.
  std::string oldDir = tempDir;
  if (::renameat2(AT_FDCWD, tempDir.c_str(), AT_FDCWD, finalDir.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS) {
      error = "cannot swap " + tempDir + " with " + finalDir + ": " + std::strerror(errno);
      return false;
    }
    // No RENAME_EXCHANGE on this file system: move the old one aside, then the new one in.
    std::string name = finalDir.substr(finalDir.find_last_of('/') + 1);
    oldDir = parentDirectory(finalDir) + "/." + name + ".old" + tempSuffix();
    fs::remove_all(oldDir, ec);
    if (::rename(finalDir.c_str(), oldDir.c_str()) != 0) {
      error = "cannot move " + finalDir + " aside: " + std::strerror(errno);
      return false;
    }
    if (::rename(tempDir.c_str(), finalDir.c_str()) != 0) {
      error = "cannot rename " + tempDir + " to " + finalDir + ": " + std::strerror(errno);
      ::rename(oldDir.c_str(), finalDir.c_str());
      return false;
    }
  }
  fs::remove_all(oldDir, ec);
  return fsyncDirectory(parentDirectory(finalDir), error);
}

} // namespace tessel::rt
