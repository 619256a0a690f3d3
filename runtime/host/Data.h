//===- Data.h - Training and evaluation tokens ------------------*- C++ -*-===//
//
// The token stream a run trains on, mapped into memory rather than read, so a file of any size
// costs only the pages the windows touch: either raw bytes (the byte tokenizer: any regular
// file, or a directory of text files concatenated in name order) or pre-tokenized ids as
// nanoGPT's prepare scripts and llm.c's write them (uint16, or llm.c's uint32 version 7), from
// one file, a directory of .bin shards or a glob pattern ("fineweb_train_*.bin"), concatenated
// in name order. Devices, FIFOs and sockets are refused.
// Evaluation reads either a separate stream (openEvaluation: nanoGPT's val.bin, llm.c's
// *_val_*.bin) or the last `evalFraction` of the training stream, held out; training windows
// are drawn at random from the rest, evaluation windows are evenly spaced over the evaluation
// tokens so every evaluation sees the same tokens. A batch's windows are drawn in every process
// alike and read only where they are needed: each process of an MPI run reads the rows its
// ranks take.
// Pre-tokenized data may instead be Tessel's example files (common/data/TokenFiles.h: what `tessel
// tokenize` writes from prompt/completion or chat data): then a row is one example from its
// start, cut at seq + 1 tokens or padded, with the targets its loss mask leaves out (and those
// of the padding) set to kernels::kIgnoredTarget. The examples split into train and eval parts
// as a stream's tokens do; training rows are examples drawn at random from the train part,
// evaluation rows examples evenly spaced over the eval part.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_HOST_DATA_H
#define TESSEL_RUNTIME_HOST_DATA_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::rt {

class Rng;

/// How a data file maps to token ids.
enum class Tokenizer {
  /// Each byte is a token 0..255; a directory's regular files are concatenated.
  Byte,
  /// Pre-tokenized .bin files of little-endian ids: raw uint16 (nanoGPT), with llm.c's
  /// 1024-byte header (magic 20240520, version 1, token count: uint16 ids; magic 20240801,
  /// version 7: uint32 ids), or Tessel's example files (common/data/TokenFiles.h).
  Tokens,
};

/// The tokens of a run, split into train and eval parts.
class TokenData {
public:
  /// Opens `path` (a file, a directory, or a glob pattern that names no existing file) to
  /// train on, holding out its last `evalFraction`. `window` is seq + 1 tokens (inputs plus
  /// the last target). Errors name the path: missing, unreadable or non-regular files (a
  /// device, a FIFO, a socket), a pattern that matches nothing, a directory of token shards
  /// that also holds a validation split, empty data, an odd-sized or inconsistent .bin, a
  /// byte vocabulary under 256, and too few tokens for one train window and (when
  /// evalFraction > 0) one eval window. Ids not below `vocab` are found here in data of up to
  /// kScannedTokens tokens, and in the window that holds them otherwise.
  static std::unique_ptr<TokenData> open(const std::string &path, Tokenizer kind, int64_t vocab,
                                         double evalFraction, int64_t window, std::string &error);
  /// Opens `path` as open() does, all of it to evaluate on (trainTokens() is 0).
  static std::unique_ptr<TokenData> openEvaluation(const std::string &path, Tokenizer kind,
                                                   int64_t vocab, int64_t window,
                                                   std::string &error);
  ~TokenData();
  TokenData(const TokenData &) = delete;
  TokenData &operator=(const TokenData &) = delete;

  /// Data up to this many tokens is checked against the vocabulary when it is opened.
  static constexpr int64_t kScannedTokens = int64_t(1) << 28;

  int64_t totalTokens() const { return total_; }
  /// Whether the data is examples (rows of their own with loss masks) rather than a stream.
  bool hasExamples() const { return !examples_.empty(); }
  /// The examples in all, and in the train part (the rest evaluate); 0 for a stream.
  int64_t exampleCount() const { return static_cast<int64_t>(examples_.size()); }
  int64_t trainExamples() const { return trainExamples_; }
  /// The examples longer than the window given to open (seq + 1), whose rows are cut.
  int64_t longExamples() const { return longExamples_; }
  /// The examples none of whose trained tokens falls within the window: rows that count
  /// nothing.
  int64_t untrainedExamples() const { return untrainedExamples_; }
  /// Tokens [0, trainTokens) train; [trainTokens, totalTokens) evaluate.
  int64_t trainTokens() const { return trainTokens_; }
  int64_t evalTokens() const { return totalTokens() - trainTokens_; }
  bool hasEval() const { return evalTokens() > 0; }
  /// The files read, in the order concatenated.
  const std::vector<std::string> &sources() const { return sources_; }
  /// What tells two processes' data apart without reading it all: a hash of the token count,
  /// each file's token width and count, and kFingerprintSamples evenly spaced pieces of
  /// kFingerprintPiece bytes of each file's tokens (all of a file up to that many bytes). Two
  /// different files get different fingerprints unless they differ only between the pieces.
  uint64_t fingerprint() const;
  static constexpr size_t kFingerprintSamples = 256, kFingerprintPiece = 4096;
  /// Tokens [begin, begin + count) of the stream.
  std::vector<uint32_t> slice(int64_t begin, int64_t count) const;

