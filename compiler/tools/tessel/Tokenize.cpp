//===- Tokenize.cpp - tessel tokenize -------------------------------------===//
//
// Text to llm.c's token files. Each document is encoded with the tokenizer's special tokens
// (its post-processor's: Llama 3's <|begin_of_text|> before it) and followed by the
// end-of-sequence token when the tokenizer names one (GPT-2's <|endoftext|>, Llama 3's
// <|end_of_text|>), so the documents of a file stay apart as llm.c's and nanoGPT's data keep
// them. The output is written to a temporary file beside it and renamed when whole.
//
//===----------------------------------------------------------------------===//

#include "Tokenize.h"

#include "common/tokenizer/Tokenizer.h"
#include "common/tokenizer/Utf8.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

using namespace llvm;

namespace tessel {

namespace {

cl::SubCommand tokenizeCommand("tokenize",
                               "Encode text and JSON-lines files with a tokenizer into an llm.c "
                               "token file");
cl::opt<std::string> tokenizerArg("tokenizer",
                                  cl::desc("A tokenizer.json, a SentencePiece .model, or a model "
                                           "folder holding one"),
                                  cl::value_desc("path"), cl::Required, cl::sub(tokenizeCommand));
cl::list<std::string> inputArgs(cl::Positional, cl::OneOrMore,
                                cl::desc("<input files: .jsonl/.ndjson (a document per line), "
                                         "else text (one document per file)>"),
                                cl::sub(tokenizeCommand));
cl::opt<std::string> outputArg("o", cl::desc("The token file to write"), cl::value_desc("OUT.bin"),
                               cl::Required, cl::sub(tokenizeCommand));
cl::opt<std::string> fieldArg("field",
                              cl::desc("The field of a JSON line that holds its text (default "
                                       "text)"),
                              cl::value_desc("name"), cl::init("text"), cl::sub(tokenizeCommand));
cl::opt<bool> appendEosArg("append-eos",
                           cl::desc("End each document with the end-of-sequence token (default: "
                                    "on when the tokenizer names one; =false to leave it out)"),
                           cl::sub(tokenizeCommand));
cl::opt<bool>
    specialTokensArg("add-special-tokens",
                     cl::desc("Put the tokenizer's own special tokens around each document, as its "
                              "post-processor does (Llama 3's <|begin_of_text|>; default on)"),
                     cl::init(true), cl::sub(tokenizeCommand));
cl::opt<double> valFractionArg("val-fraction",
                               cl::desc("Write this fraction of the documents, spread evenly "
                                        "over the input, to --val-out instead"),
                               cl::value_desc("F"), cl::init(0.0), cl::sub(tokenizeCommand));
cl::opt<std::string> valOutputArg("val-out", cl::desc("The token file of the validation documents"),
                                  cl::value_desc("VAL.bin"), cl::sub(tokenizeCommand));
cl::opt<bool> quietArg("quiet", cl::desc("Print nothing but errors"), cl::sub(tokenizeCommand));

/// llm.c's token files (runtime/host/Data.cpp reads them): 256 int32 of header, then the ids,
/// uint16 (magic 20240520, version 1) where every id fits, else uint32 (20240801, version 7).
constexpr uint32_t kMagic16 = 20240520, kMagic32 = 20240801;
constexpr size_t kHeaderWords = 256;
/// llm.c reads the count as an int32.
constexpr uint64_t kMaxTokens = 0x7FFFFFFF;

/// One token file being written: a temporary file beside `path`, renamed over it by finish().
class TokenFile {
public:
  TokenFile(std::string path, bool wide) : path_(std::move(path)), wide_(wide) {}
  ~TokenFile() {
    out_.reset();
    if (temp_)
      consumeError(temp_->discard());
  }

  bool open(std::string &error) {
    Expected<sys::fs::TempFile> temp = sys::fs::TempFile::create(path_ + ".tmp-%%%%%%");
    if (!temp) {
      error = "cannot write '" + path_ + "': " + toString(temp.takeError());
      return false;
    }
    temp_.emplace(std::move(*temp));
    out_ = std::make_unique<raw_fd_ostream>(temp_->FD, /*shouldClose=*/false);
    out_->SetBufferSize(1 << 20);
    std::string header(kHeaderWords * 4, '\0');
    out_->write(header.data(), header.size());
    return true;
  }

  bool append(const std::vector<uint32_t> &ids, std::string &error) {
    if (count_ + ids.size() > kMaxTokens) {
      error = "'" + path_ + "' would hold more than " + std::to_string(kMaxTokens) +
              " tokens, the most an llm.c token file counts; give fewer inputs per output file";
      return false;
    }
    bytes_.clear();
    for (uint32_t id : ids) {
      bytes_.push_back(static_cast<char>(id & 0xFF));
      bytes_.push_back(static_cast<char>((id >> 8) & 0xFF));
      if (wide_) {
        bytes_.push_back(static_cast<char>((id >> 16) & 0xFF));
        bytes_.push_back(static_cast<char>(id >> 24));
      }
    }
    out_->write(bytes_.data(), bytes_.size());
    count_ += ids.size();
    return true;
  }

