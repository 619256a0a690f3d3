//===- ArenaObserverTest.cpp - Which arena buffers a run's kernels touch --===//

#include "runtime/core/ArenaObserver.h"

#include <gtest/gtest.h>

using namespace tessel;
using namespace tessel::rt;
using planfile::BufferKind;
using Bytes = std::array<uint64_t, memory::kMemoryClasses>;

namespace {

constexpr size_t kKept = static_cast<size_t>(memory::MemoryClass::Kept);
constexpr size_t kTemporaries = static_cast<size_t>(memory::MemoryClass::Temporaries);

/// Four instructions over a 256-byte arena: an input [0, 64) read by 0; a kept value
/// [64, 128) from 0 to 3; a temporary [0, 64) from 1 to 2, in the input's bytes once the input
/// is done; an output [128, 192) written by 3.
planfile::Program program() {
  planfile::Program p;
  p.name = "forward_backward";
  p.arenaBytes = 256;
  p.instrs.resize(4);
  for (size_t i = 0; i < p.instrs.size(); ++i)
    p.instrs[i].kernel = "k" + std::to_string(i);
  planfile::Port in, out;
  in.name = "tokens";
  in.buffer = {planfile::Storage::Arena, 0, 0, 64, planfile::DType::I32};
  out.name = "loss";
  out.buffer = {planfile::Storage::Arena, 0, 128, 4, planfile::DType::F32};
  p.inputs = {in};
  p.outputs = {out};
  p.buffers = {{0, 64, 0, 0, BufferKind::Input},
               {64, 64, 0, 3, BufferKind::Kept},
               {0, 64, 1, 2, BufferKind::Temporary},
               {128, 4, 3, 3, BufferKind::Temporary}};
  return p;
}

TEST(ArenaObserver, MeasuresTheBuffersTheOperandsLandIn) {
  const planfile::Program p = program();
  ArenaObserver o(p);
  o.touched(0, 0, 64);  // The input.
  o.touched(0, 64, 64); // The kept value.
  o.touched(1, 0, 32);  // Part of the temporary, in the input's bytes.
  o.touched(2, 32, 32);
  o.touched(3, 64, 64);
  o.touched(3, 128, 4);
  const std::vector<Bytes> live = o.finish();
  EXPECT_TRUE(o.faults().empty());
  ASSERT_EQ(live.size(), 4u);
  EXPECT_EQ(live[0][kKept], 64u);
  EXPECT_EQ(live[0][kTemporaries], 64u); // The input counts with the temporaries.
  EXPECT_EQ(live[1][kTemporaries], 64u);
  EXPECT_EQ(live[2][kTemporaries], 64u);
  EXPECT_EQ(live[3][kKept], 64u);
  EXPECT_EQ(live[3][kTemporaries], 4u);
}

TEST(ArenaObserver, AValueLastTouchedEarlyEndsThere) {
  // The kept value read last at 1, not 3 as planned: measured, it is gone from 2 on.
  const planfile::Program p = program();
  ArenaObserver o(p);
  o.touched(0, 64, 64);
  o.touched(1, 64, 64);
  o.touched(1, 0, 64);
  o.touched(3, 128, 4);
  const std::vector<Bytes> live = o.finish();
  EXPECT_TRUE(o.faults().empty());
  EXPECT_EQ(live[1][kKept], 64u);
  EXPECT_EQ(live[2][kKept], 0u);
  EXPECT_EQ(live[1][kTemporaries], 64u); // The temporary, touched at 1 only.
  EXPECT_EQ(live[2][kTemporaries], 0u);
  EXPECT_EQ(live[3][kTemporaries], 4u);
}

TEST(ArenaObserver, NamesAnOperandNoBufferHolds) {
  const planfile::Program p = program();
  ArenaObserver o(p);
  o.touched(2, 192, 16); // Past every buffer.
  o.touched(3, 0, 64);   // The temporary's bytes after its last instruction.
  o.finish();
  ASSERT_EQ(o.faults().size(), 2u);
  EXPECT_EQ(o.faults()[0], "instruction 2 of 'forward_backward' (k2): an operand at arena bytes "
                           "192..208 lies in no buffer that holds a value then");
  EXPECT_NE(o.faults()[1].find("instruction 3 of 'forward_backward'"), std::string::npos);
}

TEST(ArenaObserver, NamesBuffersThatShareBytesWhileBothHoldValues) {
  planfile::Program p = program();
  p.buffers[2].offset = 96; // Into the kept value's bytes, which it still holds.
  ArenaObserver o(p);
  o.touched(0, 64, 64);
  o.touched(1, 96, 64);
  o.finish();
  ASSERT_FALSE(o.faults().empty());
  EXPECT_NE(o.faults()[0].find("buffer 2 (bytes 96..160) shares bytes with a buffer that still "
                               "holds a value"),
            std::string::npos)
      << o.faults()[0];
}

} // namespace