  /// A random training window: start = rng.below(trainTokens - seq), tokens = data[start ..
  /// start + seq), targets = data[start + 1 .. start + seq + 1). Requires seq + 1 <=
  /// trainTokens (guaranteed for seq + 1 <= the window given to open). Fails, naming the
  /// position, on an id not below the vocabulary.
  bool trainWindow(Rng &rng, int32_t *tokens, int32_t *targets, int64_t seq,
                   std::string &error) const;
  /// Eval window `index` of `count`, evenly spaced over the eval part: starts at
  /// trainTokens + floor(index * (evalTokens - seq) / count). Requires hasEval(),
  /// 0 <= index < count and seq + 1 <= evalTokens. Fails as trainWindow does.
  bool evalWindow(int64_t index, int64_t count, int32_t *tokens, int32_t *targets, int64_t seq,
                  std::string &error) const;

  /// A batch of taken.size() training windows: a start (for examples, an example) is drawn
  /// for every row, in row order, as trainWindow draws it, but only the rows marked in `taken`
  /// are read, into row i of `tokens` and `targets` ([rows, seq] each); the others are left as
  /// they are. Every process of a run draws the same starts, and each reads only the rows its
  /// ranks take. `counted`, where given, receives the targets of all the rows, taken or not,
  /// that are not ignored (rows × seq for a stream; for examples read from their masks).
  bool trainBatch(Rng &rng, const std::vector<bool> &taken, int32_t *tokens, int32_t *targets,
                  int64_t seq, std::string &error, int64_t *counted = nullptr) const;
  /// Eval windows first .. first + taken.size() - 1 of `count` (as evalWindow), of which only
  /// the rows marked in `taken` are read; `counted` as trainBatch's.
  bool evalBatch(int64_t first, int64_t count, const std::vector<bool> &taken, int32_t *tokens,
                 int32_t *targets, int64_t seq, std::string &error,
                 int64_t *counted = nullptr) const;
  /// The windows read so far (by the calls above): what this process has taken of the data.
  int64_t windowsRead() const { return windowsRead_; }

private:
  /// One mapped file's tokens, at `first` in the stream.
  struct Segment {
    const unsigned char *tokens = nullptr; ///< Into the mapping, past any header.
    int64_t first = 0, count = 0;
    int width = 1; ///< Bytes per token: 1 (bytes), 2 (uint16) or 4 (llm.c's uint32 files).
    void *map = nullptr; ///< The whole mapping, for munmap.
    size_t mapBytes = 0;
    /// An example file's parts: its starts (exampleCount + 1 uint64), its loss mask (one
    /// byte a token) and its padding id.
    const unsigned char *starts = nullptr, *mask = nullptr;
    int64_t exampleCount = 0;
    uint32_t padId = 0;
  };
  /// One example of an example file: tokens [begin, begin + length) of segment `segment`.
  struct Example {
    uint32_t segment = 0;
    int64_t begin = 0, length = 0;
  };

  TokenData() = default;
  /// The stream of `path`, unsplit; `role` ("data", "eval data") names it in messages.
  static std::unique_ptr<TokenData> openStream(const std::string &path, Tokenizer kind,
                                               int64_t vocab, int64_t window, const char *role,
                                               std::string &error);
  uint32_t at(int64_t index) const;
  bool copyWindow(int64_t start, int32_t *tokens, int32_t *targets, int64_t seq,
                  std::string &error) const;
  /// Example `index` as a row: its tokens cut at seq + 1 or padded, its targets ignored where
  /// its mask or its end says so. Returns the targets that count.
  int64_t copyExample(int64_t index, int32_t *tokens, int32_t *targets, int64_t seq) const;
  /// The targets of example `index`'s row that count, read from its mask alone.
  int64_t countedTargets(int64_t index, int64_t seq) const;
  /// Fills examples_ from the example files' starts, checking them and the masks; counts
  /// the long and untrained examples for rows of `window` tokens.
  bool indexExamples(int64_t window, std::string &error);
  /// Splits examples into train and eval parts (the last `evalFraction` evaluate).
  bool splitExamples(double evalFraction, std::string &error);
  /// Eval example `index` of `count`, evenly spaced over the eval part.
  int64_t evalExample(int64_t index, int64_t count) const {
    const int64_t evalCount = exampleCount() - trainExamples_;
    return trainExamples_ + static_cast<int64_t>(static_cast<__int128>(index) * evalCount / count);
  }

  std::vector<Segment> segments_;
  std::vector<Example> examples_;
  int64_t trainExamples_ = 0, longExamples_ = 0, untrainedExamples_ = 0;
  int64_t vocab_ = 0, total_ = 0, trainTokens_ = 0;
  bool scanned_ = false; ///< Every id was checked against the vocabulary at open.
  std::string what_; ///< "data file X", "eval data directory X", "data files P", for messages.
  std::vector<std::string> sources_;
  mutable int64_t windowsRead_ = 0;
};

/// Byte-tokenizer text for `count` tokens; ids outside 0..255 become U+FFFD.
std::string decodeBytes(const int32_t *tokens, int64_t count);
/// Byte-tokenizer ids of `text`: one per byte.
std::vector<int32_t> encodeBytes(std::string_view text);
/// Token ids written as text for a pre-tokenized model's prompt: decimal numbers separated by
/// spaces or commas ("15496 11 995"). Fails, saying why, on anything else or on no ids.
bool parseTokenIds(std::string_view text, std::vector<int32_t> &ids, std::string &error);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_DATA_H
