//===- HfTokenizerJsonSteps.cpp - A tokenizer.json's text steps -----------===//
//
// The steps a tokenizer.json applies to text: its normalizer (Sequence, NFC, Prepend, Replace,
// Strip), its pre-tokenizer (Sequence, ByteLevel, Split, Digits, Metaspace) and, back from
// tokens, its decoder (Sequence, ByteLevel, ByteFallback, Fuse, Metaspace, Replace, Strip),
// each a list of steps with Sequences flattened into it. Any other type is refused by name,
// and ByteLevel must be the last pre-tokenizer.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/HfTokenizerReader.h"
#include "common/tokenizer/Utf8.h"

#include <algorithm>

namespace tessel::tok {

namespace {

/// GPT-2's pre-tokenization pattern, which a ByteLevel pre-tokenizer with use_regex applies.
constexpr std::string_view kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

} // namespace

/// A single character (Metaspace's replacement, Strip's content).
bool HfTokenizerReader::character(JsonValue object, std::string_view key, std::string_view path,
                                  std::string &out) {
  if (!requiredString(object, key, path, out))
    return false;
  if (out.empty() || utf8SequenceLength(static_cast<unsigned char>(out[0])) != out.size())
    return fail(object.find(key), join(path, key), "must be one character");
  return true;
}

/// A Split's or Replace's pattern: {"String": s} or {"Regex": r}.
bool HfTokenizerReader::readPattern(JsonValue object, std::string_view path, Pattern &out) {
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

bool HfTokenizerReader::readNormalizer(JsonValue v, const std::string &path, HfTokenizer &t) {
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

bool HfTokenizerReader::readPreTokenizer(JsonValue v, const std::string &path, HfTokenizer &t) {
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
bool HfTokenizerReader::readPrependScheme(JsonValue v, std::string_view path,
                                          PrependScheme &scheme) {
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
bool HfTokenizerReader::checkByteLevelLast(JsonValue root, HfTokenizer &t) {
  const auto &steps = t.preTokenizers_;
  for (size_t i = 0; i + 1 < steps.size(); ++i)
    if (steps[i].kind == PreTokenizerStep::Kind::ByteLevel)
      return fail(root.find("pre_tokenizer"), "pre_tokenizer",
                  "a ByteLevel pre-tokenizer followed by others is not supported (ByteLevel "
                  "must come last)");
  return true;
}

bool HfTokenizerReader::readDecoders(JsonValue v, const std::string &path, HfTokenizer &t) {
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

} // namespace tessel::tok
