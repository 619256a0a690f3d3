//===- PlanFileTest.cpp - The binary plan format --------------------------===//

#include "common/plan/PlanFile.h"
#include "common/support/Checksum.h"

#include <gtest/gtest.h>

#include <cstring>

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
  StateTensor loaded = w;
  loaded.name = "c_attn_q";
  loaded.init = "load";
  loaded.initB = 0;
  loaded.initSource = "h.0.attn.c_attn.weight";
  loaded.initSlice = {0, 3, -1, -1};
  p.state.push_back(loaded);
  p.groups.push_back({"world", {}});
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
  prog.buffers = {{0, 32, 0, 0, BufferKind::Input}, {64, 128, 0, 0, BufferKind::Kept}};
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
  EXPECT_EQ(back.state[1].initSource, "h.0.attn.c_attn.weight");
  EXPECT_EQ(back.state[1].initSlice, (std::vector<int64_t>{0, 3, -1, -1}));
  ASSERT_EQ(back.programs[0].buffers.size(), 2u);
  EXPECT_EQ(back.programs[0].buffers[1].offset, 64u);
  EXPECT_EQ(back.programs[0].buffers[1].bytes, 128u);
  EXPECT_EQ(back.programs[0].buffers[1].kind, BufferKind::Kept);
  EXPECT_EQ(serializePlan(back), bytes);
}

TEST(PlanFile, RoundTripsTheRecomputedFlagAndRefusesUnknownFlags) {
  Plan p = samplePlan();
  p.programs[0].instrs[0].recomputed = true;
  // Version 9, whose payload ends with the last instruction's flags.
  std::vector<uint8_t> bytes = serializePlan(p, 9);
  Plan back;
  std::string error;
  ASSERT_TRUE(parsePlan(bytes.data(), bytes.size(), back, error)) << error;
  EXPECT_TRUE(back.programs[0].instrs[0].recomputed);
  // The flags are the instruction's last u32 before the end of the payload: set bit 1, which
  // no version 5 writer sets, and fix the checksum so that only the flags are wrong.
  const size_t flags = bytes.size() - 4;
  ASSERT_EQ(bytes[flags], 1);
  bytes[flags] = 3;
  const uint64_t sum = tessel::xxh3_64(bytes.data() + 32, bytes.size() - 32);
  std::memcpy(bytes.data() + 24, &sum, sizeof sum);
  EXPECT_FALSE(parsePlan(bytes.data(), bytes.size(), back, error));
  EXPECT_NE(error.find("an instruction has unknown flags 3"), std::string::npos) << error;
}

TEST(PlanFile, ReadsVersion9WithoutBufferLifetimes) {
  // Version 10 added each program's buffers; a version 9 plan has none, and runs.
  std::vector<uint8_t> bytes = serializePlan(samplePlan(), 9);
  ASSERT_EQ(bytes[8], 9);
  Plan back;
  std::string error;
  ASSERT_TRUE(parsePlan(bytes.data(), bytes.size(), back, error)) << error;
  EXPECT_TRUE(back.programs[0].buffers.empty());
  EXPECT_EQ(back.state[1].initSource, "h.0.attn.c_attn.weight");
}

