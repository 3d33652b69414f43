// Graph value types: dtype short names, equality and printing.
#include "ir/Type.h"

#include "runtime/TensorImpl.h"

namespace kiln {

TensorType TensorType::of(const Tensor& t, Device device) {
  TensorType tt;
  tt.dtype = t.dtype();
  for (int64_t s : t.sizes())
    tt.sizes.emplace_back(s);
  if (!t.isContiguous()) {
    tt.strides.emplace();
    for (int64_t s : t.strides())
      tt.strides->emplace_back(s);
  }
  tt.device = device;
  return tt;
}

namespace {
constexpr const char* kShortNames[kNumScalarTypes] = {"b8",  "u8",  "i8",   "i16", "i32",
                                                      "i64", "f16", "bf16", "f32", "f64",
                                                      "c64", "c128"};

std::string symList(const std::vector<IndexExpr>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + v[i].str();
  return s + "]";
}
} // namespace

const char* dtypeShortName(ScalarType t) { return kShortNames[int(t)]; }

std::optional<ScalarType> dtypeFromShortName(const std::string& name) {
  for (int i = 0; i < kNumScalarTypes; ++i)
    if (name == kShortNames[i]) return ScalarType(i);
  return std::nullopt;
}

bool TensorType::isStatic() const {
  for (const IndexExpr& s : sizes)
    if (!s.isConstant()) return false;
  if (strides)
    for (const IndexExpr& s : *strides)
      if (!s.isConstant()) return false;
  return true;
}

std::string TensorType::str() const {
  std::string s = dtypeShortName(dtype) + symList(sizes);
  std::string extra;
  if (strides) extra = "strides=" + symList(*strides);
  if (!device.isCpu() || device.index >= 0)
    extra += (extra.empty() ? "device=" : ", device=") + device.str();
  return extra.empty() ? s : s + "{" + extra + "}";
}

Type Type::tuple(std::vector<Type> elements) {
  Type t(Kind::Tuple);
  t.elements_ = std::move(elements);
  return t;
}

Type Type::number(Kind k) { return Type(k); }

bool Type::operator==(const Type& o) const {
  if (kind_ != o.kind_) return false;
  if (kind_ == Kind::Tensor) return tensor_ == o.tensor_;
  return elements_ == o.elements_;
}

std::string Type::str() const {
  switch (kind_) {
  case Kind::Tensor:
    return tensor_.str();
  case Kind::Tuple: {
    std::string s = "(";
    for (size_t i = 0; i < elements_.size(); ++i)
      s += (i ? ", " : "") + elements_[i].str();
    return s + (elements_.size() == 1 ? ",)" : ")");
  }
  case Kind::Int:
    return "int";
  case Kind::Float:
    return "float";
  case Kind::Bool:
    return "bool";
  }
  return "";
}

} // namespace kiln
