//===- Kernels.cpp - tessel kernels ---------------------------------------===//
//
// `tessel kernels` prints the kernel catalogue: every kernel a plan can call, its operands and
// parameters and what it computes; with --markdown, the tables of docs/plan-format.md, which
// test/Docs/kernel-table.test holds to the catalogue.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"

#include "common/catalogue/KernelCatalogue.h"

using namespace llvm;

namespace tessel::driver {

int runKernels() {
  outs() << (kernelsMarkdown ? catalogue::markdownTable() : catalogue::textTable());
  return 0;
}

} // namespace tessel::driver
