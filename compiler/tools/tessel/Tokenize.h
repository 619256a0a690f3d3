//===- Tokenize.h - tessel tokenize -----------------------------*- C++ -*-===//
//
// `tessel tokenize --tokenizer PATH INPUT... -o OUT.bin` encodes text files (one document each)
// and JSON-lines files (one document per line) with a tokenizer.json or SentencePiece model
// and writes llm.c's token file, the format `data =` and --data read (docs/tokenizers.md).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TOOLS_TOKENIZE_H
#define TESSEL_TOOLS_TOKENIZE_H

namespace tessel {

/// Whether the command line named `tokenize`.
bool tokenizeRequested();
/// Runs `tessel tokenize`; returns the exit status (1: a bad tokenizer or input, 2: I/O).
int runTokenize();

} // namespace tessel

#endif // TESSEL_TOOLS_TOKENIZE_H
