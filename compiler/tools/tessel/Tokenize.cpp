//===- Tokenize.cpp - tessel tokenize -------------------------------------===//
//
// Text to token files. Each document is encoded with the tokenizer's special tokens (its
// post-processor's: Llama 3's <|begin_of_text|> before it) and followed by the
// end-of-sequence token when the tokenizer names one (GPT-2's <|endoftext|>, Llama 3's
// <|end_of_text|>), so the documents of a file stay apart as llm.c's and nanoGPT's data keep
// them. JSON lines that are fine-tuning examples (prompt and completion, or a chat's
// messages) become an example file instead, each example with its loss mask
// (TokenizeExamples.h). The output is written to a temporary file beside it and renamed when
// whole.
//
//===----------------------------------------------------------------------===//

#include "Tokenize.h"
#include "TokenFileWriter.h"
#include "TokenizeExamples.h"

#include "common/tokenizer/ChatTemplate.h"
#include "common/tokenizer/ChatTemplateSource.h"
#include "common/tokenizer/JsonReader.h"
#include "common/tokenizer/Tokenizer.h"
#include "common/tokenizer/Utf8.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
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
cl::opt<std::string>
    chatTemplateArg("chat-template",
                    cl::desc("For chat examples: a built-in template's name, or a file holding "
                             "one (a .jinja file, or a tokenizer_config.json); default: the "
                             "tokenizer's own"),
                    cl::value_desc("name|file"), cl::sub(tokenizeCommand));
enum class TrainOn { Completion, All };
cl::opt<TrainOn> trainOnArg(
    "train-on", cl::desc("Which tokens of an example the loss counts"),
    cl::values(clEnumValN(TrainOn::Completion, "completion",
                          "the completion, or a chat's assistant turns (default)"),
               clEnumValN(TrainOn::All, "all", "every token")),
    cl::init(TrainOn::Completion), cl::sub(tokenizeCommand));

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

