//===- Schedule.cpp - Building the pipeline schedules ---------------------===//

#include "common/schedule/Schedule.h"
#include "common/schedule/ScheduleMessages.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>

namespace tessel::pipeline {

namespace detail {

/// The most (micro-batch, virtual stage) pairs a schedule may have: beyond it the lists (a few
/// actions per pair) and the checker's tables stop being cheap, and no pipeline comes close.
constexpr int64_t kMaxUnits = int64_t(1) << 22;

bool validateSizes(ScheduleKind kind, int p, int m, int v, std::string &error) {
  std::string name = scheduleKindName(kind);
  if (p < 1) {
    error = "a pipeline needs at least one stage (p = " + std::to_string(p) + ")";
    return false;
  }
  if (m < 1) {
    error = "a pipeline needs at least one micro-batch (m = " + std::to_string(m) + ")";
    return false;
  }
  if (kind == ScheduleKind::Interleaved) {
    if (v < 2) {
      error =
          "interleaved 1F1B needs at least 2 virtual stages per rank (v = " + std::to_string(v) +
          ")";
      return false;
    }
    // Megatron-LM's order walks micro-batches in groups of p through every chunk.
    if (m % p != 0) {
      error = "interleaved 1F1B needs the micro-batches to be a multiple of the stages, as "
              "Megatron-LM (m = " +
              std::to_string(m) + ", p = " + std::to_string(p) + ")";
      return false;
    }
  } else if (v != 1) {
    error = "only the interleaved schedule has virtual stages (" + name +
            " with v = " + std::to_string(v) + ")";
    return false;
  }
  if ((kind == ScheduleKind::OneFOneB || kind == ScheduleKind::ZBH1) && m < p) {
    error = name + " needs at least as many micro-batches as stages (m = " + std::to_string(m) +
            " < p = " + std::to_string(p) + "); use afab";
    return false;
  }
  int64_t units = int64_t(p) * m * v;
  if (units > kMaxUnits) {
    error = "the schedule is too large: p * m * v = " + std::to_string(units) +
            " (micro-batch, stage) pairs, more than " + std::to_string(kMaxUnits);
    return false;
  }
  return true;
}

} // namespace detail

namespace {

using detail::rankOfStage;
using detail::stageOf;

/// Appends computations to the ranks' lists with the receives they need before them and the
/// sends they make after them.
class ListBuilder {
public:
  ListBuilder(int p, int v) : p_(p), lastStage_(p * v - 1), lists_(p) {}

  void forward(int rank, int mb, int chunk) {
    int stage = stageOf(rank, chunk, p_);
    if (stage > 0 && rankOfStage(stage - 1, p_) != rank)
      push(rank, {Action::RecvActivation, mb, chunk, rankOfStage(stage - 1, p_)});
    push(rank, {Action::Forward, mb, chunk});
    if (stage < lastStage_ && rankOfStage(stage + 1, p_) != rank)
      push(rank, {Action::SendActivation, mb, chunk, rankOfStage(stage + 1, p_)});
  }

  /// B, or B (input) when `inputOnly`; the gradient flows the same way.
  void backward(int rank, int mb, int chunk, bool inputOnly = false) {
    int stage = stageOf(rank, chunk, p_);
    if (stage < lastStage_ && rankOfStage(stage + 1, p_) != rank)
      push(rank, {Action::RecvGrad, mb, chunk, rankOfStage(stage + 1, p_)});
    push(rank, {inputOnly ? Action::BackwardInput : Action::Backward, mb, chunk});
    if (stage > 0 && rankOfStage(stage - 1, p_) != rank)
      push(rank, {Action::SendGrad, mb, chunk, rankOfStage(stage - 1, p_)});
  }

  void weight(int rank, int mb, int chunk) { push(rank, {Action::BackwardWeight, mb, chunk}); }

