//===- CollectiveCalls.cpp - Plan kernels that communicate ----------------===//

#include "runtime/device/CollectiveCalls.h"

#include "common/layout/HeadTail.h"

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
bool copyAlone(KernelCall &c, uint64_t bytes) {
  if (c.in[0] == c.out[0])
    return true;
  CommMemory &mem = memoryOf(c);
  mem.copy(c.out[0], c.in[0], bytes);
  return mem.finish(c.error);
}

/// Between the group-index order of the ranks' blocks, [outer, ways, 2, half], and the order
/// of a head-tail dim's chunks in the whole, [outer, 2 * ways, half] (common/layout/HeadTail.h).
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

/// The operation of a collective over group `g` on the call's data, without its buffers.
CommOp opOf(const KernelCall &c, CommOp::Kind kind, const CommGroup *g) {
  CommOp op;
  op.kind = kind;
  op.type = dataType(c);
  op.group = g;
  return op;
}

/// all_gather, reduce_scatter and all_to_all: x and y of [outer, ways, chunk] or [outer,
/// chunk]. Along a head-tail dim (a group splitting a sequence for context parallelism) a
/// rank's chunk is two chunks of the whole: the whole side is reordered through a buffer of its
/// own, and the collective runs at once, whatever its event.
template <class P>
bool checkBlockCollective(KernelCall &c, const P &p, CommOp::Kind kind, args::Collective &a) {
  const int64_t outer = p.outer, chunk = p.chunk;
  const CommGroup *g = c.group(p.group);
  if (!g || !positive(c, {outer, chunk}))
    return false;
  const int64_t ways = g->size(), slice = outer * chunk, whole = outer * ways * chunk;
  const int64_t in = kind == CommOp::Kind::AllGather ? slice : whole;
  const int64_t out = kind == CommOp::Kind::ReduceScatter ? slice : whole;
  a.headTail = headtail::isHeadTail(p.group) && ways > 1 && kind != CommOp::Kind::AllToAll;
  if (a.headTail && chunk % 2 != 0)
    return c.fail("splits a dim head-tail over group " + p.group + " but its chunk of " +
                  std::to_string(chunk) + " elements is odd");
  if (!c.needIn(0, in) || !c.needOut(0, out) || !separate(c, in, out, false))
    return false;
  a.op = opOf(c, kind, g);
  a.op.outer = outer;
  a.op.chunk = chunk;
  a.alone = ways == 1;
  a.aloneBytes = bytesOf(c, slice);
  a.wholeBytes = bytesOf(c, whole);
  a.event = p.event;
  return true;
}

/// A head-tail block collective: the whole side in group-index order through a buffer.
bool launchHeadTail(KernelCall &c, const args::Collective &a, CommOp op) {
  if (!c.comm)
    return c.fail("needs a communicator, which a world of one rank does not have");
  CommMemory &mem = memoryOf(c);
  std::shared_ptr<void> buffer = mem.allocate(a.wholeBytes);
  if (!buffer)
    return c.fail("has no memory to reorder its head-tail blocks");
  char *blocks = static_cast<char *>(buffer.get());
  const int64_t ways = op.group->size();
  const size_t half = bytesOf(c, op.chunk / 2);
  if (op.kind == CommOp::Kind::ReduceScatter) {
    headTailOrder(mem, static_cast<const char *>(c.in[0]), blocks, op.outer, ways, half, false);
    op.x = blocks;
    return mem.finish(c.error) && c.comm->run(op, c.error);
  }
  op.y = blocks;
  if (!c.comm->run(op, c.error))
    return false;
  headTailOrder(mem, blocks, static_cast<char *>(c.out[0]), op.outer, ways, half, true);
  return mem.finish(c.error);
}

