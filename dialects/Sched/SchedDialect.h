//===- SchedDialect.h - The pipeline schedule dialect -----------*- C++ -*-===//
#ifndef TESSEL_DIALECT_SCHED_SCHEDDIALECT_H
#define TESSEL_DIALECT_SCHED_SCHEDDIALECT_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"

#include "Sched/SchedOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "Sched/SchedOps.h.inc"

#endif // TESSEL_DIALECT_SCHED_SCHEDDIALECT_H
