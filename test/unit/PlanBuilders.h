//===- PlanBuilders.h - Small pieces of hand-written plans for tests -*- C++ -*-===//
#ifndef TESSEL_TEST_UNIT_PLANBUILDERS_H
#define TESSEL_TEST_UNIT_PLANBUILDERS_H

#include "common/plan/PlanFile.h"

#include <string>
#include <utility>
#include <vector>

namespace tessel::test {

/// A kernel call with its operands and parameters, attributed to spec location `loc`.
inline planfile::Instr makeInstr(const std::string &kernel, std::vector<planfile::BufferRef> ins,
                                 std::vector<planfile::BufferRef> outs,
                                 std::vector<planfile::Attr> attrs, const std::string &loc) {
  planfile::Instr i;
  i.kernel = kernel;
  i.inputs = std::move(ins);
  i.outputs = std::move(outs);
  i.attrs = std::move(attrs);
  i.loc = loc;
  return i;
}

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_PLANBUILDERS_H