  /// The computations alone, and the messages around them, for a builder that places the
  /// messages itself: each pushes nothing where the neighbouring stage is on the same rank or
  /// there is none.
  void compute(int rank, Action::Kind kind, int mb, int chunk) { push(rank, {kind, mb, chunk}); }
  void receiveActivation(int rank, int mb, int chunk) {
    int stage = stageOf(rank, chunk, p_);
    if (stage > 0 && rankOfStage(stage - 1, p_) != rank)
      push(rank, {Action::RecvActivation, mb, chunk, rankOfStage(stage - 1, p_)});
  }
  void sendActivation(int rank, int mb, int chunk) {
    int stage = stageOf(rank, chunk, p_);
    if (stage < lastStage_ && rankOfStage(stage + 1, p_) != rank)
      push(rank, {Action::SendActivation, mb, chunk, rankOfStage(stage + 1, p_)});
  }
  void receiveGradient(int rank, int mb, int chunk) {
    int stage = stageOf(rank, chunk, p_);
    if (stage < lastStage_ && rankOfStage(stage + 1, p_) != rank)
      push(rank, {Action::RecvGrad, mb, chunk, rankOfStage(stage + 1, p_)});
  }
  void sendGradient(int rank, int mb, int chunk) {
    int stage = stageOf(rank, chunk, p_);
    if (stage > 0 && rankOfStage(stage - 1, p_) != rank)
      push(rank, {Action::SendGrad, mb, chunk, rankOfStage(stage - 1, p_)});
  }

  std::vector<std::vector<Action>> take() { return std::move(lists_); }

private:
  void push(int rank, Action action) { lists_[rank].push_back(action); }

