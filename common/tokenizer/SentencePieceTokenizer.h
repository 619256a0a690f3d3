//===- SentencePieceTokenizer.h - SentencePiece models ----------*- C++ -*-===//
//
// A tokenizer.model (Llama 2's, or one trained with spm_train) runs on Google's
// libsentencepiece, optional at build time (TESSEL_HAVE_SENTENCEPIECE): without it loading one
// fails saying Tessel was built without SentencePiece. Special tokens: encode adds BOS (and
// EOS) when asked to and tokenizer_config.json's add_bos_token (default true) and add_eos_token
// (default false) say so; decode writes control tokens (<s>, </s>) as their text unless they
// are skipped.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_SENTENCEPIECETOKENIZER_H
#define TESSEL_COMMON_TOKENIZER_SENTENCEPIECETOKENIZER_H

#include "common/tokenizer/Tokenizer.h"

namespace tessel::tok {

/// Loads SentencePiece model `path`; `addBos`/`addEos`: what encode adds with special tokens.
std::unique_ptr<Tokenizer> loadSentencePiece(const std::string &path, bool addBos, bool addEos,
                                             std::string &error);

} // namespace tessel::tok

#endif // TESSEL_COMMON_TOKENIZER_SENTENCEPIECETOKENIZER_H