TEST(PlanFile, RoundTripsTheDecodePlan) {
  // Version 11 carries the decode plan inside the plan, or why the model has none.
  Plan p = samplePlan();
  Plan decoder = samplePlan();
  decoder.programs[0].name = "prefill";
  StateTensor cache;
  cache.name = "kv.0.key";
  cache.role = "kv_cache";
  cache.shape = {4, 16, 2, 8};
  cache.dims = {"cache_blocks", "block_slot", "kv_heads", "head"};
  decoder.state.push_back(cache);
  p.decoder = std::make_shared<Plan>(decoder);
  std::vector<uint8_t> bytes = serializePlan(p);
  Plan back;
  std::string error;
  ASSERT_TRUE(parsePlan(bytes.data(), bytes.size(), back, error)) << error;
  ASSERT_TRUE(back.decoder);
  EXPECT_EQ(back.decoder->programs[0].name, "prefill");
  EXPECT_EQ(back.decoder->state.back().role, "kv_cache");
  EXPECT_FALSE(back.decoder->state.back().checkpointed());
  EXPECT_EQ(serializePlan(back), bytes);

  Plan refused = samplePlan();
  refused.decoderRefused = "m.model:3:5: positions(seq) compares tokens of one window";
  bytes = serializePlan(refused);
  ASSERT_TRUE(parsePlan(bytes.data(), bytes.size(), back, error)) << error;
  EXPECT_FALSE(back.decoder);
  EXPECT_EQ(back.decoderRefused, refused.decoderRefused);

  // Version 10 has neither; its plans still read.
  bytes = serializePlan(p, 10);
  ASSERT_TRUE(parsePlan(bytes.data(), bytes.size(), back, error)) << error;
  EXPECT_FALSE(back.decoder);
}

TEST(PlanFile, RefusesADecodePlanOnAnotherMesh) {
  Plan p = samplePlan();
  Plan decoder = samplePlan();
  decoder.worldSize = 2;
  decoder.mesh = {{"tp", 2}};
  decoder.groups.push_back({"tp", {0}});
  p.decoder = std::make_shared<Plan>(decoder);
  std::vector<uint8_t> bytes = serializePlan(p);
  Plan back;
  std::string error;
  EXPECT_FALSE(parsePlan(bytes.data(), bytes.size(), back, error));
  EXPECT_NE(error.find("its decode plan is laid out on another mesh than the plan"),
            std::string::npos)
      << error;
}

TEST(PlanFile, RefusesBuffersOutsideTheArenaOrTheProgram) {
  std::string error;
  Plan p = samplePlan();
  p.programs[0].buffers[1].bytes = 256; // 64 + 256 > the arena's 256.
  EXPECT_FALSE(validatePlan(p, error));
  EXPECT_EQ(error, "buffer 1 of 'forward' (bytes 64..320) lies outside the arena of 256 bytes");
  p = samplePlan();
  p.programs[0].buffers[0].last = 1; // The program has one instruction.
  EXPECT_FALSE(validatePlan(p, error));
  EXPECT_EQ(error, "buffer 0 of 'forward' holds its value from instruction 0 to 1, but the "
                   "program has 1 instructions");
  // An unknown kind is refused as the file is read (version 10: its payload ends with the
  // last buffer's kind).
  p = samplePlan();
  std::vector<uint8_t> bytes = serializePlan(p, 10);
  ASSERT_EQ(bytes.back(), static_cast<uint8_t>(BufferKind::Kept));
  bytes.back() = 9;
  const uint64_t sum = tessel::xxh3_64(bytes.data() + 32, bytes.size() - 32);
  std::memcpy(bytes.data() + 24, &sum, sizeof sum);
  Plan back;
  EXPECT_FALSE(parsePlan(bytes.data(), bytes.size(), back, error));
  EXPECT_NE(error.find("a buffer has unknown kind 9"), std::string::npos) << error;
}

TEST(PlanFile, ReadsVersion7ThatChecksummedWithFnv) {
  // Version 8 changed only the checksum: a version 7 plan (FNV-1a 64) still reads, and an
  // XXH3 checksum in it does not.
  std::vector<uint8_t> bytes = serializePlan(samplePlan(), 7);
  ASSERT_EQ(bytes[8], 7);
  Plan back;
  std::string error;
  ASSERT_TRUE(parsePlan(bytes.data(), bytes.size(), back, error)) << error;
  EXPECT_EQ(back.model, samplePlan().model);
  const uint64_t sum = tessel::xxh3_64(bytes.data() + 32, bytes.size() - 32);
  std::memcpy(bytes.data() + 24, &sum, sizeof sum);
  EXPECT_FALSE(parsePlan(bytes.data(), bytes.size(), back, error));
  EXPECT_NE(error.find("checksum"), std::string::npos) << error;
}

