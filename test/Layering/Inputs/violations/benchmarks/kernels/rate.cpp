// A kernel benchmark that reaches into the compiler.
#include "kernels/cpu/CpuKernels.h"
#include "tessel/Analysis/StepTime.h"
