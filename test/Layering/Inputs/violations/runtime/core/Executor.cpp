// A runtime file that reaches into the compiler and MLIR.
#include "common/plan/PlanFile.h"
#include "mlir/IR/Builders.h"
#include "tessel/Dialect/Plan/IR/PlanDialect.h"
