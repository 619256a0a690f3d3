//===- Data.cpp - Training and evaluation tokens --------------------------===//

#include "runtime/host/Data.h"

#include "common/data/TokenFiles.h"
#include "common/support/Checksum.h"
#include "kernels/KernelTypes.h"
#include "runtime/core/Rng.h"
#include "runtime/support/AtomicFile.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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
using tf::readLe32;

/// A broken precondition is a bug in the caller, not bad input: stop loudly.
static void require(bool condition, const char *what) {
  if (condition)
    return;
  std::fprintf(stderr, "tessel runtime: TokenData: %s\n", what);
  std::abort();
}

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

/// Token `i` of `tokens`, `width` bytes each (1, or 2 or 4 little-endian).
static uint32_t tokenAt(const unsigned char *tokens, int64_t i, int width) {
  const unsigned char *p = tokens + i * width;
  return width == 1   ? p[0]
         : width == 2 ? static_cast<uint32_t>(p[0] | p[1] << 8)
                      : readLe32(p);
}

uint32_t TokenData::at(int64_t index) const {
  // The segment holding `index`: the last one that starts at or before it.
  auto it = std::upper_bound(segments_.begin(), segments_.end(), index,
                             [](int64_t i, const Segment &s) { return i < s.first; });
  const Segment &segment = *(it - 1);
  return tokenAt(segment.tokens, index - segment.first, segment.width);
}

uint64_t TokenData::fingerprint() const {
  std::vector<uint64_t> parts{static_cast<uint64_t>(total_)};
  auto addBytes = [&](const unsigned char *data, size_t bytes) {
    if (bytes <= kFingerprintSamples * kFingerprintPiece) {
      parts.push_back(xxh3_64(data, bytes));
      return;
    }
    // Pieces spread evenly from the first byte to the last.
    const size_t last = bytes - kFingerprintPiece;
    for (size_t i = 0; i < kFingerprintSamples; ++i)
      parts.push_back(xxh3_64(data + last * i / (kFingerprintSamples - 1), kFingerprintPiece));
  };
  for (const Segment &s : segments_) {
    parts.push_back(static_cast<uint64_t>(s.width));
    parts.push_back(static_cast<uint64_t>(s.count));
    addBytes(s.tokens, static_cast<size_t>(s.count) * static_cast<size_t>(s.width));
    if (s.mask) { // An example file: its starts and mask too.
      parts.push_back(static_cast<uint64_t>(s.exampleCount));
      addBytes(s.starts, static_cast<size_t>(s.exampleCount + 1) * 8);
      addBytes(s.mask, static_cast<size_t>(s.count));
    }
  }
  return xxh3_64(parts.data(), parts.size() * sizeof(uint64_t));
}

std::vector<uint32_t> TokenData::slice(int64_t begin, int64_t count) const {
  require(begin >= 0 && count >= 0 && begin + count <= total_, "slice: outside the data");
  std::vector<uint32_t> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    out[i] = at(begin + i);
  return out;
}

