//===- ScheduleTest.cpp - Tests of the pipeline schedules and timelines ---===//

#include "common/schedule/Schedule.h"
#include "common/schedule/ScheduleMessages.h"
#include "common/schedule/Timeline.h"
#include "runtime/support/Json.h"

#include "test/unit/XmlCheck.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <tuple>

using namespace tessel::pipeline;
using tessel::rt::Json;

namespace {

using tessel::test::parseXml;

const ScheduleKind kAllKinds[] = {ScheduleKind::AFAB, ScheduleKind::OneFOneB,
                                  ScheduleKind::Interleaved, ScheduleKind::ZBH1};

using Lists = std::vector<std::vector<Action>>;

Lists build(ScheduleKind kind, int p, int m, int v = 1) {
  std::string error;
  Lists lists = buildSchedule(kind, p, m, v, error);
  EXPECT_EQ(error, "") << scheduleKindName(kind) << " p=" << p << " m=" << m << " v=" << v;
  return lists;
}

Timeline run(ScheduleKind kind, int p, int m, int v = 1, Costs costs = Costs()) {
  return simulate(kind, p, m, v, build(kind, p, m, v), costs);
}

/// The error checkSchedule gives for `lists` ("" when it passes).
std::string checkError(ScheduleKind kind, int p, int m, int v, const Lists &lists) {
  std::string error;
  bool ok = checkSchedule(kind, p, m, v, lists, error);
  EXPECT_EQ(ok, error.empty()) << error;
  return ok ? "" : error;
}

/// The error buildSchedule gives for the sizes, checking that it returns no lists with it.
std::string buildError(ScheduleKind kind, int p, int m, int v) {
  std::string error;
  Lists lists = buildSchedule(kind, p, m, v, error);
  EXPECT_TRUE(lists.empty());
  return error;
}

/// The labels of a rank's computations, in order: "F0 F1 B0 ...".
std::string computeOrder(const std::vector<Action> &list, bool withChunk = false) {
  std::string order;
  for (const Action &a : list)
    if (isCompute(a.kind))
      order += (order.empty() ? "" : " ") + actionLabel(a, withChunk);
  return order;
}

size_t find(const std::vector<Action> &list, Action action) {
  return std::find(list.begin(), list.end(), action) - list.begin();
}

/// The sizes the schedules are tried on: (p, m, v) with every valid kind.
std::vector<std::tuple<ScheduleKind, int, int, int>> validSizes() {
  std::vector<std::tuple<ScheduleKind, int, int, int>> sizes;
  for (int p : {1, 2, 3, 4, 5, 8})
    for (int m : {1, 2, 3, 4, 5, 8, 12, 16}) {
      sizes.emplace_back(ScheduleKind::AFAB, p, m, 1);
      if (m >= p) {
        sizes.emplace_back(ScheduleKind::OneFOneB, p, m, 1);
        sizes.emplace_back(ScheduleKind::ZBH1, p, m, 1);
      }
      if (m % p == 0)
        for (int v : {2, 3, 4})
          sizes.emplace_back(ScheduleKind::Interleaved, p, m, v);
    }
  return sizes;
}

TEST(Schedule, ParsesKinds) {
  for (ScheduleKind kind : kAllKinds) {
    ScheduleKind parsed = ScheduleKind::AFAB;
    EXPECT_TRUE(parseScheduleKind(scheduleKindName(kind), parsed));
    EXPECT_EQ(parsed, kind);
  }
  ScheduleKind kind;
  EXPECT_TRUE(parseScheduleKind("1f1b", kind));
  EXPECT_EQ(kind, ScheduleKind::OneFOneB);
  for (const char *bad : {"", "gpipe", "1F1B", "zb-h1", "interleave"})
    EXPECT_FALSE(parseScheduleKind(bad, kind)) << bad;
}

TEST(Schedule, EveryScheduleChecks) {
  for (auto [kind, p, m, v] : validSizes()) {
    Lists lists = build(kind, p, m, v);
    ASSERT_EQ(static_cast<int>(lists.size()), p);
    EXPECT_EQ(checkError(kind, p, m, v, lists), "")
        << scheduleKindName(kind) << " p=" << p << " m=" << m << " v=" << v;
  }
}

TEST(Schedule, OrdersOfFourStagesEightMicrobatches) {
  Lists afab = build(ScheduleKind::AFAB, 4, 8);
  EXPECT_EQ(computeOrder(afab[2]), "F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7");

  Lists oneF = build(ScheduleKind::OneFOneB, 4, 8);
  EXPECT_EQ(computeOrder(oneF[0]), "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(computeOrder(oneF[2]), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7");
  EXPECT_EQ(computeOrder(oneF[3]), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");

  // Rank r lets r W's wait, and runs them in the tail.
  Lists zb = build(ScheduleKind::ZBH1, 4, 8);
  EXPECT_EQ(computeOrder(zb[0]), "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 "
                                 "B6 W6 B7 W7");
  EXPECT_EQ(computeOrder(zb[3]), "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 "
                                 "W4 W5 W6 W7");

  // Megatron-LM: micro-batches in groups of p through chunk 0, then chunk 1; 2(p - r - 1) +
  // (v - 1)p warm-up forwards on rank r.
  Lists inter = build(ScheduleKind::Interleaved, 4, 8, 2);
  EXPECT_EQ(computeOrder(inter[3], true),
            "F0.0 F1.0 F2.0 F3.0 F0.1 B0.1 F1.1 B1.1 F2.1 B2.1 F3.1 B3.1 F4.0 B0.0 F5.0 B1.0 "
            "F6.0 B2.0 F7.0 B3.0 F4.1 B4.1 F5.1 B5.1 F6.1 B6.1 F7.1 B7.1 B4.0 B5.0 B6.0 B7.0");
  EXPECT_EQ(computeOrder(inter[0], true).substr(0, 59),
            "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1 F4.0 F5.0 F6.0 B0.1");
}

TEST(Schedule, MessagesSitNextToTheirComputations) {
  Lists lists = build(ScheduleKind::OneFOneB, 4, 8);
  // Rank 1: the activation arrives right before F and leaves right after it; the gradient
  // likewise around B.
  const std::vector<Action> &rank1 = lists[1];
  size_t f = find(rank1, {Action::Forward, 5, 0, -1});
  ASSERT_LT(f + 1, rank1.size());
  EXPECT_EQ(rank1[f - 1], (Action{Action::RecvActivation, 5, 0, 0}));
  EXPECT_EQ(rank1[f + 1], (Action{Action::SendActivation, 5, 0, 2}));
  size_t b = find(rank1, {Action::Backward, 5, 0, -1});
  ASSERT_LT(b + 1, rank1.size());
  EXPECT_EQ(rank1[b - 1], (Action{Action::RecvGrad, 5, 0, 2}));
  EXPECT_EQ(rank1[b + 1], (Action{Action::SendGrad, 5, 0, 0}));
  // The ends of the pipeline receive and send only on their inner side: 4 actions per
  // micro-batch there, 6 inside.
  EXPECT_EQ(lists[0].size(), 4u * 8);
  EXPECT_EQ(lists[1].size(), 6u * 8);
  EXPECT_EQ(lists[3].size(), 4u * 8);
  EXPECT_EQ(lists[0].front(), (Action{Action::Forward, 0, 0, -1}));

  // Interleaved: the last rank's chunk 0 feeds the first rank's chunk 1.
  Lists inter = build(ScheduleKind::Interleaved, 4, 8, 2);
  size_t send = find(inter[3], {Action::SendActivation, 2, 0, 0});
  EXPECT_LT(send, inter[3].size());
  size_t recv = find(inter[0], {Action::RecvActivation, 2, 1, 3});
  ASSERT_LT(recv + 1, inter[0].size());
  EXPECT_EQ(inter[0][recv + 1], (Action{Action::Forward, 2, 1, -1}));
  EXPECT_LT(find(inter[0], {Action::SendGrad, 2, 1, 3}), inter[0].size());
  EXPECT_EQ(find(inter[0], {Action::SendGrad, 2, 0, 3}), inter[0].size()); // stage 0

  // One rank with several chunks: everything stays local.
  Lists single = build(ScheduleKind::Interleaved, 1, 3, 2);
  for (const Action &a : single[0])
    EXPECT_TRUE(isCompute(a.kind)) << actionLabel(a, true);
}

TEST(Schedule, ExchangesMeetWhenSendsWaitForTheirReceives) {
  // The schedules' own exchanges meet: 1F1B's neighbours exchange an activation for a
  // gradient; interleaved ranks, in the steady phase, run F and B back to back and then
  // exchange all four messages with both neighbours, as Megatron-LM's
  // send_forward_backward_recv_forward_backward.
  Lists inter = build(ScheduleKind::Interleaved, 4, 8, 2);
  const std::vector<Action> &rank1 = inter[1];
  size_t f = find(rank1, {Action::Forward, 5, 0, -1});
  ASSERT_LT(f + 7, rank1.size());
  EXPECT_EQ(std::vector<Action>(rank1.begin() + f - 2, rank1.begin() + f + 8),
            (std::vector<Action>{{Action::RecvActivation, 5, 0, 0},
                                 {Action::RecvGrad, 1, 1, 2},
                                 {Action::Forward, 5, 0},
                                 {Action::Backward, 1, 1},
                                 {Action::SendActivation, 5, 0, 2},
                                 {Action::SendGrad, 1, 1, 0},
                                 {Action::RecvActivation, 6, 0, 0},
                                 {Action::RecvGrad, 2, 1, 2},
                                 {Action::Forward, 6, 0},
                                 {Action::Backward, 2, 1}}));
  Lists oneF = build(ScheduleKind::OneFOneB, 2, 4);
  f = find(oneF[0], {Action::Forward, 1, 0, -1});
  EXPECT_EQ(oneF[0][f + 1], (Action{Action::SendActivation, 1, 0, 1}));
  EXPECT_EQ(oneF[0][f + 2], (Action{Action::RecvGrad, 0, 0, 1}));

  // checkSchedule refuses lists that only run with buffered sends: here rank 1 runs W0 between
  // sending the gradient of micro-batch 0 and receiving the activation of 1, while rank 0 waits
  // in that send before it computes F2 and receives the gradient.
  const Action::Kind F = Action::Forward, B = Action::BackwardInput, W = Action::BackwardWeight;
  Lists crossing = {{{F, 0},
                     {Action::SendActivation, 0, 0, 1},
                     {F, 1},
                     {Action::SendActivation, 1, 0, 1},
                     {F, 2},
                     {Action::SendActivation, 2, 0, 1},
                     {Action::RecvGrad, 0, 0, 1},
                     {B, 0},
                     {W, 0},
                     {Action::RecvGrad, 1, 0, 1},
                     {B, 1},
                     {W, 1},
                     {Action::RecvGrad, 2, 0, 1},
                     {B, 2},
                     {W, 2}},
                    {{Action::RecvActivation, 0, 0, 0},
                     {F, 0},
                     {B, 0},
                     {Action::SendGrad, 0, 0, 0},
                     {W, 0},
                     {Action::RecvActivation, 1, 0, 0},
                     {F, 1},
                     {B, 1},
                     {Action::SendGrad, 1, 0, 0},
                     {W, 1},
                     {Action::RecvActivation, 2, 0, 0},
                     {F, 2},
                     {B, 2},
                     {Action::SendGrad, 2, 0, 0},
                     {W, 2}}};
  EXPECT_EQ(checkError(ScheduleKind::ZBH1, 2, 3, 1, crossing),
            "the schedule deadlocks when a send waits for its receive (NCCL, MPI): rank 0, "
            "action 3 (send act 1) waits for rank 1; rank 1, action 3 (send grad 0) waits for "
            "rank 0");
  std::string stuck;
  EXPECT_FALSE(detail::runExchanges(2, crossing, stuck));
}

TEST(Schedule, BubbleOfAfabAndOneFOneB) {
  // Under F = 1, B = 2 and free transfers both take 3(m + p - 1): the bubble is (p-1)/m of
  // the compute time and (p-1)/(m+p-1) of the rank-time.
  for (ScheduleKind kind : {ScheduleKind::AFAB, ScheduleKind::OneFOneB})
    for (auto [p, m] : {std::pair{4, 8}, {2, 2}, {3, 7}, {4, 4}, {8, 16}, {1, 5}}) {
      Timeline t = run(kind, p, m);
      EXPECT_DOUBLE_EQ(t.makespan, 3.0 * (m + p - 1));
      EXPECT_DOUBLE_EQ(t.bubbleOverIdeal, double(p - 1) / m);
      EXPECT_DOUBLE_EQ(t.bubbleFraction, double(p - 1) / (m + p - 1));
      EXPECT_DOUBLE_EQ(analyticBubble(kind, p, m, 1), double(p - 1) / m);
    }
  Timeline t = run(ScheduleKind::OneFOneB, 4, 8);
  EXPECT_DOUBLE_EQ(t.bubbleOverIdeal, 0.375);
  EXPECT_DOUBLE_EQ(t.bubbleFraction, 3.0 / 11);
}

TEST(Schedule, BubbleOfInterleaved) {
  // Per chunk F = 1, B = 2: the bubble shrinks by v.
  for (auto [p, m, v] : {std::tuple{4, 8, 2}, {4, 8, 3}, {2, 4, 2}, {4, 4, 2}, {8, 16, 4}}) {
    Timeline t = run(ScheduleKind::Interleaved, p, m, v);
    EXPECT_DOUBLE_EQ(t.bubbleOverIdeal, double(p - 1) / (v * m)) << p << " " << m << " " << v;
    EXPECT_DOUBLE_EQ(analyticBubble(ScheduleKind::Interleaved, p, m, v), double(p - 1) / (v * m));
  }
  Timeline t = run(ScheduleKind::Interleaved, 4, 8, 2);
  EXPECT_DOUBLE_EQ(t.makespan, 57);
  EXPECT_DOUBLE_EQ(t.bubbleOverIdeal, 0.1875);
}

TEST(Schedule, BubbleOfZbh1) {
  EXPECT_TRUE(std::isnan(analyticBubble(ScheduleKind::ZBH1, 4, 8, 1)));
  // With F = B = W = 1, as the paper, the bubble is a third of 1F1B's: 3m + p - 1 in all.
  for (auto [p, m] : {std::pair{4, 8}, {2, 2}, {3, 7}, {4, 4}, {8, 16}}) {
    Timeline zb = run(ScheduleKind::ZBH1, p, m);
    Timeline oneF = run(ScheduleKind::OneFOneB, p, m);
    EXPECT_DOUBLE_EQ(zb.makespan, 3.0 * m + p - 1);
    EXPECT_DOUBLE_EQ(zb.bubbleOverIdeal, double(p - 1) / (3 * m));
    EXPECT_LT(zb.bubbleOverIdeal, oneF.bubbleOverIdeal);
    EXPECT_EQ(zb.peakInFlight, oneF.peakInFlight); // 1F1B's memory
  }
  Timeline t = run(ScheduleKind::ZBH1, 4, 8);
  EXPECT_DOUBLE_EQ(t.makespan, 27);
  EXPECT_DOUBLE_EQ(t.bubbleOverIdeal, 0.125);
  // A slower W still leaves it below 1F1B with the same total backward time.
  Costs uneven;
  uneven.backward = 2.5;
  uneven.backwardInput = 1.5;
  uneven.backwardWeight = 1;
  EXPECT_LT(run(ScheduleKind::ZBH1, 4, 8, 1, uneven).makespan,
            run(ScheduleKind::OneFOneB, 4, 8, 1, uneven).makespan);
}

TEST(Schedule, MicrobatchesInFlight) {
  Timeline afab = run(ScheduleKind::AFAB, 4, 8);
  EXPECT_EQ(afab.peakInFlight, (std::vector<int>{8, 8, 8, 8}));
  Timeline oneF = run(ScheduleKind::OneFOneB, 4, 8);
  EXPECT_EQ(oneF.peakInFlight, (std::vector<int>{4, 3, 2, 1}));
  for (auto [p, m] : {std::pair{2, 9}, {5, 5}, {8, 16}}) {
    Timeline t = run(ScheduleKind::OneFOneB, p, m);
    EXPECT_EQ(t.peakInFlight[0], p);
    for (int peak : t.peakInFlight)
      EXPECT_LE(peak, p);
  }
  // Interleaved counts (micro-batch, chunk) pairs: Megatron-LM's warm-up plus one on rank 0.
  Timeline inter = run(ScheduleKind::Interleaved, 4, 8, 2);
  EXPECT_EQ(inter.peakInFlight, (std::vector<int>{11, 9, 7, 5}));
}

TEST(Schedule, RefusesBadSizes) {
  EXPECT_EQ(buildError(ScheduleKind::OneFOneB, 4, 3, 1),
            "1f1b needs at least as many micro-batches as stages (m = 3 < p = 4); use afab");
  EXPECT_EQ(buildError(ScheduleKind::ZBH1, 4, 2, 1),
            "zbh1 needs at least as many micro-batches as stages (m = 2 < p = 4); use afab");
  EXPECT_EQ(buildError(ScheduleKind::Interleaved, 4, 8, 1),
            "interleaved 1F1B needs at least 2 virtual stages per rank (v = 1)");
  EXPECT_EQ(buildError(ScheduleKind::Interleaved, 4, 6, 2),
            "interleaved 1F1B needs the micro-batches to be a multiple of the stages, as "
            "Megatron-LM (m = 6, p = 4)");
  EXPECT_EQ(buildError(ScheduleKind::OneFOneB, 4, 8, 2),
            "only the interleaved schedule has virtual stages (1f1b with v = 2)");
  EXPECT_EQ(buildError(ScheduleKind::AFAB, 0, 8, 1), "a pipeline needs at least one stage (p = 0)");
  EXPECT_EQ(buildError(ScheduleKind::AFAB, 4, 0, 1),
            "a pipeline needs at least one micro-batch (m = 0)");
  EXPECT_EQ(buildError(ScheduleKind::AFAB, 100000, 100000, 1),
            "the schedule is too large: p * m * v = 10000000000 (micro-batch, stage) pairs, "
            "more than 4194304");
  // AFAB takes fewer micro-batches than stages; the checker refuses what the builder does.
  EXPECT_EQ(checkError(ScheduleKind::AFAB, 4, 2, 1, build(ScheduleKind::AFAB, 4, 2)), "");
  EXPECT_NE(checkError(ScheduleKind::OneFOneB, 4, 3, 1, build(ScheduleKind::AFAB, 4, 3)), "");
}

TEST(Schedule, CheckerFindsMistakes) {
  const Lists good = build(ScheduleKind::OneFOneB, 4, 8);
  auto broken = [&](auto edit) {
    Lists lists = good;
    edit(lists);
    return checkError(ScheduleKind::OneFOneB, 4, 8, 1, lists);
  };
  auto erase = [](std::vector<Action> &list, Action action) {
    list.erase(list.begin() + find(list, action));
  };

  EXPECT_EQ(broken([](Lists &l) { l.pop_back(); }), "the schedule has 3 rank lists for 4 stages");
  EXPECT_EQ(broken([&](Lists &l) {
              erase(l[2], {Action::Backward, 6, 0, -1});
            }),
            "rank 2 never runs the backward pass of micro-batch 6 of stage 2");
  EXPECT_EQ(broken([&](Lists &l) {
              l[1].push_back({Action::Forward, 0, 0, -1});
            }),
            "rank 1, action 48 (F0): repeats action 1");
  EXPECT_EQ(broken([&](Lists &l) {
              l[1][find(l[1], {Action::SendActivation, 3, 0, 2})].peer = 0;
            }),
            "rank 1, action 14 (send act 3): the peer of stage 1 is rank 2, not 0");
  EXPECT_EQ(broken([&](Lists &l) {
              l[0].insert(l[0].begin(), {Action::RecvActivation, 0, 0, 3});
            }),
            "rank 0, action 0 (recv act 0): stage 0 has no previous stage");
  EXPECT_EQ(broken([&](Lists &l) {
              erase(l[2], {Action::RecvActivation, 4, 0, 1});
            }),
            "rank 2, action 21 (F4): no receive of its activation from rank 1");
  EXPECT_EQ(broken([&](Lists &l) {
              erase(l[1], {Action::SendActivation, 4, 0, 2});
            }),
            "rank 2, action 21 (recv act 4): rank 1 never sends it");
  EXPECT_EQ(broken([&](Lists &l) { std::swap(l[3][0], l[3][1]); }),
            "rank 3, action 1 (recv act 0): comes after rank 3, action 0 (F0), which needs it");
  EXPECT_EQ(broken([&](Lists &l) { std::swap(l[0][0], l[0][1]); }),
            "rank 0, action 0 (send act 0): comes before rank 0, action 1 (F0), which produces "
            "it");
  EXPECT_EQ(broken([&](Lists &l) {
              l[3][find(l[3], {Action::Backward, 0, 0, -1})].kind = Action::BackwardInput;
            }),
            "rank 3, action 2 (B0): only zbh1 splits the backward pass");

  // W must follow its B in ZB-H1.
  Lists zb = build(ScheduleKind::ZBH1, 2, 2);
  std::swap(zb[0][find(zb[0], {Action::BackwardInput, 1, 0, -1})],
            zb[0][find(zb[0], {Action::BackwardWeight, 1, 0, -1})]);
  EXPECT_EQ(checkError(ScheduleKind::ZBH1, 2, 2, 1, zb),
            "rank 0, action 8 (W1): runs before its backward pass, rank 0, action 9 (B1)");

  // Both activations leave after they are computed, but in the other order than rank 1
  // receives them.
  Lists swapped = build(ScheduleKind::AFAB, 2, 2);
  swapped[0] = {{Action::Forward, 0, 0, -1},       {Action::Forward, 1, 0, -1},
                {Action::SendActivation, 1, 0, 1}, {Action::SendActivation, 0, 0, 1},
                {Action::RecvGrad, 0, 0, 1},       {Action::Backward, 0, 0, -1},
                {Action::RecvGrad, 1, 0, 1},       {Action::Backward, 1, 0, -1}};
  EXPECT_EQ(checkError(ScheduleKind::AFAB, 2, 2, 1, swapped),
            "rank 1, action 0 (recv act 0): is receive 0 of its kind from rank 0 but rank 0, "
            "action 3 (send act 0) is send 1; the communicator pairs a link's messages in order");

  // Every computation in a valid order and every message matched, but the ranks wait on each
  // other: rank 0 runs 1F1B without warm-up while rank 1 runs all forwards first.
  Lists afab = build(ScheduleKind::AFAB, 2, 2);
  afab[0] = {{Action::Forward, 0, 0, -1}, {Action::SendActivation, 0, 0, 1},
             {Action::RecvGrad, 0, 0, 1}, {Action::Backward, 0, 0, -1},
             {Action::Forward, 1, 0, -1}, {Action::SendActivation, 1, 0, 1},
             {Action::RecvGrad, 1, 0, 1}, {Action::Backward, 1, 0, -1}};
  EXPECT_EQ(checkError(ScheduleKind::AFAB, 2, 2, 1, afab),
            "the schedule deadlocks: rank 0, action 2 (recv grad 0) waits for rank 1; rank 1, "
            "action 2 (recv act 1) waits for rank 0");
}

TEST(Schedule, TransfersTakeTime) {
  // Two stages, one micro-batch: F 0-1, send 1-1.5 | recv 1.5, F 1.5-2.5, B 2.5-4.5,
  // send 4.5-5 | recv 5, B 5-7.
  Costs costs;
  costs.transfer = 0.5;
  Timeline t = run(ScheduleKind::AFAB, 2, 1, 1, costs);
  EXPECT_DOUBLE_EQ(t.makespan, 7);
  EXPECT_DOUBLE_EQ(t.bubbleFraction, 1 - 6.0 / 14);
  ASSERT_EQ(t.actions.size(), 8u);
  const TimedAction &recv = t.actions[4]; // rank 0's four, then rank 1's recv act
  EXPECT_EQ(recv.rank, 1);
  EXPECT_EQ(recv.action.kind, Action::RecvActivation);
  EXPECT_DOUBLE_EQ(recv.start, 1.5);
  EXPECT_DOUBLE_EQ(recv.end, 1.5);
  EXPECT_EQ(t.actions[2].action.kind, Action::RecvGrad);
  EXPECT_DOUBLE_EQ(t.actions[2].start, 5);
}

TEST(Schedule, SimulationLeavesOutWhatCannotRun) {
  Lists lists = build(ScheduleKind::AFAB, 2, 1);
  lists[0].erase(lists[0].begin() + 1); // the send: rank 1 waits forever
  Timeline t = simulate(ScheduleKind::AFAB, 2, 1, 1, lists);
  EXPECT_EQ(t.actions.size(), 1u); // rank 0's F; its recv of the gradient never completes
}

TEST(Timeline, SummarizesMeasuredRuns) {
  // A recorded run: seconds from some origin, in any order, with overlapping communication.
  std::vector<TimedAction> recorded = {
      {1, {Action::Backward, 0, 0, -1}, 100.30, 100.50},
      {0, {Action::Forward, 0, 0, -1}, 100.00, 100.10},
      {0, {Action::SendActivation, 0, 0, 1}, 100.10, 100.12},
      {1, {Action::RecvActivation, 0, 0, 0}, 100.05, 100.12},
      {1, {Action::Forward, 0, 0, -1}, 100.12, 100.30},
      {0, {Action::Forward, 1, 0, -1}, 100.12, 100.20},
      {0, {Action::Backward, 0, 0, -1}, 100.55, 100.80},
      {0, {Action::Backward, 1, 0, -1}, 100.80, 101.00},
      {7, {Action::Forward, 0, 0, -1}, 0, 1000}, // not a rank of this run
  };
  Timeline t = summarizeTimeline(2, recorded);
  EXPECT_EQ(t.ranks, 2);
  EXPECT_EQ(t.actions.size(), 8u);
  EXPECT_NEAR(t.makespan, 1.0, 1e-12);
  double compute = 0.1 + 0.08 + 0.25 + 0.2 + 0.18 + 0.2;
  EXPECT_NEAR(t.bubbleFraction, 1 - compute / 2.0, 1e-12);
  EXPECT_NEAR(t.bubbleOverIdeal, (2.0 - compute) / compute, 1e-12);
  EXPECT_EQ(t.peakInFlight, (std::vector<int>{2, 1}));
  // Each rank's actions in the order they ran.
  EXPECT_EQ(t.actions[0].action.kind, Action::Forward);
  EXPECT_EQ(t.actions[0].action.microbatch, 0);
  EXPECT_EQ(t.actions[5].action.kind, Action::RecvActivation);
}

/// Parses a Chrome trace, checking its shape, and returns its "X" events.
std::vector<Json> traceEvents(const std::string &text, int ranks) {
  std::string error;
  std::optional<Json> trace = Json::parse(text, "trace.json", error);
  EXPECT_TRUE(trace) << error;
  if (!trace)
    return {};
  const Json *events = trace->find("traceEvents");
  EXPECT_TRUE(events && events->isArray());
  std::vector<Json> complete;
  int threadNames = 0;
  for (const Json &e : events->items()) {
    std::string ph = e.find("ph")->asString();
    if (ph == "X") {
      for (const char *key : {"name", "cat", "ts", "dur", "pid", "tid"})
        EXPECT_TRUE(e.find(key)) << key;
      complete.push_back(e);
    } else if (e.find("name")->asString() == "thread_name") {
      EXPECT_EQ(e.find("args")->find("name")->asString(),
                "rank " + std::to_string(e.find("tid")->asInt()));
      ++threadNames;
    }
  }
  EXPECT_EQ(threadNames, ranks);
  return complete;
}

TEST(Timeline, ChromeTrace) {
  Timeline t = run(ScheduleKind::OneFOneB, 4, 8);
  std::vector<Json> events = traceEvents(chromeTraceJson(t, "1f1b \"p=4\""), 4);
  ASSERT_EQ(events.size(), t.actions.size());
  size_t forwards = 0;
  for (const Json &e : events) {
    EXPECT_EQ(e.find("pid")->asInt(), 0);
    std::string name = e.find("name")->asString(), cat = e.find("cat")->asString();
    if (name[0] == 'F') {
      EXPECT_EQ(cat, "forward");
      ++forwards;
    } else if (name[0] == 'B') {
      EXPECT_EQ(cat, "backward");
      EXPECT_DOUBLE_EQ(e.find("dur")->asDouble(), 2e6); // 2 s in microseconds
    } else {
      EXPECT_EQ(cat, "communication");
      EXPECT_TRUE(e.find("args")->find("peer"));
    }
  }
  EXPECT_EQ(forwards, 32u);
  // Rank 0's first B starts at 10: rank 3 runs F0 at 3-4, then B0 takes 2 on each rank.
  auto b0 = std::find_if(events.begin(), events.end(), [](const Json &e) {
    return e.find("name")->asString() == "B0" && e.find("tid")->asInt() == 0;
  });
  ASSERT_NE(b0, events.end());
  EXPECT_DOUBLE_EQ(b0->find("ts")->asDouble(), 10e6);

  // Interleaved names carry the chunk.
  Timeline inter = run(ScheduleKind::Interleaved, 4, 8, 2);
  std::vector<Json> interEvents = traceEvents(chromeTraceJson(inter, "interleaved"), 4);
  ASSERT_EQ(interEvents.size(), inter.actions.size());
  EXPECT_TRUE(std::any_of(interEvents.begin(), interEvents.end(),
                          [](const Json &e) { return e.find("name")->asString() == "B3.1"; }));
}

TEST(Timeline, ScheduleSvg) {
  for (auto [kind, p, m, v] : {std::tuple{ScheduleKind::AFAB, 4, 8, 1},
                               {ScheduleKind::ZBH1, 4, 8, 1},
                               {ScheduleKind::Interleaved, 4, 8, 2},
                               {ScheduleKind::OneFOneB, 3, 5, 1}}) {
    Timeline t = run(kind, p, m, v);
    std::string svg = scheduleSvg(t, std::string(scheduleKindName(kind)) + " <p & m>");
    std::vector<std::string> elements;
    std::string error;
    ASSERT_TRUE(parseXml(svg, elements, error)) << error;
    EXPECT_EQ(elements.front(), "svg");
    size_t rows = 0;
    for (size_t at = svg.find("<g class=\"rank\""); at != std::string::npos;
         at = svg.find("<g class=\"rank\"", at + 1))
      ++rows;
    EXPECT_EQ(rows, static_cast<size_t>(p)) << scheduleKindName(kind);
    EXPECT_NE(svg.find("&lt;p &amp; m&gt;: bubble "), std::string::npos);
    // One box per computation (transfers take no time here, so they are not drawn).
    size_t boxes = std::count(elements.begin(), elements.end(), "rect");
    size_t computations =
        std::count_if(t.actions.begin(), t.actions.end(),
                      [](const TimedAction &a) { return isCompute(a.action.kind); });
    EXPECT_EQ(boxes, 1 + p + computations + 5) // background, idle rows, boxes, legend
        << scheduleKindName(kind);
    for (const char *legend :
         {"forward", "backward (input)", "weight gradient", "communication", "idle"})
      EXPECT_NE(svg.find(std::string(">") + legend + "</text>"), std::string::npos) << legend;
  }
  // The 1F1B bubble of 3/11 of the rank-time and 3/8 of the compute time is in the title.
  std::string svg = scheduleSvg(run(ScheduleKind::OneFOneB, 4, 8), "1f1b");
  EXPECT_NE(svg.find("1f1b: bubble 27.27% of rank-time (0.375 of the compute time), makespan 33"),
            std::string::npos);
}

} // namespace
