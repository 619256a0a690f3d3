//===- Data.cpp - Opening training and evaluation tokens ------------------===//
//
// TokenData::open and openEvaluation: the files a path names (the file itself, a directory's
// files, or a glob pattern's matches), each one mapped and its header read (llm.c's, none for
// nanoGPT's .bin, or a Tessel example file's), small data checked against the vocabulary
// whole, and the tokens or examples split into train and eval parts. What is read from them
// afterwards is in DataWindows.cpp and DataExamples.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/host/Data.h"

#include "common/data/TokenFiles.h"
#include "runtime/host/DataImpl.h"
#include "runtime/support/AtomicFile.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tessel::rt {

namespace fs = std::filesystem;

namespace tf = tokenfiles;
using detail::tokenAt;
using tf::readLe32;

static uint32_t byteSwapped(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xFF00u) | ((v << 8) & 0xFF0000u) | (v << 24);
}

/// The regular files of directory `dir` that the byte tokenizer reads, in name order: not
/// symlinks, not subdirectories, not hidden, not ending in ".dat" (fortune's index files).
static bool listDataFiles(const std::string &dir, std::vector<std::string> &files,
                          std::string &error) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    error = "cannot list data directory " + dir + ": " + ec.message();
    return false;
  }
  std::vector<std::string> names;
  for (const fs::directory_entry &entry : it) {
    std::string name = entry.path().filename().string();
    fs::file_status status = entry.symlink_status(ec);
    if (ec || !fs::is_regular_file(status) || name.empty() || name[0] == '.')
      continue;
    if (name.size() >= 4 && name.compare(name.size() - 4, 4, ".dat") == 0)
      continue;
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  for (const std::string &name : names)
    files.push_back(dir + (dir.empty() || dir.back() == '/' ? "" : "/") + name);
  return true;
}

/// Where a pre-tokenized file's ids start and how wide they are: past llm.c's header (uint16
/// for version 1, uint32 for version 7), or from the first byte as uint16 (nanoGPT's .bin). A
/// header of another version or magic of llm.c's, or one written big-endian, is refused by name
/// rather than read as tokens. A Tessel example file sets `examples` to its layout.
static bool tokenFileStart(const char *role, const std::string &path, const unsigned char *data,
                           size_t size, size_t &begin, int &width, tf::ExampleLayout *examples,
                           std::string &error) {
  const std::string what = std::string(role) + " file " + path;
  begin = 0;
  width = 2;
  const uint32_t magic = size >= 4 ? readLe32(data) : 0;
  const bool gpt2 = magic == tf::kLlmcMagic16, llama3 = magic == tf::kLlmcMagic32;
  if (magic == tf::kExampleMagic) {
    if (!tf::readExampleHeader(data, size, *examples, error)) {
      error = what + " " + error;
      return false;
    }
    begin = examples->tokensOffset;
    width = examples->width;
    return true;
  }
  examples->examples = 0;
  if (size >= 4) {
    for (uint32_t known : {tf::kLlmcMagic16, tf::kLlmcMagic32, tf::kLlmcModelMagic,
                           tf::kLlmcStateMagic, tf::kExampleMagic})
      if (magic == byteSwapped(known)) {
        error = what + " starts with llm.c's magic " + std::to_string(known) +
                " written big-endian; llm.c's files are little-endian";
        return false;
      }
    if (magic == tf::kLlmcModelMagic || magic == tf::kLlmcStateMagic) {
      error = what + " is an llm.c " +
              (magic == tf::kLlmcModelMagic ? "model checkpoint" : "training state") + " (magic " +
              std::to_string(magic) + "), not a token file";
      return false;
    }
  }
  if (!gpt2 && !llama3) {
    if (size % 2 != 0) {
      error = what + " has an odd number of bytes (" + std::to_string(size) +
              "); a .bin file without llm.c's header holds uint16 tokens";
      return false;
    }
    return true;
  }
  if (size < tf::kHeaderBytes) {
    error = what + " starts like an llm.c token file but its " +
            std::to_string(size) + " bytes are too few for the 1024-byte header";
    return false;
  }
  const uint32_t version = readLe32(data + 4),
                 expected = gpt2 ? tf::kLlmcVersion16 : tf::kLlmcVersion32;
  if (version != expected) {
    error = what + " is an llm.c token file (magic " + std::to_string(magic) +
            ") of version " + std::to_string(version) + "; that magic goes with version " +
            std::to_string(expected) + " (" + (gpt2 ? "uint16" : "uint32") + " tokens)";
    return false;
  }
  width = gpt2 ? 2 : 4;
  const uint64_t count = readLe32(data + 8), bytes = count * static_cast<uint64_t>(width);
  if (size - tf::kHeaderBytes != bytes) {
    error = what + ": its llm.c header says " + std::to_string(count) +
            " tokens (" + std::to_string(bytes) + " bytes) but " +
            std::to_string(size - tf::kHeaderBytes) + " bytes follow the header";
    return false;
  }
  begin = tf::kHeaderBytes;
  return true;
}

