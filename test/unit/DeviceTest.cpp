//===- DeviceTest.cpp - The executor runs on the device interface ---------===//
//
// A device that wraps the CPU device and records every call shows that the executor allocates,
// copies and launches only through the interface, and a plan with 16-bit operands is refused
// by the CPU device at load, naming the instruction.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/Device.h"
#include "runtime/core/Executor.h"

#include "test/unit/ExecutorState.h"
#include "test/unit/PlanBuilders.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace tessel;
using namespace tessel::planfile;
using rt::Device;
using rt::DeviceBuffer;
using rt::DeviceEvent;
using rt::Executor;
using rt::KernelCall;
using rt::KernelFn;

namespace {

/// The CPU device, counting what is asked of it.
class RecordingDevice : public Device {
public:
  struct Counts {
    int allocations = 0, uploads = 0, downloads = 0, launches = 0, synchronizes = 0;
    std::vector<std::string> kernels;
    /// Instructions handed to prepare (checked), and the launches before.
    std::vector<std::string> prepared;
    int launchesBeforePrepare = 0;
    /// With `timers`, the device times launches itself: each timer reads 0.25 s, once the
    /// device has synchronized after it was stopped.
    bool timers = false;
    int timersStarted = 0, timersStopped = 0, timersReadBeforeSynchronize = 0;
  };
  explicit RecordingDevice(Counts &counts) : counts_(counts), cpu_(rt::createCpuDevice()) {}

