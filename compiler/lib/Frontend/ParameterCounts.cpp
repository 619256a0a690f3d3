//===- ParameterCounts.cpp - Total and active parameters ------------------===//
//
// A mixture of experts holds every expert's weights but runs each token through only the top
// k, so its cost per token follows the active parameters, not all of them. Which parameters
// are an expert's is read off the graph, not their names: a parameter carrying the dim that a
// top_k routes over, read only by products that keep that dim on both sides.
//
//===----------------------------------------------------------------------===//

#include "tessel/Frontend/Program.h"

#include <map>

using namespace tessel;

ParameterCounts tessel::countParameters(const Program &program) {
  const Graph &g = program.forward;
  const int inputs = static_cast<int>(g.inputs.size());
  ParameterCounts counts;
  std::map<std::string, int64_t> kOf; // Routed dim -> k (the largest, if routed twice).
  for (const Op &op : g.ops)
    if (op.name == "top_k") {
      std::string dim;
      int64_t k = 0;
      for (const auto &[key, value] : op.attrs) {
        if (key == "dim")
          dim = std::get<std::string>(value);
        if (key == "k")
          k = std::get<int64_t>(value);
      }
      kOf[dim] = std::max(kOf[dim], k);
    }
  for (const auto &[dim, k] : kOf) {
    int at = findDim(program.dims, dim);
    counts.routings.push_back({dim, at < 0 ? 0 : program.dims[at].size, k});
  }

  // Per parameter value: whether every product reading it keeps each routed dim as a batch dim.
  std::vector<std::map<std::string, bool>> perExpert(g.ops.size());
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op &op = g.ops[i];
    if (op.name != "param")
      continue;
    for (const auto &[dim, k] : kOf)
      if (findDim(op.type.dims, dim) >= 0)
        perExpert[i][dim] = true;
  }
  for (const Op &op : g.ops)
    for (size_t o = 0; o < op.operands.size(); ++o) {
      int v = op.operands[o] - inputs;
      if (v < 0 || perExpert[v].empty())
        continue;
      for (auto &[dim, keeps] : perExpert[v]) {
        bool batchDim = false;
        if (op.name == "contract" && op.operands.size() == 2) {
          const TensorType &other = g.typeOf(op.operands[1 - o]);
          batchDim = findDim(other.dims, dim) >= 0 && findDim(op.type.dims, dim) >= 0;
        }
        keeps = keeps && batchDim;
      }
    }
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op &op = g.ops[i];
    if (op.name != "param")
      continue;
    double n = 1;
    for (const NamedDim &d : op.type.dims)
      n *= static_cast<double>(d.size);
    counts.total += n;
    double share = 1;
    for (const auto &[dim, keeps] : perExpert[i])
      if (keeps) {
        int at = findDim(op.type.dims, dim);
        share *= static_cast<double>(kOf[dim]) / static_cast<double>(op.type.dims[at].size);
      }
    if (share < 1)
      counts.expert += n;
    counts.active += n * share;
  }
  return counts;
}
