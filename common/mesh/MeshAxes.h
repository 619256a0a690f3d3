//===- MeshAxes.h - The axes a device mesh can have -------------*- C++ -*-===//
//
// The one list of mesh axes: the front end reads a spec's `mesh` with it, the settings
// dialect verifies `tessel.parallel` with it, and the sharding passes lay the grid out in its
// order. Header-only, so the front end (which links nothing of common/) uses it too.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_COMMON_MESH_MESHAXES_H
#define TESSEL_COMMON_MESH_MESHAXES_H

#include <array>
#include <string>
#include <string_view>

namespace tessel::mesh {

/// The axes, outermost first as the grid lays them out: pipeline, data, expert, context and
/// tensor parallelism. Rank numbers are row-major over the grid, so tp neighbours have
/// adjacent ranks; ep sits next to dp, being a data axis for everything but expert weights.
constexpr std::array<std::string_view, 5> kMeshAxes = {"pp", "dp", "ep", "cp", "tp"};

/// Whether `name` is a mesh axis.
constexpr bool isMeshAxis(std::string_view name) {
  for (std::string_view axis : kMeshAxes)
    if (axis == name)
      return true;
  return false;
}

/// "pp, dp, ep, cp, tp": the axes, for messages.
inline std::string meshAxisList() {
  std::string list;
  for (std::string_view axis : kMeshAxes)
    list += (list.empty() ? "" : ", ") + std::string(axis);
  return list;
}

} // namespace tessel::mesh

#endif // TESSEL_COMMON_MESH_MESHAXES_H
