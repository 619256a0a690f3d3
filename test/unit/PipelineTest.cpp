//===- PipelineTest.cpp - Pipelined plans through Ranks and the trainer ---===//
//
// The hand-written model of PipelineModel.h under every schedule, against the same math fused
// into the programs of a plan without a pipeline: losses, gradients, updated weights,
// evaluation and sampling agree bit for bit. Also what the stash holds (in a run and in the
// shared walk tessel estimate runs, for every rank of a stage's programs), the recorded
// timeline, a failing rank ending every rank, plans whose programs break the pipeline
// contract, and the trainer's pipelined loop against its loop without a pipeline.
//
//===----------------------------------------------------------------------===//

#include "common/layout/PipelineWalk.h"
#include "runtime/host/Ranks.h"
#include "runtime/host/Trainer.h"
#include "runtime/support/Json.h"
#include "test/unit/PipelineModel.h"
#include "test/unit/ScratchDir.h"

#include "test/unit/ExecutorState.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

using namespace tessel;
using pipeline::ScheduleKind;
using rt::MicroBatchData;
using rt::Ranks;
using rt::StepContext;
using test::PipelineModel;

namespace {

std::unique_ptr<Ranks> makeRanks(const planfile::Plan &plan) {
  std::string error;
  auto ranks = Ranks::create(plan, 2, error);
  EXPECT_TRUE(ranks) << error;
  return ranks;
}

/// The same random parameters in every plan of `model` (gradients zero).
void setWeights(Ranks &ranks, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  const planfile::Plan &plan = ranks.plan();
  for (size_t i = 0; i < plan.state.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : ranks.stateShape(i))
      n *= d;
    std::vector<float> whole(static_cast<size_t>(n), 0.0f);
    if (plan.state[i].role == "param")
      for (float &x : whole)
        x = dist(gen);
    ranks.setWholeState(i, whole.data());
  }
}

std::vector<MicroBatchData> batches(const PipelineModel &m, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(m.vocab) - 1);
  std::vector<MicroBatchData> out(static_cast<size_t>(m.microbatches));
  for (MicroBatchData &b : out)
    for (int64_t i = 0; i < m.batchTokens(); ++i) {
      b.tokens.push_back(id(gen));
      b.targets.push_back(id(gen));
    }
  return out;
}

std::vector<float> wholeState(const Ranks &ranks, size_t index) {
  std::vector<float> scratch;
  const float *x = ranks.wholeState(index, scratch);
  int64_t n = 1;
  for (int64_t d : ranks.stateShape(index))
    n *= d;
  return std::vector<float>(x, x + n);
}

/// One step without a pipeline: forward_backward per micro-batch, then optimizer_step.
std::vector<float> fusedStep(Ranks &ranks, int64_t step, const std::vector<MicroBatchData> &data) {
  std::vector<float> losses;
  std::string error;
  for (size_t i = 0; i < data.size(); ++i) {
    const int64_t n = static_cast<int64_t>(data[i].tokens.size());
    EXPECT_TRUE(ranks.writeInput("forward_backward", "tokens", data[i].tokens.data(), n, error) &&
                ranks.writeInput("forward_backward", "targets", data[i].targets.data(), n, error) &&
                ranks.run("forward_backward", StepContext{step, static_cast<int64_t>(i), 7}, error))
        << error;
    losses.push_back(ranks.output("forward_backward", "loss")[0]);
  }
  return losses;
}

struct Layout {
  ScheduleKind schedule;
  int virtualStages, dp;
};

std::string layoutName(const testing::TestParamInfo<Layout> &info) {
  return std::string(pipeline::scheduleKindName(info.param.schedule)) + "_v" +
         std::to_string(info.param.virtualStages) + "_dp" + std::to_string(info.param.dp);
}

class Schedules : public testing::TestWithParam<Layout> {
protected:
  PipelineModel model() const {
    PipelineModel m;
    m.schedule = GetParam().schedule;
    m.virtualStages = GetParam().virtualStages;
    m.dp = GetParam().dp;
    return m;
  }
};

