//===- SemaConfig.h - Settings read against a schema ------------*- C++ -*-===//
//
// The `parallel` and `train` sections are groups of `key = value` settings, some of them
// groups themselves (`mesh { ... }`, `eval { ... }`). Both are read against a schema: each
// group lists the keys it knows, so a misspelt key is an error with a suggestion rather than
// a silently ignored line. SemaParallel.cpp reads `parallel` and SemaTrain.cpp `train` with
// what this header declares; SemaConfig.cpp defines it and reads the sections in order.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_FRONTEND_SEMACONFIG_H
#define TESSEL_FRONTEND_SEMACONFIG_H

#include "SemaImpl.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessel::detail {

/// The settings of one group, indexed by key, with duplicate and unknown keys reported.
class SettingGroup {
public:
  /// Indexes `settings`, reporting a key not in `known` (with the closest one as a hint) and
  /// a key set twice; `where` names the group in those reports.
  SettingGroup(Sema &sema, const std::vector<ast::Setting> &settings, const std::string &where,
               const std::vector<std::string> &known);

  /// The setting `key`, or null when the group does not set it.
  const ast::Setting *get(const std::string &key) const;
  /// The value expression of `key`, or null (reporting an error when it is a group).
  const ast::Expr *value(const std::string &key) const;
  /// The settings of group `key`, or null (reporting an error when it is a value).
  const std::vector<ast::Setting> *group(const std::string &key) const;

private:
  Sema &sema_;
  std::map<std::string, const ast::Setting *> byKey_;
};

/// Reads a name-like value: an identifier, a string, or a digit-led word such as `1f1b`,
/// lowercased and one of `allowed`, or one of `aliases`' keys (read as its value, which is in
/// `allowed`). Reports any other value as an unknown `what`, with a suggestion, and returns
/// nullopt.
std::optional<std::string> readWord(Sema &sema, const ast::Expr &e, const char *what,
                                    const std::vector<std::string> &allowed,
                                    const std::map<std::string, std::string> &aliases = {});

} // namespace tessel::detail

#endif // TESSEL_FRONTEND_SEMACONFIG_H
