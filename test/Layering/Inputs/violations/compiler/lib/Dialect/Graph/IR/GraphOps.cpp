// A dialect that calls a CPU kernel.
#include "kernels/cpu/CpuKernels.h"
