//===- FormatFuzzer.cpp - libFuzzer entry for one file-format reader ------===//
//
// Built once per target of FuzzTargets.h, TESSEL_FUZZ_TARGET naming it (test/fuzz/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#include "test/fuzz/FuzzTargets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tessel::fuzz::TESSEL_FUZZ_TARGET(data, size);
  return 0;
}
