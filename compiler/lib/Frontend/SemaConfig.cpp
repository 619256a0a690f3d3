//===- SemaConfig.cpp - The parallel and train sections, and their schema -===//
//
// A model file has at most one `parallel` and one `train` section; readSections finds them
// and reads `parallel` first, because the train section's batch arithmetic depends on the
// mesh's data axes. The schema both are read against lives here once: SettingGroup's checks
// of unknown and repeated keys, and readWord's of name-like values.
//
//===----------------------------------------------------------------------===//

#include "SemaConfig.h"

#include <algorithm>
#include <cctype>

using namespace tessel;
using namespace tessel::detail;

SettingGroup::SettingGroup(Sema &sema, const std::vector<ast::Setting> &settings,
                           const std::string &where, const std::vector<std::string> &known)
    : sema_(sema) {
  for (const ast::Setting &s : settings) {
    if (std::find(known.begin(), known.end(), s.key.name) == known.end()) {
      std::string guess = closestMatch(s.key.name, known);
      std::string list;
      for (const std::string &k : known)
        list += (list.empty() ? "" : ", ") + k;
      sema.error(s.key.loc, "unknown setting '" + s.key.name + "' in " + where,
                 guess.empty() ? "known settings: " + list : "did you mean '" + guess + "'?");
      continue;
    }
    auto [it, inserted] = byKey_.insert({s.key.name, &s});
    if (!inserted) {
      if (sema.error(s.key.loc, "'" + s.key.name + "' is set twice in " + where))
        sema.note(it->second->key.loc, "first set here");
    }
  }
}

const ast::Setting *SettingGroup::get(const std::string &key) const {
  auto it = byKey_.find(key);
  return it == byKey_.end() ? nullptr : it->second;
}

const ast::Expr *SettingGroup::value(const std::string &key) const {
  const ast::Setting *s = get(key);
  if (!s)
    return nullptr;
  if (s->isGroup()) {
    sema_.error(s->key.loc, "'" + key + "' takes a value: write " + key + " = ...");
    return nullptr;
  }
  return s->value.get();
}

const std::vector<ast::Setting> *SettingGroup::group(const std::string &key) const {
  const ast::Setting *s = get(key);
  if (!s)
    return nullptr;
  if (!s->isGroup()) {
    sema_.error(s->key.loc, "'" + key + "' is a group: write " + key + " { ... }");
    return nullptr;
  }
  return &s->group;
}

std::optional<std::string> tessel::detail::readWord(Sema &sema, const ast::Expr &e,
                                                    const char *what,
                                                    const std::vector<std::string> &allowed,
                                                    const std::map<std::string, std::string> &aliases) {
  std::string word;
  if (e.kind == ast::ExprKind::Name || e.kind == ast::ExprKind::String ||
      e.kind == ast::ExprKind::Number)
    word = e.text;
  std::string lower = word;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  if (auto alias = aliases.find(lower); alias != aliases.end())
    lower = alias->second;
  if (std::find(allowed.begin(), allowed.end(), lower) != allowed.end())
    return lower;
  std::string list;
  for (const std::string &a : allowed)
    list += (list.empty() ? "" : ", ") + a;
  std::string guess = closestMatch(lower, allowed);
  sema.error(e.loc, std::string("unknown ") + what + (word.empty() ? "" : " '" + word + "'"),
             guess.empty() ? "choose one of: " + list : "did you mean '" + guess + "'?");
  return std::nullopt;
}

void Sema::readSections() {
  const ast::Section *parallel = nullptr, *train = nullptr;
  for (const ast::Section &s : module_.root().sections) {
    const ast::Section *&slot = s.kind.name == "parallel" ? parallel : train;
    if (slot) {
      if (error(s.kind.loc, "a second '" + s.kind.name + "' section"))
        note(slot->kind.loc, "the first is here");
      continue;
    }
    slot = &s;
  }
  if (parallel)
    readParallel(*parallel);
  if (train) {
    readTrain(*train);
  } else {
    error(model_->name.loc, "model '" + model_->name.name + "' has no train section",
          "add train { batch = ..., micro_batch = ..., optimizer = adamw(lr = ...) }");
  }
}
