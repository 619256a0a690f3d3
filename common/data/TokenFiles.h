//===- TokenFiles.h - The token files Tessel reads and writes ---*- C++ -*-===//
//
// The one statement of the binary token formats that `tessel tokenize` writes and the runtime's
// data loader reads (runtime/host/Data.h), all little-endian with a header of 256 uint32 words:
//
// - llm.c's token streams: magic 20240520, version 1, then uint16 ids (GPT-2's vocabulary), or
//   magic 20240801, version 7, then uint32 ids (Llama 3's); word 2 is the token count. Documents
//   follow each other, separated by the tokenizer's end-of-sequence token.
// - Tessel's example files, for fine-tuning on separate examples (prompt and completion, or a
//   chat): each example is a row of its own, padded, with a loss mask saying which of its tokens
//   are trained. Layout:
//
//       header   magic 20261101, version 1, token width (2 or 4), pad id,
//                example count (two words, low first), token count (two words, low first);
//                the other words 0
//       starts   example count + 1 uint64: example i is tokens [starts[i], starts[i+1]);
//                starts[0] = 0, non-decreasing, the last = token count
//       tokens   token count ids of `width` bytes
//       mask     token count bytes: 1 where the token is a trained target (the loss counts
//                predicting it from the tokens before it), else 0; an example's first token
//                is never a target
//
// The pad id fills a row past its example's end; its targets there are ignored, so any id in
// the vocabulary serves.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_DATA_TOKENFILES_H
#define TESSEL_COMMON_DATA_TOKENFILES_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessel::tokenfiles {

constexpr size_t kHeaderWords = 256, kHeaderBytes = kHeaderWords * 4;

/// llm.c's token streams.
constexpr uint32_t kLlmcMagic16 = 20240520, kLlmcVersion16 = 1;
constexpr uint32_t kLlmcMagic32 = 20240801, kLlmcVersion32 = 7;
/// The magic numbers of llm.c's other files, which are not token data.
constexpr uint32_t kLlmcModelMagic = 20240326, kLlmcStateMagic = 20240327;
/// llm.c reads a stream's token count as an int32.
constexpr uint64_t kLlmcMaxTokens = 0x7FFFFFFF;

/// Tessel's example files.
constexpr uint32_t kExampleMagic = 20261101, kExampleVersion = 1;

/// What an example file's header says, and where its parts lie in the file.
struct ExampleLayout {
  int width = 2; ///< Bytes per token id: 2 or 4.
  uint32_t padId = 0;
  uint64_t examples = 0, tokens = 0;
  size_t startsOffset = 0, tokensOffset = 0, maskOffset = 0, fileBytes = 0;
};

/// The layout of an example file of `examples` examples and `tokens` tokens.
ExampleLayout exampleLayout(int width, uint32_t padId, uint64_t examples, uint64_t tokens);
/// The header of `layout`: kHeaderBytes bytes into `header`.
void writeExampleHeader(const ExampleLayout &layout, unsigned char *header);
/// Reads the header at the start of a file of `size` bytes (whose first word is kExampleMagic)
/// and checks that the file has exactly the size it implies. False with the reason (not naming
/// the file) otherwise.
bool readExampleHeader(const unsigned char *data, size_t size, ExampleLayout &layout,
                       std::string &error);

uint32_t readLe32(const unsigned char *bytes);
uint64_t readLe64(const unsigned char *bytes);
void writeLe32(uint32_t value, unsigned char *bytes);
void writeLe64(uint64_t value, unsigned char *bytes);

} // namespace tessel::tokenfiles

#endif // TESSEL_COMMON_DATA_TOKENFILES_H
