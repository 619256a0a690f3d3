// A runtime file that reaches into the compiler and MLIR.

#include "tessel/Dialect/Plan/IR/PlanDialect.h"
#include "mlir/IR/Builders.h"
#include "common/PlanFile.h"
