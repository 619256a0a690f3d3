// A runtime file that reaches into the compiler and MLIR.

#include "Plan/PlanDialect.h"
#include "mlir/IR/Builders.h"
#include "common/PlanFile.h"
