//===- CollectiveCalls.cpp - Plan kernels that communicate ----------------===//

#include "runtime/comm/CollectiveCalls.h"

#include "common/HeadTail.h"

#include <cstring>
#include <vector>

namespace tessel::rt {

namespace {

/// Sizes must be positive; returns false (with an error) otherwise.
bool positive(KernelCall &c, std::initializer_list<int64_t> sizes) {
  for (int64_t s : sizes)
    if (s <= 0)
      return c.fail("has a non-positive size");
  return c.error.empty();
}

/// The type of the call's data: its operands have one (the catalogue's Moved and Reduced).
planfile::DType dataType(const KernelCall &c) {
  return c.instr->inputs.empty() ? c.instr->outputs[0].dtype : c.instr->inputs[0].dtype;
}

/// Bytes of `elements` of the call's data.
size_t bytesOf(const KernelCall &c, int64_t elements) {
  return static_cast<size_t>(elements) * planfile::dtypeBytes(dataType(c));
}

/// The output must not overlap the input, except by being the same buffer where `inPlace`.
bool separate(KernelCall &c, int64_t inElements, int64_t outElements, bool inPlace) {
  const char *x = static_cast<const char *>(c.in[0]);
  const char *y = static_cast<const char *>(c.out[0]);
  if (inPlace && x == y)
    return true;
  if (x < y + bytesOf(c, outElements) && y < x + bytesOf(c, inElements))
    return c.fail(inPlace ? "has an output that overlaps its input without being it"
                          : "has an output that overlaps its input");
  return true;
}

/// Runs `op` now, or starts it and files it under `event`.
bool issue(KernelCall &c, const CommOp &op, const std::optional<int64_t> &event) {
  if (!c.comm)
    return c.fail("needs a communicator, which a world of one rank does not have");
  if (event && !c.rank->synchronous) {
    c.rank->events[*event] = c.comm->start(op);
    return true;
  }
  return c.comm->run(op, c.error);
}

/// Where this rank's buffers are.
CommMemory &memoryOf(KernelCall &c) { return c.rank->memory ? *c.rank->memory : hostMemory(); }

/// A group of one rank: every collective copies x to y.
bool copyAlone(KernelCall &c, int64_t elements) {
  if (c.in[0] == c.out[0])
    return true;
  CommMemory &mem = memoryOf(c);
  mem.copy(c.out[0], c.in[0], bytesOf(c, elements));
  return mem.finish(c.error);
}

/// Between the group-index order of the ranks' blocks, [outer, ways, 2, half], and the order
/// of a head-tail dim's chunks in the whole, [outer, 2 * ways, half] (common/HeadTail.h).
void headTailOrder(CommMemory &mem, const char *from, char *to, int64_t outer, int64_t ways,
                   size_t bytes, bool toWhole) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < ways; ++r)
      for (int64_t h = 0; h < 2; ++h) {
        const int64_t block = (o * ways + r) * 2 + h;
        const int64_t whole = o * 2 * ways + headtail::chunkOf(r, ways, h);
        if (toWhole)
          mem.copy(to + whole * bytes, from + block * bytes, bytes);
        else
          mem.copy(to + block * bytes, from + whole * bytes, bytes);
      }
}

/// The kind of all_gather, reduce_scatter and all_to_all: x and y of [outer, ways, chunk] or
/// [outer, chunk]. Along a head-tail dim (a group splitting a sequence for context
/// parallelism) a rank's chunk is two chunks of the whole: the whole side is reordered
/// through a buffer of its own, and the collective runs at once, whatever its event.
template <class P> bool blockCollective(KernelCall &c, const P &p, CommOp::Kind kind) {
  const int64_t outer = p.outer, chunk = p.chunk;
  const CommGroup *g = c.group(p.group);
  if (!g || !positive(c, {outer, chunk}))
    return false;
  const int64_t ways = g->size(), slice = outer * chunk, whole = outer * ways * chunk;
  const int64_t in = kind == CommOp::Kind::AllGather ? slice : whole;
  const int64_t out = kind == CommOp::Kind::ReduceScatter ? slice : whole;
  const bool headTail = headtail::isHeadTail(p.group) && ways > 1 && kind != CommOp::Kind::AllToAll;
  if (headTail && chunk % 2 != 0)
    return c.fail("splits a dim head-tail over group " + p.group + " but its chunk of " +
                  std::to_string(chunk) + " elements is odd");
  if (!c.needIn(0, in) || !c.needOut(0, out) || !separate(c, in, out, false) || c.validating)
    return c.error.empty();
  if (ways == 1)
    return copyAlone(c, slice);
  CommOp op;
  op.kind = kind;
  op.type = dataType(c);
  op.group = g;
  op.outer = outer;
  op.chunk = chunk;
  op.x = c.in[0];
  op.y = c.out[0];
  if (!headTail)
    return issue(c, op, p.event);
  if (!c.comm)
    return c.fail("needs a communicator, which a world of one rank does not have");
  CommMemory &mem = memoryOf(c);
  std::shared_ptr<void> buffer = mem.allocate(bytesOf(c, whole));
  if (!buffer)
    return c.fail("has no memory to reorder its head-tail blocks");
  char *blocks = static_cast<char *>(buffer.get());
  if (kind == CommOp::Kind::ReduceScatter) {
    headTailOrder(mem, static_cast<const char *>(c.in[0]), blocks, outer, ways,
                  bytesOf(c, chunk / 2), false);
    op.x = blocks;
    return mem.finish(c.error) && c.comm->run(op, c.error);
  }
  op.y = blocks;
  if (!c.comm->run(op, c.error))
    return false;
  headTailOrder(mem, blocks, static_cast<char *>(c.out[0]), outer, ways, bytesOf(c, chunk / 2),
                true);
  return mem.finish(c.error);
}

