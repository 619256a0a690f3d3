//===- NcclCommunicator.cpp - Ranks as one GPU per process, over NCCL -----===//
//
// NCCL's library, opened when the first communicator is made, and a communicator's life:
// joining the world with the unique id rank 0 hands out, one split of the world per group of
// the plan and one copy per point-to-point tag, and the communicators destroyed with it, or
// aborted. Run on one GPU as a world of one; between GPUs not yet (see the header). What a
// communicator runs is in NcclOperations.cpp (NcclCommunicatorImpl.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/NcclCommunicator.h"

#include "runtime/comm/NcclCommunicatorImpl.h"

#include <dlfcn.h>

#include <cstring>

namespace tessel::rt::nccl {

namespace detail {

namespace {

//===----------------------------------------------------------------------===//
// The library, opened when the first communicator is made
//===----------------------------------------------------------------------===//

#define TESSEL_STRING(x) #x
#define TESSEL_EXPAND_STRING(x) TESSEL_STRING(x)
constexpr const char *kLibrary = "libnccl.so." TESSEL_EXPAND_STRING(NCCL_MAJOR);

/// NCCL of this build's major version: where the loader finds it, else beside the library CMake
/// found. Null with the reason.
const Library *loadLibrary(std::string &error) {
  static std::string failure;
  static const Library *loaded = []() -> const Library * {
    void *handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const std::string first = dlerror();
      const std::string built = std::string(TESSEL_NCCL_LIBRARY_DIR) + "/" + kLibrary;
      handle = dlopen(built.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle) {
        failure = std::string("cannot load NCCL: ") + first + "; nor " + built;
        return nullptr;
      }
    }
    static Library l;
#define TESSEL_NCCL_RESOLVE(name)                                                                  \
  l.name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name));                              \
  if (!l.name) {                                                                                   \
    failure = std::string(kLibrary) + " has no " #name;                                            \
    return nullptr;                                                                                \
  }
    TESSEL_NCCL_FUNCTIONS(TESSEL_NCCL_RESOLVE)
#undef TESSEL_NCCL_RESOLVE
    return &l;
  }();
  if (!loaded)
    error = failure;
  return loaded;
}

} // namespace

//===----------------------------------------------------------------------===//
// Joining the world, and leaving it
//===----------------------------------------------------------------------===//

NcclCommunicator::~NcclCommunicator() {
  cudaSetDevice(device_);
  if (stream_)
    cudaStreamSynchronize(stream_);
  for (auto &[ticket, event] : events_)
    cudaEventDestroy(event);
  if (ready_)
    cudaEventDestroy(ready_);
  for (void *p : staging_)
    cudaFree(p);
  for (auto &[ranks, comm] : groups_)
    nccl_.ncclCommDestroy(comm);
  for (auto &[tag, comm] : tagged_)
    nccl_.ncclCommDestroy(comm);
  if (world_)
    nccl_.ncclCommDestroy(world_);
  if (stream_)
    cudaStreamDestroy(stream_);
}

bool NcclCommunicator::start(const IdExchange &exchange,
                             const std::vector<std::optional<CommGroup>> &splits,
                             const std::vector<int64_t> &tags, std::string &error) {
  if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) {
    error = cudaMessage("cudaSetDevice", e);
    return false;
  }
  cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
  if (e == cudaSuccess)
    e = cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    error = cudaMessage("creating the communication stream", e);
    return false;
  }
  ncclUniqueId id{};
  if (rank_ == 0 && !check("ncclGetUniqueId", nccl_.ncclGetUniqueId(&id), error)) {
    // The others wait for the id: tell them why none comes.
    std::vector<char> none;
    std::string ignored;
    exchange(none, ignored);
    return false;
  }
  std::vector<char> blob(reinterpret_cast<const char *>(&id),
                         reinterpret_cast<const char *>(&id) + sizeof id);
  if (!exchange(blob, error))
    return false;
  if (blob.empty()) {
    error = "rank 0 could not make NCCL's unique id (its own message says why)";
    return false;
  }
  if (blob.size() != sizeof id) {
    error = "rank 0 handed out an NCCL id of " + std::to_string(blob.size()) + " bytes, not " +
            std::to_string(sizeof id);
    return false;
  }
  std::memcpy(&id, blob.data(), sizeof id);
  if (!check(
          "ncclCommInitRank",
          nccl_.ncclCommInitRank(&world_, static_cast<int>(size_), id, static_cast<int>(rank_)),
          error))
    return false;
  for (const std::optional<CommGroup> &g : splits) {
    if (g && (g->ranks.empty() || g->index >= g->size() || g->ranks[g->index] != rank_)) {
      error = "a group that does not hold rank " + std::to_string(rank_) + " at its index";
      return false;
    }
    // The instance is named by its first member (color), the rank by its index in it (key).
    ncclComm_t sub = nullptr;
    if (!check("ncclCommSplit",
               nccl_.ncclCommSplit(world_,
                                   g ? static_cast<int>(g->ranks.front()) : NCCL_SPLIT_NOCOLOR,
                                   g ? static_cast<int>(g->index) : 0, &sub, nullptr),
               error))
      return false;
    if (!g)
      continue;
    // Two groups of the same members (an axis of size one, say) share one communicator.
    auto [it, fresh] = groups_.try_emplace(g->ranks, sub);
    if (!fresh)
      nccl_.ncclCommDestroy(sub);
  }
  // NCCL pairs a send with a receive by their order on a communicator, without tags: each
  // tag given gets a copy of the world, so its messages pair in order whatever the others do.
  for (int64_t tag : tags) {
    if (tagged_.count(tag))
      continue;
    ncclComm_t copy = nullptr;
    if (!check("ncclCommSplit",
               nccl_.ncclCommSplit(world_, 0, static_cast<int>(rank_), &copy, nullptr), error))
      return false;
    tagged_[tag] = copy;
  }
  return true;
}

void NcclCommunicator::abort(const std::string &reason) {
  if (!abortReason_.empty())
    return;
  abortReason_ = reason.empty() ? "aborted" : reason;
  for (auto &[ranks, comm] : groups_)
    nccl_.ncclCommAbort(comm);
  groups_.clear();
  for (auto &[tag, comm] : tagged_)
    nccl_.ncclCommAbort(comm);
  tagged_.clear();
  if (world_)
    nccl_.ncclCommAbort(world_);
  world_ = nullptr;
}

bool NcclCommunicator::aborted(std::string *reason) const {
  if (abortReason_.empty())
    return false;
  if (reason)
    *reason = abortReason_;
  return true;
}

} // namespace detail

bool available() { return true; }

std::unique_ptr<Communicator>
createCommunicator(int device, uint32_t rank, uint32_t size, const IdExchange &exchange,
                   const std::vector<std::optional<CommGroup>> &splits,
                   const std::vector<int64_t> &tags, std::string &error) {
  const detail::Library *nccl = detail::loadLibrary(error);
  if (!nccl) {
    // The other ranks wait for rank 0's id: tell them why none comes.
    if (rank == 0) {
      std::vector<char> none;
      std::string ignored;
      exchange(none, ignored);
    }
    return nullptr;
  }
  auto comm = std::make_unique<detail::NcclCommunicator>(*nccl, device, rank, size);
  if (!comm->start(exchange, splits, tags, error))
    return nullptr;
  return comm;
}

} // namespace tessel::rt::nccl