TokenData::~TokenData() {
  for (const Segment &segment : segments_)
    if (segment.map)
      ::munmap(segment.map, segment.mapBytes);
}

/// How messages call the data a role reads: "training data" or "eval data".
static std::string dataNoun(const char *role) {
  return std::strcmp(role, "data") == 0 ? "training data" : role;
}

/// Whether `path` is a pattern for glob(3) rather than a name: it holds *, ? or [.
static bool isPattern(const std::string &path) {
  return path.find_first_of("*?[") != std::string::npos;
}

/// Whether a token file's name marks it as a validation split, as nanoGPT's `val.bin` and
/// llm.c's `fineweb_val_000000.bin` do: "val" (or "valid", "validation") as a word of the name.
static bool namesValidationSplit(const std::string &path) {
  std::string name = fs::path(path).filename().string();
  std::string word;
  auto isSplitWord = [](const std::string &w) {
    return w == "val" || w == "valid" || w == "validation";
  };
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      continue;
    }
    if (isSplitWord(word))
      return true;
    word.clear();
  }
  return isSplitWord(word);
}

/// The files that `path` names, in the order their tokens are concatenated: the file itself; a
/// directory's files in name order (for the byte tokenizer every usable file, for token files
/// those ending in .bin); or the files a glob pattern matches, in name order
/// ("fineweb_train_*.bin"). `what` becomes how messages name the data.
static bool resolveSources(const std::string &path, Tokenizer kind, const char *role,
                           std::vector<std::string> &sources, std::string &what,
                           std::string &error) {
  struct stat info;
  const bool exists = ::stat(path.c_str(), &info) == 0;
  const int statErrno = errno;
  if (!exists && isPattern(path) && statErrno == ENOENT) {
    what = std::string(role) + " files " + path;
    glob_t matches{};
    const int status = ::glob(path.c_str(), GLOB_ERR, nullptr, &matches);
    if (status == 0)
      for (size_t i = 0; i < matches.gl_pathc; ++i)
        sources.push_back(matches.gl_pathv[i]);
    ::globfree(&matches);
    if (status == GLOB_NOMATCH || (status == 0 && sources.empty())) {
      error = "no file matches the " + std::string(role) + " pattern " + path;
      return false;
    }
    if (status != 0) {
      error = "cannot list the files of the " + std::string(role) + " pattern " + path + ": " +
              (status == GLOB_NOSPACE ? "out of memory" : "a directory cannot be read");
      return false;
    }
    std::sort(sources.begin(), sources.end());
    // Each match is opened below, which refuses what is not a regular file by name.
    return true;
  }
  if (!exists) {
    error = statErrno == ENOENT
                ? std::string(role) + " file " + path + " does not exist"
                : "cannot access " + std::string(role) + " file " + path + ": " +
                      std::strerror(statErrno);
    return false;
  }
  const bool isDirectory = S_ISDIR(info.st_mode);
  what = std::string(role) + (isDirectory ? " directory " : " file ") + path;
  if (!isDirectory && !S_ISREG(info.st_mode)) {
    error = what + " is " + fileKindOf(info.st_mode) + "; " + dataNoun(role) +
            " must be a regular file or a directory of them";
    return false;
  }
  if (!isDirectory) {
    sources.push_back(path);
    return true;
  }
  std::vector<std::string> files;
  if (!listDataFiles(path, files, error))
    return false;
  if (kind == Tokenizer::Byte) {
    sources = std::move(files);
    if (sources.empty()) {
      error = what + " has no usable files (it reads regular files, skipping symlinks, "
                     "subdirectories, hidden files and names ending in .dat)";
      return false;
    }
    return true;
  }
  // Token files: the directory's .bin shards. A directory that also holds a validation split
  // is ambiguous, and training on held-out data is the worst mistake to make silently.
  std::vector<std::string> validation;
  for (const std::string &file : files) {
    if (file.size() < 4 || file.compare(file.size() - 4, 4, ".bin") != 0)
      continue;
    (namesValidationSplit(file) ? validation : sources).push_back(file);
  }
  if (!validation.empty()) {
    error = what + " holds validation data (" + fs::path(validation[0]).filename().string() +
            (validation.size() > 1 ? " and " + std::to_string(validation.size() - 1) + " more"
                                   : std::string()) +
            ") beside the training files; name the training files with a pattern (\"" + path +
            (path.back() == '/' ? "" : "/") +
            "*train*.bin\") and the validation files with eval.data or --eval-data";
    sources.clear();
    return false;
  }
  if (sources.empty()) {
    error = what + " has no .bin token files";
    return false;
  }
  return true;
}