TEST(PlanFile, ReadsVersion8WithoutLoadedInitialisers) {
  // Version 9 added the stored tensor a parameter loads; a version 8 plan has none.
  std::vector<uint8_t> bytes = serializePlan(samplePlan(), 8);
  ASSERT_EQ(bytes[8], 8);
  EXPECT_LT(bytes.size(), serializePlan(samplePlan()).size());
  Plan back;
  std::string error;
  ASSERT_TRUE(parsePlan(bytes.data(), bytes.size(), back, error)) << error;
  ASSERT_EQ(back.state.size(), 2u);
  EXPECT_EQ(back.state[1].init, "load");
  EXPECT_TRUE(back.state[1].initSource.empty());
  EXPECT_EQ(back.programs[0].instrs[0].loc, "tiny.model:3:7");
}

TEST(PlanFile, RefusesAnotherVersion) {
  std::vector<uint8_t> bytes = serializePlan(samplePlan());
  ASSERT_EQ(bytes[8], 11);
  bytes[8] = 6; // Version 6's optimizer kernels took one tensor each and `n` as an integer.
  Plan back;
  std::string error;
  EXPECT_FALSE(parsePlan(bytes.data(), bytes.size(), back, error));
  EXPECT_EQ(error, "plan version 6, this runtime reads 7 to 11: recompile the model");
  bytes[8] = 12;
  EXPECT_FALSE(parsePlan(bytes.data(), bytes.size(), back, error));
  EXPECT_EQ(error, "plan version 12, this runtime reads 7 to 11: recompile the model");
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

TEST(PlanFile, RefusesTransfersWhoseEndsDisagreeOnTheType) {
  // A send of 16 bf16 elements with tag 3 in one program and a receive of f32 with that tag in
  // another: a communicator would hand the receiver bytes it reads as another type.
  Plan p = samplePlan();
  Instr send;
  send.kernel = "send";
  send.inputs = {{Storage::Arena, 0, 192, 32, DType::BF16}};
  send.attrs = {{"group", std::string("world")},
                {"peer", int64_t(1)},
                {"tag", int64_t(3)},
                {"n", int64_t(16)}};
  p.programs[0].instrs.push_back(send);
  Program other = p.programs[0];
  other.name = "backward";
  other.instrs = {send};
  other.instrs[0].kernel = "recv";
  other.instrs[0].outputs = {{Storage::Arena, 0, 128, 64, DType::F32}};
  other.instrs[0].inputs.clear();
  p.programs.push_back(other);
  std::string error;
  EXPECT_FALSE(validatePlan(p, error));
  EXPECT_NE(error.find("moves f32 with tag 3, which 'forward' moves as bf16"), std::string::npos)
      << error;
  p.programs[1].instrs[0].outputs[0] = {Storage::Arena, 0, 128, 32, DType::BF16};
  EXPECT_TRUE(validatePlan(p, error)) << error;
}

/// samplePlan over a mesh {dp = 2, tp = 2} (rank = dp * 2 + tp): the table split by rows over
/// tp, the tokens by batch over dp, the embedding reading its rows through `row_group`. One
/// version of the program serves every rank.
Plan meshPlan(uint32_t dp = 2) {
  Plan p = samplePlan();
  p.worldSize = dp * 2;
  p.mesh = {{"dp", dp}, {"tp", 2}};
  p.groups = {{"world", {0, 1}}, {"tp", {1}}, {"dp", {0}}};
  p.state[0].split = {"tp", ""};
  p.programs[0].inputs[0].split = {"dp", ""};
  p.programs[0].instrs[0].attrs.push_back({"row_group", std::string("tp")});
  return p;
}

TEST(PlanFile, RoundTripsTheMeshAndSplits) {
  std::vector<uint8_t> bytes = serializePlan(meshPlan());
  Plan back;
  std::string error;
  ASSERT_TRUE(parsePlan(bytes.data(), bytes.size(), back, error)) << error;
  EXPECT_EQ(back.worldSize, 4u);
  ASSERT_EQ(back.mesh.size(), 2u);
  EXPECT_EQ(back.mesh[1].name, "tp");
  EXPECT_EQ(back.mesh[1].size, 2u);
  EXPECT_EQ(back.state[0].split, (std::vector<std::string>{"tp", ""}));
  EXPECT_EQ(back.programs[0].inputs[0].split, (std::vector<std::string>{"dp", ""}));
  ASSERT_EQ(back.groups.size(), 3u);
  EXPECT_EQ(back.groups[0].axes, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(serializePlan(back), bytes);
}

TEST(PlanFile, SizeDoesNotGrowWithTheMesh) {
  // 4 ranks or 4096: the same bytes but for the size of dp.
  EXPECT_EQ(serializePlan(meshPlan(2)).size(), serializePlan(meshPlan(2048)).size());
  std::string error;
  EXPECT_TRUE(validatePlan(meshPlan(2048), error)) << error;
}

TEST(PlanFile, FindsEachRanksGroup) {
  Plan p = meshPlan();
  ASSERT_TRUE(p.findGroup("tp", 3));
  EXPECT_EQ(p.findGroup("tp", 3)->ranks, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(p.findGroup("tp", 3)->index, 1u);
  EXPECT_EQ(p.findGroup("dp", 1)->ranks, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(p.findGroup("dp", 1)->index, 0u);
  EXPECT_EQ(p.findGroup("world", 2)->ranks, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(p.findGroup("world", 2)->index, 2u);
  EXPECT_FALSE(p.findGroup("pp", 0));
  EXPECT_EQ(p.meshCoordinates(3), (std::vector<uint32_t>{1, 1}));
  // One rank, no axes: "world" is that rank.
  EXPECT_EQ(samplePlan().findGroup("world", 0)->ranks, (std::vector<uint32_t>{0}));
}

TEST(PlanFile, GroupInstancesFollowTheMeshNumbering) {
  // {pp = 2, dp = 3, tp = 2}, rank = (pp * 3 + dp) * 2 + tp: every set of axes against the
  // instances listed by hand the way the compiler numbers ranks (an instance: the ranks that
  // agree on every other axis, ascending).
  Plan p;
  p.worldSize = 12;
  p.mesh = {{"pp", 2}, {"dp", 3}, {"tp", 2}};
  for (uint32_t mask = 0; mask < 8; ++mask) {
    Group g{"g" + std::to_string(mask), {}};
    for (uint32_t a = 0; a < 3; ++a)
      if (mask & (1u << a))
        g.axes.push_back(a);
    p.groups.push_back(g);
  }
  for (uint32_t mask = 0; mask < 8; ++mask)
    for (uint32_t r = 0; r < 12; ++r) {
      const std::vector<uint32_t> c = p.meshCoordinates(r);
      ASSERT_EQ((c[0] * 3 + c[1]) * 2 + c[2], r);
      std::vector<uint32_t> want;
      for (uint32_t q = 0; q < 12; ++q) {
        const std::vector<uint32_t> d = p.meshCoordinates(q);
        bool same = true;
        for (uint32_t a = 0; a < 3; ++a)
          if (!(mask & (1u << a)) && d[a] != c[a])
            same = false;
        if (same)
          want.push_back(q);
      }
      std::optional<GroupInstance> got = p.findGroup("g" + std::to_string(mask), r);
      ASSERT_TRUE(got);
      EXPECT_EQ(got->ranks, want) << "axes " << mask << ", rank " << r;
      ASSERT_LT(got->index, got->ranks.size());
      EXPECT_EQ(got->ranks[got->index], r);
      EXPECT_EQ(p.groupSize(p.groups[mask]), want.size());
    }
}

/// validatePlan refuses `p` with a message containing `expected`.
void expectRefused(const Plan &p, const std::string &expected) {
  std::string error;
  EXPECT_FALSE(validatePlan(p, error)) << "expected: " << expected;
  EXPECT_NE(error.find(expected), std::string::npos) << error;
}

TEST(PlanFile, RefusesUnknownRolesAndWorkingCopiesThatMatchNoParameter) {
  // The runtime initialises and checkpoints each tensor by its role: a role it does not know,
  // or a working copy it could not make from a parameter, would train wrong without a word.
  Plan p = samplePlan();
  StateTensor copy = p.state[0];
  copy.name = "working.w";
  copy.role = "working";
  copy.of = "w";
  copy.dtype = DType::BF16;
  copy.init = "zeros";
  p.state.push_back(copy);
  const size_t at = p.state.size() - 1;
  std::string error;
  EXPECT_TRUE(validatePlan(p, error)) << error;
  Plan bad = p;
  bad.state[at].role = "shadow";
  expectRefused(bad, "state tensor 'working.w' has the unknown role 'shadow'");
  bad = p;
  bad.state[at].of = "v";
  expectRefused(bad, "working copy 'working.w' must be a 16-bit float tensor of a parameter's "
                     "shape, split and stages ('v' is no parameter)");
  bad = p;
  bad.state[at].dtype = DType::F32;
  expectRefused(bad, "working copy 'working.w' must be a 16-bit float tensor");
  bad = p;
  bad.state[at].shape = {8, 4};
  expectRefused(bad, "working copy 'working.w' must be a 16-bit float tensor");
  bad = p;
  bad.state[0].dtype = DType::BF16;
  expectRefused(bad, "parameter 'w' must be f32 and belong to no other tensor");
}

TEST(PlanFile, RefusesMeshesThatDoNotDescribeTheWorld) {
  std::string error;
  EXPECT_TRUE(validatePlan(meshPlan(), error)) << error;
  Plan p = meshPlan();
  p.worldSize = 8;
  expectRefused(p, "the mesh {dp = 2, tp = 2} has 4 ranks, but the plan has 8");
  p = samplePlan();
  p.worldSize = 2;
  expectRefused(p, "the mesh {} has 1 rank, but the plan has 2");
  p = meshPlan();
  p.mesh[0].size = 0;
  expectRefused(p, "mesh axis 'dp' has size 0");
  p = meshPlan();
  p.mesh[1].name = "dp";
  expectRefused(p, "mesh axis 1 'dp' is named twice");
  p = meshPlan();
  p.mesh[0].name = "";
  expectRefused(p, "mesh axis 0 has no name");
  p = meshPlan();
  p.groups.push_back({"tp", {0}});
  expectRefused(p, "group 'tp' is described twice");
  p = meshPlan();
  p.groups[1].axes = {2};
  expectRefused(p, "group 'tp' spans axis 2, but the mesh has 2");
  p = meshPlan();
  p.groups[0].axes = {1, 0};
  expectRefused(p, "group 'world' lists its axes out of order");
  p = meshPlan();
  p.groups[0].axes = {1, 1};
  expectRefused(p, "group 'world' lists its axes out of order");
}

TEST(PlanFile, RefusesSplitsOverUnknownGroups) {
  Plan p = meshPlan();
  p.state[0].split = {"pp", ""};
  expectRefused(p, "state tensor 'w' is split over group 'pp', which the plan does not have");
  p = meshPlan();
  p.state[0].split = {"tp"};
  expectRefused(p, "state tensor 'w' has 1 split entries for 2 dims");
  p = meshPlan();
  p.programs[0].inputs[0].split = {"", "sp"};
  expectRefused(p, "input 'tokens' of 'forward' is split over group 'sp'");
  p = meshPlan();
  p.programs[0].instrs[0].attrs.back().value = std::string("ep");
  expectRefused(p, "names group 'ep', which the plan does not have");
}

/// A mesh {pp = 2, tp = 2} (rank = stage * 2 + tp): "forward.0" on stage 0 reads `w`, which
/// only stage 0 holds; "forward.1" on stage 1 reads `w1`, which only stage 1 holds.
Plan pipelinePlan() {
  Plan p = samplePlan();
  p.worldSize = 4;
  p.mesh = {{"pp", 2}, {"tp", 2}};
  p.groups = {{"world", {0, 1}}, {"tp", {1}}, {"pp", {0}}};
  p.state[0].stages = {0};
  p.state.push_back(p.state[0]);
  p.state[1].name = "w1";
  p.state[1].stages = {1};
  Program base = p.programs[0];
  p.programs.clear();
  for (uint32_t stage = 0; stage < 2; ++stage) {
    p.programs.push_back(base);
    p.programs.back().stage = stage;
    p.programs.back().name = "forward." + std::to_string(stage);
    p.programs.back().instrs[0].inputs[0].state = stage;
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
  EXPECT_EQ(back.programs[1].stage, 1u);
  EXPECT_TRUE(back.state[1].heldBy(1));
  EXPECT_FALSE(back.state[1].heldBy(0));
  EXPECT_EQ(serializePlan(back), bytes);
  // Without a "pp" group, one stage: every rank is stage 0.
  EXPECT_EQ(meshPlan().pipelineStages(), 1u);
  EXPECT_EQ(meshPlan().pipelineStage(3), 0u);
}

TEST(PlanFile, FindsEachRanksPrograms) {
  Plan p = pipelinePlan();
  EXPECT_EQ(p.ranksByStage(), (std::vector<std::vector<uint32_t>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(p.ranksOf(p.programs[1]), (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(p.findProgram("forward.1", 3), &p.programs[1]);
  EXPECT_EQ(p.findProgram("forward.0", 1), &p.programs[0]);
  EXPECT_EQ(p.findProgram("forward.0", 3), nullptr);
  // Without a "pp" group, one stage of every rank.
  Plan mesh = meshPlan();
  EXPECT_EQ(mesh.findProgram("forward", 3), &mesh.programs[0]);
  EXPECT_EQ(mesh.ranksOf(mesh.programs[0]), (std::vector<uint32_t>{0, 1, 2, 3}));
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
  p.programs[1].instrs[0].inputs[0].state = 0;
  expectRefused(p, "operand of instruction 0 (embedding) in 'forward.1' refers to state tensor "
                   "'w', which its pipeline stage 1 does not hold");
  p = pipelinePlan();
  p.state[0].stages = {};
  p.programs[1].instrs[0].inputs[0].state = 0;
  EXPECT_TRUE(validatePlan(p, error)) << error; // held by every stage
}

TEST(PlanFile, RefusesProgramsOffTheirStages) {
  Plan p = pipelinePlan();
  p.programs.push_back(p.programs[0]);
  p.programs.back().stage = 1;
  p.programs.back().instrs.clear();
  p.programs.back().buffers.clear();
  expectRefused(p, "program 'forward.0' is on pipeline stage 1, but chunk 0 runs on stage 0");
  // A program without a chunk is on every stage.
  p = pipelinePlan();
  p.programs.push_back(p.programs[0]);
  p.programs.back().name = "optimizer_step";
  p.programs.back().instrs.clear();
  p.programs.back().buffers.clear();
  expectRefused(p, "program 'optimizer_step' has no version for pipeline stage 1");
  p = pipelinePlan();
  p.programs.push_back(p.programs[0]);
  expectRefused(p, "program 'forward.0' appears twice for stage 0");
  p = pipelinePlan();
  p.programs.erase(p.programs.begin() + 1);
  p.programs[0].stage = 1;
  p.programs[0].instrs.clear();
  p.programs[0].buffers.clear();
  expectRefused(p, "program 'forward.0' has no version for pipeline stage 0, which runs chunk 0");
  p = pipelinePlan();
  p.programs[1].stage = 2;
  expectRefused(p, "program 'forward.1' is for pipeline stage 2 of 2");
  p = pipelinePlan();
  p.programs[0].name = p.programs[1].name = "forward.x";
  expectRefused(p, "program 'forward.x' has a '.' but no chunk number after it");
}

} // namespace
