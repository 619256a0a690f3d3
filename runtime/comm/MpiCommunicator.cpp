//===- MpiCommunicator.cpp - Ranks as MPI processes -----------------------===//
//
// MPI started once per process, the process's place in the job and on its host, the job ended
// at once on a failure, and the communicator made and ended. Without MPI each of these says
// there is none. What the communicator does is in MpiWaits.cpp, MpiCollectives.cpp and
// MpiPointToPoint.cpp (MpiCommunicatorImpl.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiCommunicator.h"

#include <cstdlib>

#ifdef TESSEL_HAVE_MPI
#include "runtime/comm/MpiCommunicatorImpl.h"
#endif

namespace tessel::rt::mpi {

bool launched() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(var))
      return true;
  return false;
}

#ifndef TESSEL_HAVE_MPI

bool available() { return false; }
bool initialize(std::string &error) {
  error = "this runtime was built without MPI, so it cannot run as MPI processes; run the "
          "program without mpirun to run its ranks as threads";
  return false;
}
uint32_t processRank() { return 0; }
uint32_t processCount() { return 1; }
uint32_t processesOnThisHost() { return 1; }
uint32_t processIndexOnThisHost() { return 0; }
void finalize() {}
void abortJob(int code) { std::_Exit(code); }
std::unique_ptr<Communicator> createCommunicator(std::string &error) {
  initialize(error);
  return nullptr;
}

#else

namespace {

bool initialized = false;
uint32_t worldRank = 0, worldSize = 1, hostSize = 1, hostRank = 0;

} // namespace

namespace detail {

MpiCommunicator::MpiCommunicator(uint32_t rank, uint32_t size, MPI_Comm control)
    : rank_(rank), size_(size), control_(control) {
  startWorker();
}

MpiCommunicator::~MpiCommunicator() {
  stopWorker();
  for (Answer &a : answers_)
    MPI_Request_free(&a.request);
  // Buffered sends still in flight complete once their receivers take them.
  for (PendingSend &s : sends_)
    MPI_Waitall(static_cast<int>(s.requests.size()), s.requests.data(), MPI_STATUSES_IGNORE);
}

} // namespace detail

bool available() { return true; }

bool initialize(std::string &error) {
  if (initialized)
    return true;
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    error = "MPI could not be initialised";
    return false;
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    error = "this MPI library cannot be called from the communication thread (thread level " +
            std::to_string(provided) + ")";
    return false;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  worldRank = static_cast<uint32_t>(rank);
  worldSize = static_cast<uint32_t>(size);
  MPI_Comm host;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host) ==
      MPI_SUCCESS) {
    int onHost = 1, here = 0;
    MPI_Comm_size(host, &onHost);
    MPI_Comm_rank(host, &here);
    hostSize = static_cast<uint32_t>(onHost);
    hostRank = static_cast<uint32_t>(here);
    MPI_Comm_free(&host);
  }
  initialized = true;
  return true;
}

uint32_t processRank() { return worldRank; }
uint32_t processCount() { return worldSize; }
uint32_t processesOnThisHost() { return hostSize; }
uint32_t processIndexOnThisHost() { return hostRank; }

void finalize() {
  if (!initialized)
    return;
  MPI_Finalize();
  initialized = false;
}

void abortJob(int code) {
  if (initialized)
    MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

std::unique_ptr<Communicator> createCommunicator(std::string &error) {
  if (!initialize(error))
    return nullptr;
  MPI_Comm control;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &control) != MPI_SUCCESS) {
    error = "MPI could not make the communicator's control channel";
    return nullptr;
  }
  MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN);
  return std::make_unique<detail::MpiCommunicator>(worldRank, worldSize, control);
}

#endif

} // namespace tessel::rt::mpi
