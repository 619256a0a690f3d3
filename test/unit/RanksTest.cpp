//===- RanksTest.cpp - Hand-written multi-rank plans through the executor -===//
//
// Small plans of 2 and 4 ranks whose programs use the collective kernels, run through
// Executors on threads with a LocalCommunicator and through Ranks (what the trainer uses): the
// results against hand computation, asynchronous collectives with `event` and `wait`, the
// blocks of split inputs and state, the rows of the data each process takes, the splits an NCCL
// communicator makes (the same on every rank), and plans refused at load or failing at run
// time with the failing rank named, never hanging.
//
//===----------------------------------------------------------------------===//

#include "common/plan/PlanFile.h"
#include "runtime/comm/Communicator.h"
#include "runtime/core/Executor.h"
#include "runtime/host/Ranks.h"
#include "test/unit/ExecutorState.h"
#include "test/unit/PlanBuilders.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>
#include <thread>

using namespace tessel;
using namespace tessel::planfile;
using rt::Executor;
using rt::Ranks;
using rt::StepContext;

namespace {

BufferRef arena(uint64_t offset, uint64_t elements, DType type = DType::F32) {
  return {Storage::Arena, 0, offset * 4, elements * 4, type};
}

BufferRef stateRef(uint32_t index, uint64_t elements, uint64_t offset = 0) {
  return {Storage::State, index, offset * 4, elements * 4, DType::F32};
}

Instr kernel(const std::string &name, std::vector<BufferRef> ins, std::vector<BufferRef> outs,
             std::vector<Attr> attrs) {
  return tessel::test::makeInstr(name, std::move(ins), std::move(outs), std::move(attrs),
                                 "test.model:1:1");
}

StateTensor tensor(const std::string &name, std::vector<int64_t> shape,
                   std::vector<std::string> split = {}) {
  StateTensor t;
  t.name = name;
  t.role = "param";
  t.shape = std::move(shape);
  t.split = std::move(split);
  return t;
}

/// A plan running `program` on `mesh` (the world is the product of its sizes), with the group
/// "world" over every axis and one group per axis, named after it. With an axis "pp", each of its
/// coordinates is a pipeline stage with its own version of `program`, which a test may change:
/// on the mesh {pp = n}, programs[r] is rank r's.
Plan spmd(std::vector<MeshAxis> mesh, std::vector<StateTensor> state, const Program &program) {
  Plan p;
  p.model = "test";
  p.state = std::move(state);
  p.mesh = std::move(mesh);
  Group all{"world", {}};
  for (uint32_t a = 0; a < p.mesh.size(); ++a) {
    p.worldSize *= p.mesh[a].size;
    all.axes.push_back(a);
    p.groups.push_back({p.mesh[a].name, {a}});
  }
  p.groups.push_back(all);
  for (uint32_t stage = 0; stage < p.pipelineStages(); ++stage) {
    p.programs.push_back(program);
    p.programs.back().stage = stage;
  }
  return p;
}

/// `program` on every rank of a world of `world` ranks, the mesh {dp = world}.
Plan spmd(uint32_t world, std::vector<StateTensor> state, const Program &program) {
  return spmd({{"dp", world}}, std::move(state), program);
}

Program program(const std::string &name, uint64_t arenaElements, std::vector<Instr> instrs) {
  Program p;
  p.name = name;
  p.arenaBytes = arenaElements * 4;
  p.instrs = std::move(instrs);
  return p;
}

TEST(RanksExecutor, AllReduceOfAStateTensorOnTwoRanks) {
  // Each rank's own Executor and end of the communicator, on its own thread.
  Plan plan = spmd(2, {tensor("w", {5})},
                   program("step", 0,
                           {kernel("all_reduce", {stateRef(0, 5)}, {stateRef(0, 5)},
                                   {{"group", std::string("world")},
                                    {"op", std::string("sum")},
                                    {"n", int64_t(5)}})}));
  auto comms = rt::LocalCommunicator::createWorld(2);
  std::vector<std::unique_ptr<Executor>> ex;
  for (uint32_t r = 0; r < 2; ++r) {
    std::string error;
    ex.push_back(Executor::create(plan, r, error, comms[r].get()));
    ASSERT_TRUE(ex.back()) << error;
    for (int e = 0; e < 5; ++e)
      setStateAt(*ex[r], 0, e, static_cast<float>((r + 1) * 10 + e));
  }
  std::string errors[2];
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < 2; ++r)
    threads.emplace_back([&, r] { ex[r]->run("step", StepContext{}, errors[r]); });
  for (std::thread &t : threads)
    t.join();
  for (uint32_t r = 0; r < 2; ++r) {
    EXPECT_EQ(errors[r], "");
    for (int e = 0; e < 5; ++e)
      EXPECT_EQ(stateAt(*ex[r], 0, e), 30.0f + 2 * e) << "rank " << r;
  }
}

