//===- NoNccl.cpp - The NCCL communicator of a build without NCCL ---------===//
//
// Built in place of NcclCommunicator.cpp and NcclOperations.cpp where CMake found no CUDA
// toolkit or no nccl.h: a run of one process per GPU cannot be made, and asking for one says
// why.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/NcclCommunicator.h"

namespace tessel::rt::nccl {

bool available() { return false; }

std::unique_ptr<Communicator> createCommunicator(int, uint32_t, uint32_t, const IdExchange &,
                                                 const std::vector<std::optional<CommGroup>> &,
                                                 const std::vector<int64_t> &, std::string &error) {
  error = "this runtime was built without NCCL (CMake found no CUDA toolkit or no nccl.h), so "
          "it cannot run one process per GPU; run the ranks as threads (no launcher)";
  return nullptr;
}

} // namespace tessel::rt::nccl
