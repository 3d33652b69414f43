// Node arguments: construction, identity, hashing and traversal of node references.
#include "ir/Argument.h"

#include <cstdint>
#include <cmath>
#include <cstring>
#include <limits>

namespace kiln {

Argument::Argument(double v)
    : kind_(Kind::Float), v_(std::isnan(v) ? std::numeric_limits<double>::quiet_NaN() : v) {}

Argument Argument::ellipsis() {
  Argument a;
  a.kind_ = Kind::Ellipsis;
  return a;
}

Argument Argument::slice(Argument start, Argument stop, Argument step) {
  return Argument(Kind::Slice, {std::move(start), std::move(stop), std::move(step)});
}

Argument Argument::list(std::vector<Argument> items) {
  return Argument(Kind::List, std::move(items));
}

Argument Argument::tuple(std::vector<Argument> items) {
  return Argument(Kind::Tuple, std::move(items));
}

Argument Argument::dict(std::vector<std::pair<std::string, Argument>> entries) {
  std::vector<Argument> values;
  Argument a(Kind::Dict, {});
  for (auto& [k, v] : entries) {
    a.keys_.push_back(std::move(k));
    values.push_back(std::move(v));
  }
  a.v_ = std::move(values);
  return a;
}

bool Argument::operator==(const Argument& o) const {
  if (kind_ != o.kind_) return false;
  if (kind_ == Kind::Float) {
    double a = toFloat(), b = o.toFloat();
    return std::memcmp(&a, &b, sizeof(double)) == 0;
  }
  return v_ == o.v_ && keys_ == o.keys_;
}

size_t Argument::hash() const {
  size_t h = size_t(kind_) * 0x9e3779b97f4a7c15ull;
  auto mix = [&](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  switch (kind_) {
  case Kind::None:
  case Kind::Ellipsis:
    break;
  case Kind::Bool:
    mix(toBool());
    break;
  case Kind::Int:
    mix(std::hash<int64_t>()(toInt()));
    break;
  case Kind::Float: {
    double d = toFloat();
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof(bits));
    mix(std::hash<uint64_t>()(bits));
    break;
  }
  case Kind::String:
    mix(std::hash<std::string>()(toString()));
    break;
  case Kind::Dtype:
    mix(size_t(toDtype()));
    break;
  case Kind::Device:
    mix(size_t(toDevice().type) * 256 + size_t(uint8_t(toDevice().index)));
    break;
  case Kind::Node:
    mix(std::hash<const void*>()(toNode()));
    break;
  case Kind::Slice:
  case Kind::List:
  case Kind::Tuple:
  case Kind::Dict:
    for (const std::string& k : keys_)
      mix(std::hash<std::string>()(k));
    for (const Argument& a : items())
      mix(a.hash());
    break;
  }
  return h;
}

void Argument::forEachNode(const std::function<void(kiln::Node*)>& f) const {
  if (kind_ == Kind::Node) f(toNode());
  if (auto* v = std::get_if<std::vector<Argument>>(&v_))
    for (const Argument& a : *v)
      a.forEachNode(f);
}

Argument Argument::mapNodes(const std::function<Argument(kiln::Node*)>& f) const {
  if (kind_ == Kind::Node) return f(toNode());
  auto* v = std::get_if<std::vector<Argument>>(&v_);
  if (!v) return *this;
  Argument out = *this;
  std::vector<Argument> mapped;
  mapped.reserve(v->size());
  for (const Argument& a : *v)
    mapped.push_back(a.mapNodes(f));
  out.v_ = std::move(mapped);
  return out;
}

} // namespace kiln
