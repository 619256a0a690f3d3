//===- HfTokenizerJson.cpp - Reading a tokenizer.json ---------------------===//
//
// Builds an HfTokenizer's steps from a tokenizer.json. Every key the pipeline depends on is
// checked for its type, and every component type Tessel does not implement is refused by
// name, so a file either loads as Hugging Face's tokenizers would run it or is refused with a
// reason: "FILE: model.merges[12] (line 80, column 5): ...".
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/HfTokenizer.h"

#include "common/tokenizer/JsonReader.h"
#include "common/tokenizer/Utf8.h"

#include <algorithm>
#include <unordered_map>

namespace tessel::tok {

namespace {

/// GPT-2's pre-tokenization pattern, which a ByteLevel pre-tokenizer with use_regex applies.
constexpr std::string_view kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/// A word character as Rust's regex crate has it (Unicode's \\w), for single_word; with the
/// characters Unicode 15.0 to 16.0 made word characters, which PCRE2 10.42's tables lack.
constexpr std::string_view kWordCharacter =
    "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}"
    "\\x{897}\\x{CF3}\\x{ECE}\\x{1C89}-\\x{1C8A}\\x{A7CB}-\\x{A7CD}\\x{A7DA}-\\x{A7DC}"
    "\\x{105C0}-\\x{105F3}\\x{10D40}-\\x{10D65}\\x{10D69}-\\x{10D6D}\\x{10D6F}-\\x{10D85}"
    "\\x{10EC2}-\\x{10EC4}\\x{10EFC}-\\x{10EFF}\\x{1123F}-\\x{11241}\\x{11380}-\\x{11389}"
    "\\x{1138B}\\x{1138E}\\x{11390}-\\x{113B5}\\x{113B7}-\\x{113C0}\\x{113C2}\\x{113C5}"
    "\\x{113C7}-\\x{113CA}\\x{113CC}-\\x{113D3}\\x{113E1}-\\x{113E2}\\x{116D0}-\\x{116E3}"
    "\\x{11BC0}-\\x{11BE0}\\x{11BF0}-\\x{11BF9}\\x{11F00}-\\x{11F10}\\x{11F12}-\\x{11F3A}"
    "\\x{11F3E}-\\x{11F42}\\x{11F50}-\\x{11F5A}\\x{1342F}\\x{13440}-\\x{13455}"
    "\\x{13460}-\\x{143FA}\\x{16100}-\\x{16139}\\x{16D40}-\\x{16D6C}\\x{16D70}-\\x{16D79}"
    "\\x{18CFF}\\x{1B132}\\x{1B155}\\x{1CCF0}-\\x{1CCF9}\\x{1DF25}-\\x{1DF2A}"
    "\\x{1E030}-\\x{1E06D}\\x{1E08F}\\x{1E4D0}-\\x{1E4F9}\\x{1E5D0}-\\x{1E5FA}\\x{2B739}"
    "\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}]";

std::string quoted(std::string_view s) {
  std::string out = "'";
  out.append(s.substr(0, 80));
  return out + (s.size() > 80 ? "...'" : "'");
}

} // namespace

class HfTokenizerReader {
public:
  HfTokenizerReader(const std::string &file, std::string &error) : file_(file), error_(error) {}

