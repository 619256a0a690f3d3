//===- HalfCollectivesTest.cpp - Collectives of bf16 and f16 data ---------===//
//
// Mixed precision moves activations and working weights between ranks in 16 bits. Moves keep
// the bits, at any element count (odd ones too, which 4-byte units would break); reductions
// widen each member's values, sum them in f32 in group-index order and round once, so a sum
// loses no more than its final rounding and every member gets the same bits.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include "common/support/Float16.h"
#include "test/unit/CommGroups.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace tessel;
using namespace tessel::rt;
using tessel::planfile::DType;
using tessel::test::onRanks;
using tessel::test::worldGroup;

namespace {

using Halves = std::vector<uint16_t>;

uint16_t narrowed(DType t, float f) { return t == DType::BF16 ? floatToBf16(f) : floatToHalf(f); }
float widened(DType t, uint16_t h) { return t == DType::BF16 ? bf16ToFloat(h) : halfToFloat(h); }

Halves randomHalves(DType t, size_t n, uint32_t seed) {
  Halves h;
  for (float f : test::randomFloats(n, -3.0f, 3.0f, seed))
    h.push_back(narrowed(t, f));
  return h;
}

CommOp opOf(CommOp::Kind kind, DType type, const CommGroup &g, const void *x, void *y) {
  CommOp op;
  op.kind = kind;
  op.type = type;
  op.group = &g;
  op.x = x;
  op.y = y;
  return op;
}

struct Case {
  DType type;
  uint32_t ranks;
};

class HalfCollectives : public ::testing::TestWithParam<Case> {};

TEST_P(HalfCollectives, AllReduceSumsInF32AndRoundsOnce) {
  const auto [type, size] = GetParam();
  const int64_t n = 1001;
  std::vector<Halves> x(size), y(size, Halves(n));
  for (uint32_t r = 0; r < size; ++r)
    x[r] = randomHalves(type, n, 40 + r);
  Halves want(n);
  for (int64_t i = 0; i < n; ++i) {
    float sum = widened(type, x[0][i]);
    for (uint32_t r = 1; r < size; ++r)
      sum += widened(type, x[r][i]);
    want[i] = narrowed(type, sum);
  }
  std::vector<std::string> errors(size);
  onRanks(size, [&](uint32_t r, Communicator &c) {
    CommGroup g = worldGroup(size, r);
    CommOp op = opOf(CommOp::Kind::AllReduce, type, g, x[r].data(), y[r].data());
    op.n = n;
    if (!c.run(op, errors[r]))
      return;
    // Then in place, as the plans' all-reduces of activations run.
    op.y = x[r].data();
    c.run(op, errors[r]);
  });
  for (uint32_t r = 0; r < size; ++r) {
    EXPECT_EQ(errors[r], "");
    EXPECT_EQ(y[r], want) << "rank " << r;
    EXPECT_EQ(x[r], want) << "rank " << r << ", in place";
  }
}

TEST_P(HalfCollectives, ReduceScatterSumsInF32AndRoundsOnce) {
  const auto [type, size] = GetParam();
  const int64_t outer = 3, chunk = 7;
  std::vector<Halves> x(size), y(size, Halves(outer * chunk));
  for (uint32_t r = 0; r < size; ++r)
    x[r] = randomHalves(type, outer * size * chunk, 60 + r);
  std::vector<std::string> errors(size);
  onRanks(size, [&](uint32_t r, Communicator &c) {
    CommGroup g = worldGroup(size, r);
    CommOp op = opOf(CommOp::Kind::ReduceScatter, type, g, x[r].data(), y[r].data());
    op.outer = outer;
    op.chunk = chunk;
    c.run(op, errors[r]);
  });
  for (uint32_t me = 0; me < size; ++me) {
    EXPECT_EQ(errors[me], "");
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < chunk; ++i) {
        const int64_t at = (o * size + me) * chunk + i;
        float sum = widened(type, x[0][at]);
        for (uint32_t r = 1; r < size; ++r)
          sum += widened(type, x[r][at]);
        ASSERT_EQ(y[me][o * chunk + i], narrowed(type, sum))
            << "rank " << me << " [" << o << ", " << i << "]";
      }
  }
}

