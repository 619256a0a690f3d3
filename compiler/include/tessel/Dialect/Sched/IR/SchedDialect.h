//===- SchedDialect.h - The pipeline schedule dialect -----------*- C++ -*-===//
#ifndef TESSEL_DIALECT_SCHED_IR_SCHEDDIALECT_H
#define TESSEL_DIALECT_SCHED_IR_SCHEDDIALECT_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"

#include "tessel/Dialect/Sched/IR/SchedOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "tessel/Dialect/Sched/IR/SchedOps.h.inc"

#endif // TESSEL_DIALECT_SCHED_IR_SCHEDDIALECT_H
