//===- Normalization.h - Unicode normalization form C -----------*- C++ -*-===//
//
// Qwen2's tokenizer.json normalizes text to NFC before it pre-tokenizes. The tables come from
// Python's unicodedata (generate_unicode_tables.py writes UnicodeTables.inc); Hugging Face's
// tokenizers uses a newer Unicode, so characters whose normalization data is newer than the
// tables' version are left as they are. Text that holds no character that NFC could change
// (the common case: checked against a table, most text without a lookup) is copied as it is.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_NORMALIZATION_H
#define TESSEL_COMMON_TOKENIZER_NORMALIZATION_H

#include <string>
#include <string_view>

namespace tessel::tok {

/// Appends the NFC form of valid UTF-8 `text` to `out`.
void appendNfc(std::string_view text, std::string &out);

} // namespace tessel::tok

#endif // TESSEL_COMMON_TOKENIZER_NORMALIZATION_H
