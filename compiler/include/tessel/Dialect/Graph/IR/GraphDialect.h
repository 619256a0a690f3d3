//===- GraphDialect.h - The graph dialect -----------------------*- C++ -*-===//
#ifndef TESSEL_DIALECT_GRAPH_IR_GRAPHDIALECT_H
#define TESSEL_DIALECT_GRAPH_IR_GRAPHDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"

#include "tessel/Dialect/Settings/IR/SettingsDialect.h"

#include "tessel/Dialect/Graph/IR/GraphOpsDialect.h.inc"

#include "tessel/Dialect/Graph/IR/GraphEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tessel/Dialect/Graph/IR/GraphAttrs.h.inc"

#endif // TESSEL_DIALECT_GRAPH_IR_GRAPHDIALECT_H