  int p_;
  int lastStage_;
  std::vector<std::vector<Action>> lists_;
};

void buildAfab(ListBuilder &b, int p, int m) {
  for (int r = 0; r < p; ++r) {
    for (int i = 0; i < m; ++i)
      b.forward(r, i, 0);
    for (int i = 0; i < m; ++i)
      b.backward(r, i, 0);
  }
}

void buildOneFOneB(ListBuilder &b, int p, int m) {
  for (int r = 0; r < p; ++r) {
    int warmup = p - r - 1; // m >= p, so every rank reaches the steady phase
    for (int i = 0; i < warmup; ++i)
      b.forward(r, i, 0);
    for (int i = 0; i + warmup < m; ++i) {
      b.forward(r, i + warmup, 0);
      b.backward(r, i, 0);
    }
    for (int i = m - warmup; i < m; ++i)
      b.backward(r, i, 0);
  }
}

/// 1F1B with each B split into B (input gradient) and W, and rank r running its W's r
/// micro-batches late. In the steady phase every rank runs an F, a B and a W per micro-batch,
/// so neighbours keep pace, but the later ranks, whose B's the earlier ones wait for, run
/// their B's sooner than 1F1B would; the late W's then fill the tail, where 1F1B waits for
/// gradients. With F, B and W of equal cost the makespan is 3m + p - 1: the paper's bubble of
/// (p - 1)(T_F + T_B - T_W) per rank, a third of 1F1B's. The waiting W's keep what they need
/// alive: (p - r) M_B + r M_W on rank r, as the paper's ZB-H1 (counting ranks from 0).
void buildZbh1(ListBuilder &b, int p, int m) {
  for (int r = 0; r < p; ++r) {
    std::deque<int> waiting; // micro-batches whose W has not run
    auto afterBackward = [&](int mb) {
      waiting.push_back(mb);
      while (static_cast<int>(waiting.size()) > r) {
        b.weight(r, waiting.front(), 0);
        waiting.pop_front();
      }
    };
    int warmup = p - r - 1;
    for (int i = 0; i < warmup; ++i)
      b.forward(r, i, 0);
    for (int i = 0; i + warmup < m; ++i) {
      b.forward(r, i + warmup, 0);
      b.backward(r, i, 0, /*inputOnly=*/true);
      afterBackward(i);
    }
    for (int i = m - warmup; i < m; ++i) {
      b.backward(r, i, 0, /*inputOnly=*/true);
      afterBackward(i);
    }
    for (int mb : waiting)
      b.weight(r, mb, 0);
  }
}

/// Megatron-LM's interleaved schedule (forward_backward_pipelining_with_interleaving). The
/// k-th forward unit of a rank is micro-batch (k / pv) p + k % p of chunk (k / p) % v; the
/// k-th backward unit the same micro-batch of chunk v - 1 - (k / p) % v. Its messages are
/// placed as Megatron-LM places them, one exchange after each step of the loop: in the
/// warm-up, after each F, its output and the next F's input (and, after the last, the first
/// B's gradient); in the steady phase F and B run back to back and then exchange all four
/// (send_forward_backward_recv_forward_backward); in the cool-down, after each B, its
/// gradient and the next B's. Every rank then exchanges with both neighbours at the same
/// point of its loop, so when a send waits for its receive (NCCL) no rank waits for a
/// neighbour that is still computing, beyond the schedule's own dependencies.
void buildInterleaved(ListBuilder &b, int p, int m, int v) {
  int total = m * v;
  auto microbatchOf = [&](int k) { return (k / (p * v)) * p + k % p; };
  auto forwardChunk = [&](int k) { return (k / p) % v; };
  auto backwardChunk = [&](int k) { return v - 1 - (k / p) % v; };
  for (int r = 0; r < p; ++r) {
    auto receiveForward = [&](int k) {
      if (k < total)
        b.receiveActivation(r, microbatchOf(k), forwardChunk(k));
    };
    auto receiveBackward = [&](int k) {
      if (k < total)
        b.receiveGradient(r, microbatchOf(k), backwardChunk(k));
    };
    auto forward = [&](int k) { b.compute(r, Action::Forward, microbatchOf(k), forwardChunk(k)); };
    auto backward = [&](int k) {
      b.compute(r, Action::Backward, microbatchOf(k), backwardChunk(k));
    };
    // With m == p Megatron-LM runs every forward first; the general count is deadlock-free
    // too, so it is used throughout.
    int warmup = std::min(total, 2 * (p - r - 1) + (v - 1) * p);
    receiveForward(0);
    for (int k = 0; k < warmup; ++k) {
      forward(k);
      b.sendActivation(r, microbatchOf(k), forwardChunk(k));
      receiveForward(k + 1);
      if (k + 1 == warmup)
        receiveBackward(0);
    }
    for (int k = 0; k + warmup < total; ++k) {
      forward(k + warmup);
      backward(k);
      b.sendActivation(r, microbatchOf(k + warmup), forwardChunk(k + warmup));
      b.sendGradient(r, microbatchOf(k), backwardChunk(k));
      receiveForward(k + warmup + 1);
      receiveBackward(k + 1);
    }
    for (int k = std::max(0, total - warmup); k < total; ++k) {
      backward(k);
      b.sendGradient(r, microbatchOf(k), backwardChunk(k));
      receiveBackward(k + 1);
    }
  }
}

} // namespace

std::vector<std::vector<Action>> buildSchedule(ScheduleKind kind, int p, int m, int v,
                                               std::string &error) {
  if (!detail::validateSizes(kind, p, m, v, error))
    return {};
  ListBuilder builder(p, v);
  switch (kind) {
  case ScheduleKind::AFAB:
    buildAfab(builder, p, m);
    break;
  case ScheduleKind::OneFOneB:
    buildOneFOneB(builder, p, m);
    break;
  case ScheduleKind::Interleaved:
    buildInterleaved(builder, p, m, v);
    break;
  case ScheduleKind::ZBH1:
    buildZbh1(builder, p, m);
    break;
  }
  return builder.take();
}

double analyticBubble(ScheduleKind kind, int p, int m, int v) {
  switch (kind) {
  case ScheduleKind::AFAB:
  case ScheduleKind::OneFOneB:
    return double(p - 1) / m;
  case ScheduleKind::Interleaved:
    return double(p - 1) / (double(v) * m);
  case ScheduleKind::ZBH1:
    break;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

} // namespace tessel::pipeline