bool TokenData::copyWindow(int64_t start, int32_t *tokens, int32_t *targets, int64_t seq,
                           std::string &error) const {
  ++windowsRead_;
  for (int64_t i = 0; i <= seq; ++i) {
    const uint32_t t = at(start + i);
    if (!scanned_ && t >= vocab_) {
      error = what_ + ": token " + std::to_string(t) + " at position " +
              std::to_string(start + i) + " is not below the vocabulary size " +
              std::to_string(vocab_);
      return false;
    }
    if (i < seq)
      tokens[i] = t;
    if (i > 0)
      targets[i - 1] = t;
  }
  return true;
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

bool TokenData::indexExamples(int64_t window, std::string &error) {
  for (uint32_t index = 0; index < segments_.size(); ++index) {
    const Segment &segment = segments_[index];
    const std::string file = "example file of " + what_;
    auto startOf = [&](int64_t i) {
      return static_cast<int64_t>(tf::readLe64(segment.starts + 8 * i));
    };
    if (startOf(0) != 0 || startOf(segment.exampleCount) != segment.count) {
      error = what_ + ": an example file's starts do not run from 0 to its " +
              std::to_string(segment.count) + " tokens (it is corrupt)";
      return false;
    }
    for (int64_t i = 0; i < segment.exampleCount; ++i) {
      const int64_t begin = startOf(i), end = startOf(i + 1);
      if (end < begin || end > segment.count) {
        error = what_ + ": example " + std::to_string(i) + " of an example file has starts " +
                std::to_string(begin) + " and " + std::to_string(end) + " (the file is corrupt)";
        return false;
      }
      if (end - begin < 2) {
        error = what_ + ": example " + std::to_string(i) + " of an example file has " +
                std::to_string(end - begin) + " tokens; an example needs 2 or more";
        return false;
      }
      examples_.push_back({index, begin, end - begin});
    }
    for (int64_t i = 0; i < segment.count; ++i)
      if (segment.mask[i] > 1) {
        error = what_ + ": the loss mask of an example file holds " +
                std::to_string(segment.mask[i]) + " at token " + std::to_string(i) +
                "; its bytes are 0 or 1 (the file is corrupt)";
        return false;
      }
    if (segment.padId >= static_cast<uint64_t>(vocab_)) {
      error = what_ + ": an example file pads with token " + std::to_string(segment.padId) +
              ", not below the vocabulary size " + std::to_string(vocab_);
      return false;
    }
  }
  if (examples_.empty()) {
    error = what_ + " holds no examples";
    return false;
  }
  for (int64_t e = 0; e < exampleCount(); ++e) {
    longExamples_ += examples_[e].length > window;
    untrainedExamples_ += countedTargets(e, window - 1) == 0;
  }
  return true;
}

bool TokenData::splitExamples(double evalFraction, std::string &error) {
  const int64_t n = exampleCount();
  const int64_t evalExamples =
      static_cast<int64_t>(std::floor(static_cast<double>(n) * evalFraction));
  trainExamples_ = n - evalExamples;
  if (evalFraction > 0 && evalExamples == 0) {
    char percent[32];
    std::snprintf(percent, sizeof percent, "%g%%", 100 * evalFraction);
    error = what_ + ": the eval split (" + percent + " of " + std::to_string(n) +
            " examples) holds no example; raise eval.fraction, use more data, or set "
            "eval.fraction = 0 to hold nothing out";
    return false;
  }
  if (trainExamples_ == 0) {
    error = what_ + ": the train split holds no example of " + std::to_string(n) +
            "; lower the eval fraction";
    return false;
  }
  trainTokens_ = 0;
  for (int64_t e = 0; e < trainExamples_; ++e)
    trainTokens_ += examples_[e].length;
  return true;
}

int64_t TokenData::copyExample(int64_t index, int32_t *tokens, int32_t *targets,
                               int64_t seq) const {
  ++windowsRead_;
  const Example &x = examples_[index];
  const Segment &segment = segments_[x.segment];
  int64_t counted = 0;
  for (int64_t j = 0; j < seq; ++j) {
    tokens[j] = static_cast<int32_t>(
        j < x.length ? tokenAt(segment.tokens, x.begin + j, segment.width) : segment.padId);
    const int64_t next = j + 1;
    if (next < x.length && segment.mask[x.begin + next]) {
      targets[j] = static_cast<int32_t>(tokenAt(segment.tokens, x.begin + next, segment.width));
      ++counted;
    } else {
      targets[j] = kernels::kIgnoredTarget;
    }
  }
  return counted;
}

int64_t TokenData::countedTargets(int64_t index, int64_t seq) const {
  const Example &x = examples_[index];
  const unsigned char *mask = segments_[x.segment].mask + x.begin;
  int64_t counted = 0;
  for (int64_t next = 1; next < std::min(x.length, seq + 1); ++next)
    counted += mask[next];
  return counted;
}

bool TokenData::trainWindow(Rng &rng, int32_t *tokens, int32_t *targets, int64_t seq,
                            std::string &error) const {
  if (hasExamples()) {
    copyExample(static_cast<int64_t>(rng.below(static_cast<uint64_t>(trainExamples_))), tokens,
                targets, seq);
    return true;
  }
  require(seq >= 1 && seq + 1 <= trainTokens_, "trainWindow: seq + 1 exceeds the train split");
  int64_t start = static_cast<int64_t>(rng.below(static_cast<uint64_t>(trainTokens_ - seq)));
  return copyWindow(start, tokens, targets, seq, error);
}

bool TokenData::evalWindow(int64_t index, int64_t count, int32_t *tokens, int32_t *targets,
                           int64_t seq, std::string &error) const {
  require(count >= 1 && index >= 0 && index < count, "evalWindow: index outside [0, count)");
  if (hasExamples()) {
    copyExample(evalExample(index, count), tokens, targets, seq);
    return true;
  }
  require(seq >= 1 && seq + 1 <= evalTokens(), "evalWindow: seq + 1 exceeds the eval split");
  int64_t positions = evalTokens() - seq;
  int64_t offset = static_cast<int64_t>(static_cast<__int128>(index) * positions / count);
  return copyWindow(trainTokens_ + offset, tokens, targets, seq, error);
}

bool TokenData::trainBatch(Rng &rng, const std::vector<bool> &taken, int32_t *tokens,
                           int32_t *targets, int64_t seq, std::string &error,
                           int64_t *counted) const {
  if (hasExamples()) {
    int64_t sum = 0;
    for (size_t row = 0; row < taken.size(); ++row) {
      const auto index = static_cast<int64_t>(rng.below(static_cast<uint64_t>(trainExamples_)));
      sum += taken[row] ? copyExample(index, tokens + row * seq, targets + row * seq, seq)
                        : countedTargets(index, seq);
    }
    if (counted)
      *counted = sum;
    return true;
  }
  if (counted)
    *counted = static_cast<int64_t>(taken.size()) * seq;
  require(seq >= 1 && seq + 1 <= trainTokens_, "trainBatch: seq + 1 exceeds the train split");
  for (size_t row = 0; row < taken.size(); ++row) {
    // Drawn for every row, so the generator moves on alike in every process.
    int64_t start = static_cast<int64_t>(rng.below(static_cast<uint64_t>(trainTokens_ - seq)));
    if (taken[row] && !copyWindow(start, tokens + row * seq, targets + row * seq, seq, error))
      return false;
  }
  return true;
}

bool TokenData::evalBatch(int64_t first, int64_t count, const std::vector<bool> &taken,
                          int32_t *tokens, int32_t *targets, int64_t seq, std::string &error,
                          int64_t *counted) const {
  if (hasExamples()) {
    int64_t sum = 0;
    for (size_t row = 0; row < taken.size(); ++row) {
      const int64_t index = evalExample(first + static_cast<int64_t>(row), count);
      sum += taken[row] ? copyExample(index, tokens + row * seq, targets + row * seq, seq)
                        : countedTargets(index, seq);
    }
    if (counted)
      *counted = sum;
    return true;
  }
  if (counted)
    *counted = static_cast<int64_t>(taken.size()) * seq;
  for (size_t row = 0; row < taken.size(); ++row)
    if (taken[row] && !evalWindow(first + static_cast<int64_t>(row), count, tokens + row * seq,
                                  targets + row * seq, seq, error))
      return false;
  return true;
}

std::string decodeBytes(const int32_t *tokens, int64_t count) {
  std::string text;
  text.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    if (tokens[i] >= 0 && tokens[i] < 256)
      text += static_cast<char>(tokens[i]);
    else
      text += "\xEF\xBF\xBD";
  }
  return text;
}

bool parseTokenIds(std::string_view text, std::vector<int32_t> &ids, std::string &error) {
  ids.clear();
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == ' ' || c == ',' || c == '\t' || c == '\n') {
      ++i;
      continue;
    }
    if (c < '0' || c > '9') {
      error = "'" + std::string(text) + "' is not a list of token ids: '" + std::string(1, c) +
              "' at offset " + std::to_string(i) + " (write ids as numbers, e.g. \"15496 11 995\")";
      return false;
    }
    int64_t value = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      value = value * 10 + (text[i] - '0');
      if (value > 65535) {
        error = "token id " + std::string(text.substr(i - (i > 5 ? 5 : i), 6)) +
                "... is larger than a uint16 token file can hold (65535)";
        return false;
      }
    }
    ids.push_back(static_cast<int32_t>(value));
  }
  if (ids.empty()) {
    error = "the prompt holds no token ids (write them as numbers, e.g. \"15496 11 995\")";
    return false;
  }
  return true;
}

std::vector<int32_t> encodeBytes(std::string_view text) {
  std::vector<int32_t> tokens;
  tokens.reserve(text.size());
  for (char c : text)
    tokens.push_back(static_cast<unsigned char>(c));
  return tokens;
}

} // namespace tessel::rt