std::unique_ptr<TokenData> TokenData::open(const std::string &path, Tokenizer kind, int64_t vocab,
                                           double evalFraction, int64_t window,
                                           std::string &error) {
  if (!(evalFraction >= 0 && evalFraction < 1)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", evalFraction);
    error = std::string("eval fraction must lie in [0, 1), not ") + text;
    return nullptr;
  }
  auto data = openStream(path, kind, vocab, window, "data", error);
  if (!data)
    return nullptr;
  if (data->hasExamples())
    return data->splitExamples(evalFraction, error) ? std::move(data) : nullptr;
  const std::string &what = data->what_;
  const int64_t total = data->totalTokens();
  bool wantEval = evalFraction > 0;
  int64_t needed = wantEval ? 2 * window : window;
  if (total < needed) {
    error = what + " has " + std::to_string(total) + " tokens; a window needs " +
            std::to_string(window) + " (seq + 1)" +
            (wantEval ? ", and the train and eval splits need one window each (" +
                            std::to_string(needed) + " tokens)"
                      : "");
    return nullptr;
  }
  int64_t evalTokens = static_cast<int64_t>(std::floor(static_cast<double>(total) * evalFraction));
  data->trainTokens_ = total - evalTokens;
  auto shortSplit = [&](const char *part, double fraction, int64_t tokens) {
    char percent[32];
    std::snprintf(percent, sizeof percent, "%g%%", 100 * fraction);
    return what + ": the " + part + " split (" + percent + " of " + std::to_string(total) +
           " tokens = " + std::to_string(tokens) + ") is shorter than one window (" +
           std::to_string(window) + " tokens)";
  };
  if (wantEval && evalTokens < window) {
    error =
        shortSplit("eval", evalFraction, evalTokens) +
        "; raise eval.fraction, use more data, or set eval.fraction = 0 to hold nothing out";
    return nullptr;
  }
  if (data->trainTokens_ < window) {
    error = shortSplit("train", 1 - evalFraction, data->trainTokens_) + "; lower the eval fraction";
    return nullptr;
  }
  return data;
}

std::unique_ptr<TokenData> TokenData::openEvaluation(const std::string &path, Tokenizer kind,
                                                     int64_t vocab, int64_t window,
                                                     std::string &error) {
  auto data = openStream(path, kind, vocab, window, "eval data", error);
  if (!data)
    return nullptr;
  if (data->hasExamples()) {
    data->trainExamples_ = data->trainTokens_ = 0; // All of it evaluates.
    return data;
  }
  if (data->totalTokens() < window) {
    error = data->what_ + " has " + std::to_string(data->totalTokens()) +
            " tokens; one evaluation window needs " + std::to_string(window) + " (seq + 1)";
    return nullptr;
  }
  data->trainTokens_ = 0; // All of it evaluates.
  return data;
}

