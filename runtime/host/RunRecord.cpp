//===- RunRecord.cpp - The first line a run writes to its metrics ---------===//

#include "runtime/host/RunRecord.h"

#include "common/support/Version.h"

#include <ctime>
#include <unistd.h>

namespace tessel::rt {

namespace {

Json attrValue(const planfile::AttrValue &v) {
  if (auto i = std::get_if<int64_t>(&v))
    return Json(*i);
  if (auto d = std::get_if<double>(&v))
    return Json(*d);
  if (auto s = std::get_if<std::string>(&v))
    return Json(*s);
  Json list = Json::array();
  for (int64_t x : std::get<std::vector<int64_t>>(v))
    list.push(Json(x));
  return list;
}

/// The plan's config entries under `prefix`, with the prefix taken off their names.
Json configUnder(const planfile::Plan &plan, const std::string &prefix) {
  Json out = Json::object();
  for (const planfile::Attr &a : plan.config)
    if (a.name.rfind(prefix, 0) == 0)
      out.set(a.name.substr(prefix.size()), attrValue(a.value));
  return out;
}

std::string utcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0)
    return "";
  return name;
}

} // namespace

Json runRecord(const planfile::Plan &plan, const RunOptions &options, const RunFacts &facts) {
  Json run = Json::object();
  run.set("tessel", releaseVersion());
  run.set("commit", sourceCommit());
  run.set("started", utcNow());
  run.set("host", hostName());

  Json planJson = Json::object();
  planJson.set("model", plan.model);
  planJson.set("fingerprint", options.planFingerprint);
  planJson.set("source", options.planSource);
  run.set("plan", std::move(planJson));

  // The recipe as the spec compiled it, with the overrides applied (the plan was edited), and
  // the overrides apart.
  run.set("recipe", configUnder(plan, "train."));
  Json overrides = Json::object();
  for (const planfile::Attr &a : options.recipeOverrides)
    overrides.set(a.name.rfind("train.", 0) == 0 ? a.name.substr(6) : a.name,
                  attrValue(a.value));
  run.set("overrides", std::move(overrides));
  Json commandLine = Json::array();
  for (const std::string &arg : options.commandLine)
    commandLine.push(Json(arg));
  run.set("command_line", std::move(commandLine));
  run.set("seed", facts.seed);
  run.set("steps", facts.steps);

  Json layout = Json::object();
  Json mesh = Json::object();
  for (const planfile::MeshAxis &axis : plan.mesh)
    mesh.set(axis.name, static_cast<int64_t>(axis.size));
  layout.set("mesh", std::move(mesh));
  layout.set("ranks", static_cast<int64_t>(plan.worldSize));
  layout.set("processes", static_cast<int64_t>(facts.processes));
  layout.set("threads_per_rank", static_cast<int64_t>(facts.threadsPerRank));
  run.set("layout", std::move(layout));
  run.set("device", facts.device);
  run.set("device_model", facts.deviceModel);

  if (facts.resumedFrom.empty()) {
    run.set("resumed_from", nullptr);
  } else {
    Json resumed = Json::object();
    resumed.set("checkpoint", facts.resumedFrom);
    resumed.set("step", facts.resumedStep);
    run.set("resumed_from", std::move(resumed));
  }
  Json record = Json::object();
  record.set("run", std::move(run));
  return record;
}

} // namespace tessel::rt
