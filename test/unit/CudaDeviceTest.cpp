//===- CudaDeviceTest.cpp - The executor on the CUDA device ---------------===//
//
// A small plan runs on the CUDA device and on the CPU device and must give the same values
// within f32 tolerance (that every compute kernel has a CUDA handler is checked without a GPU,
// CudaCoverageTest.cpp). Built only with the CUDA toolkit; without a GPU every test is skipped
// with "skipped: no CUDA device" and the reason.
//
//===----------------------------------------------------------------------===//

#include "runtime/core/Executor.h"
#include "runtime/device/Device.h"

#include "test/unit/PlanBuilders.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

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

  /// `plan` on the GPU (`gpu`) and on the CPU device (`cpu`, the reference), each with state
  /// tensor 0 set to `w`. Call it under ASSERT_NO_FATAL_FAILURE.
  void onBothDevices(const Plan &plan, const std::vector<float> &w) {
    std::string error, why;
    gpu = Executor::create(plan, 0, error, nullptr, rt::createCudaDevice(0, why));
    ASSERT_TRUE(gpu) << error << why;
    cpu = Executor::create(plan, 0, error, nullptr, rt::createCpuDevice());
    ASSERT_TRUE(cpu) << error;
    ASSERT_TRUE(gpu->writeState(0, w.data()));
    ASSERT_TRUE(cpu->writeState(0, w.data()));
  }

  std::unique_ptr<Executor> gpu, cpu;
};

/// n values of a smooth function of the index, positive and negative.
std::vector<float> sineValues(int n) {
  std::vector<float> w(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    w[static_cast<size_t>(i)] = std::sin(0.37f * static_cast<float>(i));
  return w;
}

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
  std::vector<float> w(15);
  for (int i = 0; i < 15; ++i)
    w[static_cast<size_t>(i)] = 0.3f * static_cast<float>(i) - 2.0f;
  ASSERT_NO_FATAL_FAILURE(onBothDevices(softmaxPlan(), w));
  std::string error;
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(gpu->run("step", rt::StepContext{}, error)) << error;
    ASSERT_TRUE(cpu->run("step", rt::StepContext{}, error)) << error;
  }
  const float *y = gpu->output("step", "y"), *ref = cpu->output("step", "y");
  ASSERT_TRUE(y && ref);
  for (int i = 0; i < 15; ++i)
    EXPECT_NEAR(y[i], ref[i], 1e-5f + 1e-4f * std::fabs(ref[i])) << "element " << i;
}

/// One rank, w of [2, 3, 4, 5]: c = w w^T per batch index [2, 3] (gemm over two batch dims),
/// the step's learning rate, the global norm of c, its clipping factor, and a finiteness
/// guard on the norm; outputs "c", "lr" and "clip".
Plan productPlan() {
  Plan plan;
  plan.model = "test";
  StateTensor w;
  w.name = "w";
  w.role = "param";
  w.shape = {2, 3, 4, 5};
  plan.state.push_back(w);
  Program p;
  p.name = "step";
  p.arenaBytes = (96 + 3) * 4;
  const BufferRef state{Storage::State, 0, 0, 120 * 4, DType::F32};
  p.instrs.push_back(test::makeInstr("gemm", {state, state}, {arenaRef(0, 96)},
                                     {{"m", int64_t(4)},
                                      {"n", int64_t(4)},
                                      {"k", int64_t(5)},
                                      {"trans_a", int64_t(0)},
                                      {"trans_b", int64_t(1)},
                                      {"lda", int64_t(5)},
                                      {"ldb", int64_t(5)},
                                      {"ldc", int64_t(4)},
                                      {"batch_shape", std::vector<int64_t>{2, 3}},
                                      {"a_batch_strides", std::vector<int64_t>{60, 20}},
                                      {"b_batch_strides", std::vector<int64_t>{60, 20}},
                                      {"c_batch_strides", std::vector<int64_t>{48, 16}}},
                                     "test.model:5:3"));
  p.instrs.push_back(test::makeInstr("learning_rate", {}, {arenaRef(96, 1)},
                                     {{"schedule", std::string("cosine")},
                                      {"lr", 1e-3},
                                      {"min_lr", 1e-4},
                                      {"warmup", int64_t(2)},
                                      {"steps", int64_t(10)}},
                                     "test.model:6:3"));
  p.instrs.push_back(
      test::makeInstr("global_norm", {arenaRef(0, 96)}, {arenaRef(97, 1)}, {}, "test.model:7:3"));
  p.instrs.push_back(test::makeInstr("guard_finite", {arenaRef(97, 1)}, {}, {}, "test.model:7:3"));
  p.instrs.push_back(test::makeInstr("clip_coefficient", {arenaRef(97, 1)}, {arenaRef(98, 1)},
                                     {{"max", 1.0}}, "test.model:8:3"));
  p.outputs.push_back({"c", DType::F32, {2, 3, 4, 4}, {}, arenaRef(0, 96)});
  p.outputs.push_back({"lr", DType::F32, {1}, {}, arenaRef(96, 1)});
  p.outputs.push_back({"clip", DType::F32, {1}, {}, arenaRef(98, 1)});
  plan.programs.push_back(p);
  return plan;
}

