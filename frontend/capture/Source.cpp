// Sources: paths from a frame to the values its trace depends on, as guard accessors, as
// Python expressions (for the glue that feeds graph inputs) and as readable graph names.
#include "frontend/capture/Variables.h"

namespace kiln::capture {

namespace {

SourcePtr makeSource(Source::Kind kind, SourcePtr parent, int index, std::string name,
                     nb::object key = nb::object()) {
  auto s = std::make_shared<Source>();
  s->kind = kind;
  s->parent = std::move(parent);
  s->index = index;
  s->name = std::move(name);
  s->key = std::move(key);
  return s;
}

std::string keyText(const nb::object& key) {
  if (PyUnicode_Check(key.ptr())) return nb::cast<std::string>(key);
  if (PyLong_Check(key.ptr())) return nb::cast<std::string>(nb::str(key));
  return "key"; // a tensor keying an optimizer's state: its str would print its data
}

bool isConstantKey(const nb::object& key) {
  return PyUnicode_CheckExact(key.ptr()) || PyLong_CheckExact(key.ptr());
}

} // namespace

SourcePtr localSource(int index, std::string name) {
  return makeSource(Source::Kind::Local, nullptr, index, std::move(name));
}
SourcePtr closureSource(int index, std::string name) {
  return makeSource(Source::Kind::Closure, nullptr, index, std::move(name));
}
SourcePtr globalSource(std::string name) {
  return makeSource(Source::Kind::Global, nullptr, 0, std::move(name));
}
SourcePtr itemSource(SourcePtr parent, nb::object key) {
  return makeSource(Source::Kind::Item, std::move(parent), 0, "", std::move(key));
}
SourcePtr attrSource(SourcePtr parent, std::string name) {
  return makeSource(Source::Kind::Attr, std::move(parent), 0, std::move(name));
}
SourcePtr funcGlobalSource(SourcePtr fn, std::string name) {
  return makeSource(Source::Kind::FuncGlobal, std::move(fn), 0, std::move(name));
}
SourcePtr funcClosureSource(SourcePtr fn, int index) {
  return makeSource(Source::Kind::FuncClosure, std::move(fn), index, "");
}

SourcePtr iterItemSource(SourcePtr iterator, int index) {
  return makeSource(Source::Kind::IterItem, std::move(iterator), index, "");
}

std::string argumentName(const std::string& name) {
  return !name.empty() && name[0] == '.' ? "__dot" + name.substr(1) : name;
}

bool Source::isArgument() const {
  // A path through a dict keyed by a tensor has no expression over the arguments (the key is
  // an object, not a literal): such values are read once, with their identity guarded.
  const Source* s = this;
  while (s->parent && (s->kind == Kind::Item || s->kind == Kind::Attr || s->kind == Kind::IterItem)) {
    if (s->kind == Kind::Item && !isConstantKey(s->key)) return false;
    s = s->parent.get();
  }
  return s->kind == Kind::Local;
}

std::string Source::expr() const {
  switch (kind) {
  case Kind::Local: return argumentName(name);
  case Kind::Item: return parent->expr() + "[" + nb::cast<std::string>(nb::repr(key)) + "]";
  // The glue's helper (kiln._C._capture.iter_item), bound in its namespace.
  case Kind::IterItem: return "__iter_item(" + parent->expr() + ", " + std::to_string(index) + ")";
  case Kind::Attr: return parent->expr() + "." + name;
  default: return "<not an argument>";
  }
}

std::string Source::identifier() const {
  switch (kind) {
  case Kind::Local: return argumentName(name);
  case Kind::Closure:
  case Kind::Global: return name;
  case Kind::Item: return parent->identifier() + "_" + keyText(key);
  case Kind::Attr:
    if (name == "_parameters" || name == "_buffers" || name == "_modules") return parent->identifier();
    return parent->identifier() + "_" + name;
  case Kind::FuncGlobal: return name;
  case Kind::FuncClosure: return parent->identifier() + "_closure" + std::to_string(index);
  case Kind::FuncDefault: return parent->identifier() + "_default" + std::to_string(index);
  case Kind::IterItem: return parent->identifier() + "_" + std::to_string(index);
  }
  return "value";
}

GuardNode& Source::guardNode(GuardTree& tree) const {
  switch (kind) {
  case Kind::Local: return tree.local(index, "L['" + name + "']");
  case Kind::Closure: return tree.closureCell(index, "C['" + name + "']");
  case Kind::Global: return tree.global(name);
  case Kind::Item: return parent->guardNode(tree).item(key.ptr());
  case Kind::Attr: return parent->guardNode(tree).attr(name);
  case Kind::FuncGlobal: return parent->guardNode(tree).funcGlobal(name);
  case Kind::FuncClosure: return parent->guardNode(tree).funcClosureCell(index);
  case Kind::FuncDefault: return parent->guardNode(tree).funcDefault(index);
  case Kind::IterItem: return parent->guardNode(tree).iterItem(index);
  }
  return tree.global(name);
}

} // namespace kiln::capture