  std::unique_ptr<HfTokenizer> read(std::string_view text) {
    JsonDocument doc;
    std::string parseError;
    if (!doc.parse(text, parseError)) {
      error_ = file_ + ": not valid JSON: " + parseError;
      return nullptr;
    }
    JsonValue root = doc.root();
    if (!root.isObject()) {
      fail(root, "", "a tokenizer.json holds an object, not " + std::string(root.kindName()));
      return nullptr;
    }
    auto t = std::make_unique<HfTokenizer>();
    JsonValue version = root.find("version");
    if (version.valid() && !(version.isString() && version.string() == "1.0")) {
      fail(version, "version", "Tessel reads tokenizer.json version \"1.0\"");
      return nullptr;
    }
    if (!readNormalizer(root.find("normalizer"), "normalizer", *t) ||
        !readPreTokenizer(root.find("pre_tokenizer"), "pre_tokenizer", *t) ||
        !checkByteLevelLast(root, *t) || !readModel(root.find("model"), root, *t) ||
        !readAddedTokens(root.find("added_tokens"), *t) ||
        !readPostProcessor(root.find("post_processor"), "post_processor", t->prefix_, t->suffix_) ||
        !readDecoders(root.find("decoder"), "decoder", *t))
      return nullptr;
    t->hasDecoder_ = root.find("decoder").valid() && !root.find("decoder").isNull();
    for (uint32_t id : t->prefix_)
      if (!checkProcessorId(id, *t, "post_processor"))
        return nullptr;
    for (uint32_t id : t->suffix_)
      if (!checkProcessorId(id, *t, "post_processor"))
        return nullptr;
    if (t->prefix_.size() == 1)
      t->bos_ = t->prefix_[0];
    if (t->suffix_.size() == 1)
      t->eos_ = t->suffix_[0];
    const BpeModel &m = t->model_;
    t->description_ = std::string(m.byteLevel() ? "byte-level BPE" : "BPE") + ", " +
                      std::to_string(t->vocabBound_) + " ids (" + std::to_string(m.entries()) +
                      " in the vocabulary, " + std::to_string(t->added_.size()) + " added tokens)";
    return t;
  }

private:
  const std::string &file_;
  std::string &error_;

  bool fail(JsonValue at, std::string_view path, const std::string &what) {
    error_ = file_ + ": ";
    if (!path.empty())
      error_ += std::string(path) + " ";
    if (at.valid())
      error_ += "(" + at.location() + ")";
    error_ += ": " + what;
    return false;
  }

  static std::string join(std::string_view path, std::string_view key) {
    return std::string(path) + "." + std::string(key);
  }
  static std::string index(std::string_view path, size_t i) {
    return std::string(path) + "[" + std::to_string(i) + "]";
  }

  /// Reads optional string `key` of `object` into `out` (left as it is when absent or null).
  bool optionalString(JsonValue object, std::string_view key, std::string_view path,
                      std::optional<std::string> &out) {
    JsonValue v = object.find(key);
    if (!v.valid() || v.isNull())
      return true;
    if (!v.isString())
      return fail(v, join(path, key), "must be a string, not " + std::string(v.kindName()));
    out = std::string(v.string());
    return true;
  }
  bool requiredString(JsonValue object, std::string_view key, std::string_view path,
                      std::string &out) {
    std::optional<std::string> value;
    if (!optionalString(object, key, path, value))
      return false;
    if (!value)
      return fail(object, path, "needs a string \"" + std::string(key) + "\"");
    out = *value;
    return true;
  }
  /// Reads optional boolean `key` into `out` (left as it is when absent or null).
  bool flag(JsonValue object, std::string_view key, std::string_view path, bool &out) {
    JsonValue v = object.find(key);
    if (!v.valid() || v.isNull())
      return true;
    if (!v.isBool())
      return fail(v, join(path, key), "must be true or false, not " + std::string(v.kindName()));
    out = v.boolean();
    return true;
  }
  bool unsignedValue(JsonValue v, std::string_view path, uint32_t &out) {
    if (!v.isInteger() || v.integer() < 0 || v.integer() > 0xFFFFFFFEll)
      return fail(v, path,
                  "must be an id (a whole number from 0), not " +
                      (v.isNumber() ? "the number " + std::to_string(v.number())
                                    : std::string(v.kindName())));
    out = static_cast<uint32_t>(v.integer());
    return true;
  }
  bool typeOf(JsonValue v, std::string_view path, std::string &type) {
    if (!v.isObject())
      return fail(v, path, "must be an object, not " + std::string(v.kindName()));
    return requiredString(v, "type", path, type);
  }
  /// A single character (Metaspace's replacement, Strip's content).
  bool character(JsonValue object, std::string_view key, std::string_view path, std::string &out) {
    if (!requiredString(object, key, path, out))
      return false;
    if (out.empty() || utf8SequenceLength(static_cast<unsigned char>(out[0])) != out.size())
      return fail(object.find(key), join(path, key), "must be one character");
    return true;
  }

