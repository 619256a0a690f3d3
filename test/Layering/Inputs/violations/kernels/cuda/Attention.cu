// A CUDA kernel that borrows the CPU backend's header and a library no rule names.
#include "kernels/KernelTypes.h"
#include "kernels/cpu/CpuKernels.h"
#include <boost/format.hpp>
