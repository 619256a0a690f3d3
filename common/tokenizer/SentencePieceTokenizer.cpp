//===- SentencePieceTokenizer.cpp - SentencePiece models ------------------===//

#include "common/tokenizer/SentencePieceTokenizer.h"

#include "common/tokenizer/Utf8.h"

#ifdef TESSEL_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#endif

namespace tessel::tok {

#ifdef TESSEL_HAVE_SENTENCEPIECE

namespace {

class SentencePieceTokenizer final : public Tokenizer {
public:
  SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> processor,
                         bool addBos, bool addEos)
      : processor_(std::move(processor)), addBos_(addBos), addEos_(addEos) {
    const int bos = processor_->bos_id(), eos = processor_->eos_id();
    if (bos >= 0)
      bos_ = static_cast<uint32_t>(bos);
    if (eos >= 0)
      eos_ = static_cast<uint32_t>(eos);
    description_ = "SentencePiece, " + std::to_string(vocabSize()) + " ids";
  }

  void encodeAppend(std::string_view text, bool addSpecialTokens,
                    std::vector<uint32_t> &ids) const override {
    std::vector<int> pieces;
    // SentencePiece takes UTF-8; repaired as the tokenizer.json path repairs it.
    std::string repaired;
    if (!isValidUtf8(text)) {
      repaired = repairUtf8(text);
      text = repaired;
    }
    // Encode fails only for a processor that did not load, which load() never returns.
    (void)processor_->Encode(std::string(text), &pieces);
    if (addSpecialTokens && addBos_ && bos_)
      ids.push_back(*bos_);
    for (int id : pieces)
      ids.push_back(static_cast<uint32_t>(id));
    if (addSpecialTokens && addEos_ && eos_)
      ids.push_back(*eos_);
  }

  std::string decode(const std::vector<uint32_t> &ids, bool skipSpecialTokens) const override {
    // SentencePiece drops control tokens when it decodes; kept, they are written as their
    // text between the decoded runs.
    std::string text, run;
    std::vector<int> pending;
    auto flush = [&]() {
      if (pending.empty())
        return;
      run.clear();
      (void)processor_->Decode(pending, &run);
      text += run;
      pending.clear();
    };
    const int size = processor_->GetPieceSize();
    for (uint32_t id : ids) {
      if (id >= static_cast<uint32_t>(size))
        continue;
      int piece = static_cast<int>(id);
      if (processor_->IsControl(piece)) {
        if (skipSpecialTokens)
          continue;
        flush();
        text += processor_->IdToPiece(piece);
        continue;
      }
      pending.push_back(piece);
    }
    flush();
    return text;
  }

  uint32_t vocabSize() const override { return static_cast<uint32_t>(processor_->GetPieceSize()); }

  std::optional<uint32_t> tokenToId(std::string_view token) const override {
    const int id = processor_->PieceToId(std::string(token));
    // PieceToId answers the unknown token's id for pieces it does not have.
    if (id < 0 || (processor_->IsUnknown(id) && processor_->IdToPiece(id) != token))
      return std::nullopt;
    return static_cast<uint32_t>(id);
  }

  std::optional<std::string> idToToken(uint32_t id) const override {
    if (id >= vocabSize())
      return std::nullopt;
    return processor_->IdToPiece(static_cast<int>(id));
  }

private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  bool addBos_, addEos_;
};

} // namespace

bool haveSentencePieceSupport() { return true; }

std::unique_ptr<Tokenizer> loadSentencePiece(const std::string &path, bool addBos, bool addEos,
                                             std::string &error) {
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = processor->Load(path);
  if (!status.ok()) {
    error = path + ": not a SentencePiece model: " + status.ToString();
    return nullptr;
  }
  return std::make_unique<SentencePieceTokenizer>(std::move(processor), addBos, addEos);
}

#else

bool haveSentencePieceSupport() { return false; }

std::unique_ptr<Tokenizer> loadSentencePiece(const std::string &path, bool, bool,
                                             std::string &error) {
  error = path + ": Tessel was built without SentencePiece, which reading a .model file "
                 "needs (Debian: libsentencepiece-dev; rebuild after installing it)";
  return nullptr;
}

#endif

} // namespace tessel::tok
