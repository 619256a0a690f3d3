// Shared code that depends on the runtime, on OpenMP, MPI and CUDA, and on a common/ folder
// above its own.
#include "common/memory/MemoryProfile.h"
#include "common/support/Checksum.h"
#include "runtime/support/Json.h"
#include <cuda_runtime.h>
#include <mpi.h>
#include <omp.h>
#include <string>