  /// A Split's or Replace's pattern: {"String": s} or {"Regex": r}.
  bool readPattern(JsonValue object, std::string_view path, Pattern &out) {
    JsonValue p = object.find("pattern");
    std::string at = join(path, "pattern");
    if (!p.valid())
      return fail(object, path, "needs a \"pattern\"");
    if (!p.isObject() || p.size() != 1 || !p.value(0).isString() ||
        (p.key(0) != "String" && p.key(0) != "Regex"))
      return fail(p, at, "must be {\"String\": ...} or {\"Regex\": ...}");
    if (p.key(0) == "String") {
      out.isRegex = false;
      out.literal = std::string(p.value(0).string());
      return true;
    }
    out.isRegex = true;
    std::string why;
    if (!out.regex.compile(p.value(0).string(), why))
      return fail(p, at, why);
    return true;
  }

  bool readNormalizer(JsonValue v, const std::string &path, HfTokenizer &t) {
    if (!v.valid() || v.isNull())
      return true;
    std::string type;
    if (!typeOf(v, path, type))
      return false;
    NormalizerStep step{NormalizerStep::Kind::Prepend, "", {}, false, false};
    if (type == "Sequence") {
      JsonValue list = v.find("normalizers");
      if (!list.valid() || !list.isArray())
        return fail(v, path, "a Sequence needs an array \"normalizers\"");
      for (size_t i = 0; i < list.size(); ++i)
        if (!readNormalizer(list.at(i), index(join(path, "normalizers"), i), t))
          return false;
      return true;
    }
    if (type == "Prepend") {
      if (!requiredString(v, "prepend", path, step.text))
        return false;
    } else if (type == "Replace") {
      step.kind = NormalizerStep::Kind::Replace;
      if (!readPattern(v, path, step.pattern) || !requiredString(v, "content", path, step.text))
        return false;
    } else if (type == "Strip") {
      step.kind = NormalizerStep::Kind::Strip;
      step.left = step.right = true;
      if (!flag(v, "strip_left", path, step.left) || !flag(v, "strip_right", path, step.right))
        return false;
    } else if (type == "NFC") {
      step.kind = NormalizerStep::Kind::Nfc;
    } else {
      return fail(v, join(path, "type"),
                  "normalizer " + quoted(type) +
                      " is not supported (Tessel has Sequence, NFC, Prepend, Replace, Strip)");
    }
    t.normalizers_.push_back(std::move(step));
    return true;
  }

