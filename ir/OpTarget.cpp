// Resolution of "aten.*" call_function targets against the dispatcher's op table.
#include "ir/OpTarget.h"

#include "runtime/Dispatcher.h"

namespace kiln {

namespace {
constexpr std::string_view kPrefix = "aten.";
constexpr std::string_view kDefault = ".default";
} // namespace

bool isOpTarget(std::string_view target) { return target.starts_with(kPrefix); }

OpId resolveOpTarget(std::string_view target) {
  if (!isOpTarget(target)) return OpId::NumOps;
  std::string_view name = target.substr(kPrefix.size());
  if (name.ends_with(kDefault)) name.remove_suffix(kDefault.size());
  return Dispatcher::instance().find(std::string(name));
}

std::string opTarget(OpId op) { return std::string(kPrefix) + opSchema(op).qualifiedName(); }

const OpSchema& opSchema(OpId op) { return Dispatcher::instance().schema(op); }

std::string unknownOpMessage(std::string_view target) {
  std::string msg = "unknown op '" + std::string(target) + "'";
  if (!isOpTarget(target)) return msg;
  std::string_view name = target.substr(kPrefix.size());
  name = name.substr(0, name.find('.'));
  std::string overloads;
  for (OpId op : Dispatcher::instance().overloadsOf(std::string(name)))
    overloads += (overloads.empty() ? "" : ", ") + opTarget(op);
  if (!overloads.empty()) msg += "; overloads of " + std::string(name) + ": " + overloads;
  return msg;
}

} // namespace kiln
