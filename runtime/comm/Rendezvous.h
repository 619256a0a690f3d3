//===- Rendezvous.h - One blob from rank 0 to every process, over TCP -*- C++ -*-===//
//
// How the processes of a job started by torchrun (or any launcher that sets its variables:
// RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) find each other before NCCL can:
// rank 0 listens on MASTER_ADDR:MASTER_PORT, every other rank connects and says who it is, and
// once all have come rank 0 hands each of them the same blob (NCCL's unique id, 128 bytes).
// Under mpirun the blob goes over MPI instead; this exchange needs neither MPI nor CUDA.
//
// Nothing waits forever: a rank retries its connection while rank 0 is not yet listening, up
// to the deadline; rank 0 waits for the others up to the same deadline, then names the ranks
// that never came and tells those that did. A rank that disagrees about the world (another
// WORLD_SIZE, a rank already taken) fails the exchange for every rank, with the reason.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_COMM_RENDEZVOUS_H
#define TESSEL_RUNTIME_COMM_RENDEZVOUS_H

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::rt::rendezvous {

/// This process's place in a job, as the launcher's variables give it.
struct Place {
  uint32_t rank = 0, localRank = 0, size = 1;
  std::string masterAddr;  ///< A host name or an IPv4/IPv6 address.
  uint16_t masterPort = 0; ///< Where rank 0 listens for the exchange.
};

/// Whether the torchrun variables name a job of several processes (WORLD_SIZE > 1, or RANK set
/// with a WORLD_SIZE): the runner then runs one rank per process.
bool launched();

/// Reads and checks the variables; false with a message that names the variable that is
/// missing or bad. LOCAL_RANK defaults to RANK (one host). The exchange's port is MASTER_PORT,
/// or the one after it where torchrun's agent holds MASTER_PORT with its own store
/// (TORCHELASTIC_USE_AGENT_STORE=True, its static rendezvous); TESSEL_RENDEZVOUS_PORT, where
/// set, names it instead.
bool readPlace(Place &place, std::string &error);

/// How long a rank waits for the others: TESSEL_RENDEZVOUS_TIMEOUT seconds, default 120; false
/// with the reason where the variable is not a positive number.
bool timeoutSeconds(double &seconds, std::string &error);

/// Rank 0: hands `blob` to every other rank. The others: receive it into `blob` (which their
/// caller leaves empty). Every rank of `place.size` calls this once; false with the reason on
/// any rank that does not end with the blob.
bool exchange(const Place &place, std::vector<char> &blob, double timeoutSeconds,
              std::string &error);

} // namespace tessel::rt::rendezvous

#endif // TESSEL_RUNTIME_COMM_RENDEZVOUS_H
