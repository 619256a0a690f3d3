//===- AcceleratorPeaks.cpp - An accelerator's peak, by its device name ---===//

#include "common/cluster/AcceleratorPeaks.h"

#include "common/cluster/AcceleratorPresets.h"

using namespace tessel;

std::vector<std::pair<std::string, cluster::Cluster>> cluster::shippedPresets(std::string *error) {
  std::vector<std::pair<std::string, Cluster>> out;
  for (const PresetText &p : kPresetTexts) {
    Cluster c;
    std::string why;
    if (!parseCluster(p.text, std::string(p.file) + ".cluster", c, why)) {
      if (error)
        *error = why;
      continue;
    }
    out.emplace_back(p.file, std::move(c));
  }
  return out;
}

std::optional<cluster::Cluster> cluster::presetForDevice(const std::string &deviceName) {
  std::optional<Cluster> best;
  for (auto &[file, c] : shippedPresets())
    if (!c.device.empty() && deviceName.find(c.device) != std::string::npos &&
        (!best || c.device.size() > best->device.size()))
      best = c;
  return best;
}