TEST_P(Schedules, StepsMatchTheFusedPlanBitForBit) {
  const PipelineModel m = model();
  auto piped = makeRanks(m.pipelined()), fused = makeRanks(m.fused());
  ASSERT_TRUE(piped && fused);
  ASSERT_TRUE(piped->pipeline());
  ASSERT_FALSE(fused->pipeline());
  setWeights(*piped, 11);
  setWeights(*fused, 11);
  for (int64_t step = 1; step <= 2; ++step) {
    std::vector<MicroBatchData> data = batches(m, static_cast<unsigned>(step));
    std::vector<float> losses;
    std::string error;
    ASSERT_TRUE(piped->runPipelineStep(StepContext{step, 0, 7}, data, losses, error)) << error;
    EXPECT_EQ(losses, fusedStep(*fused, step, data)) << "step " << step;
    for (size_t i = 0; i < piped->plan().state.size(); ++i)
      EXPECT_EQ(wholeState(*piped, i), wholeState(*fused, i))
          << piped->plan().state[i].name << ", step " << step;
    ASSERT_TRUE(piped->run("optimizer_step", StepContext{step, 0, 7}, error)) << error;
    ASSERT_TRUE(fused->run("optimizer_step", StepContext{step, 0, 7}, error)) << error;
    EXPECT_EQ(piped->output("optimizer_step", "lr")[0], 0.1f);
  }
  for (size_t i = 0; i < piped->plan().state.size(); ++i)
    EXPECT_EQ(wholeState(*piped, i), wholeState(*fused, i)) << piped->plan().state[i].name;

  // The forward-only chains: the eval loss and the sampled logits of one batch.
  MicroBatchData batch = batches(m, 99)[0];
  const int64_t n = m.batchTokens();
  std::string error;
  std::vector<float> loss, logits;
  ASSERT_TRUE(piped->runForwardChain("eval", StepContext{}, batch, loss, error)) << error;
  ASSERT_TRUE(fused->writeInput("eval", "tokens", batch.tokens.data(), n, error) &&
              fused->writeInput("eval", "targets", batch.targets.data(), n, error) &&
              fused->run("eval", StepContext{}, error))
      << error;
  ASSERT_EQ(loss.size(), 1u);
  EXPECT_EQ(loss[0], fused->output("eval", "loss")[0]);
  ASSERT_TRUE(piped->runForwardChain("sample", StepContext{}, {batch.tokens, {}}, logits, error))
      << error;
  ASSERT_TRUE(fused->writeInput("sample", "tokens", batch.tokens.data(), n, error) &&
              fused->run("sample", StepContext{}, error))
      << error;
  // Logits from the lowest rank of the last stage: data-parallel replica 0's rows.
  const int64_t local = m.rows * m.seq * m.dim;
  ASSERT_EQ(static_cast<int64_t>(logits.size()), local);
  EXPECT_EQ(logits, std::vector<float>(fused->output("sample", "logits"),
                                       fused->output("sample", "logits") + local));
}

