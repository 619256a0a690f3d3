//===- Files.cpp - Where the driver finds and writes files ----------------===//
//
// The programs installed beside `tessel` (the runner, tessel-calibrate), the library root that
// holds `std/` and the cluster presets, and the writing of outputs: directories made before any
// work, files written through a temporary so that none is left half-written.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace llvm;

namespace tessel::driver {

std::string runnerPath(const char *argv0) {
  std::string exe = sys::fs::getMainExecutable(argv0, reinterpret_cast<void *>(&runnerPath));
  SmallString<256> path(sys::path::parent_path(exe));
  sys::path::append(path, "tessel-runner");
  return std::string(path);
}

std::string siblingPath(const char *argv0, StringRef name) {
  std::string exe = sys::fs::getMainExecutable(argv0, reinterpret_cast<void *>(&siblingPath));
  SmallString<256> path(sys::path::parent_path(exe));
  sys::path::append(path, name);
  return std::string(path);
}

std::string libraryRoot(const char *argv0) {
  std::string exe = sys::fs::getMainExecutable(argv0, reinterpret_cast<void *>(&libraryRoot));
  SmallString<256> installed(sys::path::parent_path(sys::path::parent_path(exe)));
  sys::path::append(installed, "share", "tessel");
  if (sys::fs::is_directory(installed + "/std"))
    return std::string(installed);
  return TESSEL_LIBRARY_ROOT;
}

bool prepareOutputPath(const std::string &path) {
  if (path.empty() || path == "-")
    return true;
  StringRef parent = sys::path::parent_path(path);
  if (parent.empty() || sys::fs::is_directory(parent))
    return true;
  // The nearest ancestor that exists must be a directory.
  for (StringRef up = parent; !up.empty(); up = sys::path::parent_path(up)) {
    if (!sys::fs::exists(up))
      continue;
    if (!sys::fs::is_directory(up)) {
      errs() << "tessel: error: cannot write '" << path << "': '" << up
             << "' is a file, not a directory\n";
      return false;
    }
    break;
  }
  if (std::error_code ec = sys::fs::create_directories(parent)) {
    errs() << "tessel: error: cannot write '" << path << "': cannot create '" << parent
           << "': " << ec.message() << "\n";
    return false;
  }
  return true;
}

bool writeOutput(const std::string &path, const std::vector<uint8_t> &bytes, bool executable) {
  std::string tmp = path + ".tmp";
  {
    std::error_code ec;
    raw_fd_ostream out(tmp, ec, sys::fs::OF_None);
    if (ec) {
      errs() << "tessel: error: cannot write '" << path << "': " << ec.message() << "\n";
      return false;
    }
    out.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
    out.close();
    if (out.has_error()) {
      errs() << "tessel: error: cannot write '" << path << "': " << out.error().message() << "\n";
      sys::fs::remove(tmp);
      return false;
    }
  }
  if (executable)
    sys::fs::setPermissions(tmp, sys::fs::perms::all_read | sys::fs::perms::all_exe |
                                     sys::fs::perms::owner_write);
  if (std::error_code ec = sys::fs::rename(tmp, path)) {
    errs() << "tessel: error: cannot write '" << path << "': " << ec.message() << "\n";
    sys::fs::remove(tmp);
    return false;
  }
  return true;
}

bool loadCluster(const char *argv0, const std::string &spec, cluster::Cluster &out) {
  std::string path = spec;
  if (!sys::fs::exists(path)) {
    SmallString<256> preset(libraryRoot(argv0));
    sys::path::append(preset, "clusters", spec + ".cluster");
    if (!sys::fs::exists(preset)) {
      errs() << "tessel: error: no cluster '" << spec << "': neither a file nor a preset in "
             << sys::path::parent_path(preset) << "\n";
      return false;
    }
    path = std::string(preset);
  }
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    errs() << "tessel: error: cannot read '" << path << "': " << buffer.getError().message()
           << "\n";
    return false;
  }
  std::string error;
  if (!cluster::parseCluster((*buffer)->getBuffer().str(), path, out, error)) {
    errs() << error << "\n";
    return false;
  }
  return true;
}

} // namespace tessel::driver
