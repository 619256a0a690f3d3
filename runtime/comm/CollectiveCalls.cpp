//===- CollectiveCalls.cpp - Plan kernels that communicate ----------------===//

#include "runtime/comm/CollectiveCalls.h"

#include <cstring>

namespace tessel::rt {

namespace {

/// Sizes must be positive; returns false (with an error) otherwise.
bool positive(KernelCall &c, std::initializer_list<int64_t> sizes) {
  for (int64_t s : sizes)
    if (s <= 0)
      return c.fail("has a non-positive size");
  return c.error.empty();
}

/// The output must not overlap the input, except by being the same buffer where `inPlace`.
bool separate(KernelCall &c, int64_t inElements, int64_t outElements, bool inPlace) {
  const char *x = static_cast<const char *>(c.in[0]);
  const char *y = static_cast<const char *>(c.out[0]);
  if (inPlace && x == y)
    return true;
  if (x < y + outElements * 4 && y < x + inElements * 4)
    return c.fail(inPlace ? "has an output that overlaps its input without being it"
                          : "has an output that overlaps its input");
  return true;
}

/// Runs `op` now, or starts it and files it under the instruction's `event`.
bool issue(KernelCall &c, const CommOp &op) {
  if (!c.comm)
    return c.fail("needs a communicator, which a world of one rank does not have");
  const planfile::Attr *event = c.instr->find("event");
  if (event && !c.rank->synchronous) {
    c.rank->events[std::get<int64_t>(event->value)] = c.comm->start(op);
    return true;
  }
  return c.comm->run(op, c.error);
}

/// A group of one rank: every collective copies x to y.
bool copyAlone(KernelCall &c, int64_t elements) {
  if (c.in[0] != c.out[0])
    std::memcpy(c.out[0], c.in[0], static_cast<size_t>(elements) * 4);
  return true;
}

/// The kind of all_gather, reduce_scatter and all_to_all: x and y of [outer, ways, chunk] or
/// [outer, chunk].
bool blockCollective(KernelCall &c, CommOp::Kind kind) {
  int64_t outer = c.i("outer"), chunk = c.i("chunk");
  const CommGroup *g = c.group(c.s("group"));
  if (!g || !c.arity(1, 1) || !positive(c, {outer, chunk}))
    return false;
  const int64_t ways = g->size(), slice = outer * chunk, whole = outer * ways * chunk;
  const int64_t in = kind == CommOp::Kind::AllGather ? slice : whole;
  const int64_t out = kind == CommOp::Kind::ReduceScatter ? slice : whole;
  if (!c.needIn(0, in) || !c.needOut(0, out) || !separate(c, in, out, false) || c.validating)
    return c.error.empty();
  if (ways == 1)
    return copyAlone(c, slice);
  CommOp op;
  op.kind = kind;
  op.group = g;
  op.outer = outer;
  op.chunk = chunk;
  op.x = c.in[0];
  op.y = c.out[0];
  return issue(c, op);
}

/// The peer of a send or receive: another rank of the world.
bool peerOf(KernelCall &c, uint32_t &peer) {
  int64_t p = c.i("peer");
  if (!c.error.empty())
    return false;
  if (p < 0 || p >= c.rank->worldSize || p == c.rank->rank)
    return c.fail("has peer " + std::to_string(p) + ", which is not another rank of the " +
                  std::to_string(c.rank->worldSize) + " of this world");
  peer = static_cast<uint32_t>(p);
  return true;
}

/// The members of `g` that `members` names (ascending indices into it), which must include
/// this rank: found once while validating, then cached in the call.
const CommGroup *membersOf(KernelCall &c, const CommGroup &g) {
  if (!c.validating)
    return c.subgroup;
  const std::vector<int64_t> &members = c.v("members");
  if (!c.error.empty())
    return nullptr;
  std::vector<uint32_t> ranks;
  int64_t index = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    int64_t m = members[i];
    if (m < 0 || m >= g.size() || (i > 0 && m <= members[i - 1])) {
      c.fail("has members that are not ascending indices into its group of " +
             std::to_string(g.size()));
      return nullptr;
    }
    if (m == g.index)
      index = static_cast<int64_t>(i);
    ranks.push_back(g.ranks[m]);
  }
  if (index < 0) {
    c.fail("runs over members that do not include this rank (index " + std::to_string(g.index) +
           " of its group)");
    return nullptr;
  }
  auto it = c.rank->subgroups.try_emplace(ranks, CommGroup{ranks, static_cast<uint32_t>(index)});
  c.subgroup = &it.first->second;
  return c.subgroup;
}

} // namespace