/// The peer of a send or receive: another rank of its group, by its index in the group (so a
/// program says "stage 2 of my pipeline" rather than a world rank, and one program serves every
/// rank of its stage).
bool peerOf(KernelCall &c, const std::string &group, int64_t p, bool relative, uint32_t &peer) {
  const CommGroup *g = c.group(group);
  if (!g || !c.error.empty())
    return false;
  // A ring's peer is an offset from this rank, so that one program serves every rank.
  if (relative)
    p = ((g->index + p) % g->size() + g->size()) % g->size();
  if (p < 0 || p >= g->size() || p == g->index)
    return c.fail("has peer " + std::to_string(p) +
                  ", which is not another index of its group of " + std::to_string(g->size()));
  peer = g->ranks[static_cast<size_t>(p)];
  return true;
}

/// The members of `g` that `members` names (ascending indices into it), which must include
/// this rank: found once while validating, then cached in the call.
const CommGroup *membersOf(KernelCall &c, const CommGroup &g, const std::vector<int64_t> &members) {
  if (!c.validating)
    return c.subgroup;
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

bool run(KernelCall &c, const catalogue::AllReduce &p) {
  const int64_t n = p.n;
  const CommGroup *g = c.group(p.group);
  if (g && p.members)
    g = membersOf(c, *g, *p.members);
  if (!g || !positive(c, {n}))
    return false;
  if (!c.needIn(0, n) || !c.needOut(0, n) || !separate(c, n, n, true) || c.validating)
    return c.error.empty();
  if (g->size() == 1)
    return copyAlone(c, n);
  CommOp op;
  op.kind = CommOp::Kind::AllReduce;
  op.type = dataType(c);
  op.group = g;
  op.reduce = p.op == catalogue::Reduction::Sum ? ReduceOp::Sum : ReduceOp::Max;
  op.n = n;
  op.x = c.in[0];
  op.y = c.out[0];
  return issue(c, op, p.event);
}

bool run(KernelCall &c, const catalogue::AllGather &p) {
  return blockCollective(c, p, CommOp::Kind::AllGather);
}
bool run(KernelCall &c, const catalogue::ReduceScatter &p) {
  return blockCollective(c, p, CommOp::Kind::ReduceScatter);
}
bool run(KernelCall &c, const catalogue::AllToAll &p) {
  return blockCollective(c, p, CommOp::Kind::AllToAll);
}

bool run(KernelCall &c, const catalogue::Broadcast &p) {
  const int64_t n = p.n, root = p.root;
  const CommGroup *g = c.group(p.group);
  if (!g || !positive(c, {n}))
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
  op.type = dataType(c);
  op.group = g;
  op.root = static_cast<uint32_t>(root);
  op.n = n;
  op.x = c.in[0];
  op.y = c.out[0];
  return issue(c, op, p.event);
}

bool run(KernelCall &c, const catalogue::Send &p) {
  const int64_t n = p.n, tag = p.tag;
  uint32_t peer = 0;
  if (!peerOf(c, p.group, p.peer, p.relative.value_or(0) != 0, peer) || !positive(c, {n}) ||
      !c.needIn(0, n) || c.validating)
    return c.error.empty();
  CommOp op;
  op.kind = CommOp::Kind::Send;
  op.type = dataType(c);
  op.peer = peer;
  op.tag = tag;
  op.n = n;
  op.x = c.in[0];
  return issue(c, op, p.event);
}

bool run(KernelCall &c, const catalogue::Recv &p) {
  const int64_t n = p.n, tag = p.tag;
  uint32_t peer = 0;
  if (!peerOf(c, p.group, p.peer, p.relative.value_or(0) != 0, peer) || !positive(c, {n}) ||
      !c.needOut(0, n) || c.validating)
    return c.error.empty();
  CommOp op;
  op.kind = CommOp::Kind::Recv;
  op.type = dataType(c);
  op.peer = peer;
  op.tag = tag;
  op.n = n;
  op.y = c.out[0];
  return issue(c, op, p.event);
}

bool run(KernelCall &c, const catalogue::Wait &p) {
  // Operands, if any, name the buffers the collective uses (so that the memory plan keeps
  // them until here); the wait itself reads and writes nothing.
  const int64_t event = p.event;
  if (c.validating)
    return true;
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
