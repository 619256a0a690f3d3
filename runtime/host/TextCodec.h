//===- TextCodec.h - Prompts in, sampled text out ---------------*- C++ -*-===//
//
// What `--generate` reads and prints, for each way a model sees text: the byte tokenizer
// (each byte a token), pre-tokenized data (a prompt of token ids, ids printed), or a real
// tokenizer (common/tokenizer: a Hugging Face tokenizer.json or a SentencePiece model), whose
// prompt is encoded with its special tokens and whose sampled ids are printed as text as soon
// as they decode to whole characters; sampling stops at its end-of-sequence token (and at the
// ids that generation_config.json beside it lists as eos_token_id). In a chat (--chat), the
// prompt is the user's turn, rendered with a chat template and its generation prompt.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_TEXTCODEC_H
#define TESSEL_RUNTIME_HOST_TEXTCODEC_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessel::tok {
class Tokenizer;
}

namespace tessel::rt {

class TextCodec {
public:
  ~TextCodec();
  /// `kind` is the spec's train.tokenizer ("byte" or "tokens"); a non-empty `tokenizerPath`
  /// (a tokenizer.json, a .model, or a folder holding one) replaces it. Fails when the
  /// tokenizer does not load or has more ids than the model's `vocab`.
  static std::unique_ptr<TextCodec> create(const std::string &kind,
                                           const std::string &tokenizerPath, int64_t vocab,
                                           std::string &error);

  /// A codec of the same tokenizer (loaded once, shared) with nothing sampled yet: one per
  /// sequence generated at once, each decoding its own ids.
  std::unique_ptr<TextCodec> fresh() const;

  /// The prompt's ids (`given`: the user wrote one; else a default start: a newline, id 0, or
  /// the tokenizer's BOS).
  bool encodePrompt(const std::string &prompt, bool given, std::vector<int32_t> &ids,
                    std::string &error) const;
  /// The prompt as the user's turn of a conversation (after a system turn where `system` is
  /// given), rendered with the chat template `templateName` names (empty: the tokenizer's own;
  /// common/tokenizer/ChatTemplateSource.h) and its generation prompt, and encoded: what the
  /// model answers. Needs a tokenizer.
  bool encodeChat(const std::string &user, const std::string &system,
                  const std::string &templateName, std::vector<int32_t> &ids,
                  std::string &error) const;
  /// What to print of the prompt, so that the output reads as one text.
  std::string echo(const std::string &prompt, bool given, const std::vector<int32_t> &ids) const;
  /// Takes a sampled id; returns the text it completes (empty while a character is partial).
  std::string append(int32_t id);
  /// Whether `id` ends a sample: the tokenizer's end-of-sequence token, or an id that
  /// generation_config.json beside the tokenizer names as eos_token_id (a chat model's
  /// end-of-turn token, such as Llama 3's <|eot_id|>).
  bool endsSample(int32_t id) const;
  /// "the byte tokenizer", "token ids", or the tokenizer's path.
  const std::string &description() const { return description_; }

private:
  TextCodec() = default;
  enum class Kind { Bytes, Ids, Tokenizer } kind_ = Kind::Bytes;
  std::shared_ptr<const tok::Tokenizer> tokenizer_;
  std::vector<int32_t> stops_; ///< The ids that end a sample.
  std::string description_;
  std::vector<uint32_t> sampled_;
  size_t printed_ = 0; ///< Bytes of the sampled ids' text printed so far.
};

class Rng;

/// Samples a token from `logits` (`vocab` of them): scaled by 1 / temperature, kept to the
/// `topK` likeliest (0: all), then to the likeliest of those whose probabilities add up to
/// `topP` (1: all; at least one is kept). `probs` is scratch.
int32_t sampleToken(const float *logits, int64_t vocab, double temperature, int64_t topK,
                    double topP, Rng &rng, std::vector<float> &probs);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_TEXTCODEC_H