  std::string name() const override { return "recording"; }
  std::unique_ptr<DeviceBuffer> allocate(uint64_t bytes, std::string &error) override {
    ++counts_.allocations;
    return cpu_->allocate(bytes, error);
  }
  void upload(void *device, const void *host, uint64_t bytes) override {
    ++counts_.uploads;
    cpu_->upload(device, host, bytes);
  }
  void download(void *host, const void *device, uint64_t bytes) override {
    ++counts_.downloads;
    cpu_->download(host, device, bytes);
  }
  KernelFn kernel(const catalogue::KernelInfo &kernel, const std::vector<DType> &ins,
                  const std::vector<DType> &outs, std::string &error) override {
    counts_.kernels.push_back(kernel.name);
    return cpu_->kernel(kernel, ins, outs, error);
  }
  bool prepare(KernelCall &call, const rt::KernelArgs &args) override {
    if (call.error.empty())
      counts_.prepared.push_back(call.instr->kernel);
    counts_.launchesBeforePrepare += counts_.launches;
    return cpu_->prepare(call, args);
  }
  uint32_t streams() const override { return 1; }
  bool launch(uint32_t stream, KernelFn fn, KernelCall &call,
              const rt::KernelArgs &args) override {
    ++counts_.launches;
    return cpu_->launch(stream, fn, call, args);
  }
  DeviceEvent record(uint32_t stream) override { return cpu_->record(stream); }
  void waitFor(uint32_t stream, const DeviceEvent &event) override { cpu_->waitFor(stream, event); }
  bool synchronize(std::string &error) override {
    ++counts_.synchronizes;
    stoppedSinceSynchronize_ = 0;
    return cpu_->synchronize(error);
  }
  int64_t startTimer(uint32_t stream) override {
    return counts_.timers ? counts_.timersStarted++ : -1;
  }
  void stopTimer(int64_t timer, uint32_t stream) override {
    ++counts_.timersStopped;
    ++stoppedSinceSynchronize_;
  }
  double timerSeconds(int64_t timer) override {
    counts_.timersReadBeforeSynchronize += stoppedSinceSynchronize_ > 0;
    return 0.25;
  }

private:
  Counts &counts_;
  std::unique_ptr<Device> cpu_;
  int stoppedSinceSynchronize_ = 0;
};

BufferRef arenaRef(uint64_t offset, uint64_t elements, DType type = DType::F32) {
  return {Storage::Arena, 0, offset * 4, elements * 4, type};
}

/// One rank: y = exp(w) into the arena, then w = y + y; output "y".
Plan twoKernels(DType type = DType::F32) {
  Plan plan;
  plan.model = "test";
  StateTensor w;
  w.name = "w";
  w.role = "param";
  w.shape = {4};
  plan.state.push_back(w);
  Program p;
  p.name = "step";
  p.arenaBytes = 16;
  p.instrs.push_back(
      test::makeInstr("unary", {{Storage::State, 0, 0, 16, DType::F32}}, {arenaRef(0, 4, type)},
                      {{"op", std::string("exp")}, {"n", int64_t(4)}}, "test.model:2:3"));
  p.instrs.push_back(test::makeInstr("binary", {arenaRef(0, 4, type), arenaRef(0, 4, type)},
                                     {{Storage::State, 0, 0, 16, DType::F32}},
                                     {{"op", std::string("add")},
                                      {"shape", std::vector<int64_t>{4}},
                                      {"a_strides", std::vector<int64_t>{1}},
                                      {"b_strides", std::vector<int64_t>{1}}},
                                     "test.model:3:3"));
  p.outputs.push_back({"y", DType::F32, {4}, {}, arenaRef(0, 4)});
  plan.programs.push_back(p);
  return plan;
}

TEST(Device, ExecutorAllocatesCopiesAndLaunchesThroughTheDevice) {
  RecordingDevice::Counts counts;
  std::string error;
  auto ex =
      Executor::create(twoKernels(), 0, error, nullptr, std::make_unique<RecordingDevice>(counts));
  ASSERT_TRUE(ex) << error;
  EXPECT_EQ(counts.allocations, 2); // The arena and the one state tensor.
  EXPECT_EQ(counts.kernels, (std::vector<std::string>{"unary", "binary"}));
  // Each instruction is prepared once, validated, at load: before anything runs.
  EXPECT_EQ(counts.prepared, (std::vector<std::string>{"unary", "binary"}));
  EXPECT_EQ(counts.launchesBeforePrepare, 0);

  const float w[4] = {0, 1, 2, -1};
  ASSERT_TRUE(ex->writeState(0, w));
  EXPECT_EQ(counts.uploads, 1);
  ASSERT_TRUE(ex->run("step", rt::StepContext{}, error)) << error;
  EXPECT_EQ(counts.launches, 2);
  EXPECT_GE(counts.synchronizes, 1);

  const float *y = ex->output("step", "y");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(counts.downloads, 1);
  EXPECT_FLOAT_EQ(y[1], std::exp(1.0f));
  ex->output("step", "y"); // Copied once per run.
  EXPECT_EQ(counts.downloads, 1);
  EXPECT_FLOAT_EQ(rt::stateAt(*ex, 0, 2), 2 * std::exp(2.0f));
}

// --profile on a device that times its own launches (a GPU, whose launches return before the
// kernels run): each launch is timed by the device's timer, read once the run synchronized,
// not by the host clock around the launch.
TEST(Device, ProfileTakesTheDevicesTimersWhereItHasThem) {
  RecordingDevice::Counts counts;
  counts.timers = true;
  std::string error;
  auto ex =
      Executor::create(twoKernels(), 0, error, nullptr, std::make_unique<RecordingDevice>(counts));
  ASSERT_TRUE(ex) << error;
  ex->enableProfiling();
  for (int run = 0; run < 2; ++run)
    ASSERT_TRUE(ex->run("step", rt::StepContext{}, error)) << error;
  EXPECT_EQ(counts.timersStarted, 4);
  EXPECT_EQ(counts.timersStopped, 4);
  EXPECT_EQ(counts.timersReadBeforeSynchronize, 0);
  const std::vector<Executor::KernelTime> times = ex->profile();
  ASSERT_EQ(times.size(), 2u);
  for (const Executor::KernelTime &t : times) {
    EXPECT_EQ(t.calls, 2) << t.kernel;
    EXPECT_DOUBLE_EQ(t.seconds, 0.5) << t.kernel; // two timers of 0.25 s, nothing of the host
  }

  // Without timers (the CPU device) the host clock times each launch.
  RecordingDevice::Counts untimed;
  auto host =
      Executor::create(twoKernels(), 0, error, nullptr, std::make_unique<RecordingDevice>(untimed));
  ASSERT_TRUE(host) << error;
  host->enableProfiling();
  ASSERT_TRUE(host->run("step", rt::StepContext{}, error)) << error;
  EXPECT_EQ(untimed.timersStopped, 0);
  for (const Executor::KernelTime &t : host->profile())
    EXPECT_LT(t.seconds, 0.25) << t.kernel;
}

// The optimizer step's guard: a value that is not finite ends the program before anything
// after it runs, and the executor says where; a finite one lets it run to the end.
TEST(Device, GuardFiniteEndsTheProgramBeforeLaterKernels) {
  Plan plan = twoKernels();
  Program &p = plan.programs[0];
  p.instrs.insert(p.instrs.begin(),
                  test::makeInstr("guard_finite", {{Storage::State, 0, 0, 16, DType::F32}}, {}, {},
                                  "test.model:1:1"));
  std::string error;
  auto ex = Executor::create(plan, 0, error);
  ASSERT_TRUE(ex) << error;

  const float bad[4] = {1, std::nanf(""), 2, 3};
  ASSERT_TRUE(ex->writeState(0, bad));
  ASSERT_TRUE(ex->run("step", rt::StepContext{}, error)) << error;
  EXPECT_EQ(ex->stoppedAt(),
            "kernel 'guard_finite' (from test.model:1:1), instruction 0 of 'step'");
  EXPECT_FLOAT_EQ(rt::stateAt(*ex, 0, 0), 1.0f); // Untouched.
  EXPECT_FLOAT_EQ(rt::stateAt(*ex, 0, 3), 3.0f);

  const float infinite[4] = {1, 2, -INFINITY, 3};
  ASSERT_TRUE(ex->writeState(0, infinite));
  ASSERT_TRUE(ex->run("step", rt::StepContext{}, error)) << error;
  EXPECT_FALSE(ex->stoppedAt().empty());
  EXPECT_FLOAT_EQ(rt::stateAt(*ex, 0, 1), 2.0f);

  const float good[4] = {0, 1, 2, -1};
  ASSERT_TRUE(ex->writeState(0, good));
  ASSERT_TRUE(ex->run("step", rt::StepContext{}, error)) << error;
  EXPECT_EQ(ex->stoppedAt(), "");
  EXPECT_FLOAT_EQ(rt::stateAt(*ex, 0, 2), 2 * std::exp(2.0f));
}

// `gemm` with `accumulate` adds its product into its output (the fused output head's weight
// gradient, summed over chunks of rows); without it, it overwrites.
TEST(Device, GemmAccumulateAddsIntoItsOutput) {
  Plan plan;
  plan.model = "test";
  StateTensor a;
  a.name = "a";
  a.role = "param";
  a.shape = {2, 2};
  plan.state.push_back(a);
  Program p;
  p.name = "step";
  p.arenaBytes = 16;
  BufferRef state{Storage::State, 0, 0, 16, DType::F32};
  auto gemm = [&](bool accumulate) {
    std::vector<planfile::Attr> attrs = {{"batch_shape", std::vector<int64_t>{}},
                                         {"a_batch_strides", std::vector<int64_t>{}},
                                         {"b_batch_strides", std::vector<int64_t>{}},
                                         {"c_batch_strides", std::vector<int64_t>{}},
                                         {"m", int64_t(2)},
                                         {"n", int64_t(2)},
                                         {"k", int64_t(2)},
                                         {"trans_a", int64_t(0)},
                                         {"trans_b", int64_t(0)},
                                         {"lda", int64_t(2)},
                                         {"ldb", int64_t(2)},
                                         {"ldc", int64_t(2)}};
    if (accumulate)
      attrs.push_back({"accumulate", int64_t(1)});
    return test::makeInstr("gemm", {state, state}, {arenaRef(0, 4)}, attrs, "test.model:1:1");
  };
  p.instrs.push_back(gemm(false));
  p.instrs.push_back(gemm(true));
  p.instrs.push_back(gemm(true));
  p.outputs.push_back({"c", DType::F32, {2, 2}, {}, arenaRef(0, 4)});
  plan.programs.push_back(p);

  std::string error;
  auto ex = Executor::create(plan, 0, error);
  ASSERT_TRUE(ex) << error;
  const float m[4] = {1, 2, 3, 4}; // m * m = {7, 10, 15, 22}
  ASSERT_TRUE(ex->writeState(0, m));
  for (int run = 0; run < 2; ++run) { // The first gemm overwrites what the last run left.
    ASSERT_TRUE(ex->run("step", rt::StepContext{}, error)) << error;
    const float *c = ex->output("step", "c");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(std::vector<float>(c, c + 4), (std::vector<float>{21, 30, 45, 66}));
  }
}

/// One rank: an sgd call over two tensors, a (4 elements) and b (2), with lr 0.5 and factor 1;
/// `n` as given.
Plan sgdOverTwoTensors(std::vector<int64_t> n) {
  Plan plan;
  plan.model = "test";
  for (auto [name, size] : {std::pair<const char *, int64_t>{"a", 4},
                            {"b", 2},
                            {"grad.a", 4},
                            {"grad.b", 2},
                            {"momentum.a", 4},
                            {"momentum.b", 2}}) {
    StateTensor t;
    t.name = name;
    t.role = "param";
    t.shape = {size};
    plan.state.push_back(t);
  }
  auto state = [](uint32_t i, uint64_t elements) {
    return BufferRef{Storage::State, i, 0, elements * 4, DType::F32};
  };
  Program p;
  p.name = "step";
  p.arenaBytes = 8;
  auto fill = [&](uint64_t at, double value) {
    return test::makeInstr("fill", {}, {arenaRef(at, 1)}, {{"n", int64_t(1)}, {"value", value}},
                           "test.model:1:1");
  };
  p.instrs.push_back(fill(0, 0.5));
  p.instrs.push_back(fill(1, 1.0));
  p.instrs.push_back(
      test::makeInstr("sgd", {state(2, 4), state(3, 2), arenaRef(0, 1), arenaRef(1, 1)},
                      {state(0, 4), state(1, 2), state(4, 4), state(5, 2)},
                      {{"n", n}, {"momentum", 0.0}, {"weight_decay", 0.0}}, "test.model:2:1"));
  plan.programs.push_back(p);
  return plan;
}

TEST(Device, MultiTensorCallsUpdateEveryTensorAndAreCheckedAtLoad) {
  std::string error;
  auto ex = Executor::create(sgdOverTwoTensors({4, 2}), 0, error);
  ASSERT_TRUE(ex) << error;
  const float a[4] = {1, 2, 3, 4}, b[2] = {5, 6}, ga[4] = {2, 2, 2, 2}, gb[2] = {4, 8};
  ASSERT_TRUE(ex->writeState(0, a) && ex->writeState(1, b) && ex->writeState(2, ga) &&
              ex->writeState(3, gb));
  ASSERT_TRUE(ex->run("step", rt::StepContext{}, error)) << error;
  float a1[4], b1[2];
  ASSERT_TRUE(ex->readState(0, a1) && ex->readState(1, b1));
  EXPECT_EQ(std::vector<float>(a1, a1 + 4), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(std::vector<float>(b1, b1 + 2), (std::vector<float>{3, 2}));

  // `n` that lists another count of tensors, or a tensor larger than its buffers.
  EXPECT_FALSE(Executor::create(sgdOverTwoTensors({4}), 0, error));
  EXPECT_NE(
      error.find(
          "(kernel 'sgd', from test.model:2:1): lists 1 tensor in `n` but has operands for 2"),
      std::string::npos)
      << error;
  EXPECT_FALSE(Executor::create(sgdOverTwoTensors({4, 8}), 0, error));
  EXPECT_NE(error.find("input 1 needs 8 elements but its buffer holds 2"), std::string::npos)
      << error;
}

/// A device with `free` bytes of its own memory left: a GPU's, as the driver reports it.
class SmallMemoryDevice : public RecordingDevice {
public:
  SmallMemoryDevice(Counts &counts, uint64_t free) : RecordingDevice(counts), free_(free) {}
  std::string name() const override { return "small:0"; }
  bool memoryInUse(uint64_t &used, uint64_t &total) const override {
    total = uint64_t(80) << 30;
    used = total - free_;
    return true;
  }

private:
  uint64_t free_;
};

// A plan is checked against the memory of the device it runs on (a GPU's, not the host's), and
// refused before anything is allocated, with both figures.
TEST(Device, PlanIsCheckedAgainstTheDevicesMemory) {
  RecordingDevice::Counts counts;
  std::string error;
  EXPECT_FALSE(Executor::create(twoKernels(), 0, error, nullptr,
                                std::make_unique<SmallMemoryDevice>(counts, 16)));
  EXPECT_NE(error.find("small:0 has 16 bytes free of 80.0 GiB"), std::string::npos) << error;
  EXPECT_EQ(counts.allocations, 0);
  error.clear();
  EXPECT_TRUE(Executor::create(twoKernels(), 0, error, nullptr,
                               std::make_unique<SmallMemoryDevice>(counts, uint64_t(1) << 30)))
      << error;
}

} // namespace

// A runtime built with or without CUDA starts on a machine without a GPU: asking for the CUDA
// device then gives no device and a reason, never a crash.
TEST(Device, CudaDeviceSaysWhyThereIsNone) {
  std::string why;
  auto device = rt::createCudaDevice(0, why);
  if (device) {
    EXPECT_EQ(device->name(), "cuda:0");
    return;
  }
  EXPECT_TRUE(why.find("no GPU") != std::string::npos ||
              why.find("built without CUDA") != std::string::npos)
      << why;
  std::string countWhy;
  EXPECT_EQ(rt::cudaDeviceCount(countWhy), 0);
  EXPECT_FALSE(countWhy.empty());
}

/// One rank: attention_grad of one sequence of 4 queries, 2 heads of 4, reading `saved` of the
/// forward call's output and lse (0, 1 or 2 operands); the lse holds `lseElements`.
Plan attentionGradReading(int saved, uint64_t lseElements) {
  Plan plan;
  plan.model = "test";
  Program p;
  p.name = "step";
  const uint64_t q = 4 * 2 * 4;
  p.arenaBytes = (8 * q + lseElements) * 4;
  std::vector<BufferRef> ins = {arenaRef(0, q), arenaRef(q, q), arenaRef(2 * q, q),
                                arenaRef(3 * q, q)};
  if (saved >= 1)
    ins.push_back(arenaRef(4 * q, q));
  if (saved >= 2)
    ins.push_back(arenaRef(8 * q, lseElements));
  std::vector<planfile::Attr> attrs = {{"batch", int64_t(1)},   {"seq", int64_t(4)},
                                       {"heads", int64_t(2)},   {"kv_seq", int64_t(4)},
                                       {"kv_heads", int64_t(2)}, {"head", int64_t(4)},
                                       {"causal", int64_t(1)},  {"scale", 0.5}};
  p.instrs.push_back(test::makeInstr("attention_grad", ins,
                                     {arenaRef(5 * q, q), arenaRef(6 * q, q), arenaRef(7 * q, q)},
                                     attrs, "test.model:3:7"));
  plan.programs.push_back(p);
  return plan;
}

TEST(Device, AttentionGradTakesTheForwardOutputAndLseTogether) {
  std::string error;
  EXPECT_TRUE(Executor::create(attentionGradReading(0, 0), 0, error)) << error;
  EXPECT_TRUE(Executor::create(attentionGradReading(2, 8), 0, error)) << error;
  error.clear();
  EXPECT_FALSE(Executor::create(attentionGradReading(1, 0), 0, error));
  EXPECT_NE(error.find("takes the forward call's o and lse together"), std::string::npos) << error;
  EXPECT_NE(error.find("test.model:3:7"), std::string::npos) << error;
  // One lse per query row and head: 8 here.
  error.clear();
  EXPECT_FALSE(Executor::create(attentionGradReading(2, 7), 0, error));
  EXPECT_NE(error.find("input 5"), std::string::npos) << error;
}
