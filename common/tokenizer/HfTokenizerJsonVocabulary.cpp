//===- HfTokenizerJsonVocabulary.cpp - A tokenizer.json's ids -------------===//
//
// What gives a tokenizer.json's ids: its BPE model (vocab, merges and options; dropout, which
// makes encoding random, and other model types are refused), its added tokens (each id
// checked against what Hugging Face's tokenizers would give it, and their matchers built) and
// its post-processor (TemplateProcessing, Roberta and Bert's, Sequence) as the ids it puts
// around a single sequence, each checked to be a token.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/HfTokenizerReader.h"

#include <algorithm>
#include <unordered_map>

namespace tessel::tok {

namespace {

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

} // namespace

bool HfTokenizerReader::readModel(JsonValue v, JsonValue root, HfTokenizer &t) {
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
      merges.emplace_back(std::string(line.substr(0, space)), std::string(line.substr(space + 1)));
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

bool HfTokenizerReader::readAddedTokens(JsonValue list, HfTokenizer &t) {
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
        !requiredString(v, "content", at, token.content) || !flag(v, "special", at, token.special))
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
bool HfTokenizerReader::finishAddedTokens(JsonValue list, HfTokenizer &t) {
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
bool HfTokenizerReader::readPostProcessor(JsonValue v, const std::string &path,
                                          std::vector<uint32_t> &prefix,
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
bool HfTokenizerReader::tokenPair(JsonValue v, std::string_view key, std::string_view path,
                                  uint32_t &id) {
  JsonValue pair = v.find(key);
  if (!pair.valid() || !pair.isArray() || pair.size() != 2 || !pair.at(0).isString())
    return fail(pair.valid() ? pair : v, join(path, key), "must be [\"token\", id]");
  return unsignedValue(pair.at(1), join(path, key), id);
}

bool HfTokenizerReader::readTemplate(JsonValue v, const std::string &path,
                                     std::vector<uint32_t> &prefix, std::vector<uint32_t> &suffix) {
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

bool HfTokenizerReader::checkProcessorId(uint32_t id, const HfTokenizer &t, std::string_view path) {
  if (id < t.vocabBound_ && (t.model_.idToToken(id) || t.addedIndexOfId_[id] >= 0))
    return true;
  error_ = file_ + ": " + std::string(path) + ": the post-processor adds id " + std::to_string(id) +
           ", which is no token of the vocabulary";
  return false;
}

} // namespace tessel::tok