TEST(RanksExecutor, PlanOfSeveralRanksNeedsACommunicator) {
  Plan plan = spmd(2, {tensor("w", {5})}, program("step", 0, {}));
  std::string error;
  EXPECT_FALSE(Executor::create(plan, 0, error));
  EXPECT_NE(error.find("needs a communicator"), std::string::npos) << error;
}

/// Creates Ranks for `plan` or fails the test.
std::unique_ptr<Ranks> makeRanks(const Plan &plan, int threads = 2) {
  std::string error;
  auto ranks = Ranks::create(plan, threads, error);
  EXPECT_TRUE(ranks) << error;
  return ranks;
}

TEST(RanksExecutor, EventCollectiveOverlapsLaterKernels) {
  // all_reduce(a -> b) in flight while a fill writes c; the wait, then a copy reads b.
  Program p = program(
      "step", 16,
      {kernel("all_reduce", {stateRef(0, 4)}, {stateRef(1, 4)},
              {{"group", std::string("world")},
               {"op", std::string("max")},
               {"n", int64_t(4)},
               {"event", int64_t(3)}}),
       kernel("fill", {}, {stateRef(2, 4)}, {{"n", int64_t(4)}, {"value", 7.0}}),
       kernel("wait", {}, {}, {{"event", int64_t(3)}}),
       kernel("copy", {stateRef(1, 4)}, {arena(0, 4)},
              {{"shape", std::vector<int64_t>{4}}, {"x_strides", std::vector<int64_t>{1}}})});
  p.outputs.push_back({"y", DType::F32, {4}, {}, arena(0, 4)});
  Plan plan = spmd(4, {tensor("a", {4}), tensor("b", {4}), tensor("c", {4})}, p);
  auto ranks = makeRanks(plan);
  ASSERT_TRUE(ranks);
  for (uint32_t r = 0; r < 4; ++r)
    for (int e = 0; e < 4; ++e)
      setStateAt(ranks->executor(r), 0, e, static_cast<float>((r * 3 + e * 5) % 7));
  std::string error;
  ASSERT_TRUE(ranks->run("step", StepContext{}, error)) << error;
  for (int e = 0; e < 4; ++e) {
    float want = 0;
    for (uint32_t r = 0; r < 4; ++r)
      want = std::max(want, static_cast<float>((r * 3 + e * 5) % 7));
    EXPECT_EQ(ranks->output("step", "y")[e], want);
    for (uint32_t r = 0; r < 4; ++r) {
      EXPECT_EQ(stateAt(ranks->executor(r), 1, e), want);
      EXPECT_EQ(stateAt(ranks->executor(r), 2, e), 7.0f);
    }
  }
  // The checking rerun runs the collective synchronously: the same result.
  ASSERT_TRUE(ranks->run("step", StepContext{}, error, /*checkFinite=*/true)) << error;
  EXPECT_EQ(stateAt(ranks->executor(3), 1, 0), stateAt(ranks->executor(0), 1, 0));
}

TEST(RanksExecutor, UnwaitedEventEndsWithItsProgram) {
  Plan plan = spmd(2, {tensor("a", {3}), tensor("b", {3})},
                   program("step", 0,
                           {kernel("all_reduce", {stateRef(0, 3)}, {stateRef(1, 3)},
                                   {{"group", std::string("world")},
                                    {"op", std::string("sum")},
                                    {"n", int64_t(3)},
                                    {"event", int64_t(1)}})}));
  auto ranks = makeRanks(plan);
  ASSERT_TRUE(ranks);
  setStateAt(ranks->executor(0), 0, 1, 2);
  setStateAt(ranks->executor(1), 0, 1, 5);
  std::string error;
  ASSERT_TRUE(ranks->run("step", StepContext{}, error)) << error;
  EXPECT_EQ(stateAt(ranks->executor(0), 1, 1), 7.0f);
  EXPECT_EQ(stateAt(ranks->executor(1), 1, 1), 7.0f);
}