  bool finish(std::string &error) {
    uint32_t header[3] = {wide_ ? kMagic32 : kMagic16, wide_ ? 7u : 1u,
                          static_cast<uint32_t>(count_)};
    char bytes[12];
    for (int w = 0; w < 3; ++w)
      for (int b = 0; b < 4; ++b)
        bytes[w * 4 + b] = static_cast<char>((header[w] >> (8 * b)) & 0xFF);
    out_->seek(0);
    out_->write(bytes, sizeof(bytes));
    out_->flush();
    if (out_->has_error()) {
      error = "cannot write '" + path_ + "': " + out_->error().message();
      out_->clear_error();
      return false;
    }
    out_.reset();
    Error kept = temp_->keep(path_);
    temp_.reset();
    if (kept) {
      error = "cannot write '" + path_ + "': " + toString(std::move(kept));
      return false;
    }
    return true;
  }

  uint64_t count() const { return count_; }
  const std::string &path() const { return path_; }

private:
  std::string path_;
  bool wide_;
  std::optional<sys::fs::TempFile> temp_;
  std::unique_ptr<raw_fd_ostream> out_;
  std::string bytes_;
  uint64_t count_ = 0;
};

/// Progress on stderr, about once a second: bytes read of all, the rate, the tokens.
class Progress {
public:
  explicit Progress(uint64_t total) : total_(total), start_(Clock::now()), last_(start_) {}

  void update(uint64_t bytes, uint64_t tokens) {
    Clock::time_point now = Clock::now();
    if (quietArg || now - last_ < std::chrono::seconds(1))
      return;
    last_ = now;
    errs() << "tessel tokenize: " << format("%.1f", bytes / 1e6) << " of "
           << format("%.1f", total_ / 1e6) << " MB, " << format("%.1f", rate(bytes)) << " MB/s, "
           << tokens << " tokens\n";
  }

  double rate(uint64_t bytes) const {
    double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    return seconds > 0 ? bytes / 1e6 / seconds : 0.0;
  }

private:
  using Clock = std::chrono::steady_clock;
  uint64_t total_;
  Clock::time_point start_, last_;
};

bool isJsonLines(StringRef path) { return path.ends_with(".jsonl") || path.ends_with(".ndjson"); }

/// Calls `document(text, where)` for each document of `path`: the whole file, or each line of a
/// JSON-lines file (blank lines skipped). Returns 1 for a bad line (having said where), 2 when
/// the file cannot be read, or what `document` returns when it is not 0.
template <typename Fn> int forEachDocument(const std::string &path, Fn &&document) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    errs() << "tessel: error: cannot read '" << path << "': " << std::strerror(errno) << "\n";
    return 2;
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE *)> closer(f, std::fclose);
  std::string buffer;
  std::vector<char> chunk(4 << 20);
  const bool lines = isJsonLines(path);
  size_t lineNumber = 0;
  auto emitLine = [&](std::string_view line) -> int {
    ++lineNumber;
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    // A byte-order mark some editors put first is no part of the JSON.
    if (lineNumber == 1 && line.substr(0, 3) == "\xEF\xBB\xBF")
      line.remove_prefix(3);
    if (line.find_first_not_of(" \t") == std::string_view::npos)
      return 0;
    const std::string where = path + ":" + std::to_string(lineNumber);
    // JSON is UTF-8; bytes that are not are read as U+FFFD, as a JavaScript reader would.
    std::string repaired;
    if (!tok::isValidUtf8(line)) {
      repaired = tok::repairUtf8(line);
      line = repaired;
    }
    Expected<json::Value> value = json::parse(StringRef(line.data(), line.size()));
    if (!value) {
      errs() << where << ": error: not valid JSON: " << toString(value.takeError()) << "\n";
      return 1;
    }
    const json::Object *object = value->getAsObject();
    const json::Value *field = object ? object->get(fieldArg) : nullptr;
    if (!field) {
      errs() << where << ": error: " << (object ? "no field '" + fieldArg + "'" : "not an object")
             << " (--field names the one holding the text)\n";
      return 1;
    }
    std::optional<StringRef> text = field->getAsString();
    if (!text) {
      errs() << where << ": error: field '" << fieldArg << "' is not a string\n";
      return 1;
    }
    return document(std::string_view(text->data(), text->size()), where);
  };
  while (true) {
    size_t got = std::fread(chunk.data(), 1, chunk.size(), f);
    if (got == 0)
      break;
    buffer.append(chunk.data(), got);
    if (!lines)
      continue;
    size_t begin = 0;
    for (size_t end; (end = buffer.find('\n', begin)) != std::string::npos; begin = end + 1)
      if (int rc = emitLine(std::string_view(buffer).substr(begin, end - begin)))
        return rc;
    buffer.erase(0, begin);
  }
  if (std::ferror(f)) {
    errs() << "tessel: error: cannot read '" << path << "': " << std::strerror(errno) << "\n";
    return 2;
  }
  if (lines)
    return buffer.empty() ? 0 : emitLine(buffer);
  return document(buffer, path);
}

} // namespace

