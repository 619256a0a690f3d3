//===- PlanFileTest.cpp - The binary plan format --------------------------===//

#include "common/PlanFile.h"

#include <gtest/gtest.h>

using namespace tessel::planfile;

namespace {

Plan samplePlan() {
  Plan p;
  p.model = "tiny";
  p.config = {{"steps", int64_t(10)}, {"lr", 3e-3}, {"data", std::string("x.txt")}};
  StateTensor w;
  w.name = "w";
  w.role = "param";
  w.shape = {4, 8};
  w.dims = {"a", "b"};
  w.init = "normal";
  w.initB = 0.02;
  p.state.push_back(w);
  p.groups.push_back({"world", {0}});
  Program prog;
  prog.name = "forward";
  prog.arenaBytes = 256;
  Port in;
  in.name = "tokens";
  in.dtype = DType::I32;
  in.shape = {2, 4};
  in.buffer = {Storage::Arena, 0, 0, 32, DType::I32};
  prog.inputs.push_back(in);
  Instr i;
  i.kernel = "embedding";
  i.inputs = {{Storage::State, 0, 0, 128, DType::F32}, in.buffer};
  i.outputs = {{Storage::Arena, 0, 64, 128, DType::F32}};
  i.attrs = {{"rows", int64_t(4)}, {"shape", std::vector<int64_t>{2, 4, 8}}};
  i.loc = "tiny.model:3:7";
  prog.instrs.push_back(i);
  p.programs.push_back(prog);
  return p;
}

TEST(PlanFile, RoundTrips) {
  std::vector<uint8_t> bytes = serializePlan(samplePlan());
  Plan back;
  std::string error;
  ASSERT_TRUE(parsePlan(bytes.data(), bytes.size(), back, error)) << error;
  EXPECT_EQ(back.model, "tiny");
  ASSERT_EQ(back.programs.size(), 1u);
  const Instr &i = back.programs[0].instrs[0];
  EXPECT_EQ(i.kernel, "embedding");
  EXPECT_EQ(i.loc, "tiny.model:3:7");
  EXPECT_EQ(std::get<std::vector<int64_t>>(i.find("shape")->value),
            (std::vector<int64_t>{2, 4, 8}));
  EXPECT_EQ(std::get<double>(back.findConfig("lr")->value), 3e-3);
  EXPECT_EQ(back.state[0].initB, 0.02);
  EXPECT_EQ(serializePlan(back), bytes);
}

TEST(PlanFile, RefusesAnotherVersion) {
  std::vector<uint8_t> bytes = serializePlan(samplePlan());
  ASSERT_EQ(bytes[8], 3);
  bytes[8] = 1;
  Plan back;
  std::string error;
  EXPECT_FALSE(parsePlan(bytes.data(), bytes.size(), back, error));
  EXPECT_EQ(error, "plan version 1, this runtime reads 3: recompile the model");
}

TEST(PlanFile, RefusesCorruption) {
  std::vector<uint8_t> bytes = serializePlan(samplePlan());
  bytes[bytes.size() / 2] ^= 0x40;
  Plan back;
  std::string error;
  EXPECT_FALSE(parsePlan(bytes.data(), bytes.size(), back, error));
  EXPECT_NE(error.find("checksum"), std::string::npos) << error;
}

TEST(PlanFile, RefusesEveryTruncation) {
  std::vector<uint8_t> bytes = serializePlan(samplePlan());
  for (size_t n = 0; n < bytes.size(); ++n) {
    Plan back;
    std::string error;
    EXPECT_FALSE(parsePlan(bytes.data(), n, back, error)) << "length " << n;
    EXPECT_FALSE(error.empty());
  }
}

TEST(PlanFile, RefusesNonPlans) {
  std::string text = "#!/bin/sh\necho this is not a plan, but is long enough to have a header\n";
  Plan back;
  std::string error;
  EXPECT_FALSE(parsePlan(reinterpret_cast<const uint8_t *>(text.data()), text.size(), back, error));
  EXPECT_NE(error.find("not a Tessel plan"), std::string::npos);
}

TEST(PlanFile, RefusesOperandsOutsideTheArena) {
  Plan p = samplePlan();
  p.programs[0].instrs[0].outputs[0].offset = 200; // 200 + 128 > 256
  std::string error;
  EXPECT_FALSE(validatePlan(p, error));
  EXPECT_NE(error.find("outside its buffer"), std::string::npos) << error;
  p = samplePlan();
  p.programs[0].instrs[0].inputs[0].state = 7;
  EXPECT_FALSE(validatePlan(p, error));
  EXPECT_NE(error.find("state tensor #7"), std::string::npos) << error;
}

/// samplePlan over a mesh {dp = 2, tp = 2} (rank = dp * 2 + tp): the table split by rows over
/// tp, the tokens by batch over dp, the embedding reading its rows through `row_group`.
Plan meshPlan() {
  Plan p = samplePlan();
  p.worldSize = 4;
  p.groups = {
      {"world", {0, 1, 2, 3}}, {"tp", {0, 1}}, {"tp", {2, 3}}, {"dp", {0, 2}}, {"dp", {1, 3}}};
  p.state[0].split = {"tp", ""};
  p.programs[0].inputs[0].split = {"dp", ""};
  p.programs[0].instrs[0].attrs.push_back({"row_group", std::string("tp")});
  Program base = p.programs[0];
  for (uint32_t r = 1; r < 4; ++r) {
    p.programs.push_back(base);
    p.programs.back().rank = r;
  }
  return p;
}

TEST(PlanFile, RoundTripsSplitsAndGroups) {
  std::vector<uint8_t> bytes = serializePlan(meshPlan());
  Plan back;
  std::string error;
  ASSERT_TRUE(parsePlan(bytes.data(), bytes.size(), back, error)) << error;
  EXPECT_EQ(back.worldSize, 4u);
  EXPECT_EQ(back.state[0].split, (std::vector<std::string>{"tp", ""}));
  EXPECT_EQ(back.programs[3].inputs[0].split, (std::vector<std::string>{"dp", ""}));
  EXPECT_EQ(back.groups.size(), 5u);
  EXPECT_EQ(serializePlan(back), bytes);
}

TEST(PlanFile, FindsEachRanksGroup) {
  Plan p = meshPlan();
  ASSERT_NE(p.findGroup("tp", 3), nullptr);
  EXPECT_EQ(p.findGroup("tp", 3)->ranks, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(p.findGroup("tp", 3)->indexOf(3), 1);
  EXPECT_EQ(p.findGroup("dp", 1)->ranks, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(p.findGroup("dp", 1)->indexOf(1), 0);
  EXPECT_EQ(p.findGroup("pp", 0), nullptr);
}

/// validatePlan refuses `p` with a message containing `expected`.
void expectRefused(const Plan &p, const std::string &expected) {
  std::string error;
  EXPECT_FALSE(validatePlan(p, error)) << "expected: " << expected;
  EXPECT_NE(error.find(expected), std::string::npos) << error;
}

TEST(PlanFile, RefusesGroupsThatDoNotCoverTheWorld) {
  std::string error;
  EXPECT_TRUE(validatePlan(meshPlan(), error)) << error;
  Plan p = meshPlan();
  p.groups.pop_back(); // dp {1, 3}
  expectRefused(p, "no instance of group 'dp' holds rank 1");
  p = meshPlan();
  p.groups.push_back({"tp", {1, 2}});
  expectRefused(p, "holds rank 1, which instance 1 of that name holds too");
  p = meshPlan();
  p.groups[3] = {"dp", {0, 2, 1}};
  expectRefused(p, "has 2 ranks where another instance of that name has 3");
  p = meshPlan();
  p.groups[0].ranks.push_back(4);
  expectRefused(p, "holds rank 4 of a world of 4");
}

TEST(PlanFile, RefusesSplitsOverUnknownGroups) {
  Plan p = meshPlan();
  p.state[0].split = {"pp", ""};
  expectRefused(p, "state tensor 'w' is split over group 'pp', which the plan does not have");
  p = meshPlan();
  p.state[0].split = {"tp"};
  expectRefused(p, "state tensor 'w' has 1 split entries for 2 dims");
  p = meshPlan();
  p.programs[2].inputs[0].split = {"", "sp"};
  expectRefused(p, "input 'tokens' of 'forward' is split over group 'sp'");
  p = meshPlan();
  p.programs[1].instrs[0].attrs.back().value = std::string("ep");
  expectRefused(p, "names group 'ep', which the plan does not have");
}

TEST(PlanFile, RefusesRanksWithoutTheirPrograms) {
  Plan p = meshPlan();
  p.programs.pop_back();
  expectRefused(p, "program 'forward' has no version for rank 3");
  p = meshPlan();
  p.programs[3].rank = 2;
  expectRefused(p, "program 'forward' appears twice for rank 2");
}

/// A mesh {pp = 2, tp = 2} (rank = stage * 2 + tp): "forward.0" on stage 0 reads `w`, which
/// only stage 0 holds; "forward.1" on stage 1 reads `w1`, which only stage 1 holds.
Plan pipelinePlan() {
  Plan p = samplePlan();
  p.worldSize = 4;
  p.groups = {
      {"world", {0, 1, 2, 3}}, {"tp", {0, 1}}, {"tp", {2, 3}}, {"pp", {0, 2}}, {"pp", {1, 3}}};
  p.state[0].stages = {0};
  p.state.push_back(p.state[0]);
  p.state[1].name = "w1";
  p.state[1].stages = {1};
  Program base = p.programs[0];
  p.programs.clear();
  for (uint32_t r = 0; r < 4; ++r) {
    p.programs.push_back(base);
    p.programs.back().rank = r;
    p.programs.back().name = r < 2 ? "forward.0" : "forward.1";
    p.programs.back().instrs[0].inputs[0].state = r < 2 ? 0 : 1;
  }
  return p;
}

TEST(PlanFile, RoundTripsStages) {
  std::vector<uint8_t> bytes = serializePlan(pipelinePlan());
  Plan back;
  std::string error;
  ASSERT_TRUE(parsePlan(bytes.data(), bytes.size(), back, error)) << error;
  EXPECT_EQ(back.state[0].stages, (std::vector<uint32_t>{0}));
  EXPECT_EQ(back.state[1].stages, (std::vector<uint32_t>{1}));
  EXPECT_EQ(back.pipelineStages(), 2u);
  EXPECT_EQ(back.pipelineStage(3), 1u);
  EXPECT_EQ(back.pipelineStage(1), 0u);
  EXPECT_TRUE(back.state[1].heldBy(1));
  EXPECT_FALSE(back.state[1].heldBy(0));
  EXPECT_EQ(serializePlan(back), bytes);
  // Without a "pp" group, one stage: every rank is stage 0.
  EXPECT_EQ(meshPlan().pipelineStages(), 1u);
  EXPECT_EQ(meshPlan().pipelineStage(3), 0u);
}

TEST(PlanFile, ReadsChunksFromProgramNames) {
  uint32_t chunk = 99;
  EXPECT_TRUE(pipelineChunkOf("forward.3", chunk));
  EXPECT_EQ(chunk, 3u);
  EXPECT_TRUE(pipelineChunkOf("backward_weight.12", chunk));
  EXPECT_EQ(chunk, 12u);
  for (const char *name : {"forward", "forward.", "a.b", "x.1y", "forward.1234567890"})
    EXPECT_FALSE(pipelineChunkOf(name, chunk)) << name;
}

TEST(PlanFile, RefusesStateAStageDoesNotHold) {
  std::string error;
  EXPECT_TRUE(validatePlan(pipelinePlan(), error)) << error;
  Plan p = pipelinePlan();
  p.state[0].stages = {0, 2};
  expectRefused(p, "state tensor 'w' is held by pipeline stage 2 of 2");
  p = pipelinePlan();
  p.programs[3].instrs[0].inputs[0].state = 0;
  expectRefused(p, "operand of instruction 0 (embedding) in 'forward.1' on rank 3 refers to "
                   "state tensor 'w', which the rank's pipeline stage 1 does not hold");
  p = pipelinePlan();
  p.state[0].stages = {};
  p.programs[3].instrs[0].inputs[0].state = 0;
  EXPECT_TRUE(validatePlan(p, error)) << error; // held by every stage
}

/// `base` (pipelinePlan, kept either way) with a copy of "forward.0" on rank 2 of stage 1, or
/// with an "optimizer_step" on rank 0 only, which the first rank of stage 1 (`missing`) lacks.
void expectStrayProgramsRefused(const Plan &base, const std::string &missing) {
  Plan p = base;
  p.programs.push_back(p.programs[0]);
  p.programs.back().rank = 2;
  p.programs.back().instrs.clear();
  expectRefused(p, "program 'forward.0' is on rank 2 of pipeline stage 1, but chunk 0 runs on "
                   "stage 0");
  // A program without a chunk is still on every rank.
  p = base;
  p.programs.push_back(p.programs[0]);
  p.programs.back().name = "optimizer_step";
  p.programs.back().instrs.clear();
  expectRefused(p, "program 'optimizer_step' has no version for rank " + missing);
}

TEST(PlanFile, RefusesPipelineProgramsOnOtherStages) {
  expectStrayProgramsRefused(pipelinePlan(), "1");
  Plan p = pipelinePlan();
  p.programs.erase(p.programs.begin() + 1);
  expectRefused(p, "program 'forward.0' has no version for rank 1 (pipeline stage 0 runs chunk 0)");
  p = pipelinePlan();
  p.programs[2].name = p.programs[3].name = "forward.x";
  expectRefused(p, "program 'forward.x' has a '.' but no chunk number after it");
}

/// pipelinePlan kept as the compiler keeps it: one version of each program per stage, on the
/// stage's first rank.
Plan perStagePlan() {
  Plan p = pipelinePlan();
  p.programs = {p.programs[0], p.programs[2]}; // forward.0 on rank 0, forward.1 on rank 2
  p.programsPerStage = true;
  return p;
}

TEST(PlanFile, KeepsProgramsPerStage) {
  std::string error;
  Plan p = perStagePlan();
  ASSERT_TRUE(validatePlan(p, error)) << error;
  EXPECT_EQ(p.ranksByStage(), (std::vector<std::vector<uint32_t>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(p.ranksOf(p.programs[1]), (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(p.findProgram("forward.1", 3), &p.programs[1]);
  EXPECT_EQ(p.findProgram("forward.0", 1), &p.programs[0]);
  EXPECT_EQ(p.findProgram("forward.0", 3), nullptr);
  // The file holds a version per rank: the same bytes as the plan kept per rank, which is what
  // parsing gives back.
  std::vector<uint8_t> bytes = serializePlan(p);
  EXPECT_EQ(bytes, serializePlan(pipelinePlan()));
  Plan back;
  ASSERT_TRUE(parsePlan(bytes.data(), bytes.size(), back, error)) << error;
  EXPECT_FALSE(back.programsPerStage);
  ASSERT_EQ(back.programs.size(), 4u);
  EXPECT_EQ(back.programs[3].name, "forward.1");
  EXPECT_EQ(back.programs[3].rank, 3u);
  EXPECT_EQ(back.ranksOf(back.programs[3]), (std::vector<uint32_t>{3}));
  // Without a "pp" group, one stage of every rank.
  Plan mesh = meshPlan();
  mesh.programs.resize(1);
  mesh.programsPerStage = true;
  EXPECT_TRUE(validatePlan(mesh, error)) << error;
  EXPECT_EQ(serializePlan(mesh), serializePlan(meshPlan()));
  EXPECT_EQ(mesh.findProgram("forward", 3), &mesh.programs[0]);
}

TEST(PlanFile, RefusesProgramsPerStageOffTheirStage) {
  Plan p = perStagePlan();
  p.programs[0].rank = 1;
  expectRefused(p, "program 'forward.0' is kept on rank 1, not on rank 0, the first of stage 0");
  p = perStagePlan();
  p.programs.push_back(p.programs[0]);
  expectRefused(p, "program 'forward.0' appears twice for stage 0");
  expectStrayProgramsRefused(perStagePlan(), "2");
}

} // namespace
