//===- Data.cpp - Training and evaluation tokens --------------------------===//

#include "runtime/Data.h"

#include "runtime/AtomicFile.h"
#include "runtime/Rng.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>

namespace tessel::rt {

namespace fs = std::filesystem;

/// llm.c's token files: 256 int32 of header, then uint16 tokens.
constexpr uint32_t kLlmcMagic = 20240520;
constexpr size_t kLlmcHeaderBytes = 256 * 4;

/// A broken precondition is a bug in the caller, not bad input: stop loudly.
static void require(bool condition, const char *what) {
  if (condition)
    return;
  std::fprintf(stderr, "tessel runtime: TokenData: %s\n", what);
  std::abort();
}

static uint32_t readLe32(const unsigned char *bytes) {
  return static_cast<uint32_t>(bytes[0]) | static_cast<uint32_t>(bytes[1]) << 8 |
         static_cast<uint32_t>(bytes[2]) << 16 | static_cast<uint32_t>(bytes[3]) << 24;
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

/// Appends the ids of a pre-tokenized file's bytes to `tokens`.
static bool decodeTokenFile(const std::string &path, const std::string &bytes,
                            std::vector<uint16_t> &tokens, std::string &error) {
  const auto *data = reinterpret_cast<const unsigned char *>(bytes.data());
  size_t size = bytes.size();
  size_t begin = 0;
  if (size >= 4 && readLe32(data) == kLlmcMagic) {
    if (size < kLlmcHeaderBytes) {
      error = "data file " + path + " starts like an llm.c token file but its " +
              std::to_string(size) + " bytes are too few for the 1024-byte header";
      return false;
    }
    uint32_t version = readLe32(data + 4);
    if (version != 1) {
      error = "data file " + path + " is an llm.c token file of version " +
              std::to_string(version) + "; only version 1 (uint16 tokens) is supported";
      return false;
    }
    uint64_t count = readLe32(data + 8);
    if (size - kLlmcHeaderBytes != 2 * count) {
      error = "data file " + path + ": its llm.c header says " + std::to_string(count) +
              " tokens (" + std::to_string(2 * count) + " bytes) but " +
              std::to_string(size - kLlmcHeaderBytes) + " bytes follow the header";
      return false;
    }
    begin = kLlmcHeaderBytes;
  } else if (size % 2 != 0) {
    error = "data file " + path + " has an odd number of bytes (" + std::to_string(size) +
            "); a .bin file holds uint16 tokens";
    return false;
  }
  tokens.reserve(tokens.size() + (size - begin) / 2);
  for (size_t i = begin; i + 1 < size; i += 2)
    tokens.push_back(static_cast<uint16_t>(data[i] | data[i + 1] << 8));
  return true;
}

std::unique_ptr<TokenData> TokenData::open(const std::string &path, Tokenizer kind, int64_t vocab,
                                           double evalFraction, int64_t window,
                                           std::string &error) {
  if (window < 2) {
    error = "data window must hold at least 2 tokens (seq + 1), not " + std::to_string(window);
    return nullptr;
  }
  if (!(evalFraction >= 0 && evalFraction < 1)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", evalFraction);
    error = std::string("eval fraction must lie in [0, 1), not ") + text;
    return nullptr;
  }
  if (vocab < 1) {
    error = "vocabulary size must be positive, not " + std::to_string(vocab);
    return nullptr;
  }
  if (kind == Tokenizer::Byte && vocab < 256) {
    error = "the byte tokenizer needs a vocabulary of at least 256, not " + std::to_string(vocab) +
            " (data " + path + ")";
    return nullptr;
  }

  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    error = errno == ENOENT ? "data file " + path + " does not exist"
                            : "cannot access data file " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  bool isDirectory = S_ISDIR(info.st_mode);
  std::string what = (isDirectory ? "data directory " : "data file ") + path;

  std::unique_ptr<TokenData> data(new TokenData());
  if (isDirectory) {
    if (kind != Tokenizer::Byte) {
      error = what + " is a directory; the tokens tokenizer reads one pre-tokenized .bin file";
      return nullptr;
    }
    if (!listDataFiles(path, data->sources_, error))
      return nullptr;
    if (data->sources_.empty()) {
      error = what + " has no usable files (it reads regular files, skipping symlinks, "
                     "subdirectories, hidden files and names ending in .dat)";
      return nullptr;
    }
  } else {
    data->sources_.push_back(path);
  }

  std::string bytes;
  for (const std::string &source : data->sources_) {
    if (!readWholeFile(source, bytes, error))
      return nullptr;
    if (kind == Tokenizer::Byte) {
      data->tokens_.reserve(data->tokens_.size() + bytes.size());
      for (char c : bytes)
        data->tokens_.push_back(static_cast<unsigned char>(c));
    } else if (!decodeTokenFile(source, bytes, data->tokens_, error)) {
      return nullptr;
    }
  }
  bytes = std::string();

  int64_t total = data->totalTokens();
  if (total == 0) {
    error = what + " is empty";
    return nullptr;
  }
  for (size_t i = 0; i < data->tokens_.size(); ++i) {
    if (data->tokens_[i] >= vocab) {
      error = what + ": token " + std::to_string(data->tokens_[i]) + " at position " +
              std::to_string(i) + " is not below the vocabulary size " + std::to_string(vocab);
      return nullptr;
    }
  }

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
        shortSplit("eval", evalFraction, evalTokens) + "; raise the eval fraction or use more data";
    return nullptr;
  }
  if (data->trainTokens_ < window) {
    error = shortSplit("train", 1 - evalFraction, data->trainTokens_) + "; lower the eval fraction";
    return nullptr;
  }
  return data;
}

void TokenData::trainWindow(Rng &rng, int32_t *tokens, int32_t *targets, int64_t seq) const {
  require(seq >= 1 && seq + 1 <= trainTokens_, "trainWindow: seq + 1 exceeds the train split");
  int64_t start = static_cast<int64_t>(rng.below(static_cast<uint64_t>(trainTokens_ - seq)));
  const uint16_t *from = tokens_.data() + start;
  for (int64_t i = 0; i < seq; ++i) {
    tokens[i] = from[i];
    targets[i] = from[i + 1];
  }
}

void TokenData::evalWindow(int64_t index, int64_t count, int32_t *tokens, int32_t *targets,
                           int64_t seq) const {
  require(count >= 1 && index >= 0 && index < count, "evalWindow: index outside [0, count)");
  require(seq >= 1 && seq + 1 <= evalTokens(), "evalWindow: seq + 1 exceeds the eval split");
  int64_t positions = evalTokens() - seq;
  int64_t offset = static_cast<int64_t>(static_cast<__int128>(index) * positions / count);
  const uint16_t *from = tokens_.data() + trainTokens_ + offset;
  for (int64_t i = 0; i < seq; ++i) {
    tokens[i] = from[i];
    targets[i] = from[i + 1];
  }
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

std::vector<int32_t> encodeBytes(std::string_view text) {
  std::vector<int32_t> tokens;
  tokens.reserve(text.size());
  for (char c : text)
    tokens.push_back(static_cast<unsigned char>(c));
  return tokens;
}

} // namespace tessel::rt
