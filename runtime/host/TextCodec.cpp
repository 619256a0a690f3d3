//===- TextCodec.cpp - Prompts in, sampled text out -----------------------===//

#include "runtime/host/TextCodec.h"

#include "common/tokenizer/ChatTemplate.h"
#include "common/tokenizer/ChatTemplateSource.h"
#include "common/tokenizer/JsonReader.h"
#include "common/tokenizer/Tokenizer.h"
#include "runtime/core/Rng.h"
#include "runtime/host/Data.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tessel::rt {

namespace {
/// U+FFFD in UTF-8: what a decoder gives for the bytes of a character not yet complete.
constexpr char kReplacement[] = "\xEF\xBF\xBD";

/// The eos_token_id of generation_config.json in `folder` (a number or a list of them); none
/// where the file is absent. A file that is not JSON, or holds something else there, fails.
bool generationStops(const std::filesystem::path &folder, std::vector<int32_t> &ids,
                     std::string &error) {
  const std::filesystem::path file = folder / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    return true;
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  tok::JsonDocument doc;
  std::string why;
  if (!doc.parse(text.str(), why) || !doc.root().isObject()) {
    error = file.string() + ": " + (why.empty() ? "not a JSON object" : why);
    return false;
  }
  const tok::JsonValue eos = doc.root().find("eos_token_id");
  if (!eos.valid() || eos.isNull())
    return true;
  auto add = [&](const tok::JsonValue &v) {
    if (!v.isInteger() || v.integer() < 0 || v.integer() > INT32_MAX) {
      error = file.string() + ": eos_token_id (" + v.location() + ") is not a token id";
      return false;
    }
    ids.push_back(static_cast<int32_t>(v.integer()));
    return true;
  };
  if (!eos.isArray())
    return add(eos);
  for (size_t i = 0; i < eos.size(); ++i)
    if (!add(eos.at(i)))
      return false;
  return true;
}
} // namespace

TextCodec::~TextCodec() = default;

std::unique_ptr<TextCodec> TextCodec::create(const std::string &kind,
                                             const std::string &tokenizerPath, int64_t vocab,
                                             std::string &error) {
  auto codec = std::unique_ptr<TextCodec>(new TextCodec());
  if (!tokenizerPath.empty()) {
    codec->tokenizer_ = tok::Tokenizer::load(tokenizerPath, error);
    if (!codec->tokenizer_)
      return nullptr;
    if (static_cast<int64_t>(codec->tokenizer_->vocabSize()) > vocab) {
      error = "the tokenizer " + tokenizerPath + " has " +
              std::to_string(codec->tokenizer_->vocabSize()) + " ids, more than the model's " +
              std::to_string(vocab) + " (dims.vocab)";
      return nullptr;
    }
    codec->kind_ = Kind::Tokenizer;
    codec->description_ = tokenizerPath;
    if (std::optional<uint32_t> eos = codec->tokenizer_->eosId())
      codec->stops_.push_back(static_cast<int32_t>(*eos));
    std::error_code ec;
    const std::filesystem::path path(tokenizerPath);
    if (!generationStops(std::filesystem::is_directory(path, ec) ? path : path.parent_path(),
                         codec->stops_, error))
      return nullptr;
  } else if (kind == "byte") {
    codec->description_ = "the byte tokenizer";
  } else {
    codec->kind_ = Kind::Ids;
    codec->description_ = "token ids";
  }
  return codec;
}

std::unique_ptr<TextCodec> TextCodec::fresh() const {
  auto codec = std::unique_ptr<TextCodec>(new TextCodec());
  codec->kind_ = kind_;
  codec->tokenizer_ = tokenizer_;
  codec->stops_ = stops_;
  codec->description_ = description_;
  return codec;
}

bool TextCodec::encodePrompt(const std::string &prompt, bool given, std::vector<int32_t> &ids,
                             std::string &error) const {
  ids.clear();
  switch (kind_) {
  case Kind::Bytes:
    ids = encodeBytes(prompt);
    break;
  case Kind::Ids:
    if (given && !parseTokenIds(prompt, ids, error)) {
      error = "--prompt: this model reads pre-tokenized data (tokenizer = tokens) and no "
              "tokenizer is named (--tokenizer), so its prompt is token ids: " +
              error;
      return false;
    }
    break;
  case Kind::Tokenizer:
    for (uint32_t id : tokenizer_->encode(given ? prompt : "", /*addSpecialTokens=*/true))
      ids.push_back(static_cast<int32_t>(id));
    break;
  }
  if (ids.empty()) {
    if (kind_ == Kind::Tokenizer && !tokenizer_->bosId() && !given) {
      error = "the tokenizer " + description_ + " has no beginning-of-sequence token to start "
              "from: give a --prompt";
      return false;
    }
    if (kind_ == Kind::Tokenizer && !tokenizer_->bosId()) {
      error = "--prompt encodes to no tokens";
      return false;
    }
    ids.push_back(kind_ == Kind::Bytes ? '\n'
                  : kind_ == Kind::Ids ? 0
                                       : static_cast<int32_t>(*tokenizer_->bosId()));
  }
  return true;
}