TEST(RanksExecutor, ShardSliceTakesTheRanksBlock) {
  // x [outer 2, ways 2, chunk 3], the same on both ranks of "tp"; y [2, 3] is block `me`.
  Program p = program(
      "step", 6,
      {kernel("shard_slice", {stateRef(0, 12)}, {arena(0, 6)},
              {{"group", std::string("tp")}, {"outer", int64_t(2)}, {"chunk", int64_t(3)}})});
  p.outputs.push_back({"y", DType::F32, {6}, {}, arena(0, 6)});
  Plan plan = spmd({{"tp", 2}}, {tensor("x", {12})}, p);
  auto ranks = makeRanks(plan);
  ASSERT_TRUE(ranks);
  for (uint32_t r = 0; r < 2; ++r)
    for (int e = 0; e < 12; ++e)
      setStateAt(ranks->executor(r), 0, e, static_cast<float>(e));
  std::string error;
  ASSERT_TRUE(ranks->run("step", StepContext{}, error)) << error;
  const float want[2][6] = {{0, 1, 2, 6, 7, 8}, {3, 4, 5, 9, 10, 11}};
  for (uint32_t r = 0; r < 2; ++r)
    for (int e = 0; e < 6; ++e)
      EXPECT_EQ(ranks->executor(r).output("step", "y")[e], want[r][e]) << "rank " << r;
}

TEST(RanksExecutor, SendAndReceiveBetweenRanks) {
  // Rank 0 sends its x to rank 1, which receives into y; each is its own pipeline stage, so
  // their programs differ. Peers are indices into the group.
  Plan plan = spmd({{"pp", 2}}, {tensor("x", {4}), tensor("y", {4})}, program("step", 0, {}));
  plan.programs[0].instrs = {kernel("send", {stateRef(0, 4)}, {},
                                    {{"group", std::string("pp")},
                                     {"peer", int64_t(1)},
                                     {"tag", int64_t(9)},
                                     {"n", int64_t(4)}})};
  plan.programs[1].instrs = {kernel("recv", {}, {stateRef(1, 4)},
                                    {{"group", std::string("pp")},
                                     {"peer", int64_t(0)},
                                     {"tag", int64_t(9)},
                                     {"n", int64_t(4)}})};
  auto ranks = makeRanks(plan);
  ASSERT_TRUE(ranks);
  for (int e = 0; e < 4; ++e)
    setStateAt(ranks->executor(0), 0, e, 1.5f * e);
  std::string error;
  ASSERT_TRUE(ranks->run("step", StepContext{}, error)) << error;
  for (int e = 0; e < 4; ++e)
    EXPECT_EQ(stateAt(ranks->executor(1), 1, e), 1.5f * e);
}

/// Ranks::create refuses `plan` with a message containing `expected`.
void expectRefused(const Plan &plan, const std::string &expected) {
  std::string error;
  EXPECT_FALSE(Ranks::create(plan, 1, error)) << "expected: " << expected;
  EXPECT_NE(error.find(expected), std::string::npos) << error;
}

TEST(RanksExecutor, RefusesBadCollectivesAtLoad) {
  auto reduce = [](std::vector<Attr> attrs, BufferRef out = stateRef(1, 4)) {
    return spmd(2, {tensor("a", {8}), tensor("b", {4})},
                program("step", 0, {kernel("all_reduce", {stateRef(0, 4)}, {out}, attrs)}));
  };
  const Attr world{"group", std::string("world")}, sum{"op", std::string("sum")};
  expectRefused(reduce({{"group", std::string("tp")}, sum, {"n", int64_t(4)}}),
                "names group 'tp', which the plan does not have");
  expectRefused(reduce({world, sum, {"n", int64_t(5)}}), "input 0 needs 5 elements");
  expectRefused(reduce({world, {"op", std::string("mean")}, {"n", int64_t(4)}}),
                "has op 'mean'; it takes sum, max");
  expectRefused(reduce({world, sum, {"n", int64_t(4)}}, stateRef(0, 4, 2)),
                "overlaps its input without being it");
  expectRefused(reduce({world, sum, {"n", int64_t(4)}, {"event", int64_t(0)}}),
                "'event' must be an integer of at least 1");

  Plan gather = spmd(2, {tensor("a", {4}), tensor("b", {4})},
                     program("step", 0,
                             {kernel("all_gather", {stateRef(0, 4)}, {stateRef(1, 4)},
                                     {world, {"outer", int64_t(1)}, {"chunk", int64_t(4)}})}));
  expectRefused(gather, "output 0 needs 8 elements but its buffer holds 4");
  Plan bcast = spmd(2, {tensor("a", {4})},
                    program("step", 0,
                            {kernel("broadcast", {stateRef(0, 4)}, {stateRef(0, 4)},
                                    {world, {"root", int64_t(2)}, {"n", int64_t(4)}})}));
  expectRefused(bcast, "has root 2 outside its group of 2");
  Plan self = spmd(
      {{"pp", 2}}, {tensor("a", {4})},
      program("step", 0,
              {kernel("send", {stateRef(0, 4)}, {},
                      {world, {"peer", int64_t(0)}, {"tag", int64_t(0)}, {"n", int64_t(4)}})}));
  self.programs[1].instrs.clear();
  expectRefused(self, "has peer 0, which is not another index of its group of 2");
  Plan outside = self;
  outside.programs[0].instrs[0].attrs[1].value = int64_t(2);
  expectRefused(outside, "has peer 2, which is not another index of its group of 2");
}

