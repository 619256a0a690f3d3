// A device-neutral runtime file that reaches back up into the executor and into a backend.
#include "kernels/cpu/CpuKernels.h"
#include "runtime/comm/Communicator.h"
#include "runtime/core/Executor.h"