  bool readPreTokenizer(JsonValue v, const std::string &path, HfTokenizer &t) {
    if (!v.valid() || v.isNull())
      return true;
    std::string type;
    if (!typeOf(v, path, type))
      return false;
    PreTokenizerStep step{};
    if (type == "Sequence") {
      JsonValue list = v.find("pretokenizers");
      if (!list.valid() || !list.isArray())
        return fail(v, path, "a Sequence needs an array \"pretokenizers\"");
      for (size_t i = 0; i < list.size(); ++i)
        if (!readPreTokenizer(list.at(i), index(join(path, "pretokenizers"), i), t))
          return false;
      return true;
    }
    std::string why;
    if (type == "ByteLevel") {
      step.kind = PreTokenizerStep::Kind::ByteLevel;
      step.addPrefixSpace = true;
      step.useRegex = true;
      if (!flag(v, "add_prefix_space", path, step.addPrefixSpace) ||
          !flag(v, "use_regex", path, step.useRegex))
        return false;
      if (step.useRegex) {
        step.pattern.isRegex = true;
        if (!step.pattern.regex.compile(kGpt2Pattern, why))
          return fail(v, path, "ByteLevel with use_regex: " + why);
      }
    } else if (type == "Split") {
      step.kind = PreTokenizerStep::Kind::Split;
      std::string behavior;
      if (!readPattern(v, path, step.pattern) || !requiredString(v, "behavior", path, behavior) ||
          !flag(v, "invert", path, step.invert))
        return false;
      static const std::pair<const char *, SplitBehavior> behaviors[] = {
          {"Removed", SplitBehavior::Removed},
          {"Isolated", SplitBehavior::Isolated},
          {"MergedWithPrevious", SplitBehavior::MergedWithPrevious},
          {"MergedWithNext", SplitBehavior::MergedWithNext},
          {"Contiguous", SplitBehavior::Contiguous}};
      auto it = std::find_if(std::begin(behaviors), std::end(behaviors),
                             [&](const auto &b) { return behavior == b.first; });
      if (it == std::end(behaviors))
        return fail(v.find("behavior"), join(path, "behavior"),
                    quoted(behavior) + " is not one of Removed, Isolated, MergedWithPrevious, "
                                       "MergedWithNext, Contiguous");
      step.behavior = it->second;
    } else if (type == "Digits") {
      // Digits splits at Unicode numbers (Rust's char::is_numeric): one piece per digit, or per
      // run of digits.
      step.kind = PreTokenizerStep::Kind::Split;
      bool individual = false;
      if (!flag(v, "individual_digits", path, individual))
        return false;
      step.pattern.isRegex = true;
      if (!step.pattern.regex.compile(individual ? "\\p{N}" : "\\p{N}+", why))
        return fail(v, path, "Digits: " + why);
    } else if (type == "Metaspace") {
      step.kind = PreTokenizerStep::Kind::Metaspace;
      if (!character(v, "replacement", path, step.replacement) ||
          !readPrependScheme(v, path, step.scheme) || !flag(v, "split", path, step.split))
        return false;
    } else {
      return fail(v, join(path, "type"),
                  "pre-tokenizer " + quoted(type) +
                      " is not supported (Tessel has Sequence, ByteLevel, Split, Digits, "
                      "Metaspace)");
    }
    t.preTokenizers_.push_back(std::move(step));
    return true;
  }

  /// Metaspace's prepend_scheme, and the add_prefix_space of older files.
  bool readPrependScheme(JsonValue v, std::string_view path, PrependScheme &scheme) {
    std::optional<std::string> name;
    if (!optionalString(v, "prepend_scheme", path, name))
      return false;
    scheme = PrependScheme::Always;
    if (name && *name == "first")
      scheme = PrependScheme::First;
    else if (name && *name == "never")
      scheme = PrependScheme::Never;
    else if (name && *name != "always")
      return fail(v.find("prepend_scheme"), join(path, "prepend_scheme"),
                  quoted(*name) + " is not one of first, never, always");
    bool addPrefixSpace = true;
    JsonValue legacy = v.find("add_prefix_space");
    if (!flag(v, "add_prefix_space", path, addPrefixSpace))
      return false;
    if (legacy.valid() && legacy.isBool() && !addPrefixSpace) {
      if (scheme != PrependScheme::Never && name)
        return fail(legacy, join(path, "add_prefix_space"),
                    "false does not match prepend_scheme " + quoted(*name));
      scheme = PrependScheme::Never;
    }
    return true;
  }

  /// The model's bytes are the text's bytes when ByteLevel is the last pre-tokenizer; one
  /// before others would hand them its printable spelling, which Tessel does not keep.
  bool checkByteLevelLast(JsonValue root, HfTokenizer &t) {
    const auto &steps = t.preTokenizers_;
    for (size_t i = 0; i + 1 < steps.size(); ++i)
      if (steps[i].kind == PreTokenizerStep::Kind::ByteLevel)
        return fail(root.find("pre_tokenizer"), "pre_tokenizer",
                    "a ByteLevel pre-tokenizer followed by others is not supported (ByteLevel "
                    "must come last)");
    return true;
  }