TEST(RanksExecutor, RefusesEventsOutOfOrder) {
  auto withEvents = [](std::vector<Instr> instrs) {
    return spmd(2, {tensor("a", {4}), tensor("b", {4})}, program("step", 0, std::move(instrs)));
  };
  auto reduce = [](int64_t event) {
    return kernel("all_reduce", {stateRef(0, 4)}, {stateRef(1, 4)},
                  {{"group", std::string("world")},
                   {"op", std::string("sum")},
                   {"n", int64_t(4)},
                   {"event", event}});
  };
  auto wait = [](int64_t event) { return kernel("wait", {}, {}, {{"event", event}}); };
  expectRefused(withEvents({wait(2)}), "waits for event 2, which no earlier collective started");
  expectRefused(withEvents({reduce(1), reduce(1)}), "starts event 1 while it is in flight");
  expectRefused(withEvents({reduce(1), wait(1), wait(1)}), "waits for event 1");
  expectRefused(withEvents({kernel("fill", {}, {stateRef(0, 4)},
                                   {{"n", int64_t(4)}, {"value", 0.0}, {"event", int64_t(1)}})}),
                "has parameter 'event', which it does not take");
  std::string error;
  EXPECT_TRUE(Ranks::create(withEvents({reduce(1), wait(1), reduce(1), wait(1)}), 1, error))
      << error;
}

/// 2 ranks of data parallelism: tokens [2, 3] per rank (the whole batch [4, 3] split by rows
/// over "dp"), embedded from a table [4, 2] replicated, then the output all-reduced.
Plan embeddingPlan() {
  Program p = program(
      "step", 64,
      {kernel("embedding", {stateRef(0, 8), arena(0, 6, DType::I32)}, {arena(16, 12)},
              {{"n", int64_t(6)}, {"rows", int64_t(4)}, {"cols", int64_t(2)}}),
       kernel("unary", {arena(16, 12)}, {arena(32, 12)},
              {{"op", std::string("log")}, {"n", int64_t(12)}}),
       kernel("all_reduce", {arena(32, 12)}, {arena(32, 12)},
              {{"group", std::string("dp")}, {"op", std::string("sum")}, {"n", int64_t(12)}})});
  p.inputs.push_back({"tokens", DType::I32, {2, 3}, {"dp", ""}, arena(0, 6, DType::I32)});
  p.outputs.push_back({"y", DType::F32, {12}, {}, arena(32, 12)});
  return spmd(2, {tensor("table", {4, 2})}, p);
}

TEST(RanksExecutor, EachRankTakesItsBlockOfTheBatch) {
  auto ranks = makeRanks(embeddingPlan());
  ASSERT_TRUE(ranks);
  const float table[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ranks->setWholeState(0, table);
  const int32_t tokens[12] = {0, 1, 2, 3, 3, 3, /* rank 1: */ 1, 1, 0, 2, 0, 3};
  std::string error;
  ASSERT_TRUE(ranks->writeInput("step", "tokens", tokens, 12, error)) << error;
  ASSERT_TRUE(ranks->run("step", StepContext{}, error)) << error;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 2; ++j) {
      float want = std::log(table[tokens[i] * 2 + j]) + std::log(table[tokens[6 + i] * 2 + j]);
      EXPECT_FLOAT_EQ(ranks->output("step", "y")[i * 2 + j], want) << i << "," << j;
    }
  EXPECT_FALSE(ranks->writeInput("step", "tokens", tokens, 6, error));
  EXPECT_NE(error.find("holds 12 elements in all, not the 6"), std::string::npos) << error;
}

