// Value printing.
#include "runtime/Value.h"
#include <cstdint>

namespace kiln {

std::string Value::repr() const {
  struct Visitor {
    std::string operator()(std::monostate) { return "None"; }
    std::string operator()(bool b) { return b ? "True" : "False"; }
    std::string operator()(int64_t i) { return std::to_string(i); }
    std::string operator()(double d) { return Scalar(d).toString(); }
    std::string operator()(const Tensor& t) { return t.defined() ? t.describe() : "None"; }
    std::string operator()(const std::vector<int64_t>& v) { return shapeString(v); }
    std::string operator()(const std::vector<double>& v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + Scalar(v[i]).toString();
      return s + "]";
    }
    std::string operator()(const std::vector<Tensor>& v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i].describe();
      return s + "]";
    }
    std::string operator()(const std::vector<std::optional<Tensor>>& v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + (v[i] ? v[i]->describe() : "None");
      return s + "]";
    }
    std::string operator()(const Scalar& s) { return s.toString(); }
    std::string operator()(ScalarType t) { return scalarTypeName(t); }
    std::string operator()(const Device& d) { return "\"" + d.str() + "\""; }
    std::string operator()(const std::string& s) { return "\"" + s + "\""; }
  };
  return std::visit(Visitor{}, v_);
}

} // namespace kiln
