//===- Executor.cpp - Runs the programs of one rank's plan ----------------===//

#include "runtime/core/Executor.h"
#include "runtime/core/ArenaObserver.h"

#include "runtime/comm/Communicator.h"
#include "runtime/core/HostMemory.h"
#include "runtime/device/Device.h"
#include "runtime/device/KernelArgs.h"

#include "common/support/Float16.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <omp.h>
#include <set>

namespace tessel::rt {

using planfile::BufferRef;
using planfile::Storage;

void setComputeThreads(int threads) {
  if (threads < 1)
    threads = 1;
  // OpenBLAS itself runs single-threaded: kernels/cpu's GEMM splits products over these.
  omp_set_num_threads(threads);
}

struct Executor::Decoded {
  KernelFn fn;
  uint32_t stream = 0;
  KernelArgs args;
  KernelCall call;
};

struct Executor::DecodedProgram {
  const planfile::Program *program;
  std::vector<Decoded> instrs;
};

namespace {

/// Follows the events of `p` in program order: each starts once before its `wait`, and no
/// event is started again while it is in flight. (Which kernels take an `event` at all is the
/// catalogue's to say: the collectives and transfers.)
bool checkEvents(const planfile::Program &p, std::string &error) {
  std::set<int64_t> inFlight;
  for (size_t n = 0; n < p.instrs.size(); ++n) {
    const planfile::Instr &instr = p.instrs[n];
    const planfile::Attr *a = instr.find("event");
    if (!a)
      continue;
    std::string where = "instruction " + std::to_string(n) + " of program '" + p.name +
                        "' (kernel '" + instr.kernel + "'" +
                        (instr.loc.empty() ? "" : ", from " + instr.loc) + ")";
    if (!std::holds_alternative<int64_t>(a->value) || std::get<int64_t>(a->value) < 1) {
      error = where + ": 'event' must be an integer of at least 1";
      return false;
    }
    int64_t event = std::get<int64_t>(a->value);
    if (instr.kernel == "wait") {
      if (!inFlight.erase(event)) {
        error = where + ": waits for event " + std::to_string(event) +
                ", which no earlier collective started";
        return false;
      }
    } else if (!inFlight.insert(event).second) {
      error = where + ": starts event " + std::to_string(event) + " while it is in flight";
      return false;
    }
  }
  return true;
}

} // namespace

//===----------------------------------------------------------------------===//
// Executor
//===----------------------------------------------------------------------===//

Executor::Executor(const planfile::Plan &plan, uint32_t rank) : plan_(plan), rank_(rank) {}

Executor::~Executor() = default;

std::unique_ptr<Executor> Executor::create(const planfile::Plan &plan, uint32_t rank,
                                           std::string &error, Communicator *comm) {
  return create(plan, rank, error, comm, createCpuDevice());
}

std::unique_ptr<Executor> Executor::create(const planfile::Plan &plan, uint32_t rank,
                                           std::string &error, Communicator *comm,
                                           std::unique_ptr<Device> device) {
  if (!planfile::validatePlan(plan, error))
    return nullptr;
  if (rank >= plan.worldSize) {
    error = "rank " + std::to_string(rank) + " is outside the plan's world of " +
            std::to_string(plan.worldSize);
    return nullptr;
  }
  if (plan.worldSize > 1 &&
      (!comm || comm->worldSize() != plan.worldSize || comm->rank() != rank)) {
    error = "a plan of " + std::to_string(plan.worldSize) +
            " ranks needs a communicator of as many ranks, at rank " + std::to_string(rank);
    return nullptr;
  }
  if (!fitsInMemoryOf(*device, rankAllocationBytes(plan, rank), "rank " + std::to_string(rank),
                      error))
    return nullptr;
  std::unique_ptr<Executor> ex(new Executor(plan, rank));
  ex->device_ = std::move(device);
  Device &dev = *ex->device_;
  ex->rankContext_ = std::make_unique<RankContext>(RankContext::forRank(ex->plan_, rank, comm));
  ex->rankContext_->memory = &dev.commMemory();
  const uint32_t stage = ex->plan_.pipelineStage(rank);
  for (const planfile::Program &p : ex->plan_.programs)
    if (p.stage == stage)
      ex->arenaBytes_ = std::max(ex->arenaBytes_, p.arenaBytes);
  std::string why;
  ex->arena_ = dev.allocate(ex->arenaBytes_, why);
  if (!ex->arena_) {
    error = "allocating the arena of " + formatBytes(ex->arenaBytes_) + " on " + dev.name() + ": " +
            why;
    return nullptr;
  }
  for (const planfile::StateTensor &t : ex->plan_.state) {
    std::unique_ptr<DeviceBuffer> b;
    if (t.heldBy(stage) && !(b = dev.allocate(t.bytes(), why))) {
      error = "allocating the state of rank " + std::to_string(rank) + " (" +
              formatBytes(rankAllocationBytes(plan, rank)) + " with its arena) on " + dev.name() +
              ": " + why;
      return nullptr;
    }
    ex->state_.push_back(std::move(b));
  }

  // Operand addresses, in the device's address space.
  auto pointer = [&](const BufferRef &b) -> void * {
    const DeviceBuffer &base = b.storage == Storage::Arena ? *ex->arena_ : *ex->state_[b.state];
    return static_cast<char *>(base.address()) + b.offset;
  };
  for (const planfile::Program &p : ex->plan_.programs) {
    if (p.stage != stage)
      continue;
    if (!checkEvents(p, error))
      return nullptr;
    auto decoded = std::make_unique<DecodedProgram>();
    decoded->program = &p;
    for (size_t n = 0; n < p.instrs.size(); ++n) {
      const planfile::Instr &instr = p.instrs[n];
      Decoded d;
      std::string where = "instruction " + std::to_string(n) + " of program '" + p.name +
                          "' (kernel '" + instr.kernel + "'" +
                          (instr.loc.empty() ? "" : ", from " + instr.loc) + ")";
      const catalogue::KernelInfo *kernel = catalogue::findKernel(instr.kernel);
      if (!kernel) {
        error = where + ": this runtime has no such kernel";
        return nullptr;
      }
      std::vector<planfile::DType> ins, outs;
      for (const BufferRef &b : instr.inputs)
        ins.push_back(b.dtype);
      for (const BufferRef &b : instr.outputs)
        outs.push_back(b.dtype);
      catalogue::KernelParams params;
      if (!catalogue::checkOperands(*kernel, ins, outs, why) ||
          !catalogue::decodeParams(*kernel, instr.attrs, params, why) ||
          !catalogue::checkTensors(*kernel, params, ins.size(), why)) {
        error = where + ": " + why;
        return nullptr;
      }
      d.fn = dev.kernel(*kernel, ins, outs, why);
      if (!d.fn) {
        error = where + ": " + why;
        return nullptr;
      }
      // A device with fewer streams than the plan runs several of them as one, in program
      // order: that keeps every order the plan's streams ask for.
      d.stream = instr.stream % dev.streams();
      d.call.instr = &instr;
      d.call.rank = ex->rankContext_.get();
      d.call.comm = comm;
      for (const BufferRef &b : instr.inputs) {
        d.call.in.push_back(pointer(b));
        d.call.inElements.push_back(b.bytes / planfile::dtypeBytes(b.dtype));
      }
      for (const BufferRef &b : instr.outputs) {
        d.call.out.push_back(pointer(b));
        d.call.outElements.push_back(b.bytes / planfile::dtypeBytes(b.dtype));
      }
      if (!checkKernelCall(d.call, params, d.args) || !dev.prepare(d.call, d.args)) {
        error = where + ": " + d.call.error;
        return nullptr;
      }
      decoded->instrs.push_back(std::move(d));
    }
    ex->programs_.push_back(std::move(decoded));
  }
  return ex;
}

int Executor::stateIndex(const std::string &name) const {
  for (size_t i = 0; i < plan_.state.size(); ++i)
    if (plan_.state[i].name == name)
      return static_cast<int>(i);
  return -1;
}

uint64_t Executor::stateBytes() const {
  uint64_t bytes = 0;
  for (const auto &t : state_)
    bytes += t ? t->bytes() : 0;
  return bytes;
}

bool Executor::readState(size_t index, void *host) const {
  if (index >= state_.size() || !state_[index])
    return false;
  device_->download(host, state_[index]->address(), state_[index]->bytes());
  return true;
}

const void *Executor::stateInHostMemory(size_t index) const {
  return index < state_.size() && state_[index] && device_->addressesHostMemory()
             ? state_[index]->address()
             : nullptr;
}

bool Executor::writeState(size_t index, const void *host) {
  if (index >= state_.size() || !state_[index])
    return false;
  device_->upload(state_[index]->address(), host, state_[index]->bytes());
  return true;
}

const Executor::DecodedProgram *Executor::find(const std::string &name) const {
  for (const auto &p : programs_)
    if (p->program->name == name)
      return p.get();
  return nullptr;
}

double Executor::traceClock() {
  static const auto origin = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
}

std::vector<Executor::KernelTime> Executor::profile() const {
  std::vector<KernelTime> sorted = times_;
  std::sort(sorted.begin(), sorted.end(),
            [](const KernelTime &a, const KernelTime &b) { return a.seconds > b.seconds; });
  return sorted;
}

bool Executor::hasProgram(const std::string &name) const { return find(name) != nullptr; }

bool Executor::writeInput(const std::string &program, const std::string &port, const void *host,
                          uint64_t bytes) {
  void *to = inputAddress(program, port, bytes);
  if (!to)
    return false;
  device_->upload(to, host, bytes);
  return true;
}

const float *Executor::output(const std::string &program, const std::string &port) const {
  const planfile::Port *out = outputPort(program, port);
  if (!out)
    return nullptr;
  HostOutput &cached = hostOutputs_[{program, port}];
  if (cached.fresh)
    return cached.values.data();
  const BufferRef &b = out->buffer;
  const void *at = outputAddress(program, port, b.bytes);
  std::vector<float> &host = cached.values;
  if (b.dtype == planfile::DType::BF16 || b.dtype == planfile::DType::F16) {
    std::vector<uint16_t> half(b.bytes / 2);
    device_->download(half.data(), at, half.size() * sizeof(uint16_t));
    host.resize(half.size());
    for (size_t e = 0; e < half.size(); ++e)
      host[e] = b.dtype == planfile::DType::BF16 ? bf16ToFloat(half[e]) : halfToFloat(half[e]);
  } else {
    host.resize((b.bytes + 3) / 4);
    device_->download(host.data(), at, b.bytes);
  }
  cached.fresh = true;
  return host.data();
}

void *Executor::inputAddress(const std::string &program, const std::string &port, uint64_t bytes) {
  const DecodedProgram *p = find(program);
  if (!p)
    return nullptr;
  for (const planfile::Port &in : p->program->inputs)
    if (in.name == port) {
      if (bytes > in.buffer.bytes || in.buffer.storage != Storage::Arena)
        return nullptr;
      return static_cast<char *>(arena_->address()) + in.buffer.offset;
    }
  return nullptr;
}

const void *Executor::outputAddress(const std::string &program, const std::string &port,
                                    uint64_t bytes) const {
  const planfile::Port *out = outputPort(program, port);
  if (!out || bytes > out->buffer.bytes)
    return nullptr;
  const BufferRef &b = out->buffer;
  const DeviceBuffer &base = b.storage == Storage::Arena ? *arena_ : *state_[b.state];
  return static_cast<const char *>(base.address()) + b.offset;
}

const planfile::Port *Executor::outputPort(const std::string &program,
                                           const std::string &port) const {
  const DecodedProgram *p = find(program);
  if (!p)
    return nullptr;
  for (const planfile::Port &out : p->program->outputs)
    if (out.name == port)
      return &out;
  return nullptr;
}

bool Executor::run(const std::string &program, const StepContext &ctx, std::string &error,
                   bool checkFinite) {
  const DecodedProgram *p = find(program);
  if (!p) {
    error = "the plan has no program '" + program + "' for rank " + std::to_string(rank_);
    return false;
  }
  RankContext &rc = *rankContext_;
  rc.synchronous = checkFinite;
  for (auto &[key, cached] : hostOutputs_)
    cached.fresh = false;
  stoppedAt_.clear();
  bool ok = runInstructions(*p, ctx, error, checkFinite);
  std::string failed;
  if (ok && !device_->synchronize(failed)) {
    error = "program '" + program + "' on " + device_->name() + ": " + failed;
    ok = false;
  }
  for (const PendingTimer &t : pendingTimers_) {
    if (t.span >= 0) {
      TraceSpan &span = trace_[static_cast<size_t>(t.span)];
      span.start = originHost_ + device_->timerOffsetSeconds(originTimer_, t.timer);
    }
    const double seconds = device_->timerSeconds(t.timer);
    if (t.span >= 0) {
      TraceSpan &span = trace_[static_cast<size_t>(t.span)];
      span.end = span.start + seconds;
    }
    if (ok && profiling_)
      times_[t.index].seconds += seconds;
  }
  pendingTimers_.clear();
  if (originTimer_ >= 0)
    device_->timerSeconds(originTimer_);
  originTimer_ = -1;
  // The other ranks must not wait for this one: abort before waiting for what is in flight.
  if (!ok && rc.comm)
    rc.comm->abort("rank " + std::to_string(rank_) + ": " + error);
  std::string drained;
  if (!rc.events.empty() && !rc.drainEvents(drained) && ok) {
    error = "program '" + program + "': " + drained;
    ok = false;
  }
  return ok;
}

void Executor::setMemoryContext(uint64_t stash, uint64_t messages, int micro) {
  contextStash_ = stash;
  contextMessages_ = messages;
  contextMicro_ = micro;
}

void Executor::enableMemoryTrace(bool on) {
  memoryTracing_ = on;
  memoryState_ = {};
  for (size_t i = 0; i < plan_.state.size(); ++i)
    if (state_[i])
      memoryState_[static_cast<size_t>(memory::classOfRole(plan_.state[i].role))] +=
          state_[i]->bytes();
}

memory::MemorySample Executor::memorySample() const {
  memory::MemorySample s;
  s.bytes = memoryState_;
  s.bytes[static_cast<size_t>(memory::MemoryClass::Stash)] = contextStash_;
  s.bytes[static_cast<size_t>(memory::MemoryClass::Messages)] = contextMessages_;
  s.micro = contextMicro_;
  uint64_t used = 0, total = 0;
  s.resident = device_->memoryInUse(used, total) ? used : residentBytes();
  return s;
}

void Executor::noteMemory(const std::string &what) {
  if (!memoryTracing_)
    return;
  memory::MemorySample s = memorySample();
  s.what = what;
  memorySamples_.push_back(std::move(s));
}

bool Executor::runInstructions(const DecodedProgram &p, const StepContext &ctx, std::string &error,
                               bool checkFinite) {
  const std::string &name = p.program->name;
  // --memory-trace: the buffers the kernels' operands land in, instruction by instruction.
  std::unique_ptr<ArenaObserver> observer;
  if (memoryTracing_)
    observer = std::make_unique<ArenaObserver>(*p.program);
  const char *arenaBase = arena_ ? static_cast<const char *>(arena_->address()) : nullptr;
  auto observe = [&](size_t n, const std::vector<void *> &pointers,
                     const std::vector<planfile::BufferRef> &refs) {
    for (size_t i = 0; i < pointers.size() && i < refs.size(); ++i) {
      const char *at = static_cast<const char *>(pointers[i]);
      if (refs[i].storage == planfile::Storage::Arena && arenaBase && at >= arenaBase &&
          at < arenaBase + arenaBytes_)
        observer->touched(n, static_cast<uint64_t>(at - arenaBase), refs[i].bytes);
    }
  };
  std::vector<memory::MemorySample> samples;
  // The observed arena into the samples recorded so far (a run that stopped at a guard has
  // fewer); its faults kept for the runner to report.
  auto finishObserving = [&] {
    if (!observer)
      return;
    const auto arena = observer->finish();
    for (memory::MemorySample &sample : samples) {
      for (size_t c = 0; c < memory::kMemoryClasses; ++c)
        sample.bytes[c] += arena[static_cast<size_t>(sample.instr)][c];
      memorySamples_.push_back(std::move(sample));
    }
    memoryFaults_.insert(memoryFaults_.end(), observer->faults().begin(), observer->faults().end());
  };
  for (size_t n = 0; n < p.instrs.size(); ++n) {
    Decoded &d = const_cast<Decoded &>(p.instrs[n]);
    d.call.ctx = &ctx;
    d.call.error.clear();
    d.call.stop = false;
    const bool timed = profiling_ || tracing_;
    if (tracing_ && originTimer_ < 0 && n == 0) {
      // Where the device's timers place this run's calls on the host's clock.
      originTimer_ = device_->startTimer(d.stream);
      if (originTimer_ >= 0)
        device_->stopTimer(originTimer_, d.stream);
      originHost_ = traceClock();
    }
    const int64_t timer = timed ? device_->startTimer(d.stream) : -1;
    const double start = timed ? traceClock() : 0;
    bool ok = device_->launch(d.stream, d.fn, d.call, d.args);
    if (observer) {
      observe(n, d.call.in, d.call.instr->inputs);
      observe(n, d.call.out, d.call.instr->outputs);
      memory::MemorySample sample = memorySample();
      sample.program = name;
      sample.instr = static_cast<int64_t>(n);
      sample.what = d.call.instr->kernel;
      sample.loc = d.call.instr->loc;
      samples.push_back(std::move(sample));
    }
    if (timed) {
      const double end = traceClock();
      const bool recomputed = d.call.instr->recomputed;
      size_t index = 0;
      if (profiling_) {
        auto it = std::find_if(times_.begin(), times_.end(), [&](const KernelTime &t) {
          return t.kernel == d.call.instr->kernel && t.recomputed == recomputed;
        });
        if (it == times_.end())
          it = times_.insert(times_.end(), KernelTime{d.call.instr->kernel, 0, 0, recomputed});
        ++it->calls;
        index = static_cast<size_t>(it - times_.begin());
        if (timer < 0)
          it->seconds += end - start;
      }
      int64_t span = -1;
      if (tracing_) {
        span = static_cast<int64_t>(trace_.size());
        trace_.push_back({d.call.instr->kernel, name, d.stream, recomputed, start, end});
      }
      if (timer >= 0) {
        device_->stopTimer(timer, d.stream);
        pendingTimers_.push_back({timer, index, span});
      }
    }
    if (!ok) {
      error = "kernel '" + d.call.instr->kernel + "'" +
              (d.call.instr->loc.empty() ? "" : " (from " + d.call.instr->loc + ")") + ": " +
              d.call.error;
      return false;
    }
    if (d.call.stop) {
      stoppedAt_ = "kernel '" + d.call.instr->kernel + "'" +
                   (d.call.instr->loc.empty() ? "" : " (from " + d.call.instr->loc + ")") +
                   ", instruction " + std::to_string(n) + " of '" + name + "'";
      finishObserving();
      return true;
    }
    if (!checkFinite)
      continue;
    std::string failed;
    if (!device_->synchronize(failed)) {
      error = "kernel '" + d.call.instr->kernel + "': " + failed;
      return false;
    }
    for (size_t k = 0; k < d.call.out.size(); ++k) {
      const planfile::DType type = d.call.instr->outputs[k].dtype;
      if (!planfile::isFloat(type))
        continue;
      std::vector<float> values(d.call.outElements[k]);
      if (type == planfile::DType::F32) {
        device_->download(values.data(), d.call.out[k], values.size() * sizeof(float));
      } else {
        std::vector<uint16_t> half(values.size());
        device_->download(half.data(), d.call.out[k], half.size() * sizeof(uint16_t));
        for (size_t e = 0; e < half.size(); ++e)
          values[e] = type == planfile::DType::BF16 ? bf16ToFloat(half[e]) : halfToFloat(half[e]);
      }
      const float *x = values.data();
      for (uint64_t e = 0; e < d.call.outElements[k]; ++e)
        if (!std::isfinite(x[e])) {
          error = "the first non-finite value (" + std::to_string(x[e]) + ") came from kernel '" +
                  d.call.instr->kernel + "'" +
                  (d.call.instr->loc.empty() ? "" : " at " + d.call.instr->loc) + ", instruction " +
                  std::to_string(n) + " of '" + name + "'";
          return false;
        }
    }
  }
  finishObserving();
  return true;
}

} // namespace tessel::rt