TEST(RanksExecutor, EachProcessTakesTheRowsOfItsRanks) {
  // A mesh {dp = 2, tp = 2} whose data is split by rows over dp: a process running rank 0 or
  // its tp partner 1 takes rows 0-1 of 4, one running rank 2 or 3 rows 2-3; a process running
  // every rank takes every row, and a batch of another size (a sample's) none.
  Program p = program("forward_backward", 16, {});
  p.inputs.push_back({"tokens", DType::I32, {2, 3}, {"dp", ""}, arena(0, 6, DType::I32)});
  p.inputs.push_back({"targets", DType::I32, {2, 3}, {"dp", ""}, arena(8, 6, DType::I32)});
  Plan plan = spmd({{"dp", 2}, {"tp", 2}}, {}, p);
  using Rows = std::vector<bool>;
  EXPECT_EQ(rt::dataRowsOf(plan, {0}, 4), (Rows{true, true, false, false}));
  EXPECT_EQ(rt::dataRowsOf(plan, {1}, 4), (Rows{true, true, false, false}));
  EXPECT_EQ(rt::dataRowsOf(plan, {2}, 4), (Rows{false, false, true, true}));
  EXPECT_EQ(rt::dataRowsOf(plan, {3}, 4), (Rows{false, false, true, true}));
  EXPECT_EQ(rt::dataRowsOf(plan, {0, 1, 2, 3}, 4), Rows(4, true));
  EXPECT_EQ(rt::dataRowsOf(plan, {0}, 8), Rows(8, false));
  // On the mesh {pp = 2, dp = 2} (stage 1 is ranks 2 and 3): a stage whose programs read no
  // data takes no rows; one that reads only the targets (the last stage) takes their rows.
  Plan piped = spmd({{"pp", 2}, {"dp", 2}}, {}, p);
  piped.programs[1].inputs.clear();
  EXPECT_EQ(rt::dataRowsOf(piped, {0}, 4), (Rows{true, true, false, false}));
  EXPECT_EQ(rt::dataRowsOf(piped, {3}, 4), Rows(4, false));
  piped.programs[1].inputs = p.inputs;
  piped.programs[1].inputs.erase(piped.programs[1].inputs.begin());
  EXPECT_EQ(rt::dataRowsOf(piped, {3}, 4), (Rows{false, false, true, true}));
}

