//===- CudaDeviceTest.cpp - The executor on the CUDA device ---------------===//
//
// A small plan runs on the CUDA device and on the CPU device and must give the same values
// within f32 tolerance; a plan with a kernel the CUDA backend lacks is refused at load, naming
// the kernel. Built only with the CUDA toolkit; without a GPU every test is skipped with
// "skipped: no CUDA device" and the reason.
//
//===----------------------------------------------------------------------===//

#include "runtime/core/Executor.h"
#include "runtime/device/Device.h"

#include "test/unit/PlanBuilders.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace tessel;
using namespace tessel::planfile;
using rt::Executor;

namespace {

class CudaDevice : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (rt::cudaDeviceCount(why) == 0)
      GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  }
};

BufferRef arenaRef(uint64_t offset, uint64_t elements) {
  return {Storage::Arena, 0, offset * 4, elements * 4, DType::F32};
}

/// One rank, w of [3, 5]: y = softmax(gelu(w)) per row, then w = w + y; output "y".
Plan softmaxPlan() {
  Plan plan;
  plan.model = "test";
  StateTensor w;
  w.name = "w";
  w.role = "param";
  w.shape = {3, 5};
  plan.state.push_back(w);
  Program p;
  p.name = "step";
  p.arenaBytes = 2 * 15 * 4;
  const BufferRef state{Storage::State, 0, 0, 60, DType::F32};
  p.instrs.push_back(test::makeInstr("unary", {state}, {arenaRef(0, 15)},
                                     {{"op", std::string("gelu")}, {"n", int64_t(15)}},
                                     "test.model:2:3"));
  p.instrs.push_back(test::makeInstr("softmax", {arenaRef(0, 15)}, {arenaRef(15, 15)},
                                     {{"rows", int64_t(3)}, {"cols", int64_t(5)}},
                                     "test.model:3:3"));
  p.instrs.push_back(test::makeInstr("binary", {state, arenaRef(15, 15)}, {state},
                                     {{"op", std::string("add")},
                                      {"shape", std::vector<int64_t>{15}},
                                      {"a_strides", std::vector<int64_t>{1}},
                                      {"b_strides", std::vector<int64_t>{1}}},
                                     "test.model:4:3"));
  p.outputs.push_back({"y", DType::F32, {3, 5}, {}, arenaRef(15, 15)});
  plan.programs.push_back(p);
  return plan;
}

TEST_F(CudaDevice, RunsAPlanAsTheCpuDeviceDoes) {
  const Plan plan = softmaxPlan();
  std::string error, why;
  auto gpu = Executor::create(plan, 0, error, nullptr, rt::createCudaDevice(0, why));
  ASSERT_TRUE(gpu) << error << why;
  auto cpu = Executor::create(plan, 0, error, nullptr, rt::createCpuDevice());
  ASSERT_TRUE(cpu) << error;
  float w[15];
  for (int i = 0; i < 15; ++i)
    w[i] = 0.3f * static_cast<float>(i) - 2.0f;
  ASSERT_TRUE(gpu->writeState(0, w));
  ASSERT_TRUE(cpu->writeState(0, w));
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(gpu->run("step", rt::StepContext{}, error)) << error;
    ASSERT_TRUE(cpu->run("step", rt::StepContext{}, error)) << error;
  }
  const float *y = gpu->output("step", "y"), *ref = cpu->output("step", "y");
  ASSERT_TRUE(y && ref);
  for (int i = 0; i < 15; ++i)
    EXPECT_NEAR(y[i], ref[i], 1e-5f + 1e-4f * std::fabs(ref[i])) << "element " << i;
}

TEST_F(CudaDevice, RefusesAKernelItLacksAtLoad) {
  Plan plan = softmaxPlan();
  plan.programs[0].instrs.push_back(test::makeInstr("gemm", {arenaRef(0, 15), arenaRef(0, 15)},
                                                    {arenaRef(15, 9)},
                                                    {{"m", int64_t(3)},
                                                     {"n", int64_t(3)},
                                                     {"k", int64_t(5)},
                                                     {"trans_a", int64_t(0)},
                                                     {"trans_b", int64_t(1)},
                                                     {"lda", int64_t(5)},
                                                     {"ldb", int64_t(5)},
                                                     {"ldc", int64_t(3)},
                                                     {"batch_shape", std::vector<int64_t>{}},
                                                     {"a_batch_strides", std::vector<int64_t>{}},
                                                     {"b_batch_strides", std::vector<int64_t>{}},
                                                     {"c_batch_strides", std::vector<int64_t>{}}},
                                                    "test.model:5:3"));
  std::string error, why;
  EXPECT_FALSE(Executor::create(plan, 0, error, nullptr, rt::createCudaDevice(0, why)));
  EXPECT_NE(error.find("the cuda device has no 'gemm' kernel yet"), std::string::npos) << error;
}

} // namespace