TEST_P(Schedules, RecordsTheStepOfEveryStage) {
  const PipelineModel m = model();
  auto ranks = makeRanks(m.pipelined());
  ASSERT_TRUE(ranks);
  setWeights(*ranks, 3);
  std::vector<float> losses;
  std::string error;
  ASSERT_TRUE(ranks->runPipelineStep(StepContext{1, 0, 7}, batches(m, 1), losses, error)) << error;
  pipeline::Timeline t = ranks->lastTimeline();
  EXPECT_EQ(t.ranks, m.stages);
  size_t actions = 0, computations = 0;
  for (int s = 0; s < m.stages; ++s)
    actions += ranks->pipeline()->actions(static_cast<uint32_t>(s)).size();
  ASSERT_EQ(t.actions.size(), actions);
  for (const pipeline::TimedAction &a : t.actions) {
    EXPECT_LE(a.start, a.end);
    EXPECT_GE(a.start, 0);
    computations += pipeline::isCompute(a.action.kind);
  }
  const size_t perUnit = m.schedule == ScheduleKind::ZBH1 ? 3 : 2;
  EXPECT_EQ(computations, perUnit * static_cast<size_t>(m.microbatches * m.chunks()));
  EXPECT_GT(t.makespan, 0);
  EXPECT_GE(t.bubbleOverIdeal, 0);
  for (uint32_t r = 0; r < ranks->size(); ++r)
    EXPECT_GT(ranks->pipelineStashBytes(r), 0u) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(
    Pipeline, Schedules,
    testing::Values(Layout{ScheduleKind::AFAB, 1, 1}, Layout{ScheduleKind::OneFOneB, 1, 1},
                    Layout{ScheduleKind::ZBH1, 1, 1}, Layout{ScheduleKind::Interleaved, 2, 1},
                    Layout{ScheduleKind::OneFOneB, 1, 2}, Layout{ScheduleKind::Interleaved, 2, 2}),
    layoutName);

TEST(Pipeline, StashHoldsWhatTheScheduleHasInFlight) {
  // Per micro-batch a stage keeps one activation (x0 on stage 0; h0 and the target embedding
  // on stage 1) from its forward to its backward pass, plus the value in transit.
  PipelineModel m;
  const uint64_t value = static_cast<uint64_t>(m.rows * m.seq * m.dim) * 4;
  const uint64_t mb = static_cast<uint64_t>(m.microbatches);
  for (ScheduleKind kind : {ScheduleKind::AFAB, ScheduleKind::OneFOneB}) {
    m.schedule = kind;
    auto ranks = makeRanks(m.pipelined());
    ASSERT_TRUE(ranks);
    const bool afab = kind == ScheduleKind::AFAB;
    // AFAB: every micro-batch's x0, and the h0 a send carries, which stays until the
    // gradient received in the same exchange is there too; 1F1B: p of them.
    EXPECT_EQ(ranks->pipelineStashBytes(0), (afab ? mb + 2 : 4) * value);
    EXPECT_EQ(ranks->pipelineStashBytes(1), (afab ? 2 * mb : 2) * value);
    // Measured in a run: the same.
    setWeights(*ranks, 1);
    std::vector<float> losses;
    std::string error;
    ASSERT_TRUE(ranks->runPipelineStep(StepContext{1, 0, 0}, batches(m, 1), losses, error)) << error;
    EXPECT_EQ(ranks->pipelineStashBytes(0), (afab ? mb + 2 : 4) * value);
    pipeline::Timeline t = ranks->lastTimeline();
    EXPECT_EQ(t.peakInFlight[0], afab ? m.microbatches : m.stages);
  }
}

TEST(Pipeline, EstimateWalksTheRuntimesStash) {
  // The dry walk of common/layout/PipelineWalk.h, without a runtime, as tessel estimate runs it: the
  // peaks the ranks report, with two data-parallel replicas running each stage's programs.
  PipelineModel m;
  m.dp = 2;
  for (ScheduleKind kind : {ScheduleKind::AFAB, ScheduleKind::OneFOneB, ScheduleKind::ZBH1}) {
    m.schedule = kind;
    const planfile::Plan plan = m.pipelined();
    auto ranks = makeRanks(plan);
    ASSERT_TRUE(ranks);
    std::string error;
    auto layout = pipeline::PipelineLayout::create(plan, error);
    ASSERT_TRUE(layout) << error;
    for (uint32_t r = 0; r < plan.worldSize; ++r) {
      uint64_t peak = 0;
      ASSERT_TRUE(pipeline::peakStashBytes(*layout, plan, r, peak, error)) << error;
      EXPECT_EQ(peak, ranks->pipelineStashBytes(r)) << "rank " << r;
    }
  }
}

/// Walk hooks over host buffers that count what the walk allocates and copies; the two stages'
/// walks exchange messages through a shared mailbox.
class CountingHooks : public pipeline::WalkHooks {
public:
  struct Mailbox {
    std::mutex mutex;
    std::condition_variable arrived;
    std::map<std::tuple<uint32_t, uint32_t, int64_t>, std::deque<std::vector<char>>> queues;
  };
  CountingHooks(uint32_t stage, Mailbox &mailbox) : stage_(stage), mailbox_(mailbox) {}

  bool movesData() const override { return true; }
  std::shared_ptr<void> allocate(uint64_t bytes, std::string &) override {
    ++allocations;
    return std::shared_ptr<void>(std::malloc(std::max<uint64_t>(bytes, 1)), std::free);
  }
  void copy(void *to, const void *from, uint64_t bytes) override {
    copied += bytes;
    std::memcpy(to, from, bytes);
  }
  void *inputAddress(const std::string &program, const std::string &port, uint64_t bytes,
                     std::string &) override {
    return buffer(program + "/" + port, bytes);
  }
  const void *outputAddress(const std::string &program, const std::string &port, uint64_t bytes,
                            std::string &) override {
    return buffer(program + "/" + port, bytes);
  }
  bool send(uint32_t stage, int64_t tag, const void *data, uint64_t bytes, std::string &) override {
    std::lock_guard<std::mutex> lock(mailbox_.mutex);
    const char *c = static_cast<const char *>(data);
    mailbox_.queues[{stage_, stage, tag}].emplace_back(c, c + bytes);
    mailbox_.arrived.notify_all();
    return true;
  }
  bool receive(uint32_t stage, int64_t tag, void *data, uint64_t bytes,
               std::string &error) override {
    std::unique_lock<std::mutex> lock(mailbox_.mutex);
    auto &queue = mailbox_.queues[{stage, stage_, tag}];
    mailbox_.arrived.wait(lock, [&] { return !queue.empty(); });
    if (queue.front().size() != bytes) {
      error = "a message of " + std::to_string(queue.front().size()) + " bytes, not " +
              std::to_string(bytes);
      return false;
    }
    std::memcpy(data, queue.front().data(), bytes);
    queue.pop_front();
    return true;
  }

  int allocations = 0;
  uint64_t copied = 0;

private:
  void *buffer(const std::string &name, uint64_t bytes) {
    std::vector<char> &b = buffers_[name];
    b.resize(std::max<uint64_t>(b.size(), bytes));
    return b.data();
  }
  uint32_t stage_;
  Mailbox &mailbox_;
  std::map<std::string, std::vector<char>> buffers_;
};

TEST(Pipeline, StashReusesItsBuffersAfterTheFirstStep) {
  // The stash keeps each value in a buffer of the hooks' memory (the device's in a run), and a
  // value's buffer serves the next value of its size: a second step allocates nothing. Each
  // value is copied once into the stash and once out of it.
  PipelineModel m;
  const planfile::Plan plan = m.pipelined();
  std::string error;
  auto layout = pipeline::PipelineLayout::create(plan, error);
  ASSERT_TRUE(layout) << error;
  CountingHooks::Mailbox mailbox;
  std::vector<std::unique_ptr<pipeline::PipelineWalk>> walks;
  std::vector<std::unique_ptr<CountingHooks>> hooks;
  for (uint32_t r = 0; r < plan.worldSize; ++r) {
    walks.push_back(std::make_unique<pipeline::PipelineWalk>(*layout, plan, r));
    hooks.push_back(std::make_unique<CountingHooks>(walks.back()->stage(), mailbox));
  }
  auto step = [&] {
    std::vector<std::string> errors(walks.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < walks.size(); ++r)
      threads.emplace_back([&, r] { walks[r]->step(*hooks[r], errors[r]); });
    for (std::thread &t : threads)
      t.join();
    for (const std::string &e : errors)
      EXPECT_EQ(e, "");
  };
  step();
  std::vector<int> first;
  for (const auto &h : hooks) {
    EXPECT_GT(h->allocations, 0);
    EXPECT_GT(h->copied, 0u);
    first.push_back(h->allocations);
  }
  std::vector<uint64_t> copied;
  for (const auto &h : hooks)
    copied.push_back(h->copied);
  step();
  for (size_t r = 0; r < hooks.size(); ++r) {
    EXPECT_EQ(hooks[r]->allocations, first[r]) << "rank " << r << " allocated in step 2";
    EXPECT_EQ(hooks[r]->copied, 2 * copied[r]) << "rank " << r;
  }
  // Per micro-batch, stage 0 copies x0 and h0 out of forward.0 (h0 is sent from its stash
  // buffer), x0 and the received gradient of h0 into backward.0: 4 values. Stage 1 copies the
  // received h0 into forward.1 and into backward.1, the kept target embedding out of forward.1
  // and into backward.1, and the gradient of h0 out of backward.1: 5.
  const uint64_t value = static_cast<uint64_t>(m.rows * m.seq * m.dim) * 4;
  const uint64_t mb = static_cast<uint64_t>(m.microbatches);
  EXPECT_EQ(copied[0], mb * 4 * value);
  EXPECT_EQ(copied[1], mb * 5 * value);
}

TEST(Pipeline, FailingRankEndsEveryRankWithItsReason) {
  for (int stage : {0, 1}) {
    PipelineModel m;
    auto ranks = makeRanks(m.pipelined());
    ASSERT_TRUE(ranks);
    setWeights(*ranks, 1);
    std::vector<MicroBatchData> data = batches(m, 5);
    // Stage 0 embeds the tokens, stage 1 the targets: an id outside the vocabulary in
    // micro-batch 2 fails that stage while the other waits for it.
    (stage == 0 ? data[2].tokens : data[2].targets)[1] = 999;
    std::vector<float> losses;
    std::string error;
    EXPECT_FALSE(ranks->runPipelineStep(StepContext{1, 0, 0}, data, losses, error));
    EXPECT_EQ(error.rfind("rank " + std::to_string(stage) + ": kernel 'embedding'", 0), 0u)
        << error;
    EXPECT_NE(error.find("token id 999"), std::string::npos) << error;
  }
}

TEST(Pipeline, WrongInputSizeFailsTheStep) {
  PipelineModel m;
  auto ranks = makeRanks(m.pipelined());
  ASSERT_TRUE(ranks);
  std::vector<float> losses;
  std::string error;
  EXPECT_FALSE(ranks->runPipelineStep(StepContext{1, 0, 0}, {}, losses, error));
  EXPECT_EQ(error, "a step of this pipeline takes 4 micro-batches, not 0");
  std::vector<MicroBatchData> data = batches(m, 5);
  data[1].targets.pop_back();
  EXPECT_FALSE(ranks->runPipelineStep(StepContext{1, 0, 0}, data, losses, error));
  EXPECT_EQ(error.rfind("rank 1: F1: input 'targets' of 'forward.1' holds 6 elements in all, "
                        "not the 5 the run feeds it",
                        0),
            0u)
      << error;
}

/// Ranks::create refuses `plan` with a message containing `expected`.
void expectRefused(const planfile::Plan &plan, const std::string &expected) {
  std::string error;
  EXPECT_FALSE(Ranks::create(plan, 1, error)) << "expected: " << expected;
  EXPECT_NE(error.find(expected), std::string::npos) << error;
}

/// The plan's versions of `program`.
std::vector<planfile::Program *> versions(planfile::Plan &plan, const std::string &program) {
  std::vector<planfile::Program *> out;
  for (planfile::Program &p : plan.programs)
    if (p.name == program)
      out.push_back(&p);
  return out;
}

TEST(Pipeline, RefusesProgramsThatBreakTheContract) {
  PipelineModel m;
  const planfile::Plan good = m.pipelined();
  const planfile::BufferRef spare{planfile::Storage::Arena, 0, 0, 4, planfile::DType::F32};

  planfile::Plan p = good;
  for (planfile::Program *v : versions(p, "backward.0"))
    v->inputs.push_back({"tgt", planfile::DType::F32, {6, 4}, {}, v->inputs[0].buffer});
  expectRefused(p, "'backward.0' reads value 'tgt' from 'forward.1': values travel only from a "
                   "forward pass to the next chunk and from a backward pass to the previous one");

  p = good;
  for (planfile::Program *v : versions(p, "backward.0"))
    v->inputs.push_back({"nope", planfile::DType::F32, {1}, {}, spare});
  expectRefused(p, "'backward.0' reads value 'nope', which no program of the step writes");

  p = good;
  for (planfile::Program *v : versions(p, "forward.1"))
    v->inputs[0].shape = {4, 6};
  expectRefused(p, "value 'h0' is f32[6, 4] in 'forward.0' on stage 0 but f32[4, 6] in "
                   "'forward.1' on stage 1");

  p = good;
  for (planfile::Program *v : versions(p, "forward.1"))
    v->inputs[0].shape = {6, 40};
  expectRefused(p, "has 96 bytes for a value of shape f32[6, 40]");

  p = good;
  for (planfile::Program *v : versions(p, "backward.1"))
    v->outputs.push_back({"h0", planfile::DType::F32, {6, 4}, {}, v->outputs[0].buffer});
  expectRefused(p, "value 'h0' is written by both");

  p = good;
  p.programs.erase(
      std::remove_if(p.programs.begin(), p.programs.end(),
                     [](const planfile::Program &x) { return x.name == "backward.1"; }),
      p.programs.end());
  expectRefused(p,
                "the plan has no program 'backward.1', which its 1f1b pipeline of 2 chunks runs");

  p = good;
  for (planfile::Program *v : versions(p, "forward.1"))
    v->name = "forwards.1";
  expectRefused(p, "program 'forwards.1' is no kind of pipeline program");

  p = good;
  for (planfile::Program *v : versions(p, "eval.1"))
    v->name = "eval.3";
  expectRefused(p, "program 'eval.3' is for chunk 3, but the pipeline has 2 chunks");

  p = good;
  for (planfile::Attr &a : p.config)
    if (a.name == "pipeline.microbatches")
      a.value = int64_t(1);
  expectRefused(p, "the plan's pipeline schedule cannot run: 1f1b needs at least as many "
                   "micro-batches as stages");

  p = good;
  for (planfile::Attr &a : p.config)
    if (a.name == "pipeline.schedule")
      a.value = std::string("gpipe");
  expectRefused(p, "pipeline.schedule is not one of afab, 1f1b, interleaved, zbh1");

  p = good;
  for (planfile::Attr &a : p.config)
    if (a.name == "pipeline.stages")
      a.value = int64_t(4);
  expectRefused(p, "the plan's pipeline has 4 stages but its group 'pp' has 2 ranks");
}

TEST(Pipeline, StateOfOneStageIsHeldByItsRanksOnly) {
  PipelineModel m;
  m.dp = 2;
  auto ranks = makeRanks(m.pipelined());
  ASSERT_TRUE(ranks);
  // T is held by stage 1: ranks 1 and 3 (rank = dp index * 2 + stage).
  const size_t t = ranks->plan().state.size() - 1;
  ASSERT_EQ(ranks->plan().state[t].name, "T");
  EXPECT_FALSE(ranks->executor(0).holdsState(t));
  EXPECT_TRUE(ranks->executor(1).holdsState(t));
  EXPECT_FALSE(ranks->executor(0).holdsState(t));
  EXPECT_EQ(ranks->executor(0).stateBytes() + static_cast<uint64_t>(m.vocab * m.dim) * 4,
            ranks->executor(1).stateBytes() + static_cast<uint64_t>(m.vocab * m.dim) * 8);
  std::vector<float> whole(static_cast<size_t>(m.vocab * m.dim));
  for (size_t i = 0; i < whole.size(); ++i)
    whole[i] = static_cast<float>(i);
  ranks->setWholeState(t, whole.data());
  EXPECT_EQ(stateAt(ranks->executor(3), t, 7), 7.0f);
  setStateAt(ranks->executor(3), t, 7, -1); // a replica that disagrees; the lowest provides
  EXPECT_EQ(wholeState(*ranks, t), whole);
}

//===----------------------------------------------------------------------===//
// The trainer
//===----------------------------------------------------------------------===//

/// The config a trainer run reads, on top of the model's.
planfile::Plan trainable(planfile::Plan plan, const std::string &data) {
  plan.config.push_back({"train.steps", int64_t(3)});
  plan.config.push_back({"train.seed", int64_t(5)});
  plan.config.push_back({"train.eval_every", int64_t(2)});
  plan.config.push_back({"train.eval_batches", int64_t(2)});
  plan.config.push_back({"train.eval_fraction", 0.2});
  plan.config.push_back({"train.data", data});
  return plan;
}

/// The metrics lines of `path` without their timings (nor the run record, which names the
/// plan and the time).
std::vector<std::string> metrics(const std::string &path) {
  std::vector<std::string> out;
  std::istringstream lines(test::readFile(path));
  for (std::string line; std::getline(lines, line);) {
    std::string error;
    auto json = rt::Json::parse(line, path, error);
    EXPECT_TRUE(json) << error;
    if (!json || json->find("run"))
      continue;
    std::string kept;
    for (const char *key : {"step", "loss", "lr", "grad_norm", "eval_loss"})
      if (const rt::Json *x = json->find(key)) {
        char text[64];
        std::snprintf(text, sizeof text, "%s=%.17g ", key, x->asDouble());
        kept += text;
      }
    out.push_back(kept);
  }
  return out;
}

TEST(Pipeline, TrainerLossesMatchTheRunWithoutPipeline) {
  test::ScratchDir dir;
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += "the quick brown fox jumps over the lazy dog " + std::to_string(i * 7919) + "\n";
  test::writeFile(dir / "text.txt", text);
  PipelineModel m;
  m.dp = 2;
  rt::RunOptions o;
  o.quiet = true;
  o.threads = 2;
  o.metricsPath = dir / "fused.jsonl";
  ASSERT_EQ(rt::train(trainable(m.fused(), dir / "text.txt"), o), 0);
  o.metricsPath = dir / "piped.jsonl";
  o.tracePath = dir / "trace.json";
  o.svgPath = dir / "schedule.svg";
  ASSERT_EQ(rt::train(trainable(m.pipelined(), dir / "text.txt"), o), 0);

  std::vector<std::string> fused = metrics(dir / "fused.jsonl");
  EXPECT_EQ(fused.size(), 5u); // three steps, two evaluations
  EXPECT_EQ(metrics(dir / "piped.jsonl"), fused);

  // The last step's measured schedule: one row per stage, an event per action.
  std::string svg = test::readFile(dir / "schedule.svg");
  size_t rows = 0;
  for (size_t at = 0; (at = svg.find("class=\"rank\"", at)) != std::string::npos; ++at)
    ++rows;
  EXPECT_EQ(rows, 2u);
  std::string error;
  auto trace = rt::Json::parse(test::readFile(dir / "trace.json"), "trace.json", error);
  ASSERT_TRUE(trace) << error;
  EXPECT_NE(test::readFile(dir / "trace.json").find("(measured, step 3)"), std::string::npos);
}

TEST(Pipeline, TrainerRefusesPicturesWithoutPipeline) {
  test::ScratchDir dir;
  test::writeFile(dir / "text.txt", std::string(400, 'a'));
  rt::RunOptions o;
  o.quiet = true;
  o.svgPath = dir / "s.svg";
  EXPECT_EQ(rt::train(trainable(PipelineModel().fused(), dir / "text.txt"), o), 1);
}

} // namespace