  bool readModel(JsonValue v, JsonValue root, HfTokenizer &t) {
    const std::string path = "model";
    if (!v.valid() || v.isNull())
      return fail(root, "", "there is no \"model\"");
    if (!v.isObject())
      return fail(v, path, "must be an object, not " + std::string(v.kindName()));
    std::optional<std::string> type;
    if (!optionalString(v, "type", path, type))
      return false;
    if (type && *type != "BPE")
      return fail(v.find("type"), "model.type",
                  "model " + quoted(*type) +
                      " is not supported (Tessel reads BPE tokenizer.json files; for a "
                      "SentencePiece model, give its tokenizer.model)");
    JsonValue dropout = v.find("dropout");
    if (dropout.valid() && !dropout.isNull() && !(dropout.isNumber() && dropout.number() == 0))
      return fail(dropout, "model.dropout",
                  "BPE dropout is not supported (it makes encoding random)");
    BpeOptions options;
    std::optional<std::string> prefix, suffix;
    if (!optionalString(v, "unk_token", path, options.unkToken) ||
        !optionalString(v, "continuing_subword_prefix", path, prefix) ||
        !optionalString(v, "end_of_word_suffix", path, suffix) ||
        !flag(v, "fuse_unk", path, options.fuseUnk) ||
        !flag(v, "byte_fallback", path, options.byteFallback) ||
        !flag(v, "ignore_merges", path, options.ignoreMerges))
      return false;
    options.continuingSubwordPrefix = prefix.value_or("");
    options.endOfWordSuffix = suffix.value_or("");

    JsonValue vocab = v.find("vocab");
    if (!vocab.valid() || !vocab.isObject())
      return fail(vocab.valid() ? vocab : v, "model.vocab",
                  "a BPE model needs an object \"vocab\" (token to id)");
    std::vector<std::pair<std::string, uint32_t>> entries;
    entries.reserve(vocab.size());
    for (size_t i = 0; i < vocab.size(); ++i) {
      uint32_t id = 0;
      if (!unsignedValue(vocab.value(i), "model.vocab[" + quoted(vocab.key(i)) + "]", id))
        return false;
      entries.emplace_back(std::string(vocab.key(i)), id);
    }
    JsonValue list = v.find("merges");
    if (!list.valid() || !list.isArray())
      return fail(list.valid() ? list : v, "model.merges", "a BPE model needs an array \"merges\"");
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      JsonValue m = list.at(i);
      if (m.isString()) {
        std::string_view line = m.string();
        if (line.substr(0, 8) == "#version")
          continue;
        size_t space = line.find(' ');
        if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
          return fail(m, index("model.merges", i),
                      quoted(line) + " is not two tokens separated by one space");
        merges.emplace_back(std::string(line.substr(0, space)),
                            std::string(line.substr(space + 1)));
      } else if (m.isArray() && m.size() == 2 && m.at(0).isString() && m.at(1).isString()) {
        merges.emplace_back(std::string(m.at(0).string()), std::string(m.at(1).string()));
      } else {
        return fail(m, index("model.merges", i),
                    "a merge is a string \"a b\" or an array of two strings");
      }
    }
    const bool byteLevel = !t.preTokenizers_.empty() &&
                           t.preTokenizers_.back().kind == PreTokenizerStep::Kind::ByteLevel;
    std::string why;
    if (!t.model_.build(std::move(entries), merges, options, byteLevel, why))
      return fail(v, path, why);
    return true;
  }

