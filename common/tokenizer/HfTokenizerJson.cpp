//===- HfTokenizerJson.cpp - Reading a tokenizer.json ---------------------===//
//
// Builds an HfTokenizer's steps from a tokenizer.json. Every key the pipeline depends on is
// checked for its type, and every component type Tessel does not implement is refused by
// name, so a file either loads as Hugging Face's tokenizers would run it or is refused with a
// reason: "FILE: model.merges[12] (line 80, column 5): ...". Here are the whole file and the
// checks of keys' types; the normalizer, pre-tokenizer and decoder steps are read in
// HfTokenizerJsonSteps.cpp, the model, the added tokens and the post-processor in
// HfTokenizerJsonVocabulary.cpp.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/HfTokenizerReader.h"

namespace tessel::tok {

std::string HfTokenizerReader::quoted(std::string_view s) {
  std::string out = "'";
  out.append(s.substr(0, 80));
  return out + (s.size() > 80 ? "...'" : "'");
}

std::unique_ptr<HfTokenizer> HfTokenizerReader::read(std::string_view text) {
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

bool HfTokenizerReader::fail(JsonValue at, std::string_view path, const std::string &what) {
  error_ = file_ + ": ";
  if (!path.empty())
    error_ += std::string(path) + " ";
  if (at.valid())
    error_ += "(" + at.location() + ")";
  error_ += ": " + what;
  return false;
}

std::string HfTokenizerReader::join(std::string_view path, std::string_view key) {
  return std::string(path) + "." + std::string(key);
}

std::string HfTokenizerReader::index(std::string_view path, size_t i) {
  return std::string(path) + "[" + std::to_string(i) + "]";
}

/// Reads optional string `key` of `object` into `out` (left as it is when absent or null).
bool HfTokenizerReader::optionalString(JsonValue object, std::string_view key,
                                       std::string_view path, std::optional<std::string> &out) {
  JsonValue v = object.find(key);
  if (!v.valid() || v.isNull())
    return true;
  if (!v.isString())
    return fail(v, join(path, key), "must be a string, not " + std::string(v.kindName()));
  out = std::string(v.string());
  return true;
}

bool HfTokenizerReader::requiredString(JsonValue object, std::string_view key,
                                       std::string_view path, std::string &out) {
  std::optional<std::string> value;
  if (!optionalString(object, key, path, value))
    return false;
  if (!value)
    return fail(object, path, "needs a string \"" + std::string(key) + "\"");
  out = *value;
  return true;
}

/// Reads optional boolean `key` into `out` (left as it is when absent or null).
bool HfTokenizerReader::flag(JsonValue object, std::string_view key, std::string_view path,
                             bool &out) {
  JsonValue v = object.find(key);
  if (!v.valid() || v.isNull())
    return true;
  if (!v.isBool())
    return fail(v, join(path, key), "must be true or false, not " + std::string(v.kindName()));
  out = v.boolean();
  return true;
}

bool HfTokenizerReader::unsignedValue(JsonValue v, std::string_view path, uint32_t &out) {
  if (!v.isInteger() || v.integer() < 0 || v.integer() > 0xFFFFFFFEll)
    return fail(v, path,
                "must be an id (a whole number from 0), not " +
                    (v.isNumber() ? "the number " + std::to_string(v.number())
                                  : std::string(v.kindName())));
  out = static_cast<uint32_t>(v.integer());
  return true;
}

bool HfTokenizerReader::typeOf(JsonValue v, std::string_view path, std::string &type) {
  if (!v.isObject())
    return fail(v, path, "must be an object, not " + std::string(v.kindName()));
  return requiredString(v, "type", path, type);
}

std::unique_ptr<HfTokenizer> HfTokenizer::fromJson(const std::string &file, std::string_view text,
                                                   std::string &error) {
  return HfTokenizerReader(file, error).read(text);
}

} // namespace tessel::tok
