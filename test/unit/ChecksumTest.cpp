//===- ChecksumTest.cpp - FNV-1a 64 against its published test vectors ----===//

#include "common/support/Checksum.h"

#include <gtest/gtest.h>

#include <string>

namespace tessel {
namespace {

uint64_t hashOf(const std::string &s) { return fnv1a64(s.data(), s.size()); }

// The reference vectors of the FNV specification (offset basis 14695981039346656037).
TEST(Checksum, MatchesTheStandardFnv1a64) {
  EXPECT_EQ(hashOf(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(hashOf("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(hashOf("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(hex64(hashOf("")), "cbf29ce484222325");
}

} // namespace
} // namespace tessel