TEST(RanksExecutor, FailingRankIsNamedAndNoRankHangs) {
  auto ranks = makeRanks(embeddingPlan());
  ASSERT_TRUE(ranks);
  const float table[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ranks->setWholeState(0, table);
  // Rank 1's block holds id 9: its embedding fails while rank 0 waits in the all-reduce.
  const int32_t tokens[12] = {0, 1, 2, 3, 3, 3, 1, 9, 0, 2, 0, 3};
  std::string error;
  ASSERT_TRUE(ranks->writeInput("step", "tokens", tokens, 12, error)) << error;
  EXPECT_FALSE(ranks->run("step", StepContext{}, error));
  EXPECT_EQ(error.rfind("rank 1: kernel 'embedding' (from test.model:1:1): token id 9", 0), 0u)
      << error;
}

TEST(RanksExecutor, NonFiniteValueIsTracedToItsRank) {
  auto ranks = makeRanks(embeddingPlan());
  ASSERT_TRUE(ranks);
  const float table[8] = {1, 2, 3, 4, 5, -6, 7, 8}; // log(-6): row 2 of the table
  ranks->setWholeState(0, table);
  const int32_t tokens[12] = {0, 1, 3, 3, 3, 3, /* rank 1: */ 1, 1, 0, 2, 0, 3};
  std::string error;
  ASSERT_TRUE(ranks->writeInput("step", "tokens", tokens, 12, error)) << error;
  ASSERT_TRUE(ranks->run("step", StepContext{}, error)) << error;
  EXPECT_TRUE(std::isnan(ranks->output("step", "y")[7]));
  EXPECT_FALSE(ranks->run("step", StepContext{}, error, /*checkFinite=*/true));
  EXPECT_EQ(error.rfind("rank 1: the first non-finite value (", 0), 0u) << error;
  EXPECT_NE(error.find("came from kernel 'unary' at test.model:1:1"), std::string::npos) << error;
}

TEST(RanksExecutor, RankWithoutItsCollectiveFailsThePeerInsteadOfHanging) {
  Plan plan = spmd({{"pp", 2}}, {tensor("a", {4})}, program("step", 0, {}));
  plan.programs[0].instrs = {
      kernel("all_reduce", {stateRef(0, 4)}, {stateRef(0, 4)},
             {{"group", std::string("world")}, {"op", std::string("sum")}, {"n", int64_t(4)}})};
  auto ranks = makeRanks(plan);
  ASSERT_TRUE(ranks);
  std::string error;
  EXPECT_FALSE(ranks->run("step", StepContext{}, error));
  EXPECT_NE(error.find("rank 1 stopped without joining all_reduce"), std::string::npos) << error;
}

TEST(RanksExecutor, WholeStateIsAssembledFromBlocks) {
  // A mesh {dp = 2, tp = 2}: w [2, 3] per rank, split by rows over tp: [4, 3] in all,
  // replicated over dp.
  Plan plan =
      spmd({{"dp", 2}, {"tp", 2}}, {tensor("w", {2, 3}, {"tp", ""})}, program("step", 0, {}));
  auto ranks = makeRanks(plan, 8);
  ASSERT_TRUE(ranks);
  EXPECT_EQ(ranks->threadsPerRank(), 2);
  EXPECT_EQ(ranks->stateShape(0), (std::vector<int64_t>{4, 3}));
  std::vector<float> whole(12);
  for (int e = 0; e < 12; ++e)
    whole[e] = static_cast<float>(e);
  ranks->setWholeState(0, whole.data());
  for (uint32_t r = 0; r < 4; ++r)
    for (int e = 0; e < 6; ++e)
      EXPECT_EQ(stateAt(ranks->executor(r), 0, e), static_cast<float>((r % 2) * 6 + e));
  // Replicas that disagree: the lowest rank holding a block provides it.
  setStateAt(ranks->executor(2), 0, 0, -1);
  setStateAt(ranks->executor(0), 0, 0, 100);
  std::vector<float> scratch;
  const float *back = ranks->wholeState(0, scratch);
  EXPECT_EQ(back[0], 100);
  for (int e = 1; e < 12; ++e)
    EXPECT_EQ(back[e], static_cast<float>(e));
}

TEST(RanksExecutor, RefusesBlocksThatDoNotMakeUpTheTensor) {
  // Both dims split over the same group: the blocks lie on the diagonal only.
  Plan plan = spmd(2, {tensor("w", {2, 2}, {"world", "world"})}, program("step", 0, {}));
  expectRefused(plan, "state tensor 'w': the ranks' blocks do not make up the whole tensor");
}

/// An all_reduce of `a` over `members` of "world", on the rank of each program (each rank its
/// own pipeline stage).
Plan membersPlan(const std::vector<std::vector<int64_t>> &members) {
  Plan plan = spmd({{"pp", 4}}, {tensor("a", {3})}, program("step", 0, {}));
  for (uint32_t r = 0; r < 4; ++r)
    plan.programs[r].instrs = {kernel("all_reduce", {stateRef(0, 3)}, {stateRef(0, 3)},
                                      {{"group", std::string("world")},
                                       {"op", std::string("sum")},
                                       {"n", int64_t(3)},
                                       {"members", members[r]}})};
  return plan;
}

TEST(RanksExecutor, AllReduceOverMembersOfItsGroup) {
  // Ranks 0 and 3 (the first and last of "world") sum theirs; ranks 1 and 2 theirs, at once.
  auto ranks = makeRanks(membersPlan({{0, 3}, {1, 2}, {1, 2}, {0, 3}}));
  ASSERT_TRUE(ranks);
  for (uint32_t r = 0; r < 4; ++r)
    for (int e = 0; e < 3; ++e)
      setStateAt(ranks->executor(r), 0, e, static_cast<float>((r * r + 1) * 10 + e));
  std::string error;
  ASSERT_TRUE(ranks->run("step", StepContext{}, error)) << error;
  for (int e = 0; e < 3; ++e) {
    EXPECT_EQ(stateAt(ranks->executor(0), 0, e), 110.0f + 2 * e); // 10 + 100
    EXPECT_EQ(stateAt(ranks->executor(3), 0, e), 110.0f + 2 * e);
    EXPECT_EQ(stateAt(ranks->executor(1), 0, e), 70.0f + 2 * e); // 20 + 50
    EXPECT_EQ(stateAt(ranks->executor(2), 0, e), 70.0f + 2 * e);
  }
  // Alone among its members: a copy.
  ranks = makeRanks(membersPlan({{0}, {1, 2, 3}, {1, 2, 3}, {1, 2, 3}}));
  ASSERT_TRUE(ranks);
  setStateAt(ranks->executor(0), 0, 1, 4);
  setStateAt(ranks->executor(2), 0, 1, 5);
  ASSERT_TRUE(ranks->run("step", StepContext{}, error)) << error;
  EXPECT_EQ(stateAt(ranks->executor(0), 0, 1), 4.0f);
  EXPECT_EQ(stateAt(ranks->executor(3), 0, 1), 5.0f);
}

TEST(RanksExecutor, RefusesMembersThatDoNotFit) {
  expectRefused(membersPlan({{1, 2}, {1, 2}, {1, 2}, {0, 3}}),
                "rank 0: instruction 0 of program 'step' (kernel 'all_reduce', from "
                "test.model:1:1): runs over members that do not include this rank (index 0 of "
                "its group)");
  expectRefused(membersPlan({{3, 0}, {1, 2}, {1, 2}, {3, 0}}),
                "has members that are not ascending indices into its group of 4");
  expectRefused(membersPlan({{0, 4}, {1, 2}, {1, 2}, {0, 3}}),
                "has members that are not ascending indices into its group of 4");
  expectRefused(membersPlan({{}, {1, 2}, {1, 2}, {0, 3}}), "do not include this rank");
}

} // namespace