bool TextCodec::encodeChat(const std::string &user, const std::string &system,
                           const std::string &templateName, std::vector<int32_t> &ids,
                           std::string &error) const {
  if (kind_ != Kind::Tokenizer) {
    error = "--chat needs the model's tokenizer (--tokenizer PATH, or the one beside the "
            "pretrained weights): a chat template is text";
    return false;
  }
  std::unique_ptr<tok::ChatTemplate> chat =
      tok::loadChatTemplate(templateName, *tokenizer_, "--chat-template", error);
  if (!chat)
    return false;
  namespace chatv = tok::chat;
  auto message = [](const char *role, const std::string &content) {
    chatv::Dict d;
    d.set(chatv::Value::string("role"), chatv::Value::string(role));
    d.set(chatv::Value::string("content"), chatv::Value::string(content));
    return chatv::Value::dict(std::move(d));
  };
  chatv::List messages;
  if (!system.empty())
    messages.push_back(message("system", system));
  messages.push_back(message("user", user));
  tok::ChatTemplate::Options options;
  options.addGenerationPrompt = true;
  if (std::optional<uint32_t> bos = tokenizer_->bosId())
    options.bosToken = tokenizer_->idToToken(*bos).value_or("");
  if (std::optional<uint32_t> eos = tokenizer_->eosId())
    options.eosToken = tokenizer_->idToToken(*eos).value_or("");
  std::string text;
  if (!chat->render(chatv::Value::list(std::move(messages)), options, text, error)) {
    error = "the chat template: " + error;
    return false;
  }
  // The template writes the special tokens (BOS included) as text.
  ids.clear();
  for (uint32_t id : tokenizer_->encode(text, /*addSpecialTokens=*/false))
    ids.push_back(static_cast<int32_t>(id));
  if (ids.empty()) {
    error = "the chat template renders the prompt as no tokens";
    return false;
  }
  return true;
}

std::string TextCodec::echo(const std::string &prompt, bool given,
                            const std::vector<int32_t> &ids) const {
  switch (kind_) {
  case Kind::Bytes:
    return prompt;
  case Kind::Ids: {
    std::string out;
    if (given)
      for (int32_t t : ids)
        out += std::to_string(t) + " ";
    return out;
  }
  case Kind::Tokenizer:
    return given ? prompt : "";
  }
  return "";
}

std::string TextCodec::append(int32_t id) {
  switch (kind_) {
  case Kind::Bytes:
    return std::string(1, static_cast<char>(id));
  case Kind::Ids:
    return std::to_string(id) + " ";
  case Kind::Tokenizer:
    break;
  }
  sampled_.push_back(static_cast<uint32_t>(id));
  // The whole sample decoded again: a token's text may depend on its neighbours (byte-level
  // pieces of one character, SentencePiece's leading space), and a character split over
  // tokens decodes whole only once its last byte is in.
  const std::string text = tokenizer_->decode(sampled_, /*skipSpecialTokens=*/false);
  if (text.size() >= 3 && text.compare(text.size() - 3, 3, kReplacement) == 0)
    return "";
  if (text.size() <= printed_)
    return "";
  std::string fresh = text.substr(printed_);
  printed_ = text.size();
  return fresh;
}

bool TextCodec::endsSample(int32_t id) const {
  return std::find(stops_.begin(), stops_.end(), id) != stops_.end();
}

int32_t sampleToken(const float *logits, int64_t vocab, double temperature, int64_t topK,
                    double topP, Rng &rng, std::vector<float> &probs) {
  temperature = std::max(temperature, 1e-4);
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  for (int32_t i = 0; i < vocab; ++i)
    order[i] = i;
  const int64_t k = topK > 0 ? std::min(topK, vocab) : vocab;
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  probs.resize(static_cast<size_t>(vocab));
  const double maxLogit = logits[order[0]];
  double total = 0;
  for (int64_t i = 0; i < k; ++i) {
    probs[i] = static_cast<float>(std::exp((logits[order[i]] - maxLogit) / temperature));
    total += probs[i];
  }
  // The nucleus: the shortest prefix of the sorted tokens holding topP of the probability.
  int64_t kept = k;
  if (topP < 1.0) {
    double mass = 0;
    for (int64_t i = 0; i < k; ++i) {
      mass += probs[i];
      if (mass >= topP * total) {
        kept = i + 1;
        total = mass;
        break;
      }
    }
  }
  double r = rng.uniform() * total;
  for (int64_t i = 0; i < kept; ++i) {
    r -= probs[i];
    if (r <= 0)
      return order[i];
  }
  return order[kept - 1];
}

} // namespace tessel::rt