  bool readAddedTokens(JsonValue list, HfTokenizer &t) {
    const std::string path = "added_tokens";
    if (!list.valid() || list.isNull())
      return finishAddedTokens(list, t);
    if (!list.isArray())
      return fail(list, path, "must be an array, not " + std::string(list.kindName()));
    // Ids as Hugging Face's tokenizers gives them: the vocabulary's id of a token it has, else
    // the next after the model's (its vocabulary size) and the added tokens'. A file whose ids
    // say otherwise is inconsistent and refused, not silently renumbered.
    uint32_t next = static_cast<uint32_t>(t.model_.entries());
    std::unordered_map<std::string, size_t> byContent;
    for (size_t i = 0; i < list.size(); ++i) {
      JsonValue v = list.at(i);
      std::string at = index(path, i);
      if (!v.isObject())
        return fail(v, at, "must be an object, not " + std::string(v.kindName()));
      AddedToken token;
      uint32_t fileId = 0;
      JsonValue id = v.find("id");
      if (!id.valid())
        return fail(v, at, "needs an \"id\"");
      if (!unsignedValue(id, join(at, "id"), fileId) ||
          !requiredString(v, "content", at, token.content) ||
          !flag(v, "special", at, token.special))
        return false;
      token.normalized = !token.special;
      if (!flag(v, "single_word", at, token.singleWord) || !flag(v, "lstrip", at, token.lstrip) ||
          !flag(v, "rstrip", at, token.rstrip) || !flag(v, "normalized", at, token.normalized))
        return false;
      if (token.content.empty())
        continue;
      uint32_t assigned;
      auto seen = byContent.find(token.content);
      if (seen != byContent.end()) {
        assigned = t.added_[seen->second].id;
      } else {
        uint32_t inVocab = t.model_.tokenToId(token.content);
        assigned = inVocab != StringIdMap::kNone ? inVocab : next++;
      }
      if (assigned != fileId)
        return fail(id, join(at, "id"),
                    quoted(token.content) + " has id " + std::to_string(fileId) +
                        " but the vocabulary and the tokens before it give it " +
                        std::to_string(assigned));
      if (assigned > 0xFFFFFF)
        return fail(id, join(at, "id"),
                    "id " + std::to_string(assigned) +
                        " is beyond the largest Tessel takes (16777215)");
      token.id = assigned;
      if (token.special)
        t.specialContents_.insert(token.content);
      if (seen != byContent.end()) {
        t.added_[seen->second] = std::move(token);
      } else {
        byContent.emplace(token.content, t.added_.size());
        t.added_.push_back(std::move(token));
      }
    }
    return finishAddedTokens(list, t);
  }

  /// Normalized spellings, matchers and the id tables, once the added tokens are known.
  bool finishAddedTokens(JsonValue list, HfTokenizer &t) {
    EncodeScratch scratch;
    std::vector<std::string_view> raw, normalized;
    bool needWordClass = false;
    for (size_t i = 0; i < t.added_.size(); ++i) {
      AddedToken &token = t.added_[i];
      token.normalizedContent = token.content;
      if (token.normalized && !t.normalizers_.empty()) {
        t.normalize(token.content, scratch);
        token.normalizedContent = scratch.normalized;
      }
      needWordClass |= token.singleWord;
      if (token.normalized) {
        t.normalizedTokens_.push_back(static_cast<uint32_t>(i));
        normalized.push_back(token.normalizedContent);
      } else {
        t.rawTokens_.push_back(static_cast<uint32_t>(i));
        raw.push_back(token.content);
      }
    }
    t.rawMatcher_.build(raw);
    t.normalizedMatcher_.build(normalized);
    std::string why;
    if (needWordClass && !t.wordClass_.compile(kWordCharacter, why))
      return fail(list, "added_tokens", "a single_word token needs word characters: " + why);
    t.vocabBound_ = t.model_.idBound();
    for (const AddedToken &token : t.added_)
      t.vocabBound_ = std::max(t.vocabBound_, token.id + 1);
    t.addedIndexOfId_.assign(t.vocabBound_, -1);
    for (size_t i = 0; i < t.added_.size(); ++i)
      t.addedIndexOfId_[t.added_[i].id] = static_cast<int32_t>(i);
    return true;
  }

