// Resolution of "aten.*" / "prims.*" call_function targets against the dispatcher's op table.
#include "ir/OpTarget.h"

#include <array>
#include <utility>

#include "runtime/Dispatcher.h"

namespace kiln {

namespace {

constexpr std::array<std::string_view, 2> kNamespaces = {"aten", "prims"};
constexpr std::string_view kDefault = ".default";

// The namespace of an op target and the rest ("prims.add" -> "prims", "add"); an empty
// namespace when the target names none of the table's.
std::pair<std::string_view, std::string_view> splitTarget(std::string_view target) {
  for (std::string_view ns : kNamespaces)
    if (target.size() > ns.size() && target.starts_with(ns) && target[ns.size()] == '.')
      return {ns, target.substr(ns.size() + 1)};
  return {};
}

} // namespace

bool isOpTarget(std::string_view target) { return !splitTarget(target).first.empty(); }

OpId resolveOpTarget(std::string_view target) {
  auto [ns, name] = splitTarget(target);
  if (ns.empty()) return OpId::NumOps;
  if (name.ends_with(kDefault)) name.remove_suffix(kDefault.size());
  return Dispatcher::instance().find(std::string(name), ns);
}

std::string opTarget(OpId op) {
  const OpSchema& s = opSchema(op);
  return s.ns + "." + s.qualifiedName();
}

const OpSchema& opSchema(OpId op) { return Dispatcher::instance().schema(op); }

std::string unknownOpMessage(std::string_view target) {
  std::string msg = "unknown op '" + std::string(target) + "'";
  auto [ns, name] = splitTarget(target);
  if (ns.empty()) return msg;
  name = name.substr(0, name.find('.'));
  std::string overloads;
  for (OpId op : Dispatcher::instance().overloadsOf(std::string(name), ns))
    overloads += (overloads.empty() ? "" : ", ") + opTarget(op);
  if (!overloads.empty()) msg += "; overloads of " + std::string(name) + ": " + overloads;
  return msg;
}

} // namespace kiln
