//===- RendezvousMain.cpp - tessel-rendezvous: can the ranks meet? --------===//
//
// Runs the exchange a runner under torchrun does before it creates NCCL's communicators
// (comm/Rendezvous.h), without a GPU: rank 0 hands a random blob of NCCL's unique-id size to
// every other rank, and each prints a digest of what it holds, so that a job's processes can be
// checked to reach each other (and the tests can start several with the variables set).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Rendezvous.h"
#include "runtime/support/CommandLine.h"

#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace tessel::rt;

int main(int argc, char **argv) {
  cli::Parser parser(argv[0], "",
                     "Meets the other processes of a job as a runner under torchrun does (RANK, "
                     "LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; "
                     "TESSEL_RENDEZVOUS_TIMEOUT seconds): rank 0 hands a random 128-byte blob "
                     "to every other rank, and each prints its digest.");
  if (std::optional<int> exit = parser.parse(argc, argv))
    return *exit;
  rendezvous::Place place;
  std::string error;
  double timeout = 0;
  if (!rendezvous::readPlace(place, error) || !rendezvous::timeoutSeconds(timeout, error)) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], error.c_str());
    return 2;
  }
  std::vector<char> blob;
  if (place.rank == 0) {
    std::random_device random;
    for (int i = 0; i < 128; ++i)
      blob.push_back(static_cast<char>(random()));
  }
  if (!rendezvous::exchange(place, blob, timeout, error)) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], error.c_str());
    return 1;
  }
  // FNV-1a: the same bytes on every rank give the same digest.
  uint64_t digest = 14695981039346656037ull;
  for (char c : blob)
    digest = (digest ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  std::printf("rank %u of %u (local rank %u): %zu bytes, digest %016llx\n", place.rank, place.size,
              place.localRank, blob.size(), static_cast<unsigned long long>(digest));
  return 0;
}
