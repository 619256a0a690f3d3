//===- PlanFileTest.cpp - The binary plan format --------------------------===//

#include "runtime/PlanFile.h"

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
  EXPECT_EQ(std::get<std::vector<int64_t>>(i.find("shape")->value), (std::vector<int64_t>{2, 4, 8}));
  EXPECT_EQ(std::get<double>(back.findConfig("lr")->value), 3e-3);
  EXPECT_EQ(back.state[0].initB, 0.02);
  EXPECT_EQ(serializePlan(back), bytes);
}

TEST(PlanFile, RefusesAnotherVersion) {
  std::vector<uint8_t> bytes = serializePlan(samplePlan());
  bytes[8] = kPlanVersion + 1;
  Plan back;
  std::string error;
  EXPECT_FALSE(parsePlan(bytes.data(), bytes.size(), back, error));
  EXPECT_NE(error.find("version 2"), std::string::npos) << error;
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

} // namespace
