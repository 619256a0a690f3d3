//===- XmlCheck.h - A minimal XML well-formedness check for tests -*- C++ -*-===//
//
// The SVG pictures' tests (schedules, memory profiles) check that what they draw is XML a
// browser opens, without an XML library.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TEST_UNIT_XMLCHECK_H
#define TESSEL_TEST_UNIT_XMLCHECK_H

#include <cctype>
#include <string>
#include <vector>

namespace tessel::test {

/// A minimal XML well-formedness check: the prolog, comments, balanced and properly nested elements
/// with quoted attributes free of '<', known entities only, one root. Returns the element
/// names in document order, or an error.
inline bool parseXml(const std::string &text, std::vector<std::string> &elements,
                     std::string &error) {
  std::vector<std::string> open;
  size_t i = 0, roots = 0;
  auto entityAt = [](const std::string &in, size_t at) {
    for (const std::string entity : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"})
      if (in.compare(at, entity.size(), entity) == 0)
        return true;
    return false;
  };
  auto entityOk = [&](size_t at) { return entityAt(text, at); };
  while (i < text.size()) {
    if (text[i] != '<') {
      if (text[i] == '&' && !entityOk(i))
        return error = "bad entity at " + std::to_string(i), false;
      if (open.empty() && !std::isspace(static_cast<unsigned char>(text[i])))
        return error = "text outside the root at " + std::to_string(i), false;
      ++i;
      continue;
    }
    if (text.compare(i, 5, "<?xml") == 0 || text.compare(i, 4, "<!--") == 0) {
      const bool comment = text[i + 1] == '!';
      size_t end = text.find(comment ? "-->" : "?>", i);
      if (end == std::string::npos)
        return error = "unterminated prolog or comment", false;
      i = end + (comment ? 3 : 2);
      continue;
    }
    size_t end = text.find('>', i);
    if (end == std::string::npos)
      return error = "unterminated tag at " + std::to_string(i), false;
    std::string tag = text.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty())
      return error = "empty tag", false;
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1))
        return error = "mismatched </" + tag.substr(1) + ">", false;
      open.pop_back();
      continue;
    }
    bool selfClosing = tag.back() == '/';
    if (selfClosing)
      tag.pop_back();
    size_t nameEnd = tag.find_first_of(" \t\n");
    std::string name = tag.substr(0, nameEnd);
    if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0])))
      return error = "bad element name '" + name + "'", false;
    for (size_t a = nameEnd; a != std::string::npos && a < tag.size();) {
      a = tag.find_first_not_of(" \t\n", a);
      if (a == std::string::npos)
        break;
      size_t eq = tag.find("=\"", a), close = eq == std::string::npos ? eq : tag.find('"', eq + 2);
      if (close == std::string::npos)
        return error = "bad attribute in <" + name + ">", false;
      std::string value = tag.substr(eq + 2, close - eq - 2);
      if (value.find('<') != std::string::npos)
        return error = "'<' in an attribute of <" + name + ">", false;
      for (size_t amp = value.find('&'); amp != std::string::npos; amp = value.find('&', amp + 1))
        if (!entityAt(value, amp))
          return error = "bad entity in an attribute of <" + name + ">", false;
      a = close + 1;
    }
    if (open.empty() && roots++ > 0)
      return error = "a second root <" + name + ">", false;
    elements.push_back(name);
    if (!selfClosing)
      open.push_back(name);
  }
  if (!open.empty())
    return error = "unclosed <" + open.back() + ">", false;
  if (roots != 1)
    return error = "no root", false;
  return true;
}

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_XMLCHECK_H
