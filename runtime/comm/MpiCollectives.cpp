//===- MpiCollectives.cpp - Collectives from MPI messages -----------------===//
//
// Each collective of the MPI communicator is built from point-to-point messages between the
// members of its group, so that a sum adds the members' values in group-index order in f32,
// exactly as LocalCommunicator does: the bits of a run are the same whether its ranks are
// threads or processes.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiCommunicatorImpl.h"

#include <cstring>

namespace tessel::rt::mpi::detail {

bool MpiCommunicator::execute(const CommOp &op, std::string &error) {
  reapSends();
  const std::string what = "rank " + std::to_string(rank_) + ": " + commKindName(op.kind);
  if (op.kind == CommOp::Kind::Send || op.kind == CommOp::Kind::Recv)
    return pointToPoint(op, what, error);
  const CommGroup *g = op.group;
  if (!g || g->index >= g->size() || g->ranks[g->index] != rank_ || op.n < 0 || op.outer < 0 ||
      op.chunk < 0) {
    error = what + " on a group that does not hold this rank at its index";
    return false;
  }
  for (uint32_t r : g->ranks)
    if (r >= size_) {
      error = what + " on a group naming rank " + std::to_string(r) + " of a world of " +
              std::to_string(size_);
      return false;
    }
  switch (op.kind) {
  case CommOp::Kind::AllReduce:
    return allReduce(op, *g, what, error);
  case CommOp::Kind::ReduceScatter:
    return reduceScatter(op, *g, what, error);
  case CommOp::Kind::AllGather:
  case CommOp::Kind::AllToAll:
    return gatherOrExchange(op, *g, what, error);
  case CommOp::Kind::Broadcast:
    return broadcast(op, *g, what, error);
  default:
    error = what + ": not a collective";
    return false;
  }
}

bool MpiCommunicator::allReduce(const CommOp &op, const CommGroup &g, const std::string &what,
                                std::string &error) {
  const uint32_t me = g.index, ways = g.size();
  const char *x = static_cast<const char *>(op.x);
  char *y = static_cast<char *>(op.y);
  const int64_t lo = cut(op.n, me, ways), mine = cut(op.n, me + 1, ways) - lo;
  const size_t mineBytes = commBytes(op, mine);
  // Each member reduces its share of the elements, adding the members' values in
  // group-index order in f32, then the shares, rounded to the type, are gathered to everyone.
  std::vector<std::vector<char>> parts(ways);
  Requests reqs;
  for (uint32_t j = 0; j < ways; ++j) {
    if (j == me)
      continue;
    const int64_t at = cut(op.n, j, ways), len = cut(op.n, j + 1, ways) - at;
    reqs.send(x + commBytes(op, at), commBytes(op, len), g.ranks[j], kCollectiveTag);
    parts[j].resize(mineBytes);
    reqs.recv(parts[j].data(), mineBytes, g.ranks[j], kCollectiveTag);
  }
  if (!reqs.wait(*this, what, error))
    return false;
  std::vector<float> sum(static_cast<size_t>(mine));
  auto share = [&](uint32_t r) -> const void * {
    return r == me ? x + commBytes(op, lo) : parts[r].data();
  };
  widenInto(sum.data(), share(0), op.type, mine);
  for (uint32_t r = 1; r < ways; ++r)
    reduceInto(op.reduce, sum.data(), share(r), op.type, mine);
  std::vector<char> result(mineBytes);
  narrowInto(result.data(), op.type, sum.data(), mine);
  // Every member's sends from x are done: y may be x.
  for (uint32_t j = 0; j < ways; ++j) {
    if (j == me)
      continue;
    const int64_t at = cut(op.n, j, ways), len = cut(op.n, j + 1, ways) - at;
    reqs.send(result.data(), mineBytes, g.ranks[j], kCollectiveTag);
    reqs.recv(y + commBytes(op, at), commBytes(op, len), g.ranks[j], kCollectiveTag);
  }
  if (mine > 0)
    std::memcpy(y + commBytes(op, lo), result.data(), mineBytes);
  return reqs.wait(*this, what, error);
}

std::vector<char> MpiCommunicator::column(const CommOp &op, uint32_t j, uint32_t ways) {
  const size_t chunkBytes = commBytes(op, op.chunk);
  std::vector<char> out(static_cast<size_t>(op.outer) * chunkBytes);
  for (int64_t o = 0; o < op.outer; ++o)
    std::memcpy(out.data() + o * chunkBytes,
                static_cast<const char *>(op.x) + (o * ways + j) * chunkBytes, chunkBytes);
  return out;
}

bool MpiCommunicator::reduceScatter(const CommOp &op, const CommGroup &g, const std::string &what,
                                    std::string &error) {
  const uint32_t me = g.index, ways = g.size();
  const int64_t n = op.outer * op.chunk;
  const size_t bytes = commBytes(op, n);
  std::vector<std::vector<char>> out(ways), in(ways);
  Requests reqs;
  for (uint32_t j = 0; j < ways; ++j) {
    if (j == me)
      continue;
    out[j] = column(op, j, ways);
    reqs.send(out[j].data(), bytes, g.ranks[j], kCollectiveTag);
    in[j].resize(bytes);
    reqs.recv(in[j].data(), bytes, g.ranks[j], kCollectiveTag);
  }
  in[me] = column(op, me, ways);
  if (!reqs.wait(*this, what, error))
    return false;
  // f32 sums straight into y; 16-bit ones into f32 first, rounded once at the end.
  std::vector<float> wide(op.type == planfile::DType::F32 ? 0 : static_cast<size_t>(n));
  float *sum = op.type == planfile::DType::F32 ? static_cast<float *>(op.y) : wide.data();
  widenInto(sum, in[0].data(), op.type, n);
  for (uint32_t r = 1; r < ways; ++r)
    reduceInto(ReduceOp::Sum, sum, in[r].data(), op.type, n);
  if (op.type != planfile::DType::F32)
    narrowInto(op.y, op.type, sum, n);
  return true;
}

bool MpiCommunicator::gatherOrExchange(const CommOp &op, const CommGroup &g,
                                       const std::string &what, std::string &error) {
  const uint32_t me = g.index, ways = g.size();
  const bool gather = op.kind == CommOp::Kind::AllGather;
  const size_t chunkBytes = commBytes(op, op.chunk);
  const size_t bytes = static_cast<size_t>(op.outer) * chunkBytes;
  std::vector<std::vector<char>> out(ways), in(ways);
  Requests reqs;
  for (uint32_t j = 0; j < ways; ++j) {
    if (j == me)
      continue;
    if (gather) {
      reqs.send(op.x, bytes, g.ranks[j], kCollectiveTag);
    } else {
      out[j] = column(op, j, ways);
      reqs.send(out[j].data(), bytes, g.ranks[j], kCollectiveTag);
    }
    in[j].resize(bytes);
    reqs.recv(in[j].data(), bytes, g.ranks[j], kCollectiveTag);
  }
  in[me] = gather ? std::vector<char>(static_cast<const char *>(op.x),
                                      static_cast<const char *>(op.x) + bytes)
                  : column(op, me, ways);
  if (!reqs.wait(*this, what, error))
    return false;
  char *y = static_cast<char *>(op.y);
  for (int64_t o = 0; o < op.outer; ++o)
    for (uint32_t r = 0; r < ways; ++r)
      std::memcpy(y + (o * ways + r) * chunkBytes, in[r].data() + o * chunkBytes, chunkBytes);
  return true;
}

bool MpiCommunicator::broadcast(const CommOp &op, const CommGroup &g, const std::string &what,
                                std::string &error) {
  if (op.root >= g.size()) {
    error = what + ": root " + std::to_string(op.root) + " is not a member";
    return false;
  }
  const size_t bytes = commBytes(op, op.n);
  Requests reqs;
  if (g.index == op.root) {
    for (uint32_t j = 0; j < g.size(); ++j)
      if (j != op.root)
        reqs.send(op.x, bytes, g.ranks[j], kCollectiveTag);
    if (op.y != op.x && bytes > 0)
      std::memcpy(op.y, op.x, bytes);
  } else {
    reqs.recv(op.y, bytes, g.ranks[op.root], kCollectiveTag);
  }
  return reqs.wait(*this, what, error);
}

} // namespace tessel::rt::mpi::detail
