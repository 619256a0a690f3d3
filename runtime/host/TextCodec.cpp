//===- TextCodec.cpp - Prompts in, sampled text out -----------------------===//

#include "runtime/host/TextCodec.h"

#include "common/tokenizer/Tokenizer.h"
#include "runtime/core/Rng.h"
#include "runtime/host/Data.h"

#include <algorithm>
#include <cmath>

namespace tessel::rt {

namespace {
/// U+FFFD in UTF-8: what a decoder gives for the bytes of a character not yet complete.
constexpr char kReplacement[] = "\xEF\xBF\xBD";
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
  } else if (kind == "byte") {
    codec->description_ = "the byte tokenizer";
  } else {
    codec->kind_ = Kind::Ids;
    codec->description_ = "token ids";
  }
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

std::optional<int32_t> TextCodec::endOfSequence() const {
  if (kind_ == Kind::Tokenizer && tokenizer_->eosId())
    return static_cast<int32_t>(*tokenizer_->eosId());
  return std::nullopt;
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