TEST_F(CudaDevice, RunsBatchedProductsAndTheStepScalarsAsTheCpuDeviceDoes) {
  ASSERT_NO_FATAL_FAILURE(onBothDevices(productPlan(), sineValues(120)));
  std::string error;
  for (int64_t step = 1; step <= 4; ++step) {
    rt::StepContext ctx;
    ctx.step = step;
    ASSERT_TRUE(gpu->run("step", ctx, error)) << error;
    ASSERT_TRUE(cpu->run("step", ctx, error)) << error;
    for (const char *name : {"c", "lr", "clip"}) {
      const float *got = gpu->output("step", name), *ref = cpu->output("step", name);
      ASSERT_TRUE(got && ref) << name;
      const int n = std::string(name) == "c" ? 96 : 1;
      for (int i = 0; i < n; ++i)
        EXPECT_NEAR(got[i], ref[i], 1e-6f + 1e-5f * std::fabs(ref[i]))
            << name << " element " << i << " at step " << step;
    }
  }
}

TEST_F(CudaDevice, NamesItsModelAndMemory) {
  std::string why;
  auto device = rt::createCudaDevice(0, why);
  ASSERT_TRUE(device) << why;
  // The vendor's name (the runner finds the peak by it), and memory that is in use and fits.
  EXPECT_NE(device->model(), device->name());
  EXPECT_NE(device->model().find("NVIDIA"), std::string::npos) << device->model();
  uint64_t used = 0, total = 0;
  ASSERT_TRUE(device->memoryInUse(used, total));
  EXPECT_GT(total, 0u);
  EXPECT_LE(used, total);
}

} // namespace

/// Mixed precision: w (f32) to its bf16 working copy, c = w16 w16^T per batch index into a
/// bf16 buffer (the f32 product between widening and narrowing copies) and into an f32 buffer
/// (cuBLASLt's bf16 product), then gelu of the bf16 c into f32. The CPU device's results
/// (bf16 in, f32 compute, bf16 out rounded to nearest even) within a bf16 tolerance: the GPU's
/// f32 sums run in another order, which can move a rounding by one bf16 ulp.
TEST_F(CudaDevice, RunsBf16OperandsAsTheCpuDeviceDoes) {
  Plan plan = productPlan();
  Program &p = plan.programs[0];
  p.instrs.erase(p.instrs.begin() + 1, p.instrs.end()); // the gemm alone
  p.outputs.clear();
  const BufferRef state{Storage::State, 0, 0, 120 * 4, DType::F32};
  // Bytes: [0, 384) c (f32), [384, 624) w16, [624, 816) c16, [816, 1200) gelu(c16) (f32).
  const BufferRef w16{Storage::Arena, 0, 384, 240, DType::BF16};
  const BufferRef c16{Storage::Arena, 0, 624, 192, DType::BF16};
  const BufferRef g{Storage::Arena, 0, 816, 384, DType::F32};
  p.arenaBytes = 1200;
  p.instrs.insert(p.instrs.begin(), test::makeInstr("copy", {state}, {w16},
                                                    {{"shape", std::vector<int64_t>{120}},
                                                     {"x_strides", std::vector<int64_t>{1}}},
                                                    "test.model:4:3"));
  p.instrs[1].inputs = {w16, w16}; // c (f32) = w16 w16^T: the bf16 product
  Instr narrowProduct = p.instrs[1];
  narrowProduct.outputs = {c16}; // c16 = the same product stored in bf16
  p.instrs.push_back(narrowProduct);
  p.instrs.push_back(test::makeInstr(
      "unary", {c16}, {g}, {{"op", std::string("gelu")}, {"n", int64_t(96)}}, "test.model:9:3"));
  p.outputs.push_back({"c", DType::F32, {2, 3, 4, 4}, {}, arenaRef(0, 96)});
  p.outputs.push_back({"g", DType::F32, {96}, {}, g});
  ASSERT_NO_FATAL_FAILURE(onBothDevices(plan, sineValues(120)));
  std::string error;
  ASSERT_TRUE(gpu->run("step", rt::StepContext{}, error)) << error;
  ASSERT_TRUE(cpu->run("step", rt::StepContext{}, error)) << error;
  for (const char *name : {"c", "g"}) {
    const float *got = gpu->output("step", name), *ref = cpu->output("step", name);
    ASSERT_TRUE(got && ref) << name;
    for (int i = 0; i < 96; ++i)
      EXPECT_NEAR(got[i], ref[i], 1e-5f + 0x1p-7f * std::fabs(ref[i])) << name << " element " << i;
  }
}
