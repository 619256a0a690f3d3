// A CUDA kernel that borrows the CPU backend's header.

#include "kernels/cpu/CpuKernels.h"
#include "kernels/KernelTypes.h"
