//===- KernelCatalogue.cpp - The kernel table, decoding, docs ------------===//

#include "common/catalogue/KernelCatalogue.h"

#include <iterator>
#include <map>
#include <sstream>
#include <type_traits>
#include <variant>

namespace tessel::catalogue {

namespace {

//===----------------------------------------------------------------------===//
// Parameter types
//===----------------------------------------------------------------------===//

template <class T> constexpr ParamType paramTypeOf() {
  if constexpr (std::is_same_v<T, I64>)
    return ParamType::I64;
  else if constexpr (std::is_same_v<T, F64>)
    return ParamType::F64;
  else if constexpr (std::is_same_v<T, Str>)
    return ParamType::Str;
  else if constexpr (std::is_same_v<T, I64List>)
    return ParamType::I64List;
  else if constexpr (std::is_same_v<T, Flag>)
    return ParamType::Flag;
  else if constexpr (std::is_same_v<T, ElementwiseBody>)
    return ParamType::Body;
  else
    return ParamType::Enum;
}

template <class T> ParamInfo paramInfo(const char *name, ParamPresence presence, const char *doc) {
  ParamInfo p{name, paramTypeOf<T>(), presence, nullptr, {}, doc};
  if constexpr (std::is_enum_v<T>) {
    p.enumName = EnumWords<T>::name;
    p.words.assign(std::begin(EnumWords<T>::words), std::end(EnumWords<T>::words));
  }
  return p;
}

std::vector<KernelInfo> buildTable() {
  std::vector<KernelInfo> table;
#define TESSEL_KERNEL(Id, Name, Fam, Doc)                                                          \
  {                                                                                                \
    KernelInfo k{KernelId::Id, Name, Family::Fam, Doc, {}, {}, {}};
#define TESSEL_OPERAND(Id, Dir, Role, Types, Count)                                                \
  (Direction::Dir == Direction::In ? k.ins : k.outs)                                               \
      .push_back({#Role, OperandTypes::Types, OperandCount::Count});
#define TESSEL_PARAM(Id, Name, Type, Presence, Doc)                                                \
  k.params.push_back(paramInfo<Type>(#Name, ParamPresence::Presence, Doc));
#define TESSEL_KERNEL_END(Id)                                                                      \
  table.push_back(std::move(k));                                                                   \
  }
#include "common/catalogue/KernelCatalogue.def"
  return table;
}

//===----------------------------------------------------------------------===//
// Decoding
//===----------------------------------------------------------------------===//

/// How each parameter type is spelled: in an error ("it takes an integer"), in the docs'
/// tables ("i64") and in `tessel kernels` ("integer"). Indexed by ParamType.
struct TypeNames {
  const char *error, *table, *text;
};
constexpr TypeNames kTypeNames[] = {
    {"an integer", "i64", "integer"},
    {"a float", "f64", "float"},
    {"a string", "str", "string"},
    {"an integer list", "i64[]", "integer list"},
    {"a flag (0 or 1)", "0/1", "0 or 1"},
    {"a program (a string)", "program", "program"},
    {"a word", "", "word"},
};
const TypeNames &namesOf(ParamType t) { return kTypeNames[static_cast<size_t>(t)]; }
const char *typeWord(ParamType t) { return namesOf(t).error; }

/// Reads the parameters of one instruction by name, remembering which it used.
class Decoder {
public:
  Decoder(const KernelInfo &kernel, const std::vector<planfile::Attr> &attrs, std::string &error)
      : kernel_(kernel), attrs_(attrs), used_(attrs.size(), false), error_(error) {}

  template <class T> void get(const char *name, T &out) {
    const planfile::Attr *a = find(name);
    if (!a) {
      fail("needs parameter '" + std::string(name) + "'");
      return;
    }
    read(name, *a, out);
  }
  template <class T> void get(const char *name, std::optional<T> &out) {
    if (const planfile::Attr *a = find(name)) {
      T value{};
      read(name, *a, value);
      out = std::move(value);
    }
  }

  /// False if a parameter failed, or one is present that the kernel does not take.
  bool finish() {
    for (size_t i = 0; i < attrs_.size() && error_.empty(); ++i)
      if (!used_[i])
        fail("has parameter '" + attrs_[i].name + "', which it does not take");
    return error_.empty();
  }

private:
  const planfile::Attr *find(const char *name) {
    for (size_t i = 0; i < attrs_.size(); ++i)
      if (attrs_[i].name == name) {
        used_[i] = true;
        return &attrs_[i];
      }
    return nullptr;
  }
  void fail(const std::string &why) {
    if (error_.empty())
      error_ = why;
  }
  void wrongType(const char *name, ParamType want) {
    fail("has parameter '" + std::string(name) + "' of the wrong type; it takes " + typeWord(want));
  }

  void read(const char *name, const planfile::Attr &a, I64 &out) {
    if (auto *v = std::get_if<int64_t>(&a.value))
      out = *v;
    else
      wrongType(name, ParamType::I64);
  }
  void read(const char *name, const planfile::Attr &a, F64 &out) {
    if (auto *v = std::get_if<double>(&a.value))
      out = *v;
    else
      wrongType(name, ParamType::F64);
  }
  void read(const char *name, const planfile::Attr &a, Str &out) {
    if (auto *v = std::get_if<std::string>(&a.value))
      out = *v;
    else
      wrongType(name, ParamType::Str);
  }
  void read(const char *name, const planfile::Attr &a, I64List &out) {
    if (auto *v = std::get_if<std::vector<int64_t>>(&a.value))
      out = *v;
    else
      wrongType(name, ParamType::I64List);
  }
  void read(const char *name, const planfile::Attr &a, Flag &out) {
    auto *v = std::get_if<int64_t>(&a.value);
    if (v && (*v == 0 || *v == 1))
      out = *v == 1;
    else
      wrongType(name, ParamType::Flag);
  }
  void read(const char *name, const planfile::Attr &a, ElementwiseBody &out) {
    auto *v = std::get_if<std::string>(&a.value);
    if (!v) {
      wrongType(name, ParamType::Body);
      return;
    }
    std::string why;
    if (!parseElementwiseBody(*v, out, why))
      fail("has a " + std::string(name) + " it cannot run: " + why);
  }
  template <class E, class = std::enable_if_t<std::is_enum_v<E>>>
  void read(const char *name, const planfile::Attr &a, E &out) {
    auto *v = std::get_if<std::string>(&a.value);
    if (!v) {
      wrongType(name, ParamType::Enum);
      return;
    }
    if (std::optional<E> e = enumOf<E>(*v)) {
      out = *e;
      return;
    }
    std::string known;
    for (std::string_view w : EnumWords<E>::words)
      known += (known.empty() ? "" : ", ") + std::string(w);
    fail("has " + std::string(name) + " '" + *v + "'; it takes " + known);
  }

  const KernelInfo &kernel_;
  const std::vector<planfile::Attr> &attrs_;
  std::vector<bool> used_;
  std::string &error_;
};

bool accepts(OperandTypes types, planfile::DType t) {
  switch (types) {
  case OperandTypes::Float:
    return planfile::isFloat(t);
  case OperandTypes::F32:
    return t == planfile::DType::F32;
  case OperandTypes::Index:
    return t == planfile::DType::I32;
  case OperandTypes::AnyType:
  case OperandTypes::Moved:
    return true;
  case OperandTypes::Reduced:
    return planfile::isFloat(t);
  }
  return false;
}

const char *typesWord(OperandTypes types) {
  switch (types) {
  case OperandTypes::Float:
    return "f32, bf16 or f16";
  case OperandTypes::F32:
    return "f32";
  case OperandTypes::Index:
    return "i32";
  case OperandTypes::AnyType:
  case OperandTypes::Moved:
    return "any element type";
  case OperandTypes::Reduced:
    return "f32, bf16 or f16";
  }
  return "?";
}

/// Which declaration each of a direction's operands is, in `roles`; false with the reason when
/// their count fits none. `tensors` is a multi-tensor call's count of tensors.
bool layOut(const std::vector<OperandInfo> &decl, size_t got, size_t tensors, const char *direction,
            std::vector<const OperandInfo *> &roles, std::string &error) {
  size_t fixed = 0, each = 0, optional = 0, trailing = 0;
  bool open = false;
  for (const OperandInfo &o : decl) {
    fixed += o.count == OperandCount::One || o.count == OperandCount::OneOrMore;
    each += o.count == OperandCount::Each;
    optional += o.count == OperandCount::EachOrNone;
    trailing += o.count == OperandCount::Optional;
    open |= o.count == OperandCount::OneOrMore || o.count == OperandCount::ZeroOrMore;
  }
  auto plural = [&](size_t n) { return std::to_string(n) + " " + direction + (n == 1 ? "" : "s"); };
  roles.clear();
  if (each + optional > 0) {
    const size_t without = fixed + tensors * each, with = without + tensors * optional;
    if (got != without && got != with) {
      error = "takes " + plural(without) + (optional ? " (or " + std::to_string(with) + ")" : "") +
              " for " + std::to_string(tensors) + " tensor" + (tensors == 1 ? "" : "s") + ", not " +
              std::to_string(got);
      return false;
    }
    for (const OperandInfo &o : decl) {
      size_t n = o.count == OperandCount::One                                 ? 1
                 : o.count == OperandCount::Each || (optional && got == with) ? tensors
                                                                              : 0;
      roles.insert(roles.end(), n, &o);
    }
    return true;
  }
  if (got < fixed || (!open && got > fixed + trailing)) {
    error = std::string("takes ") + (open ? "at least " : "") + plural(fixed) +
            (trailing ? " to " + std::to_string(fixed + trailing) : "") + ", not " +
            std::to_string(got);
    return false;
  }
  // A variadic operand is the last of its direction: it takes what the fixed ones leave. The
  // optional ones follow the fixed ones in order.
  for (size_t k = 0; k < got; ++k)
    roles.push_back(&decl[std::min(k, decl.size() - 1)]);
  return true;
}

/// Checks each operand's element type against its declaration.
bool checkTypes(const std::vector<const OperandInfo *> &roles,
                const std::vector<planfile::DType> &got, const char *direction,
                std::string &error) {
  for (size_t k = 0; k < got.size(); ++k)
    if (!accepts(roles[k]->types, got[k])) {
      error = std::string(direction) + " " + std::to_string(k) + " (`" + roles[k]->role + "`) is " +
              planfile::dtypeName(got[k]) + "; it takes " + typesWord(roles[k]->types);
      return false;
    }
  return true;
}

std::string operandList(const std::vector<OperandInfo> &decl) {
  std::string s;
  for (const OperandInfo &o : decl) {
    s += (s.empty() ? "" : ", ") + std::string(o.role);
    if (o.types == OperandTypes::Index)
      s += " (i32)";
    if (o.types == OperandTypes::F32)
      s += " (f32)";
    if (o.count == OperandCount::OneOrMore)
      s += "…";
    if (o.count == OperandCount::ZeroOrMore)
      s += "… (optional)";
    if (o.count == OperandCount::Optional)
      s += " (optional)";
    if (o.count == OperandCount::Each)
      s += "[t]";
    if (o.count == OperandCount::EachOrNone)
      s += "[t] (optional)";
  }
  return s.empty() ? "—" : s;
}

/// A parameter's type in a few characters: i64, f64, str, i64[], 0/1, or its words.
std::string shortType(const ParamInfo &p) {
  if (p.type != ParamType::Enum)
    return namesOf(p.type).table;
  std::string s;
  for (size_t i = 0; i < p.words.size(); ++i)
    s += (i ? "/" : "") + std::string(p.words[i]);
  return s;
}

std::string paramList(const KernelInfo &k) {
  std::string s;
  for (const ParamInfo &p : k.params)
    s += (s.empty() ? "" : ", ") +
         std::string(p.presence == ParamPresence::Optional ? "optional " : "") + "`" + p.name +
         "` " + shortType(p);
  return s.empty() ? "—" : s;
}

} // namespace

const std::vector<KernelInfo> &kernels() {
  static const std::vector<KernelInfo> table = buildTable();
  return table;
}

const KernelInfo &kernelInfo(KernelId id) { return kernels()[static_cast<size_t>(id)]; }

const KernelInfo *findKernel(std::string_view name) {
  static const std::map<std::string_view, const KernelInfo *> byName = [] {
    std::map<std::string_view, const KernelInfo *> m;
    for (const KernelInfo &k : kernels())
      m[k.name] = &k;
    return m;
  }();
  auto it = byName.find(name);
  return it == byName.end() ? nullptr : it->second;
}

namespace {

/// The operands declared `types` (Moved or Reduced) must all have one element type.
bool checkAlike(const std::vector<const OperandInfo *> &inRoles,
                const std::vector<planfile::DType> &ins,
                const std::vector<const OperandInfo *> &outRoles,
                const std::vector<planfile::DType> &outs, OperandTypes types, std::string &error) {
  const OperandInfo *first = nullptr;
  planfile::DType type{};
  auto visit = [&](const std::vector<const OperandInfo *> &roles,
                   const std::vector<planfile::DType> &got) {
    for (size_t k = 0; k < got.size(); ++k) {
      const OperandInfo &o = *roles[k];
      if (o.types != types)
        continue;
      if (!first) {
        first = &o;
        type = got[k];
      } else if (got[k] != type) {
        error = std::string("has `") + first->role + "` of " + planfile::dtypeName(type) +
                " but `" + o.role + "` of " + planfile::dtypeName(got[k]) +
                "; they must have one element type";
        return false;
      }
    }
    return true;
  };
  return visit(inRoles, ins) && visit(outRoles, outs);
}

} // namespace

namespace {

/// A kernel's inputs of one operand each (`fixed`) and of one per tensor (`each`).
void inputCounts(const KernelInfo &kernel, size_t &fixed, size_t &each) {
  fixed = each = 0;
  for (const OperandInfo &o : kernel.ins) {
    fixed += o.count == OperandCount::One;
    each += o.count == OperandCount::Each;
  }
}

} // namespace

size_t tensorsOf(const KernelInfo &kernel, size_t ins) {
  size_t fixed, each;
  inputCounts(kernel, fixed, each);
  if (each == 0 || ins <= fixed || (ins - fixed) % each)
    return 0;
  return (ins - fixed) / each;
}

bool checkOperands(const KernelInfo &kernel, const std::vector<planfile::DType> &ins,
                   const std::vector<planfile::DType> &outs, std::string &error) {
  size_t fixed, each;
  inputCounts(kernel, fixed, each);
  const size_t tensors = tensorsOf(kernel, ins.size());
  if (each > 0 && tensors == 0) {
    error = "takes " + std::to_string(fixed) + " inputs and " + std::to_string(each) +
            " per tensor, for one tensor or more; not " + std::to_string(ins.size());
    return false;
  }
  std::vector<const OperandInfo *> inRoles, outRoles;
  return layOut(kernel.ins, ins.size(), tensors, "input", inRoles, error) &&
         layOut(kernel.outs, outs.size(), tensors, "output", outRoles, error) &&
         checkTypes(inRoles, ins, "input", error) && checkTypes(outRoles, outs, "output", error) &&
         checkAlike(inRoles, ins, outRoles, outs, OperandTypes::Moved, error) &&
         checkAlike(inRoles, ins, outRoles, outs, OperandTypes::Reduced, error);
}

namespace {

/// Whether a kernel's parameter struct has an element list `n` (a multi-tensor kernel's).
template <class T, class = void> struct HasElementList : std::false_type {};
template <class T>
struct HasElementList<T, std::void_t<decltype(T::n)>> : std::is_same<decltype(T::n), I64List> {};

} // namespace

bool checkTensors(const KernelInfo &kernel, const KernelParams &params, size_t ins,
                  std::string &error) {
  const size_t k = tensorsOf(kernel, ins);
  if (k == 0)
    return true;
  return std::visit(
      [&](const auto &p) {
        if constexpr (HasElementList<std::decay_t<decltype(p)>>::value) {
          if (p.n.size() != k) {
            error = "lists " + std::to_string(p.n.size()) + " tensor" +
                    (p.n.size() == 1 ? "" : "s") + " in `n` but has operands for " +
                    std::to_string(k);
            return false;
          }
          for (int64_t n : p.n)
            if (n < 0) {
              error = "lists a tensor of " + std::to_string(n) + " elements in `n`";
              return false;
            }
        }
        return true;
      },
      params);
}

bool decodeParams(const KernelInfo &kernel, const std::vector<planfile::Attr> &attrs,
                  KernelParams &params, std::string &error) {
  switch (kernel.id) {
#define TESSEL_KERNEL(Id, Name, Family, Doc)                                                       \
  case KernelId::Id: {                                                                             \
    Id p;                                                                                          \
    Decoder d(kernel, attrs, error);
#define TESSEL_PARAM(Id, Name, Type, Presence, Doc) d.get(#Name, p.Name);
#define TESSEL_KERNEL_END(Id)                                                                      \
  if (!d.finish())                                                                                 \
    return false;                                                                                  \
  params = std::move(p);                                                                           \
  return true;                                                                                     \
  }
#include "common/catalogue/KernelCatalogue.def"
  }
  error = "is not in the kernel catalogue";
  return false;
}

std::string markdownTable() {
  std::ostringstream os;
  const char *headings[] = {"Compute kernels", "Collectives and transfers", "Control"};
  for (Family f : {Family::Compute, Family::Collective, Family::Control}) {
    os << "\n#### " << headings[static_cast<int>(f)] << "\n\n";
    os << "| kernel | ins → outs | params | what |\n|---|---|---|---|\n";
    for (const KernelInfo &k : kernels()) {
      if (k.family != f)
        continue;
      os << "| `" << k.name << "` | " << operandList(k.ins) << " → " << operandList(k.outs) << " | "
         << paramList(k) << " | " << k.doc << " |\n";
    }
  }
  return os.str();
}

std::string textTable() {
  std::ostringstream os;
  for (const KernelInfo &k : kernels()) {
    os << k.name << ": " << operandList(k.ins) << " -> " << operandList(k.outs) << "\n";
    for (const ParamInfo &p : k.params) {
      os << "    " << p.name << (p.presence == ParamPresence::Optional ? " (optional)" : "")
         << ": ";
      if (p.type == ParamType::Enum) {
        for (size_t i = 0; i < p.words.size(); ++i)
          os << (i ? " | " : "") << p.words[i];
        os << "\n";
        continue;
      }
      os << namesOf(p.type).text << " — " << p.doc << "\n";
    }
    os << "    " << k.doc << "\n";
  }
  return os.str();
}

} // namespace tessel::catalogue
