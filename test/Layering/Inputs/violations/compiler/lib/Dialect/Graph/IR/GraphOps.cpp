// A dialect that calls a CPU kernel and reaches up into its own passes.
#include "kernels/cpu/CpuKernels.h"
#include "mlir/IR/Builders.h"
#include "tessel/Dialect/Graph/Transforms/Passes.h"