/// all_reduce and broadcast: x and y of n elements over group g; y may be x.
bool checkWhole(KernelCall &c, const CommGroup *g, int64_t n, CommOp::Kind kind,
                const std::optional<int64_t> &event, args::Collective &a) {
  if (!positive(c, {n}) || !c.needIn(0, n) || !c.needOut(0, n) || !separate(c, n, n, true))
    return false;
  a.op = opOf(c, kind, g);
  a.op.n = n;
  a.alone = g->size() == 1;
  a.aloneBytes = bytesOf(c, n);
  a.event = event;
  return true;
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
/// this rank: a sub-group the rank keeps for the calls that use it.
const CommGroup *membersOf(KernelCall &c, const CommGroup &g, const std::vector<int64_t> &members) {
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
  return &it.first->second;
}

/// A send or receive of n elements with `tag` to or from the group's `peer`.
template <class P> bool checkTransfer(KernelCall &c, const P &p, CommOp::Kind kind,
                                      args::Collective &a) {
  uint32_t peer = 0;
  if (!peerOf(c, p.group, p.peer, p.relative.value_or(0) != 0, peer) || !positive(c, {p.n}))
    return false;
  if (kind == CommOp::Kind::Send ? !c.needIn(0, p.n) : !c.needOut(0, p.n))
    return false;
  a.op = opOf(c, kind, nullptr);
  a.op.peer = peer;
  a.op.tag = p.tag;
  a.op.n = p.n;
  a.event = p.event;
  return true;
}

} // namespace

bool check(KernelCall &c, const catalogue::AllReduce &p, args::AllReduce &a) {
  const CommGroup *g = c.group(p.group);
  if (g && p.members)
    g = membersOf(c, *g, *p.members);
  if (!g || !checkWhole(c, g, p.n, CommOp::Kind::AllReduce, p.event, a))
    return false;
  a.op.reduce = p.op == catalogue::Reduction::Sum ? ReduceOp::Sum : ReduceOp::Max;
  return true;
}

bool check(KernelCall &c, const catalogue::AllGather &p, args::AllGather &a) {
  return checkBlockCollective(c, p, CommOp::Kind::AllGather, a);
}
bool check(KernelCall &c, const catalogue::ReduceScatter &p, args::ReduceScatter &a) {
  return checkBlockCollective(c, p, CommOp::Kind::ReduceScatter, a);
}
bool check(KernelCall &c, const catalogue::AllToAll &p, args::AllToAll &a) {
  return checkBlockCollective(c, p, CommOp::Kind::AllToAll, a);
}

bool check(KernelCall &c, const catalogue::Broadcast &p, args::Broadcast &a) {
  const CommGroup *g = c.group(p.group);
  if (!g)
    return false;
  if (p.root < 0 || p.root >= g->size())
    return c.fail("has root " + std::to_string(p.root) + " outside its group of " +
                  std::to_string(g->size()));
  if (!checkWhole(c, g, p.n, CommOp::Kind::Broadcast, p.event, a))
    return false;
  a.op.root = static_cast<uint32_t>(p.root);
  return true;
}

bool check(KernelCall &c, const catalogue::Send &p, args::Send &a) {
  return checkTransfer(c, p, CommOp::Kind::Send, a);
}
bool check(KernelCall &c, const catalogue::Recv &p, args::Recv &a) {
  return checkTransfer(c, p, CommOp::Kind::Recv, a);
}

bool check(KernelCall &, const catalogue::Wait &p, args::Wait &a) {
  // Operands, if any, name the buffers the collective uses (so that the memory plan keeps
  // them until here); the wait itself reads and writes nothing.
  a.event = p.event;
  return true;
}

bool launchCollective(KernelCall &c, const args::Collective &a) {
  if (a.alone)
    return copyAlone(c, a.aloneBytes);
  CommOp op = a.op;
  if (!c.in.empty())
    op.x = c.in[0];
  if (!c.out.empty())
    op.y = c.out[0];
  if (a.headTail)
    return launchHeadTail(c, a, op);
  return issue(c, op, a.event);
}

bool launchWait(KernelCall &c, const args::Wait &a) {
  // Absent: the collective ran to completion when it was issued (a group of one, or a
  // synchronous run); the executor checked at load that it was started.
  auto it = c.rank->events.find(a.event);
  if (it == c.rank->events.end())
    return true;
  Communicator::Ticket ticket = it->second;
  c.rank->events.erase(it);
  return c.comm->wait(ticket, c.error);
}

} // namespace tessel::rt
