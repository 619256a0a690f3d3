// A new compiler folder no rule names.
#include "mlir/IR/Builders.h"
