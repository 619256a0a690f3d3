//===- CudaCommunicatorTest.cpp - Collectives between GPU ranks -----------===//
//
// Ranks as threads sharing one GPU (a LocalCommunicator over the CUDA devices' CommMemory)
// against ranks as threads on the CPU: every operation on random buffers, the same bits. NCCL
// between two GPUs (two threads, each one rank, meeting over the torchrun rendezvous on this
// host) against the same host results: with two ranks a sum has one order, so the bits match
// too. Each operation runs on f32 and on 16-bit data (bf16 and f16 elements moved as bits, summed
// in f32 and rounded once). Without a GPU every test is skipped with "skipped: no CUDA device"; the
// NCCL test also needs two GPUs and says so where there are fewer.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/comm/NcclCommunicator.h"
#include "runtime/comm/Rendezvous.h"
#include "runtime/device/Device.h"

#include "common/support/Float16.h"
#include "test/unit/CommGroups.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <thread>

using namespace tessel;
using namespace tessel::rt;

namespace {

using Floats = std::vector<float>;
using Bytes = std::vector<uint8_t>;
using planfile::DType;

using test::worldGroup;

/// Values for a collective's buffers, the same for the same seed.
Floats randomFloats(size_t n, uint32_t seed) { return test::randomFloats(n, -3.0f, 3.0f, seed); }

/// One operation as every rank issues it: the kind, sizes, and each rank's input length.
struct Case {
  std::string name;
  CommOp::Kind kind;
  ReduceOp reduce = ReduceOp::Sum;
  int64_t n = 0, outer = 0, chunk = 0;
  uint32_t root = 0;
  DType type = DType::F32;
};

/// Bytes of `elements` of the case's type.
size_t bytesOf(const Case &c, int64_t elements) {
  return static_cast<size_t>(elements) * planfile::dtypeBytes(c.type);
}

int64_t inElements(const Case &c, uint32_t ways) {
  switch (c.kind) {
  case CommOp::Kind::AllGather:
    return c.outer * c.chunk;
  case CommOp::Kind::ReduceScatter:
  case CommOp::Kind::AllToAll:
    return c.outer * ways * c.chunk;
  default:
    return c.n;
  }
}

int64_t outElements(const Case &c, uint32_t ways) {
  switch (c.kind) {
  case CommOp::Kind::AllGather:
  case CommOp::Kind::AllToAll:
    return c.outer * ways * c.chunk;
  case CommOp::Kind::ReduceScatter:
    return c.outer * c.chunk;
  default:
    return c.n;
  }
}

std::vector<Case> cases() {
  return {
      {"all_reduce sum", CommOp::Kind::AllReduce, ReduceOp::Sum, 1003},
      {"all_reduce max", CommOp::Kind::AllReduce, ReduceOp::Max, 517},
      {"all_gather", CommOp::Kind::AllGather, ReduceOp::Sum, 0, 3, 37},
      {"reduce_scatter", CommOp::Kind::ReduceScatter, ReduceOp::Sum, 0, 2, 41},
      {"all_to_all", CommOp::Kind::AllToAll, ReduceOp::Sum, 0, 2, 13},
      {"broadcast", CommOp::Kind::Broadcast, ReduceOp::Sum, 301, 0, 0, 1},
      {"send/recv chain", CommOp::Kind::Send, ReduceOp::Sum, 77},
      {"bf16 all_reduce sum", CommOp::Kind::AllReduce, ReduceOp::Sum, 1003, 0, 0, 0, DType::BF16},
      {"f16 all_reduce max", CommOp::Kind::AllReduce, ReduceOp::Max, 517, 0, 0, 0, DType::F16},
      {"bf16 all_gather", CommOp::Kind::AllGather, ReduceOp::Sum, 0, 3, 37, 0, DType::BF16},
      {"bf16 reduce_scatter", CommOp::Kind::ReduceScatter, ReduceOp::Sum, 0, 2, 41, 0, DType::BF16},
      {"f16 all_to_all", CommOp::Kind::AllToAll, ReduceOp::Sum, 0, 2, 13, 0, DType::F16},
      {"bf16 broadcast", CommOp::Kind::Broadcast, ReduceOp::Sum, 301, 0, 0, 1, DType::BF16},
      {"bf16 send/recv chain", CommOp::Kind::Send, ReduceOp::Sum, 77, 0, 0, 0, DType::BF16},
  };
}

/// Runs `c` on every rank of `comms` (one thread each); x and y are each rank's buffers, in
/// whatever memory the communicators use.
void runCase(const Case &c, std::vector<Communicator *> comms, const std::vector<void *> &x,
             const std::vector<void *> &y, std::vector<std::string> &errors) {
  const uint32_t size = static_cast<uint32_t>(comms.size());
  std::vector<CommGroup> groups;
  for (uint32_t r = 0; r < size; ++r)
    groups.push_back(worldGroup(size, r));
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      Communicator &comm = *comms[r];
      std::string &error = errors[r];
      if (c.kind == CommOp::Kind::Send) {
        // A chain, as pipeline stages pass activations: each rank but the last sends to the
        // next, each but the first receives from the one before. (Not a ring: NCCL's sends
        // and receives on one stream, ungrouped, would wait for each other.)
        Communicator::Ticket sent = 0;
        if (r + 1 < size) {
          CommOp op;
          op.kind = CommOp::Kind::Send;
          op.type = c.type;
          op.peer = r + 1;
          op.tag = 5;
          op.n = c.n;
          op.x = x[r];
          sent = comm.start(op);
        }
        if (r > 0) {
          CommOp op;
          op.kind = CommOp::Kind::Recv;
          op.type = c.type;
          op.peer = r - 1;
          op.tag = 5;
          op.n = c.n;
          op.y = y[r];
          if (!comm.run(op, error))
            return;
        }
        if (sent)
          comm.wait(sent, error);
        return;
      }
      CommOp op;
      op.kind = c.kind;
      op.type = c.type;
      op.group = &groups[r];
      op.reduce = c.reduce;
      op.n = c.n;
      op.outer = c.outer;
      op.chunk = c.chunk;
      op.root = c.root;
      op.x = x[r];
      op.y = y[r];
      comm.run(op, error);
    });
  for (std::thread &t : threads)
    t.join();
}