std::unique_ptr<TokenData> TokenData::openStream(const std::string &path, Tokenizer kind,
                                                 int64_t vocab, int64_t window, const char *role,
                                                 std::string &error) {
  if (window < 2) {
    error = "data window must hold at least 2 tokens (seq + 1), not " + std::to_string(window);
    return nullptr;
  }
  if (vocab < 1) {
    error = "vocabulary size must be positive, not " + std::to_string(vocab);
    return nullptr;
  }
  if (kind == Tokenizer::Byte && vocab < 256) {
    error = "the byte tokenizer needs a vocabulary of at least 256, not " + std::to_string(vocab) +
            " (" + role + " " + path + ")";
    return nullptr;
  }

  std::unique_ptr<TokenData> data(new TokenData());
  data->vocab_ = vocab;
  if (!resolveSources(path, kind, role, data->sources_, data->what_, error))
    return nullptr;
  const std::string &what = data->what_;
  std::vector<std::string> exampleFiles, streamFiles;

  for (const std::string &source : data->sources_) {
    int fd = ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      error = "cannot open " + std::string(role) + " file " + source + ": " + std::strerror(errno);
      return nullptr;
    }
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      error = std::string(role) + " file " + source + " is " +
              (S_ISREG(st.st_mode) ? std::string("unreadable") : fileKindOf(st.st_mode)) + "; " +
              dataNoun(role) + " must be a regular file";
      ::close(fd);
      return nullptr;
    }
    size_t size = static_cast<size_t>(st.st_size);
    if (size == 0) {
      // Empty, or a file whose size the kernel does not know (/proc, /sys): only a read tells.
      char byte;
      ssize_t got = ::read(fd, &byte, 1);
      int readErrno = errno;
      ::close(fd);
      if (got < 0) {
        error = "cannot read " + source + ": " + std::strerror(readErrno);
        return nullptr;
      }
      if (got > 0) {
        error = std::string(role) + " file " + source + " has no size (a /proc or /sys file?); it cannot be " +
                "mapped: copy it to a regular file";
        return nullptr;
      }
      continue;
    }
    void *map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
    int mapErrno = errno;
    ::close(fd);
    if (map == MAP_FAILED) {
      error = "cannot map " + std::string(role) + " file " + source + ": " + std::strerror(mapErrno);
      return nullptr;
    }
    Segment segment;
    segment.map = map;
    segment.mapBytes = size;
    size_t begin = 0;
    int width = 1;
    const auto *bytes = static_cast<const unsigned char *>(map);
    data->segments_.push_back(segment); // Owned from here, so an error below unmaps it.
    tf::ExampleLayout examples;
    if (kind == Tokenizer::Tokens &&
        !tokenFileStart(role, source, bytes, size, begin, width, &examples, error))
      return nullptr;
    Segment &added = data->segments_.back();
    added.tokens = bytes + begin;
    added.width = width;
    added.first = data->total_;
    if (readLe32(bytes) == tf::kExampleMagic && kind == Tokenizer::Tokens) {
      added.starts = bytes + examples.startsOffset;
      added.mask = bytes + examples.maskOffset;
      added.exampleCount = static_cast<int64_t>(examples.examples);
      added.padId = examples.padId;
      added.count = static_cast<int64_t>(examples.tokens);
      exampleFiles.push_back(source);
    } else {
      added.count = static_cast<int64_t>((size - begin) / static_cast<size_t>(width));
      streamFiles.push_back(source);
    }
    data->total_ += added.count;
  }
  if (!exampleFiles.empty() && !streamFiles.empty()) {
    error = what + " mixes example files (" + fs::path(exampleFiles[0]).filename().string() +
            ") with token streams (" + fs::path(streamFiles[0]).filename().string() +
            "); train on one kind at a time";
    return nullptr;
  }
  // Segments without tokens (an llm.c header alone) hold no index; drop them from the search.
  data->segments_.erase(
      std::remove_if(data->segments_.begin(), data->segments_.end(), [](const Segment &s) {
        if (s.count == 0 && s.map)
          ::munmap(s.map, s.mapBytes);
        return s.count == 0;
      }),
      data->segments_.end());

  int64_t total = data->totalTokens();
  if (total == 0) {
    error = what + " is empty";
    return nullptr;
  }
  if (!exampleFiles.empty() && !data->indexExamples(window, error))
    return nullptr;
  // Ids that cannot reach the vocabulary's size need no check; small data (and examples, whose
  // rows are read without a check) is checked whole now, large data window by window as
  // training reads it.
  int64_t largestId = 0;
  for (const Segment &segment : data->segments_)
    largestId = std::max(largestId, (int64_t(1) << (8 * segment.width)) - 1);
  const bool scanNow = total <= kScannedTokens || data->hasExamples();
  data->scanned_ = largestId < vocab || scanNow;
  if (largestId >= vocab && scanNow) {
    for (const Segment &segment : data->segments_)
      for (int64_t i = 0; i < segment.count; ++i) {
        const uint32_t t = tokenAt(segment.tokens, i, segment.width);
        if (t >= vocab) {
          error = what + ": token " + std::to_string(t) + " at position " +
                  std::to_string(segment.first + i) + " is not below the vocabulary size " +
                  std::to_string(vocab);
          return nullptr;
        }
      }
  }

  return data;
}

} // namespace tessel::rt
