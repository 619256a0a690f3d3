//===- Loader.cpp - Reading a model file and its imports ------------------===//

#include "tessel/Frontend/Sema.h"

#include <set>
#include <sys/stat.h>

using namespace tessel;

namespace {

/// "" for a regular file; what else `path` is ("a directory", ...); or "missing".
std::string fileKind(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return "missing";
  if (S_ISREG(st.st_mode))
    return "";
  if (S_ISDIR(st.st_mode))
    return "a directory";
  if (S_ISFIFO(st.st_mode))
    return "a FIFO (named pipe)";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
    return "a device";
  if (S_ISSOCK(st.st_mode))
    return "a socket";
  return "a special file";
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

/// Collapses `a/./b` and `a/x/../b` so that one file imported along two paths is read once.
std::string normalize(const std::string &path) {
  std::vector<std::string> parts;
  bool absolute = !path.empty() && path[0] == '/';
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos)
      end = path.size();
    std::string part = path.substr(start, end - start);
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..")
        parts.pop_back();
      else if (!absolute)
        parts.push_back(part);
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    start = end + 1;
  }
  std::string out = absolute ? "/" : "";
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i ? "/" : "") + parts[i];
  return out.empty() ? "." : out;
}

class Loader {
public:
  Loader(SourceManager &sources, DiagnosticEngine &diags, const FrontendOptions &options)
      : sources_(sources), diags_(diags), options_(options) {}

  std::unique_ptr<ParsedModule> load(const std::string &path) {
    std::string error;
    int id = sources_.readFile(normalize(path), error);
    if (id < 0) {
      diags_.error({}, "cannot read '" + path + "': " + error);
      return nullptr;
    }
    return load(id);
  }

  std::unique_ptr<ParsedModule> load(int fileId) {
    module_ = std::make_unique<ParsedModule>();
    visit(fileId);
    return std::move(module_);
  }

private:
  void visit(int fileId) {
    active_.push_back(fileId);
    size_t index = module_->files.size();
    module_->files.push_back(parseFile(sources_, fileId, diags_, options_.limits));
    // Copy the list: recursion appends to module_->files and may move the vector's storage.
    std::vector<ast::Import> imports = module_->files[index]->imports;
    for (const ast::Import &imp : imports)
      visitImport(fileId, imp);
    active_.pop_back();
  }

  void visitImport(int fromFile, const ast::Import &imp) {
    if (imp.path.empty()) {
      diags_.error(imp.loc, "import of an empty path");
      return;
    }
    std::vector<std::string> candidates;
    if (imp.path[0] == '/') {
      candidates.push_back(imp.path);
    } else {
      candidates.push_back(directoryOf(sources_.file(fromFile).path()) + "/" + imp.path);
      for (const std::string &dir : options_.importPaths)
        candidates.push_back(dir + "/" + imp.path);
    }
    // A path that exists but is no file (a directory, a FIFO, which reading would block
    // on) is skipped like a missing one, and named if no later candidate is a file.
    std::string notAFile, notAFileKind;
    for (const std::string &raw : candidates) {
      std::string candidate = normalize(raw);
      std::string kind = fileKind(candidate);
      if (!kind.empty()) {
        if (kind != "missing" && notAFile.empty()) {
          notAFile = candidate;
          notAFileKind = kind;
        }
        continue;
      }
      int existing = sources_.findFile(candidate);
      if (existing >= 0) {
        for (int active : active_)
          if (active == existing) {
            diags_.error(imp.loc, "import cycle: '" + imp.path + "' imports this file again",
                         "move the shared blocks into a third file that both import");
            return;
          }
        return; // Already loaded through another import.
      }
      std::string error;
      int id = sources_.readFile(candidate, error);
      if (id < 0) {
        diags_.error(imp.loc, "cannot read '" + candidate + "': " + error);
        return;
      }
      if (active_.size() > 64) {
        diags_.error(imp.loc, "imports nested more than 64 deep");
        return;
      }
      visit(id);
      return;
    }
    if (!notAFile.empty()) {
      diags_.error(imp.loc, "cannot import '" + imp.path + "': '" + notAFile + "' is " +
                                notAFileKind + ", not a .model file");
      return;
    }
    std::string searched;
    for (const std::string &c : candidates)
      searched += (searched.empty() ? "" : ", ") + normalize(c);
    diags_.error(imp.loc, "cannot find imported file '" + imp.path + "'",
                 "searched " + searched + "; add directories with -I");
  }

  SourceManager &sources_;
  DiagnosticEngine &diags_;
  const FrontendOptions &options_;
  std::unique_ptr<ParsedModule> module_;
  std::vector<int> active_;
};

} // namespace

std::unique_ptr<ParsedModule> tessel::loadModule(const std::string &path, SourceManager &sources,
                                                 DiagnosticEngine &diags,
                                                 const FrontendOptions &options) {
  return Loader(sources, diags, options).load(path);
}

std::unique_ptr<ParsedModule> tessel::loadModule(int fileId, SourceManager &sources,
                                                 DiagnosticEngine &diags,
                                                 const FrontendOptions &options) {
  return Loader(sources, diags, options).load(fileId);
}