namespace {

/// The ranks of the world by the instance each holds of split `k` (those in none left out):
/// what ncclCommSplit makes of every rank's (color, key).
std::map<std::vector<uint32_t>, std::vector<uint32_t>> splitInstances(const Plan &plan, size_t k) {
  std::map<std::vector<uint32_t>, std::vector<uint32_t>> instances;
  for (uint32_t r = 0; r < plan.worldSize; ++r) {
    const std::optional<rt::CommGroup> g = rt::ncclSplitsOf(plan, r)[k];
    if (!g)
      continue;
    EXPECT_LT(g->index, g->size()) << "split " << k << ", rank " << r;
    EXPECT_EQ(g->ranks[g->index], r) << "split " << k << ", rank " << r;
    instances[g->ranks].push_back(r);
  }
  return instances;
}

} // namespace

TEST(RanksNccl, EveryRankSplitsTheSameGroupsAndSubsets) {
  // dp = 2 x tp = 3; an all_reduce over members {0, 2} of each tp instance (twice: one split).
  Instr tied = kernel("all_reduce", {stateRef(0, 4)}, {stateRef(0, 4)},
                      {{"group", std::string("tp")},
                       {"op", std::string("sum")},
                       {"n", int64_t(4)},
                       {"members", std::vector<int64_t>{0, 2}}});
  Plan plan = spmd({{"dp", 2}, {"tp", 3}}, {tensor("w", {4})}, program("step", 0, {tied, tied}));
  const size_t splits = rt::ncclSplitsOf(plan, 0).size();
  ASSERT_EQ(splits, 4u); // dp, tp, world, tp's members {0, 2}
  for (uint32_t r = 1; r < plan.worldSize; ++r)
    EXPECT_EQ(rt::ncclSplitsOf(plan, r).size(), splits) << "rank " << r;
  using Instances = std::map<std::vector<uint32_t>, std::vector<uint32_t>>;
  EXPECT_EQ(splitInstances(plan, 0),
            (Instances{{{0, 3}, {0, 3}}, {{1, 4}, {1, 4}}, {{2, 5}, {2, 5}}}));
  EXPECT_EQ(splitInstances(plan, 1), (Instances{{{0, 1, 2}, {0, 1, 2}}, {{3, 4, 5}, {3, 4, 5}}}));
  EXPECT_EQ(splitInstances(plan, 2), (Instances{{{0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}}}));
  // Ranks 1 and 4 (tp index 1) take part in no subset.
  EXPECT_EQ(splitInstances(plan, 3), (Instances{{{0, 2}, {0, 2}}, {{3, 5}, {3, 5}}}));
  EXPECT_FALSE(rt::ncclSplitsOf(plan, 1)[3]);
}
