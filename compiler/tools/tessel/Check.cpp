//===- Check.cpp - tessel check -------------------------------------------===//
//
// `tessel check FILE.model` reports every error in a spec, or one line that sums it up:
// parameters, ops, layers, ranks and accumulation steps. It lowers the model as far as compile
// does, to the plan, so that a file it accepts compiles.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"

using namespace llvm;

namespace tessel::driver {

namespace {

/// A count as people say it: 124M, 1.50B.
std::string humanCount(double n) {
  const char *units[] = {"", "K", "M", "B", "T"};
  int u = 0;
  while (n >= 1000 && u < 4) {
    n /= 1000;
    ++u;
  }
  char buf[32];
  snprintf(buf, sizeof buf, u ? "%.2f%s" : "%.0f%s", n, units[u]);
  return buf;
}

} // namespace

int runCheck(const char *argv0) {
  Frontend fe;
  if (!load(fe, argv0)) { // The file could not be read: an I/O error, not one in the input.
    finish(fe);
    return 2;
  }
  auto program = analyze(*fe.module, fe.sources, fe.diags, fe.options);
  if (!program)
    return finish(fe);
  finish(fe); // Warnings.
  // What compile would refuse, check refuses: the layout is only known to work once the
  // passes have partitioned it, split its pipeline and planned it.
  planfile::Plan plan;
  if (int rc = lower(*program, fe, Emit::PlanFile, nullptr, &plan))
    return rc;
  double params = 0;
  size_t paramCount = 0;
  for (const Op &op : program->forward.ops) {
    if (op.name != "param")
      continue;
    double n = 1;
    for (const NamedDim &d : op.type.dims)
      n *= static_cast<double>(d.size);
    params += n;
    ++paramCount;
  }
  outs() << inputFile << ": ok: model " << program->modelName << ", " << humanCount(params)
         << " parameters in " << paramCount << " tensors, " << program->forward.ops.size()
         << " ops, " << program->layers << " layers, " << program->parallel.worldSize() << " rank"
         << (program->parallel.worldSize() == 1 ? "" : "s") << ", accumulation "
         << program->train.accumulation << "\n";
  return 0;
}

} // namespace tessel::driver
