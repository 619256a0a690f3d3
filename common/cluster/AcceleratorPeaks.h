//===- AcceleratorPeaks.h - An accelerator's peak, by its device name -*- C++ -*-===//
//
// The runner reports MFU against the dense 16-bit peak of the device it runs on. The peaks are
// the shipped cluster presets' (clusters/*.cluster, embedded at build time): the preset whose
// `accelerator.device` the CUDA device name contains gives it, so one file states each GPU's
// figures for the planner and the runner alike. docs/planning.md prints the MFU formula.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_CLUSTER_ACCELERATORPEAKS_H
#define TESSEL_COMMON_CLUSTER_ACCELERATORPEAKS_H

#include "common/cluster/Cluster.h"

#include <optional>
#include <string>

namespace tessel::cluster {

/// The shipped preset of the accelerator named `deviceName` (as cudaGetDeviceProperties gives
/// it): the one whose `accelerator.device` it contains, the longest such match winning; none
/// when no preset names it.
std::optional<Cluster> presetForDevice(const std::string &deviceName);

/// Every shipped preset, parsed (file name without .cluster, cluster). A preset that does not
/// parse is a build defect: test/unit checks they all do.
std::vector<std::pair<std::string, Cluster>> shippedPresets(std::string *error = nullptr);

} // namespace tessel::cluster

#endif // TESSEL_COMMON_CLUSTER_ACCELERATORPEAKS_H
