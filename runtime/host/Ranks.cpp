//===- Ranks.cpp - The ranks of a run in this process ---------------------===//

#include "runtime/host/Ranks.h"

#include "runtime/device/Device.h"

#include "common/layout/PipelineWalk.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/NcclCommunicator.h"
#include "runtime/comm/Rendezvous.h"
#include "runtime/core/HostMemory.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <system_error>
#include <variant>

namespace tessel::rt {

namespace {

const planfile::Port *findInput(const planfile::Plan &plan, const std::string &program,
                                const std::string &port, uint32_t rank) {
  const planfile::Program *p = plan.findProgram(program, rank);
  if (!p)
    return nullptr;
  for (const planfile::Port &in : p->inputs)
    if (in.name == port)
      return &in;
  return nullptr;
}

/// Hands NCCL's unique id from process 0 to the others over MPI: a length word, then the id.
nccl::IdExchange overMpi(Communicator &comm, const CommGroup &processes) {
  return [&comm, &processes](std::vector<char> &id, std::string &error) {
    constexpr size_t kMaxBytes = 512;
    std::vector<uint32_t> words(1 + kMaxBytes / 4, 0);
    if (processes.index == 0) {
      if (id.size() > kMaxBytes) {
        error = "NCCL's unique id is larger than " + std::to_string(kMaxBytes) + " bytes";
        id.clear();
      }
      words[0] = static_cast<uint32_t>(id.size());
      std::memcpy(words.data() + 1, id.data(), id.size());
    }
    if (!comm.broadcast(processes, 0, words.data(), words.data(),
                        static_cast<int64_t>(words.size()), error))
      return false;
    id.assign(reinterpret_cast<const char *>(words.data() + 1),
              reinterpret_cast<const char *>(words.data() + 1) + words[0]);
    return error.empty();
  };
}

} // namespace

std::vector<bool> dataRowsOf(const planfile::Plan &plan, const std::vector<uint32_t> &ranks,
                             int64_t rows) {
  std::vector<bool> taken(static_cast<size_t>(std::max<int64_t>(rows, 0)), false);
  for (const planfile::Program &program : plan.programs)
    for (uint32_t r : plan.ranksOf(program)) {
      if (std::find(ranks.begin(), ranks.end(), r) == ranks.end())
        continue;
      for (const planfile::Port &in : program.inputs) {
        if ((in.name != "tokens" && in.name != "targets") || in.shape.empty())
          continue;
        Block b = blockOf(plan, in.shape, in.split, r);
        if (b.whole[0] != rows)
          continue;
        for (int64_t i = b.offset[0]; i < b.offset[0] + b.local[0]; ++i)
          taken[static_cast<size_t>(i)] = true;
      }
    }
  return taken;
}

std::vector<std::optional<CommGroup>> ncclSplitsOf(const planfile::Plan &plan, uint32_t rank) {
  std::vector<std::optional<CommGroup>> splits;
  for (const planfile::Group &g : plan.groups) {
    std::optional<planfile::GroupInstance> instance = plan.findGroup(g.name, rank);
    if (instance)
      splits.push_back(CommGroup{std::move(instance->ranks), instance->index});
    else
      splits.push_back(std::nullopt);
  }
  // The instances of one group are disjoint, so are the subgroups one `members` picks from
  // them: one split serves them all.
  std::set<std::pair<std::string, std::vector<int64_t>>> subsets;
  for (const planfile::Program &p : plan.programs)
    for (const planfile::Instr &instr : p.instrs) {
      const planfile::Attr *members = instr.find("members");
      const planfile::Attr *group = instr.find("group");
      if (instr.kernel != "all_reduce" || !members || !group ||
          !std::holds_alternative<std::vector<int64_t>>(members->value) ||
          !std::holds_alternative<std::string>(group->value))
        continue;
      subsets.emplace(std::get<std::string>(group->value),
                      std::get<std::vector<int64_t>>(members->value));
    }
  for (const auto &[name, members] : subsets) {
    std::optional<planfile::GroupInstance> instance = plan.findGroup(name, rank);
    std::optional<CommGroup> mine;
    for (size_t i = 0; instance && i < members.size(); ++i)
      if (members[i] >= 0 && members[i] < static_cast<int64_t>(instance->ranks.size()) &&
          members[i] == instance->index) {
        mine = CommGroup{};
        for (int64_t m : members)
          if (m >= 0 && m < static_cast<int64_t>(instance->ranks.size()))
            mine->ranks.push_back(instance->ranks[static_cast<size_t>(m)]);
        mine->index = static_cast<uint32_t>(i);
      }
    splits.push_back(std::move(mine));
  }
  return splits;
}

std::unique_ptr<Ranks> Ranks::create(const planfile::Plan &plan, int threads, std::string &error,
                                     const std::string &device) {
  // Out of memory or threads while setting up is a message, never an escaping exception.
  try {
    return createRanks(plan, threads, error, device);
  } catch (const std::bad_alloc &) {
    error = "out of memory while setting up the ranks";
  } catch (const std::system_error &e) {
    error = std::string("cannot start the ranks' threads: ") + e.what() +
            " (out of memory, or the process's thread limit)";
  }
  return nullptr;
}

std::unique_ptr<Ranks> Ranks::createRanks(const planfile::Plan &plan, int threads,
                                          std::string &error, const std::string &device) {
  if (!planfile::validatePlan(plan, error))
    return nullptr;
  if (device != "cpu" && device != "cuda") {
    error = "unknown device '" + device + "'; expected cpu or cuda";
    return nullptr;
  }
  int gpus = 0;
  if (device == "cuda" && (gpus = cudaDeviceCount(error)) <= 0) {
    if (error.empty())
      error = "no GPU: no CUDA device is visible";
    return nullptr;
  }
  // Under torchrun (its variables, without mpirun) each process runs one rank on one GPU.
  rendezvous::Place place;
  const bool torchrun = !mpi::launched() && rendezvous::launched();
  if (torchrun && !rendezvous::readPlace(place, error)) {
    error = "the torchrun variables: " + error;
    return nullptr;
  }
  const bool processPerRank = mpi::launched() || place.size > 1;
  if (torchrun && place.size > 1 && device != "cuda") {
    error = "the torchrun variables (WORLD_SIZE=" + std::to_string(place.size) +
            ") are for --device cuda, one process per GPU; on CPUs start the processes with "
            "mpirun, or run the ranks as threads of one process (no launcher)";
    return nullptr;
  }
  const uint32_t size = plan.worldSize;
  std::unique_ptr<Ranks> ranks(new Ranks(plan));
  ranks->comms_.resize(size);
  ranks->executors_.resize(size);
  ranks->pipelineRanks_.resize(size);
  // Which GPU of this host a process of one rank takes: its index among the host's processes.
  uint32_t gpuOfProcess = 0;
  if (mpi::launched()) {
    // One rank per process: the launcher's process count must be the plan's world.
    if (!mpi::initialize(error))
      return nullptr;
    if (mpi::processCount() != size) {
      error = "this plan has " + std::to_string(size) + (size == 1 ? " rank" : " ranks") +
              ", one per MPI process, but it was started as " +
              std::to_string(mpi::processCount()) + " processes; start it with mpirun -np " +
              std::to_string(size) + (size == 1 ? " (or without mpirun)" : "");
      return nullptr;
    }
    ranks->processIndex_ = mpi::processRank();
    gpuOfProcess = mpi::processIndexOnThisHost();
  } else if (processPerRank) {
    if (place.size != size) {
      error = "this plan has " + std::to_string(size) + (size == 1 ? " rank" : " ranks") +
              ", one per process, but torchrun started WORLD_SIZE=" + std::to_string(place.size) +
              " processes; start " + std::to_string(size) + " in all";
      return nullptr;
    }
    ranks->processIndex_ = place.rank;
    gpuOfProcess = place.localRank;
  }
  if (processPerRank) {
    ranks->processCount_ = size;
    ranks->local_ = {ranks->processIndex_};
    for (uint32_t r = 0; r < size; ++r)
      ranks->processes_.ranks.push_back(r);
    ranks->processes_.index = ranks->processIndex_;
    if (device == "cuda" && gpuOfProcess >= static_cast<uint32_t>(gpus)) {
      error = "process " + std::to_string(gpuOfProcess) + " of this host (" +
              (torchrun ? "LOCAL_RANK" : "its MPI rank on the host") +
              ") has no GPU of its own: " + "the host has " + std::to_string(gpus) +
              "; start at most " + std::to_string(gpus) + " processes per host";
      return nullptr;
    }
  } else {
    for (uint32_t r = 0; r < size; ++r)
      ranks->local_.push_back(r);
  }
  const uint32_t localCount = static_cast<uint32_t>(ranks->local_.size());
  const int threadsPerRank = std::max(1, threads / static_cast<int>(localCount));
  // The ranks of this process together, before any of them allocates.
  uint64_t bytes = 0;
  for (uint32_t r : ranks->local_)
    bytes += rankAllocationBytes(plan, r);
  const std::string what = localCount > 1 ? "the plan's " + std::to_string(localCount) + " ranks"
                           : size > 1     ? "rank " + std::to_string(ranks->local_[0])
                                          : "the plan";
  // On the CPU the ranks' state and arenas are this machine's memory; on CUDA each GPU's,
  // checked below once the devices exist.
  if ((device != "cuda" && !fitsInMemory(bytes, what, error)) ||
      !fitsInAddressSpace(bytes, static_cast<int>(localCount) * threadsPerRank,
                          size > 1 ? static_cast<int>(localCount) : 0, what, error))
    return nullptr;
  ranks->threadsPerRank_ = threadsPerRank;
  // The devices first: a communicator between ranks of this process reaches their memory.
  // On CUDA, a process of one rank takes its GPU of the host; ranks as threads take the
  // process's GPUs in turn, several sharing one where there are more ranks than GPUs.
  std::vector<std::unique_ptr<Device>> devices(size);
  auto gpuOf = [&](uint32_t r) {
    return static_cast<int>(processPerRank ? gpuOfProcess : r % static_cast<uint32_t>(gpus));
  };
  for (uint32_t r : ranks->local_)
    if (!(devices[r] = device == "cuda" ? createCudaDevice(gpuOf(r), error) : createCpuDevice()))
      return nullptr;
  if (device == "cuda") {
    // The ranks sharing each GPU together, against what that GPU has free.
    std::map<int, std::vector<uint32_t>> ranksOfGpu;
    for (uint32_t r : ranks->local_)
      ranksOfGpu[gpuOf(r)].push_back(r);
    for (const auto &[gpu, rs] : ranksOfGpu) {
      uint64_t onGpu = 0;
      for (uint32_t r : rs)
        onGpu += rankAllocationBytes(plan, r);
      const std::string who = rs.size() > 1 ? "the plan's " + std::to_string(rs.size()) +
                                                  " ranks on one GPU"
                                            : what;
      if (!fitsInMemoryOf(*devices[rs[0]], onGpu, who, error))
        return nullptr;
    }
  }
  if (ranks->processCount_ > 1 && device == "cuda") {
    const uint32_t r = ranks->local_[0];
    // NCCL's unique id travels over MPI under mpirun, else over the torchrun rendezvous.
    std::unique_ptr<Communicator> host;
    nccl::IdExchange exchange;
    if (mpi::launched()) {
      if (!(host = mpi::createCommunicator(error)))
        return nullptr;
      exchange = overMpi(*host, ranks->processes_);
    } else {
      double timeout = 0;
      if (!rendezvous::timeoutSeconds(timeout, error))
        return nullptr;
      exchange = [place, timeout](std::vector<char> &id, std::string &why) {
        return rendezvous::exchange(place, id, timeout, why);
      };
    }
    ranks->comms_[r] = nccl::createCommunicator(
        gpuOf(r), r, size, exchange, ncclSplitsOf(plan, r),
        {pipeline::kActivationTag, pipeline::kGradientTag, pipeline::kChainTag}, error);
    if (!ranks->comms_[r]) {
      error = "rank " + std::to_string(r) + ": " + error;
      return nullptr;
    }
  } else if (ranks->processCount_ > 1) {
    ranks->comms_[ranks->local_[0]] = mpi::createCommunicator(error);
    if (!ranks->comms_[ranks->local_[0]])
      return nullptr;
  } else if (size > 1) {
    std::vector<CommMemory *> memories(size);
    for (uint32_t r = 0; r < size; ++r)
      memories[r] = &devices[r]->commMemory();
    std::vector<std::unique_ptr<LocalCommunicator>> world =
        LocalCommunicator::createWorld(size, memories);
    for (uint32_t r = 0; r < size; ++r)
      ranks->comms_[r] = std::move(world[r]);
  }
  for (uint32_t r : ranks->local_) {
    auto ex = Executor::create(plan, r, error, ranks->comms_[r].get(), std::move(devices[r]));
    if (!ex) {
      if (size > 1)
        error = "rank " + std::to_string(r) + ": " + error;
      return nullptr;
    }
    ranks->executors_[r] = std::move(ex);
  }

  // Which rank provides each block of each state tensor: the lowest holding it. Together the
  // blocks of the ranks that hold the tensor (those of its pipeline stages) must make up the
  // whole tensor.
  for (size_t i = 0; i < plan.state.size(); ++i) {
    const planfile::StateTensor &t = plan.state[i];
    std::vector<Block> blocks;
    std::vector<uint32_t> holders;
    std::set<std::vector<int64_t>> seen;
    for (uint32_t r = 0; r < size; ++r) {
      blocks.push_back(blockOf(plan, t.shape, t.split, r));
      if (t.heldBy(plan.pipelineStage(r)) && seen.insert(blocks.back().offset).second)
        holders.push_back(r);
    }
    if (static_cast<int64_t>(holders.size()) * blocks[0].localElements() !=
        blocks[0].wholeElements()) {
      error = "state tensor '" + t.name + "': the ranks' blocks do not make up the whole tensor";
      return nullptr;
    }
    ranks->stateBlocks_.push_back(std::move(blocks));
    ranks->stateHolders_.push_back(std::move(holders));
  }

  ranks->pipeline_ = PipelineLayout::create(ranks->plan(), error);
  if (!ranks->pipeline_ && !error.empty())
    return nullptr;
  for (uint32_t r : ranks->local_) {
    if (!ranks->pipeline_)
      break;
    auto pr = PipelineRank::create(*ranks->pipeline_, ranks->plan(), r, error);
    if (!pr) {
      error = "rank " + std::to_string(r) + ": " + error;
      return nullptr;
    }
    ranks->pipelineRanks_[r] = std::move(pr);
  }

  if (localCount == 1) {
    setComputeThreads(ranks->threadsPerRank_);
    return ranks;
  }
  std::vector<Communicator *> comms(size);
  for (uint32_t r : ranks->local_)
    comms[r] = ranks->comms_[r].get();
  ranks->threads_ = std::make_unique<RankThreads>(
      ranks->local_, std::move(comms), [n = ranks->threadsPerRank_] { setComputeThreads(n); });
  return ranks;
}

Ranks::~Ranks() {
  if (threads_ && threads_->hasStuckRank()) {
    // A hung rank's thread may never end, and may still use its executor and communicator:
    // all of them are left to the end of the process.
    threads_.release();
    for (auto &c : comms_)
      c.release();
    for (auto &e : executors_)
      e.release();
    for (auto &p : pipelineRanks_)
      p.release();
    return;
  }
  threads_.reset();
  // The communication workers first: they may read any rank's arena until they stop.
  comms_.clear();
  executors_.clear();
}

void Ranks::setWaitLimit(const WaitLimit &limit) {
  for (uint32_t r : local_)
    if (comms_[r]) // A run of one rank has no communicator.
      comms_[r]->setWaitLimit(limit);
}

bool Ranks::run(const std::string &program, const StepContext &ctx, std::string &error,
                bool checkFinite) {
  return runOnEveryRank(
             [&](uint32_t rank, std::string &why) {
               return executors_[rank]->run(program, ctx, why, checkFinite);
             },
             error) &&
         shareOutputs(program, error);
}

bool Ranks::runOnEveryRank(const Work &work, std::string &error) {
  // One local rank runs on the calling thread; a failure there has already ended the job
  // under MPI (the communicator's abort) or is this run's own.
  if (!threads_)
    return work(local_[0], error);
  return threads_->run(work, error);
}

bool Ranks::hasInput(const std::string &program, const std::string &port) const {
  return findInput(plan(), program, port, 0) != nullptr;
}

bool Ranks::writeInput(const std::string &program, const std::string &port, const void *whole,
                       int64_t elements, std::string &error) {
  for (uint32_t r : local_) {
    const planfile::Port *in = findInput(plan(), program, port, r);
    if (!in) {
      error = "program '" + program + "' has no '" + port + "' input";
      return false;
    }
    Block b = blockOf(plan(), in->shape, in->split, r);
    std::vector<float> local(static_cast<size_t>(b.localElements()));
    if (b.wholeElements() == elements)
      copyFromWhole(b, whole, local.data());
    if (b.wholeElements() != elements ||
        !executors_[r]->writeInput(program, port, local.data(), local.size() * 4)) {
      error = "input '" + port + "' of '" + program + "' holds " +
              std::to_string(b.wholeElements()) + " elements in all, not the " +
              std::to_string(elements) + " the run feeds it";
      return false;
    }
  }
  return true;
}

const float *Ranks::output(const std::string &program, const std::string &port) const {
  if (isLocal(0))
    return executors_[0]->output(program, port);
  auto it = sharedOutputs_.find({program, port});
  return it == sharedOutputs_.end() ? nullptr : it->second.data();
}

bool Ranks::shareFromRank(uint32_t rank, void *data, size_t bytes, std::string &error) {
  if (processCount_ == 1)
    return true;
  CommOp op;
  op.kind = CommOp::Kind::Broadcast;
  op.group = &processes_;
  op.root = rank; // Under MPI, rank r is process r.
  op.n = static_cast<int64_t>((bytes + 3) / 4);
  std::vector<float> padded(static_cast<size_t>(op.n));
  if (bytes > 0)
    std::memcpy(padded.data(), data, bytes);
  op.x = padded.data();
  op.y = padded.data();
  if (!comms_[local_[0]]->run(op, error))
    return false;
  if (bytes > 0)
    std::memcpy(data, padded.data(), bytes);
  return true;
}

bool Ranks::shareOutputs(const std::string &program, std::string &error) {
  if (processCount_ == 1)
    return true;
  const planfile::Program *p = plan().findProgram(program, 0);
  if (!p)
    return true;
  for (const planfile::Port &out : p->outputs) {
    size_t bytes = 4;
    for (int64_t d : out.shape)
      bytes *= static_cast<size_t>(d);
    std::vector<float> &copy = sharedOutputs_[{program, out.name}];
    copy.resize(bytes / 4);
    if (isLocal(0))
      std::memcpy(copy.data(), executors_[0]->output(program, out.name), bytes);
    if (!shareFromRank(0, copy.data(), bytes, error))
      return false;
  }
  return true;
}

bool Ranks::gatherFromProcesses(const void *mine, size_t bytes, std::vector<char> &all,
                                std::string &error) {
  const size_t words = (bytes + 3) / 4;
  std::vector<char> padded(words * 4, 0), gathered(words * 4 * processCount_);
  std::memcpy(padded.data(), mine, bytes);
  if (processCount_ == 1) {
    gathered = padded;
  } else {
    CommOp op;
    op.kind = CommOp::Kind::AllGather;
    op.group = &processes_;
    op.outer = 1;
    op.chunk = static_cast<int64_t>(words);
    op.x = padded.data();
    op.y = gathered.data();
    if (!comms_[local_[0]]->run(op, error))
      return false;
  }
  all.resize(bytes * processCount_);
  for (uint32_t p = 0; p < processCount_; ++p)
    std::memcpy(all.data() + p * bytes, gathered.data() + p * words * 4, bytes);
  return true;
}

bool Ranks::ownsBlock(size_t index, uint32_t rank) const {
  const std::vector<uint32_t> &holders = stateHolders_[index];
  return std::find(holders.begin(), holders.end(), rank) != holders.end();
}

const float *Ranks::wholeState(size_t index, std::vector<float> &scratch) const {
  const std::vector<Block> &blocks = stateBlocks_[index];
  scratch.resize(static_cast<size_t>(blocks[0].wholeElements()));
  if (size() == 1) {
    executors_[0]->readState(index, scratch.data());
    return scratch.data();
  }
  std::vector<float> block;
  for (uint32_t r : stateHolders_[index]) {
    block.resize(static_cast<size_t>(blocks[r].localElements()));
    executors_[r]->readState(index, block.data());
    copyToWhole(blocks[r], block.data(), scratch.data());
  }
  return scratch.data();
}

void Ranks::setWholeState(size_t index, const float *whole) {
  if (size() == 1) {
    executors_[0]->writeState(index, whole);
    return;
  }
  std::vector<float> block;
  for (uint32_t r : local_)
    if (executors_[r]->holdsState(index)) {
      block.resize(static_cast<size_t>(stateBlocks_[index][r].localElements()));
      copyFromWhole(stateBlocks_[index][r], whole, block.data());
      executors_[r]->writeState(index, block.data());
    }
}

bool Ranks::runPipelineStep(const StepContext &step, const std::vector<MicroBatchData> &batches,
                            std::vector<float> &losses, std::string &error, bool checkFinite) {
  if (!pipeline_) {
    error = "the plan has no pipeline";
    return false;
  }
  if (batches.size() != static_cast<size_t>(pipeline_->config().microbatches)) {
    error = "a step of this pipeline takes " + std::to_string(pipeline_->config().microbatches) +
            " micro-batches, not " + std::to_string(batches.size());
    return false;
  }
  const PipelineRank::Clock::time_point origin = PipelineRank::Clock::now();
  if (!runOnEveryRank(
          [&](uint32_t rank, std::string &why) {
            return pipelineRanks_[rank]->runStep(*executors_[rank], *comms_[rank], step, batches,
                                                 origin, why, checkFinite);
          },
          error))
    return false;
  const uint32_t out = pipeline_->outputRank();
  losses.assign(static_cast<size_t>(pipeline_->config().microbatches), 0.0f);
  if (isLocal(out))
    losses = pipelineRanks_[out]->losses();
  return shareFromRank(out, losses.data(), losses.size() * 4, error);
}

bool Ranks::runForwardChain(const std::string &kind, const StepContext &ctx,
                            const MicroBatchData &data, std::vector<float> &output,
                            std::string &error) {
  const PipelineChain *chain = pipeline_ ? pipeline_->chain(kind) : nullptr;
  if (!chain) {
    error = "the plan has no '" + kind + ".0' program";
    return false;
  }
  if (!runOnEveryRank(
          [&](uint32_t rank, std::string &why) {
            return pipelineRanks_[rank]->runChain(*chain, *executors_[rank], *comms_[rank], ctx,
                                                  data, why);
          },
          error))
    return false;
  const uint32_t out = pipeline_->outputRank();
  uint64_t count = isLocal(out) ? pipelineRanks_[out]->chainOutput().size() : 0;
  if (!shareFromRank(out, &count, sizeof count, error))
    return false;
  output.assign(static_cast<size_t>(count), 0.0f);
  if (isLocal(out))
    output = pipelineRanks_[out]->chainOutput();
  return shareFromRank(out, output.data(), output.size() * 4, error);
}

pipeline::Timeline Ranks::lastTimeline() const {
  std::vector<pipeline::TimedAction> actions;
  if (!pipeline_)
    return pipeline::summarizeTimeline(0, actions);
  // Under MPI, what this process's ranks recorded.
  for (uint32_t rank : pipeline_->recordedRanks()) {
    if (!isLocal(rank))
      continue;
    const std::vector<pipeline::TimedAction> &timed = pipelineRanks_[rank]->timed();
    actions.insert(actions.end(), timed.begin(), timed.end());
  }
  return pipeline::summarizeTimeline(pipeline_->config().stages, std::move(actions));
}

uint64_t Ranks::pipelineStashBytes(uint32_t rank) const {
  return pipeline_ && pipelineRanks_[rank] ? pipelineRanks_[rank]->peakStashBytes() : 0;
}

} // namespace tessel::rt