  /// Reads a post-processor as the tokens it puts before and after a single sequence.
  bool readPostProcessor(JsonValue v, const std::string &path, std::vector<uint32_t> &prefix,
                         std::vector<uint32_t> &suffix) {
    if (!v.valid() || v.isNull())
      return true;
    std::string type;
    if (!typeOf(v, path, type))
      return false;
    if (type == "ByteLevel")
      return true;
    if (type == "Sequence") {
      JsonValue list = v.find("processors");
      if (!list.valid() || !list.isArray())
        return fail(v, path, "a Sequence needs an array \"processors\"");
      for (size_t i = 0; i < list.size(); ++i) {
        // Each processor wraps what the ones before it made.
        std::vector<uint32_t> before, after;
        if (!readPostProcessor(list.at(i), index(join(path, "processors"), i), before, after))
          return false;
        prefix.insert(prefix.begin(), before.begin(), before.end());
        suffix.insert(suffix.end(), after.begin(), after.end());
      }
      return true;
    }
    if (type == "RobertaProcessing" || type == "BertProcessing") {
      uint32_t cls = 0, sep = 0;
      if (!tokenPair(v, "cls", path, cls) || !tokenPair(v, "sep", path, sep))
        return false;
      prefix.push_back(cls);
      suffix.push_back(sep);
      return true;
    }
    if (type == "TemplateProcessing")
      return readTemplate(v, path, prefix, suffix);
    return fail(v, join(path, "type"),
                "post-processor " + quoted(type) +
                    " is not supported (Tessel has TemplateProcessing, ByteLevel, "
                    "RobertaProcessing, BertProcessing, Sequence)");
  }

  /// Roberta's and Bert's ["token", id].
  bool tokenPair(JsonValue v, std::string_view key, std::string_view path, uint32_t &id) {
    JsonValue pair = v.find(key);
    if (!pair.valid() || !pair.isArray() || pair.size() != 2 || !pair.at(0).isString())
      return fail(pair.valid() ? pair : v, join(path, key), "must be [\"token\", id]");
    return unsignedValue(pair.at(1), join(path, key), id);
  }

