//===- MemoryPictures.cpp - tessel estimate --memory-svg / --memory-trace -===//

#include "MemoryPictures.h"

#include "common/memory/MemoryProfile.h"
#include "tessel/Analysis/StepTime.h"

using namespace tessel;

namespace {

/// "m.svg" -> "m.stage1.svg"; a name without ".svg" gets ".stage1.svg" appended.
std::string stagePath(const std::string &svg, uint32_t stage) {
  const std::string suffix = ".svg";
  const bool svgName = svg.size() > suffix.size() &&
                       svg.compare(svg.size() - suffix.size(), suffix.size(), suffix) == 0;
  const std::string stem = svgName ? svg.substr(0, svg.size() - suffix.size()) : svg;
  return stem + ".stage" + std::to_string(stage) + suffix;
}

} // namespace

bool tessel::memoryPictures(const planfile::Plan &plan, const MemoryPictureOptions &options,
                            std::vector<MemoryPicture> &pictures, std::string &error) {
  std::vector<uint32_t> ranks;
  if (options.rank >= 0) {
    if (options.rank >= static_cast<int64_t>(plan.worldSize)) {
      error = "--rank " + std::to_string(options.rank) + " is not a rank of the plan (it has " +
              std::to_string(plan.worldSize) + ")";
      return false;
    }
    ranks.push_back(static_cast<uint32_t>(options.rank));
  } else {
    for (const std::vector<uint32_t> &stage : plan.ranksByStage())
      ranks.push_back(stage.front());
  }
  memory::InstructionSeconds seconds;
  if (options.cluster) {
    const cluster::Cluster *c = options.cluster;
    seconds = [&plan, c](const planfile::Program &program, uint32_t rank) {
      return instructionSeconds(plan, *c, program, rank);
    };
  }
  std::vector<memory::MemoryProfile> profiles;
  for (uint32_t rank : ranks) {
    memory::MemoryProfile profile;
    if (!memory::predictMemoryProfile(plan, rank, options.steps, profile, error, seconds)) {
      error = "rank " + std::to_string(rank) + ": " + error;
      return false;
    }
    profiles.push_back(std::move(profile));
  }
  for (const memory::MemoryProfile &profile : profiles) {
    if (options.svg.empty())
      break;
    MemoryPicture picture;
    picture.path = profiles.size() == 1 ? options.svg : stagePath(options.svg, profile.stage);
    picture.text = memory::memoryProfileSvg(profile);
    const memory::MemorySample *peak =
        profile.samples.empty() ? nullptr : &profile.samples[profile.peak()];
    picture.summary = picture.path + ": rank " + std::to_string(profile.rank);
    if (profile.stages > 1)
      picture.summary += " (stage " + std::to_string(profile.stage) + ")";
    if (peak)
      picture.summary += ", peak " + memory::humanBytes(static_cast<double>(peak->total())) +
                         " at " + peak->what + (peak->loc.empty() ? "" : " (" + peak->loc + ")");
    pictures.push_back(std::move(picture));
  }
  if (!options.trace.empty())
    pictures.push_back({options.trace, memory::memoryProfileTraceJson(profiles),
                        options.trace + ": " + std::to_string(profiles.size()) +
                            (profiles.size() == 1 ? " profile" : " profiles")});
  return true;
}