TEST_P(HalfCollectives, MovesKeepTheBitsOfOddCounts) {
  const auto [type, size] = GetParam();
  const int64_t outer = 2, chunk = 5, n = 9;
  std::vector<Halves> part(size), gathered(size, Halves(outer * size * chunk)),
      exchanged(size, Halves(outer * size * chunk)), mine(size), broadcast(size, Halves(n));
  for (uint32_t r = 0; r < size; ++r) {
    part[r] = randomHalves(type, outer * chunk, 80 + r);
    mine[r] = randomHalves(type, outer * size * chunk, 90 + r);
  }
  Halves root = randomHalves(type, n, 99);
  std::vector<std::string> errors(size);
  onRanks(size, [&](uint32_t r, Communicator &c) {
    CommGroup g = worldGroup(size, r);
    CommOp gather = opOf(CommOp::Kind::AllGather, type, g, part[r].data(), gathered[r].data());
    CommOp exchange = opOf(CommOp::Kind::AllToAll, type, g, mine[r].data(), exchanged[r].data());
    gather.outer = exchange.outer = outer;
    gather.chunk = exchange.chunk = chunk;
    CommOp cast =
        opOf(CommOp::Kind::Broadcast, type, g, r == 0 ? root.data() : nullptr, broadcast[r].data());
    cast.n = n;
    c.run(gather, errors[r]) && c.run(exchange, errors[r]) && c.run(cast, errors[r]);
  });
  for (uint32_t me = 0; me < size; ++me) {
    EXPECT_EQ(errors[me], "");
    EXPECT_EQ(broadcast[me], root);
    for (int64_t o = 0; o < outer; ++o)
      for (uint32_t r = 0; r < size; ++r)
        for (int64_t i = 0; i < chunk; ++i) {
          const int64_t at = (o * size + r) * chunk + i;
          ASSERT_EQ(gathered[me][at], part[r][o * chunk + i]);
          ASSERT_EQ(exchanged[me][at], mine[r][(o * size + me) * chunk + i]);
        }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, HalfCollectives,
                         ::testing::Values(Case{DType::BF16, 2}, Case{DType::BF16, 3},
                                           Case{DType::F16, 2}, Case{DType::F16, 4}),
                         [](const auto &info) {
                           return std::string(planfile::dtypeName(info.param.type)) + "_" +
                                  std::to_string(info.param.ranks);
                         });

TEST(HalfCollectives, ASumIsRoundedOnceNotPerMember) {
  // 1 + 2^-8 + 2^-8 in bf16 (8 significant bits): rounding after each addition gives 1 twice
  // (each 2^-8 is half an ulp, and ties go to even); summing in f32 gives 1 + 2^-7 exactly.
  const float values[3] = {1.0f, std::ldexp(1.0f, -8), std::ldexp(1.0f, -8)};
  std::vector<uint16_t> y(3);
  std::string errors[3];
  onRanks(3, [&](uint32_t r, Communicator &c) {
    CommGroup g = worldGroup(3, r);
    const uint16_t x = floatToBf16(values[r]);
    CommOp op = opOf(CommOp::Kind::AllReduce, DType::BF16, g, &x, &y[r]);
    op.n = 1;
    c.run(op, errors[r]);
  });
  for (uint32_t r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[r], "");
    EXPECT_EQ(bf16ToFloat(y[r]), 1.0f + std::ldexp(1.0f, -7)) << "rank " << r;
  }
}

TEST(HalfCollectives, MembersMustAgreeOnTheType) {
  std::vector<float> x(4, 1.0f), y(4);
  std::string errors[2];
  onRanks(2, [&](uint32_t r, Communicator &c) {
    CommGroup g = worldGroup(2, r);
    CommOp op =
        opOf(CommOp::Kind::AllGather, r == 0 ? DType::F32 : DType::BF16, g, x.data(), y.data());
    op.outer = 1;
    op.chunk = r == 0 ? 1 : 2;
    c.run(op, errors[r]);
  });
  const std::string &failed = errors[0].empty() ? errors[1] : errors[0];
  EXPECT_NE(failed.find("disagree"), std::string::npos) << failed;
}

TEST(HalfCollectives, AReceiveOfAnotherTypeFails) {
  std::vector<uint16_t> x(4, 0x3f80), y(4);
  std::string errors[2];
  onRanks(2, [&](uint32_t r, Communicator &c) {
    CommOp op;
    op.kind = r == 0 ? CommOp::Kind::Send : CommOp::Kind::Recv;
    op.type = r == 0 ? DType::BF16 : DType::F16;
    op.peer = 1 - r;
    op.n = 4;
    op.x = x.data();
    op.y = y.data();
    c.run(op, errors[r]);
  });
  EXPECT_NE(errors[1].find("received 4 bf16 elements"), std::string::npos) << errors[1];
}

} // namespace