  bool readTemplate(JsonValue v, const std::string &path, std::vector<uint32_t> &prefix,
                    std::vector<uint32_t> &suffix) {
    JsonValue single = v.find("single"), specials = v.find("special_tokens");
    if (!single.valid() || !single.isArray())
      return fail(single.valid() ? single : v, join(path, "single"),
                  "a TemplateProcessing needs an array \"single\"");
    bool seenSequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      JsonValue piece = single.at(i);
      std::string at = index(join(path, "single"), i);
      // {"Sequence": {"id": "A", ...}}, {"SpecialToken": {"id": "<s>", ...}}, or the string
      // forms "$A" and "<s>".
      std::string kind, id;
      if (piece.isString()) {
        std::string_view s = piece.string();
        s = s.substr(0, s.find(':'));
        kind = !s.empty() && s[0] == '$' ? "Sequence" : "SpecialToken";
        id = kind == "Sequence" ? std::string(s.substr(1)) : std::string(s);
        if (kind == "Sequence" && id.empty())
          id = "A";
      } else if (piece.isObject() && piece.size() == 1 && piece.value(0).isObject()) {
        kind = std::string(piece.key(0));
        if (!requiredString(piece.value(0), "id", at, id))
          return false;
      } else {
        return fail(piece, at,
                    "a template piece is {\"Sequence\": ...} or "
                    "{\"SpecialToken\": ...}");
      }
      if (kind == "Sequence") {
        if (id != "A" && id != "a")
          return fail(piece, at, "the single-sequence template can hold only sequence A");
        if (seenSequence)
          return fail(piece, at, "the template holds sequence A twice");
        seenSequence = true;
        continue;
      }
      if (kind != "SpecialToken")
        return fail(piece, at, quoted(kind) + " is neither Sequence nor SpecialToken");
      JsonValue special = specials.valid() && specials.isObject() ? specials.find(id) : JsonValue();
      if (!special.valid())
        return fail(piece, at, "special token " + quoted(id) + " is not in special_tokens");
      std::string where = join(join(path, "special_tokens"), quoted(id));
      JsonValue ids = special.isObject() ? special.find("ids") : JsonValue();
      if (!ids.valid() || !ids.isArray())
        return fail(special, where, "needs an array \"ids\"");
      for (size_t k = 0; k < ids.size(); ++k) {
        uint32_t value = 0;
        if (!unsignedValue(ids.at(k), index(join(where, "ids"), k), value))
          return false;
        (seenSequence ? suffix : prefix).push_back(value);
      }
    }
    if (!seenSequence)
      return fail(single, join(path, "single"), "the template does not hold sequence A ($A)");
    return true;
  }

  bool checkProcessorId(uint32_t id, const HfTokenizer &t, std::string_view path) {
    if (id < t.vocabBound_ && (t.model_.idToToken(id) || t.addedIndexOfId_[id] >= 0))
      return true;
    error_ = file_ + ": " + std::string(path) + ": the post-processor adds id " +
             std::to_string(id) + ", which is no token of the vocabulary";
    return false;
  }

  bool readDecoders(JsonValue v, const std::string &path, HfTokenizer &t) {
    if (!v.valid() || v.isNull())
      return true;
    std::string type;
    if (!typeOf(v, path, type))
      return false;
    DecoderStep step{DecoderStep::Kind::ByteLevel, "", PrependScheme::Always, {}, "", 0, 0};
    if (type == "Sequence") {
      JsonValue list = v.find("decoders");
      if (!list.valid() || !list.isArray())
        return fail(v, path, "a Sequence needs an array \"decoders\"");
      for (size_t i = 0; i < list.size(); ++i)
        if (!readDecoders(list.at(i), index(join(path, "decoders"), i), t))
          return false;
      return true;
    }
    if (type == "ByteLevel") {
      step.kind = DecoderStep::Kind::ByteLevel;
    } else if (type == "ByteFallback") {
      step.kind = DecoderStep::Kind::ByteFallback;
    } else if (type == "Fuse") {
      step.kind = DecoderStep::Kind::Fuse;
    } else if (type == "Metaspace") {
      step.kind = DecoderStep::Kind::Metaspace;
      if (!character(v, "replacement", path, step.replacement) ||
          !readPrependScheme(v, path, step.scheme))
        return false;
    } else if (type == "Replace") {
      step.kind = DecoderStep::Kind::Replace;
      if (!readPattern(v, path, step.pattern) || !requiredString(v, "content", path, step.content))
        return false;
    } else if (type == "Strip") {
      step.kind = DecoderStep::Kind::Strip;
      uint32_t start = 0, stop = 0;
      JsonValue a = v.find("start"), b = v.find("stop");
      if (!character(v, "content", path, step.content) ||
          !unsignedValue(a.valid() ? a : v, join(path, "start"), start) ||
          !unsignedValue(b.valid() ? b : v, join(path, "stop"), stop))
        return false;
      step.start = start;
      step.stop = stop;
    } else {
      return fail(v, join(path, "type"),
                  "decoder " + quoted(type) +
                      " is not supported (Tessel has Sequence, ByteLevel, ByteFallback, Fuse, "
                      "Metaspace, Replace, Strip)");
    }
    t.decoders_.push_back(std::move(step));
    return true;
  }
};

std::unique_ptr<HfTokenizer> HfTokenizer::fromJson(const std::string &file, std::string_view text,
                                                   std::string &error) {
  return HfTokenizerReader(file, error).read(text);
}

} // namespace tessel::tok
