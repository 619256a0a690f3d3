//===- Tokenizer.h - Text to token ids and back -----------------*- C++ -*-===//
//
// The tokenizers of published models, for the compiler's driver (`tessel tokenize` writes
// token files) and the runtime (text generation, chat data). Two kinds of file load:
//
//   tokenizer.json   Hugging Face's format, with a BPE model: byte-level BPE as GPT-2,
//                    Llama 3 and Qwen2 ship it (ByteLevel and Split pre-tokenizers on PCRE2,
//                    added and special tokens, TemplateProcessing), and Llama 2's BPE with
//                    byte fallback (Prepend/Replace normalizers or Metaspace). Encoding gives
//                    the ids of Hugging Face's tokenizers for the same file and text.
//   tokenizer.model  a SentencePiece model (Llama 2 ships one), through libsentencepiece.
//
// A model folder holding one of them (tokenizer.json preferred) loads too, and a
// tokenizer_config.json beside the file names the BOS and EOS tokens and keeps the chat
// template. A file that is corrupt or uses what Tessel does not implement is refused with a
// message naming the file and the key or position; nothing in a file can crash the loader.
//
// Text is UTF-8; invalid UTF-8 is repaired as the reference sees it (Utf8.h's repairUtf8: each
// maximal invalid subpart becomes U+FFFD). A tokenizer's truncation and padding settings are not
// applied: Tessel tokenizes whole documents.
//
// A loaded tokenizer is immutable: encode and decode may run on several threads at once.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_TOKENIZER_H
#define TESSEL_COMMON_TOKENIZER_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::tok {

class Tokenizer {
public:
  virtual ~Tokenizer();

  /// Loads the tokenizer at `path`: a tokenizer.json, a SentencePiece .model, or a folder
  /// holding one of them. On failure returns null with the reason in `error`.
  static std::unique_ptr<Tokenizer> load(const std::string &path, std::string &error);

  /// The ids of `text`. With `addSpecialTokens`, the tokens the tokenizer adds around a
  /// sequence (its post-processor's template: Llama 3's <|begin_of_text|>, Llama 2's <s>).
  std::vector<uint32_t> encode(std::string_view text, bool addSpecialTokens) const {
    std::vector<uint32_t> ids;
    encodeAppend(text, addSpecialTokens, ids);
    return ids;
  }
  /// As encode, appending to `ids`.
  virtual void encodeAppend(std::string_view text, bool addSpecialTokens,
                            std::vector<uint32_t> &ids) const = 0;

  /// The text of `ids`; with `skipSpecialTokens` the special tokens are left out. Ids the
  /// tokenizer does not have are left out too.
  virtual std::string decode(const std::vector<uint32_t> &ids, bool skipSpecialTokens) const = 0;

  /// The largest id (added tokens included) + 1: the rows an embedding needs.
  virtual uint32_t vocabSize() const = 0;
  /// The id of token `token` (as the vocabulary spells it: "Ġthe" in byte-level files).
  virtual std::optional<uint32_t> tokenToId(std::string_view token) const = 0;
  /// The token of `id`, as the vocabulary spells it.
  virtual std::optional<std::string> idToToken(uint32_t id) const = 0;

  /// The beginning- and end-of-sequence tokens, where the files name them: tokenizer_config.json's
  /// bos_token and eos_token, else the post-processor's template (a single token before or after
  /// the sequence), else for EOS a special token named <|endoftext|>, <|end_of_text|>, </s> or
  /// <eos> (GPT-2's tokenizer.json names none).
  std::optional<uint32_t> bosId() const { return bos_; }
  std::optional<uint32_t> eosId() const { return eos_; }
  /// tokenizer_config.json's chat_template (the "default" one of a list), else the folder's
  /// chat_template.jinja, or empty.
  const std::string &chatTemplate() const { return chatTemplate_; }
  /// One line saying what was loaded, e.g. "tokenizer.json: byte-level BPE, 50257 ids".
  const std::string &description() const { return description_; }

protected:
  std::optional<uint32_t> bos_, eos_;
  std::string chatTemplate_;
  std::string description_;
};

/// Whether this build reads tokenizers whose pre-tokenizers use regular expressions (PCRE2)
/// and SentencePiece models (libsentencepiece).
bool haveRegexSupport();
bool haveSentencePieceSupport();

} // namespace tessel::tok

#endif // TESSEL_COMMON_TOKENIZER_TOKENIZER_H