bool tokenizeRequested() { return static_cast<bool>(tokenizeCommand); }

int runTokenize() {
  const double fraction = valFractionArg;
  if (!(fraction >= 0.0 && fraction < 1.0)) {
    errs() << "tessel: error: --val-fraction must be at least 0 and below 1, not "
           << format("%g", fraction) << "\n";
    return 2;
  }
  if ((fraction > 0) != !valOutputArg.empty()) {
    errs() << "tessel: error: --val-fraction and --val-out go together\n";
    return 2;
  }
  std::string error;
  std::unique_ptr<tok::Tokenizer> tokenizer = tok::Tokenizer::load(tokenizerArg, error);
  if (!tokenizer) {
    errs() << "tessel: error: " << error << "\n";
    return 1;
  }
  std::optional<uint32_t> eos = tokenizer->eosId();
  bool appendEos = eos.has_value();
  if (appendEosArg.getNumOccurrences()) {
    appendEos = appendEosArg;
    if (appendEos && !eos) {
      errs() << "tessel: error: --append-eos: " << tokenizer->description()
             << " names no end-of-sequence token\n";
      return 1;
    }
  }
  uint64_t totalBytes = 0;
  for (const std::string &input : inputArgs) {
    uint64_t size = 0;
    if (std::error_code ec = sys::fs::file_size(input, size)) {
      errs() << "tessel: error: cannot read '" << input << "': " << ec.message() << "\n";
      return 2;
    }
    totalBytes += size;
  }
  const bool wide = tokenizer->vocabSize() > 0x10000;
  TokenFile train(outputArg, wide);
  std::optional<TokenFile> validation;
  if (!valOutputArg.empty())
    validation.emplace(valOutputArg, wide);
  if (!train.open(error) || (validation && !validation->open(error))) {
    errs() << "tessel: error: " << error << "\n";
    return 2;
  }
  if (!quietArg)
    errs() << "tessel tokenize: " << tokenizer->description()
           << (appendEos ? ", end-of-sequence token after each document" : "") << "\n";

  Progress progress(totalBytes);
  uint64_t documents = 0, validationDocuments = 0, bytesDone = 0, tokens = 0;
  std::vector<uint32_t> ids;
  for (const std::string &input : inputArgs) {
    int rc = forEachDocument(input, [&](std::string_view text, const std::string &) -> int {
      if (text.empty())
        return 0; // an empty document adds nothing, not even its separators
      ids.clear();
      tokenizer->encodeAppend(text, specialTokensArg, ids);
      if (appendEos)
        ids.push_back(*eos);
      // Document i is held out when floor((i + 1) F) passes an integer: a fraction F of the
      // documents, spread evenly and the same on every run.
      const bool held =
          validation && std::floor((documents + 1) * fraction) > std::floor(documents * fraction);
      ++documents;
      validationDocuments += held;
      tokens += ids.size();
      bytesDone += text.size();
      if (!(held ? *validation : train).append(ids, error)) {
        errs() << "tessel: error: " << error << "\n";
        return 2;
      }
      progress.update(bytesDone, tokens);
      return 0;
    });
    if (rc)
      return rc;
  }
  if (validation && validationDocuments == 0) {
    errs() << "tessel: error: --val-fraction " << format("%g", fraction) << " of " << documents
           << " documents holds none; give at least "
           << static_cast<uint64_t>(std::ceil(1 / fraction)) << " documents or a larger fraction\n";
    return 1;
  }
  if (!train.finish(error) || (validation && !validation->finish(error))) {
    errs() << "tessel: error: " << error << "\n";
    return 2;
  }
  if (!quietArg) {
    const char *kind = wide ? "uint32, llm.c version 7" : "uint16, llm.c version 1";
    errs() << "tessel tokenize: " << documents - validationDocuments << " documents, "
           << train.count() << " tokens (" << kind << ") in " << train.path();
    if (validation)
      errs() << "; " << validationDocuments << " documents, " << validation->count()
             << " tokens in " << validation->path();
    errs() << "; " << format("%.1f", progress.rate(bytesDone)) << " MB/s\n";
  }
  return 0;
}

} // namespace tessel