bool allReduceCall(KernelCall &c) {
  int64_t n = c.i("n");
  const std::string &name = c.s("op");
  const CommGroup *g = c.group(c.s("group"));
  if (g && c.instr->find("members"))
    g = membersOf(c, *g);
  if (!g || !c.arity(1, 1) || !positive(c, {n}))
    return false;
  if (name != "sum" && name != "max")
    return c.fail("unknown reduction '" + name + "' (sum or max)");
  if (!c.needIn(0, n) || !c.needOut(0, n) || !separate(c, n, n, true) || c.validating)
    return c.error.empty();
  if (g->size() == 1)
    return copyAlone(c, n);
  CommOp op;
  op.kind = CommOp::Kind::AllReduce;
  op.group = g;
  op.reduce = name == "sum" ? ReduceOp::Sum : ReduceOp::Max;
  op.n = n;
  op.x = c.in[0];
  op.y = c.out[0];
  return issue(c, op);
}

bool allGatherCall(KernelCall &c) { return blockCollective(c, CommOp::Kind::AllGather); }
bool reduceScatterCall(KernelCall &c) { return blockCollective(c, CommOp::Kind::ReduceScatter); }
bool allToAllCall(KernelCall &c) { return blockCollective(c, CommOp::Kind::AllToAll); }

bool broadcastCall(KernelCall &c) {
  int64_t n = c.i("n"), root = c.i("root");
  const CommGroup *g = c.group(c.s("group"));
  if (!g || !c.arity(1, 1) || !positive(c, {n}))
    return false;
  if (root < 0 || root >= g->size())
    return c.fail("has root " + std::to_string(root) + " outside its group of " +
                  std::to_string(g->size()));
  if (!c.needIn(0, n) || !c.needOut(0, n) || !separate(c, n, n, true) || c.validating)
    return c.error.empty();
  if (g->size() == 1)
    return copyAlone(c, n);
  CommOp op;
  op.kind = CommOp::Kind::Broadcast;
  op.group = g;
  op.root = static_cast<uint32_t>(root);
  op.n = n;
  op.x = c.in[0];
  op.y = c.out[0];
  return issue(c, op);
}

bool sendCall(KernelCall &c) {
  int64_t n = c.i("n"), tag = c.i("tag");
  uint32_t peer = 0;
  if (!peerOf(c, peer) || !c.arity(1, 0) || !positive(c, {n}) || !c.needIn(0, n) || c.validating)
    return c.error.empty();
  CommOp op;
  op.kind = CommOp::Kind::Send;
  op.peer = peer;
  op.tag = tag;
  op.n = n;
  op.x = c.in[0];
  return issue(c, op);
}

bool recvCall(KernelCall &c) {
  int64_t n = c.i("n"), tag = c.i("tag");
  uint32_t peer = 0;
  if (!peerOf(c, peer) || !c.arity(0, 1) || !positive(c, {n}) || !c.needOut(0, n) || c.validating)
    return c.error.empty();
  CommOp op;
  op.kind = CommOp::Kind::Recv;
  op.peer = peer;
  op.tag = tag;
  op.n = n;
  op.y = c.out[0];
  return issue(c, op);
}

bool waitCall(KernelCall &c) {
  // Operands, if any, name the buffers the collective uses (so that the memory plan keeps
  // them until here); the wait itself reads and writes nothing.
  int64_t event = c.i("event");
  if (!c.error.empty() || c.validating)
    return c.error.empty();
  // Absent: the collective ran to completion when it was issued (a group of one, or a
  // synchronous run); the executor checked at load that it was started.
  auto it = c.rank->events.find(event);
  if (it == c.rank->events.end())
    return true;
  Communicator::Ticket ticket = it->second;
  c.rank->events.erase(it);
  return c.comm->wait(ticket, c.error);
}

} // namespace tessel::rt