/// Calls `document(text, line, kind, where)` for each document of `path`: the whole file
/// (`line` null), or each line of a JSON-lines file (blank lines skipped; `line` the parsed
/// object, `kind` what it holds, and `text` its --field where it is a document). Returns 1 for a bad line (having said where), 2 when the
/// file cannot be read, or what `document` returns when it is not 0.
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
    tok::JsonDocument json;
    std::string why;
    if (!json.parse(line, why)) {
      errs() << where << ": error: not valid JSON: " << why << "\n";
      return 1;
    }
    const tok::JsonValue object = json.root();
    if (!object.isObject()) {
      errs() << where << ": error: not an object\n";
      return 1;
    }
    const LineKind kind = lineKind(object);
    if (kind != LineKind::Document)
      return document(std::string_view(), &object, kind, where);
    const tok::JsonValue field = object.find(fieldArg);
    if (!field.valid()) {
      errs() << where << ": error: no field '" << fieldArg
             << "' (--field names the one holding the text; a fine-tuning example has "
                "'prompt' and 'completion', or 'messages')\n";
      return 1;
    }
    if (!field.isString()) {
      errs() << where << ": error: field '" << fieldArg << "' is not a string\n";
      return 1;
    }
    return document(field.string(), &object, LineKind::Document, where);
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
  return document(buffer, nullptr, LineKind::Document, path);
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
  // The outputs are made when the first document or example shows which kind they are.
  std::optional<TokenFileWriter> train, validation;
  TokenFileWriter::Kind kind = TokenFileWriter::Kind::Stream;
  std::string firstWhere;
  auto openOutputs = [&](TokenFileWriter::Kind k) {
    kind = k;
    // Padding fills an example's row past its end; its targets are ignored, so any id does.
    const uint32_t pad = eos.value_or(0);
    train.emplace(outputArg, wide, k, pad);
    if (!valOutputArg.empty())
      validation.emplace(valOutputArg, wide, k, pad);
    if (!train->open(error) || (validation && !validation->open(error))) {
      errs() << "tessel: error: " << error << "\n";
      return false;
    }
    return true;
  };

  ExampleRecipe recipe;
  recipe.tokenizer = tokenizer.get();
  recipe.addSpecialTokens = specialTokensArg;
  recipe.eos = eos;
  recipe.trainOnAll = trainOnArg == TrainOn::All;
  if (std::optional<uint32_t> bos = tokenizer->bosId())
    recipe.bosToken = tokenizer->idToToken(*bos).value_or("");
  if (eos)
    recipe.eosToken = tokenizer->idToToken(*eos).value_or("");
  std::unique_ptr<tok::ChatTemplate> chat;
  bool chatLoaded = false;

  Progress progress(totalBytes);
  uint64_t documents = 0, validationDocuments = 0, bytesDone = 0, tokens = 0, trainedTokens = 0;
  std::vector<uint32_t> ids;
  std::vector<uint8_t> trained;
  for (const std::string &input : inputArgs) {
    int rc = forEachDocument(input, [&](std::string_view text, const tok::JsonValue *line,
                                        LineKind lineIs, const std::string &where) -> int {
      const bool example = lineIs != LineKind::Document;
      const TokenFileWriter::Kind want =
          example ? TokenFileWriter::Kind::Examples : TokenFileWriter::Kind::Stream;
      if (!train) {
        if (!openOutputs(want))
          return 2;
        firstWhere = where;
      } else if (want != kind) {
        errs() << where << ": error: " << (example ? "a fine-tuning example" : "a document")
               << ", but " << firstWhere << " was "
               << (example ? "a document" : "a fine-tuning example")
               << "; one output holds one kind (documents make a token stream, examples an "
                  "example file)\n";
        return 1;
      }
      if (example) {
        if (lineIs == LineKind::Chat && !chatLoaded) {
          chat = tok::loadChatTemplate(chatTemplateArg, *tokenizer, "--chat-template",
                                       recipe.noChatReason);
          recipe.chat = chat.get();
          chatLoaded = true;
        }
        if (!buildExample(*line, lineIs, recipe, ids, trained, error)) {
          errs() << where << ": error: " << error << "\n";
          return 1;
        }
      } else {
        if (text.empty())
          return 0; // an empty document adds nothing, not even its separators
        ids.clear();
        tokenizer->encodeAppend(text, specialTokensArg, ids);
        if (appendEos)
          ids.push_back(*eos);
      }
      // Document i is held out when floor((i + 1) F) passes an integer: a fraction F of the
      // documents, spread evenly and the same on every run.
      const bool held =
          validation && std::floor((documents + 1) * fraction) > std::floor(documents * fraction);
      ++documents;
      validationDocuments += held;
      tokens += ids.size();
      for (uint8_t t : trained)
        trainedTokens += example ? t : 0;
      bytesDone += example ? 0 : text.size();
      TokenFileWriter &out = held ? *validation : *train;
      if (!(example ? out.appendExample(ids, trained, error) : out.append(ids, error))) {
        errs() << "tessel: error: " << error << "\n";
        return 2;
      }
      progress.update(bytesDone, tokens);
      return 0;
    });
    if (rc)
      return rc;
  }
  if (!train && !openOutputs(TokenFileWriter::Kind::Stream))
    return 2;
  if (!quietArg && kind == TokenFileWriter::Kind::Stream)
    errs() << "tessel tokenize: " << tokenizer->description()
           << (appendEos ? ", end-of-sequence token after each document" : "") << "\n";
  if (validation && validationDocuments == 0) {
    const char *noun = kind == TokenFileWriter::Kind::Examples ? "examples" : "documents";
    errs() << "tessel: error: --val-fraction " << format("%g", fraction) << " of " << documents
           << " " << noun << " holds none; give at least "
           << static_cast<uint64_t>(std::ceil(1 / fraction)) << " " << noun
           << " or a larger fraction\n";
    return 1;
  }
  if (!train->finish(error) || (validation && !validation->finish(error))) {
    errs() << "tessel: error: " << error << "\n";
    return 2;
  }
  if (!quietArg && kind == TokenFileWriter::Kind::Examples) {
    errs() << "tessel tokenize: " << tokenizer->description() << "; "
           << documents - validationDocuments << " examples, " << train->count()
           << " tokens (" << (wide ? "uint32" : "uint16") << ", Tessel example file) in "
           << train->path();
    if (validation)
      errs() << "; " << validationDocuments << " examples, " << validation->count()
             << " tokens in " << validation->path();
    errs() << "; " << trainedTokens << " of " << tokens << " tokens trained ("
           << format("%.1f", tokens ? 100.0 * trainedTokens / tokens : 0.0) << "%)\n";
  } else if (!quietArg) {
    const char *what = wide ? "uint32, llm.c version 7" : "uint16, llm.c version 1";
    errs() << "tessel tokenize: " << documents - validationDocuments << " documents, "
           << train->count() << " tokens (" << what << ") in " << train->path();
    if (validation)
      errs() << "; " << validationDocuments << " documents, " << validation->count()
             << " tokens in " << validation->path();
    errs() << "; " << format("%.1f", progress.rate(bytesDone)) << " MB/s\n";
  }
  return 0;
}

} // namespace tessel