/// Every rank's input for case `c`, in its type, a NaN in one all_reduce max input.
std::vector<Bytes> inputsOf(const Case &c, uint32_t size) {
  std::vector<Bytes> in;
  for (uint32_t r = 0; r < size; ++r) {
    Floats values = randomFloats(static_cast<size_t>(inElements(c, size)), 100 * r + 7);
    if (c.reduce == ReduceOp::Max && r == size - 1)
      values[3] = std::numeric_limits<float>::quiet_NaN();
    Bytes bytes(bytesOf(c, static_cast<int64_t>(values.size())));
    if (c.type == DType::F32)
      std::memcpy(bytes.data(), values.data(), bytes.size());
    for (size_t i = 0; c.type != DType::F32 && i < values.size(); ++i) {
      const uint16_t h = c.type == DType::BF16 ? floatToBf16(values[i]) : floatToHalf(values[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
    in.push_back(std::move(bytes));
  }
  return in;
}

/// The results of `c` on ranks as threads on the CPU.
std::vector<Bytes> onHost(const Case &c, const std::vector<Bytes> &in) {
  const uint32_t size = static_cast<uint32_t>(in.size());
  auto world = LocalCommunicator::createWorld(size);
  std::vector<Bytes> x = in, y(size, Bytes(bytesOf(c, outElements(c, size))));
  std::vector<Communicator *> comms;
  std::vector<void *> xs, ys;
  for (uint32_t r = 0; r < size; ++r) {
    comms.push_back(world[r].get());
    xs.push_back(x[r].data());
    ys.push_back(y[r].data());
  }
  std::vector<std::string> errors(size);
  runCase(c, comms, xs, ys, errors);
  for (const std::string &e : errors)
    EXPECT_EQ(e, "") << c.name << " on the CPU";
  return y;
}

void expectSameBits(const Case &c, const Bytes &got, const Bytes &want, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const size_t size = planfile::dtypeBytes(c.type);
  for (size_t i = 0; i < got.size(); i += size)
    ASSERT_EQ(std::memcmp(&got[i], &want[i], size), 0) << what << ": element " << i / size;
}

class CudaCommunicator : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if ((gpus = cudaDeviceCount(why)) == 0)
      GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  }
  int gpus = 0;
};

TEST_F(CudaCommunicator, RanksSharingOneGpuGiveTheCpuBits) {
  for (uint32_t size : {2u, 3u, 4u})
    for (const Case &c : cases()) {
      const std::string what = c.name + " on " + std::to_string(size) + " ranks";
      const std::vector<Bytes> in = inputsOf(c, size);
      const std::vector<Bytes> want = onHost(c, in);
      // Every rank its own CUDA device on GPU 0, as Ranks makes them.
      std::vector<std::unique_ptr<Device>> devices;
      std::vector<CommMemory *> memories;
      std::vector<std::unique_ptr<DeviceBuffer>> xb, yb;
      std::vector<void *> xs, ys;
      std::string error;
      for (uint32_t r = 0; r < size; ++r) {
        devices.push_back(createCudaDevice(0, error));
        ASSERT_TRUE(devices.back()) << error;
        memories.push_back(&devices.back()->commMemory());
        xb.push_back(devices.back()->allocate(in[r].size(), error));
        yb.push_back(devices.back()->allocate(want[r].size(), error));
        ASSERT_TRUE(xb.back() && yb.back()) << error;
        devices.back()->upload(xb.back()->address(), in[r].data(), in[r].size());
        xs.push_back(xb.back()->address());
        ys.push_back(yb.back()->address());
      }
      auto world = LocalCommunicator::createWorld(size, memories);
      std::vector<Communicator *> comms;
      for (auto &w : world)
        comms.push_back(w.get());
      std::vector<std::string> errors(size);
      runCase(c, comms, xs, ys, errors);
      for (uint32_t r = 0; r < size; ++r) {
        ASSERT_EQ(errors[r], "") << what << ", rank " << r;
        Bytes got(want[r].size());
        devices[r]->download(got.data(), ys[r], got.size());
        expectSameBits(c, got, want[r], what + ", rank " + std::to_string(r));
      }
    }
}

/// A TCP port nothing listens on now, for the rendezvous.
uint16_t freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

/// Every case, then a broadcast of host memory, over NCCL (one communicator per rank, each on
/// its own device) against the host's results.
void expectNcclGivesTheCpuBits(std::vector<std::unique_ptr<Device>> &devices,
                               std::vector<std::unique_ptr<Communicator>> &comms) {
  const uint32_t size = static_cast<uint32_t>(comms.size());
  for (Case c : cases()) {
    c.root %= size; // a broadcast's root, in a world as small as one
    const std::vector<Bytes> in = inputsOf(c, size);
    const std::vector<Bytes> want = onHost(c, in);
    std::vector<std::unique_ptr<DeviceBuffer>> xb, yb;
    std::vector<void *> xs, ys;
    std::vector<Communicator *> raw;
    std::string error;
    for (uint32_t r = 0; r < size; ++r) {
      xb.push_back(devices[r]->allocate(in[r].size(), error));
      yb.push_back(devices[r]->allocate(want[r].size(), error));
      ASSERT_TRUE(xb.back() && yb.back()) << error;
      devices[r]->upload(xb.back()->address(), in[r].data(), in[r].size());
      xs.push_back(xb.back()->address());
      ys.push_back(yb.back()->address());
      raw.push_back(comms[r].get());
    }
    std::vector<std::string> caseErrors(size);
    runCase(c, raw, xs, ys, caseErrors);
    for (uint32_t r = 0; r < size; ++r) {
      ASSERT_EQ(caseErrors[r], "") << c.name << ", rank " << r;
      Bytes got(want[r].size());
      devices[r]->download(got.data(), ys[r], got.size());
      expectSameBits(c, got, want[r], "NCCL " + c.name + ", rank " + std::to_string(r));
    }
  }
  // The host loop's broadcast of host memory goes through the GPU.
  Case broadcast{"host broadcast", CommOp::Kind::Broadcast, ReduceOp::Sum, 33, 0, 0, 0};
  std::vector<Bytes> host = inputsOf(broadcast, size);
  std::vector<void *> hx;
  std::vector<Communicator *> raw;
  for (uint32_t r = 0; r < size; ++r) {
    hx.push_back(host[r].data());
    raw.push_back(comms[r].get());
  }
  std::vector<std::string> hostErrors(size);
  runCase(broadcast, raw, hx, hx, hostErrors);
  for (uint32_t r = 0; r < size; ++r) {
    EXPECT_EQ(hostErrors[r], "") << "host broadcast, rank " << r;
    expectSameBits(broadcast, host[r], host[0], "host broadcast, rank " + std::to_string(r));
  }
}

TEST_F(CudaCommunicator, NcclBetweenTwoGpusGivesTheCpuBits) {
  if (!nccl::available())
    GTEST_SKIP() << "skipped: this runtime was built without NCCL";
  if (gpus < 2)
    GTEST_SKIP() << "skipped: NCCL between GPUs needs two CUDA devices, and this machine has "
                 << gpus;
  const uint32_t size = 2;
  const uint16_t port = freePort();
  std::vector<std::unique_ptr<Device>> devices(size);
  std::vector<std::unique_ptr<Communicator>> comms(size);
  std::vector<std::string> errors(size);
  {
    std::vector<std::thread> threads;
    for (uint32_t r = 0; r < size; ++r)
      threads.emplace_back([&, r] {
        devices[r] = createCudaDevice(static_cast<int>(r), errors[r]);
        if (!devices[r])
          return;
        rendezvous::Place place;
        place.rank = place.localRank = r;
        place.size = size;
        place.masterAddr = "127.0.0.1";
        place.masterPort = port;
        comms[r] = nccl::createCommunicator(
            static_cast<int>(r), r, size,
            [&](std::vector<char> &id, std::string &why) {
              return rendezvous::exchange(place, id, 60, why);
            },
            {worldGroup(size, r)}, {}, errors[r]);
      });
    for (std::thread &t : threads)
      t.join();
  }
  for (uint32_t r = 0; r < size; ++r)
    ASSERT_TRUE(comms[r]) << "rank " << r << ": " << errors[r];
  expectNcclGivesTheCpuBits(devices, comms);
}

// A world of one process on one GPU: NCCL's id, the world, a split per mesh axis (two axes of
// size one, as a plan of one rank makes them), every collective and the host staging run, so
// the NCCL path is exercised on a machine with one GPU. A sum over one rank is the input, so
// the bits match.
TEST_F(CudaCommunicator, NcclWorldOfOneGivesTheCpuBits) {
  if (!nccl::available())
    GTEST_SKIP() << "skipped: this runtime was built without NCCL";
  std::vector<std::unique_ptr<Device>> devices(1);
  std::vector<std::unique_ptr<Communicator>> comms(1);
  std::string error;
  devices[0] = createCudaDevice(0, error);
  ASSERT_TRUE(devices[0]) << error;
  comms[0] = nccl::createCommunicator(
      0, 0, 1, [](std::vector<char> &, std::string &) { return true; },
      {worldGroup(1, 0), worldGroup(1, 0)}, {5}, error);
  ASSERT_TRUE(comms[0]) << error;
  expectNcclGivesTheCpuBits(devices, comms);
}

} // namespace
