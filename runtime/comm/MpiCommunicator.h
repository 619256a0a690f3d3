//===- MpiCommunicator.h - Ranks as MPI processes ---------------*- C++ -*-===//
//
// When a compiled model is started by an MPI launcher (`mpirun -np 4 ./model`), each process
// is one rank of the plan's world and talks to the others through MPI over whatever network
// MPI was given: shared memory on one host, TCP between hosts. The same executable run
// without a launcher runs its ranks as threads (LocalCommunicator).
//
// The collectives are built from point-to-point messages so that a sum adds the members'
// values in group-index order, exactly as LocalCommunicator does: a run gives the same bits
// whether its ranks are threads or processes. An all-reduce moves each member's share twice
// (a reduce-scatter, then an all-gather), like a ring, but reduces in a fixed order.
//
// A failure is final: the failing process prints its reason naming the rank and ends the
// whole job (MPI_Abort), so no process is left waiting for one that stopped. A process that
// dies outright is noticed by the launcher, which ends the others.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_COMM_MPICOMMUNICATOR_H
#define TESSEL_RUNTIME_COMM_MPICOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <memory>
#include <string>

namespace tessel::rt::mpi {

/// Whether this runtime was built with MPI.
bool available();
/// Whether an MPI launcher started this process (it sets OMPI_COMM_WORLD_SIZE, PMIX_RANK or
/// PMI_SIZE in the environment).
bool launched();
/// Initialises MPI once; false with the reason when it cannot.
bool initialize(std::string &error);
/// This process's rank and the number of processes; valid after initialize().
uint32_t processRank();
uint32_t processCount();
/// The processes of the job on this host (sharing its cores), this one included; 1 before
/// initialize().
uint32_t processesOnThisHost();
/// This process's index among those on this host (its GPU, with --device cuda); 0 before
/// initialize().
uint32_t processIndexOnThisHost();
/// Waits for every process, then shuts MPI down; after a successful run.
void finalize();
/// Ends every process of the job with `code`, at once.
[[noreturn]] void abortJob(int code);

/// This process's end of the world, where rank = process rank. MPI must be initialised.
std::unique_ptr<Communicator> createCommunicator(std::string &error);

} // namespace tessel::rt::mpi

#endif // TESSEL_RUNTIME_COMM_MPICOMMUNICATOR_H
