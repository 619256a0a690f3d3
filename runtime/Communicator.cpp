//===- Communicator.cpp - The synchronous forms of the operations ---------===//

#include "runtime/Communicator.h"

namespace tessel::rt {

const char *commKindName(CommOp::Kind kind) {
  switch (kind) {
  case CommOp::Kind::AllReduce:
    return "all_reduce";
  case CommOp::Kind::AllGather:
    return "all_gather";
  case CommOp::Kind::ReduceScatter:
    return "reduce_scatter";
  case CommOp::Kind::AllToAll:
    return "all_to_all";
  case CommOp::Kind::Broadcast:
    return "broadcast";
  case CommOp::Kind::Send:
    return "send";
  case CommOp::Kind::Recv:
    return "recv";
  }
  return "?";
}

bool Communicator::allReduce(const CommGroup &group, ReduceOp reduce, const float *x, float *y,
                             int64_t n, std::string &error) {
  CommOp op;
  op.kind = CommOp::Kind::AllReduce;
  op.group = &group;
  op.reduce = reduce;
  op.n = n;
  op.x = x;
  op.y = y;
  return run(op, error);
}

namespace {

CommOp blocks(CommOp::Kind kind, const CommGroup &group, const void *x, void *y, int64_t outer,
              int64_t chunk) {
  CommOp op;
  op.kind = kind;
  op.group = &group;
  op.outer = outer;
  op.chunk = chunk;
  op.x = x;
  op.y = y;
  return op;
}

} // namespace

bool Communicator::allGather(const CommGroup &group, const void *x, void *y, int64_t outer,
                             int64_t chunk, std::string &error) {
  return run(blocks(CommOp::Kind::AllGather, group, x, y, outer, chunk), error);
}

bool Communicator::reduceScatter(const CommGroup &group, const float *x, float *y, int64_t outer,
                                 int64_t chunk, std::string &error) {
  return run(blocks(CommOp::Kind::ReduceScatter, group, x, y, outer, chunk), error);
}

bool Communicator::allToAll(const CommGroup &group, const void *x, void *y, int64_t outer,
                            int64_t chunk, std::string &error) {
  return run(blocks(CommOp::Kind::AllToAll, group, x, y, outer, chunk), error);
}

bool Communicator::broadcast(const CommGroup &group, uint32_t root, const void *x, void *y,
                             int64_t n, std::string &error) {
  CommOp op;
  op.kind = CommOp::Kind::Broadcast;
  op.group = &group;
  op.root = root;
  op.n = n;
  op.x = x;
  op.y = y;
  return run(op, error);
}

bool Communicator::send(uint32_t peer, int64_t tag, const void *x, int64_t n, std::string &error) {
  CommOp op;
  op.kind = CommOp::Kind::Send;
  op.peer = peer;
  op.tag = tag;
  op.n = n;
  op.x = x;
  return run(op, error);
}

bool Communicator::recv(uint32_t peer, int64_t tag, void *y, int64_t n, std::string &error) {
  CommOp op;
  op.kind = CommOp::Kind::Recv;
  op.peer = peer;
  op.tag = tag;
  op.n = n;
  op.y = y;
  return run(op, error);
}

} // namespace tessel::rt
