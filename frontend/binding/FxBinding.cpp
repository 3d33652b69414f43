// kiln._C._fx: Graph and Node wrappers over ir/, node arguments <-> Python values, Type, the
// text form, the verifier, the pass manager and op-table queries.
//
// A Python Node is a handle (graph object, node pointer, node name) rather than an owner: the
// graph owns its nodes, and a handle checks on every use that its node is still in the graph
// (graph.findNode(name) is the node), so a node erased by Python or by a pass raises instead of
// being read after it was freed; the check is remembered until some graph frees a node
// (ir/GraphGeneration.h), as a lookup by name on every attribute read cost a 10,000-node
// compile ~10% of its Python time. Each graph caches one handle per live node, so the same node
// is the same Python object while anyone holds it (nodes work as dict keys, `is` works).
#include "frontend/binding/FxBinding.h"

#include <cstdint>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <sstream>
#include <unordered_map>

#include "compiler/GraphTracer.h"
#include "frontend/binding/OpFunction.h"
#include "frontend/binding/PythonConvert.h"
#include "ir/GraphGeneration.h"
#include "ir/Identifier.h"
#include "ir/OpTarget.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"
#include "runtime/Dispatcher.h"

namespace kiln::python {

namespace {

// Deeper Python containers than this are rejected (the printer and comparisons recurse).
constexpr int kMaxNesting = 200;

struct GraphHandle {
  explicit GraphHandle(Graph g) : graph(std::move(g)) {}

  Graph graph;
  // Where Python-created nodes go: before this node (named insertBeforeName), or at the end when
  // null. Kept here rather than in the Graph so that a node erased behind Python's back is
  // noticed instead of dereferenced.
  Node* insertBefore = nullptr;
  std::string insertBeforeName;
  // The live Python handle of each node that has one (borrowed; a handle unregisters itself).
  std::unordered_map<Node*, PyObject*> handles;
};

struct NodeHandle {
  nb::object graphObject;
  Node* node;
  std::string name;
  PyObject* self;
  // The nodeFreeGeneration() at which `node` was last seen live in its graph (0: not yet).
  mutable uint64_t liveAt = 0;

  NodeHandle(nb::object g, Node* n, PyObject* s)
      : graphObject(std::move(g)), node(n), name(n->name()), self(s) {}
  NodeHandle(const NodeHandle&) = delete;
  NodeHandle& operator=(const NodeHandle&) = delete;
  ~NodeHandle();
};

PyObject* gGraphClass = nullptr; // kiln.fx.Graph (a Python subclass), once registered
PyObject* gNodeClass = nullptr;  // kiln.fx.Node
PyObject* gDeviceClass = nullptr;

GraphHandle& graphOf(nb::handle graphObject) { return nb::cast<GraphHandle&>(graphObject); }

NodeHandle::~NodeHandle() {
  GraphHandle& g = graphOf(graphObject);
  auto it = g.handles.find(node);
  if (it != g.handles.end() && it->second == self) g.handles.erase(it);
}

bool isAlive(const NodeHandle& h) {
  uint64_t generation = nodeFreeGeneration();
  if (h.liveAt == generation) return true;
  bool alive = graphOf(h.graphObject).graph.findNode(h.name) == h.node;
  if (alive) h.liveAt = generation;
  return alive;
}

Node* liveNode(const NodeHandle& h) {
  if (!isAlive(h))
    throw Error(strCat("node %", h.name, " is no longer in graph @",
                       graphOf(h.graphObject).graph.name(), " (it was erased)"));
  return h.node;
}

nb::object wrapNode(nb::handle graphObject, Node* n) {
  if (!n) return nb::none();
  GraphHandle& g = graphOf(graphObject);
  auto it = g.handles.find(n);
  if (it != g.handles.end() && nb::inst_ptr<NodeHandle>(it->second)->name == n->name())
    return nb::borrow(it->second);
  nb::handle cls = gNodeClass ? nb::handle(gNodeClass) : nb::type<NodeHandle>();
  nb::object inst = nb::inst_alloc(cls);
  new (nb::inst_ptr<NodeHandle>(inst)) NodeHandle(nb::borrow(graphObject), n, inst.ptr());
  nb::inst_mark_ready(inst);
  g.handles[n] = inst.ptr();
  return inst;
}

} // namespace

nb::object wrapGraph(Graph g) {
  nb::handle cls = gGraphClass ? nb::handle(gGraphClass) : nb::type<GraphHandle>();
  nb::object inst = nb::inst_alloc(cls);
  new (nb::inst_ptr<GraphHandle>(inst)) GraphHandle(std::move(g));
  nb::inst_mark_ready(inst);
  return inst;
}

namespace {

// -- arguments ------------------------------------------------------------------------------

// Strings travel as UTF-8; bytes that are not UTF-8 (possible from "\xNN" escapes in the text
// form) survive the round trip through Python as surrogate escapes.
std::string utf8Of(PyObject* s) {
  nb::object bytes = nb::steal(PyUnicode_AsEncodedString(s, "utf-8", "surrogateescape"));
  if (!bytes.is_valid()) throw nb::python_error();
  return std::string(PyBytes_AS_STRING(bytes.ptr()), size_t(PyBytes_GET_SIZE(bytes.ptr())));
}

nb::object pyString(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "surrogateescape");
  if (!o) throw nb::python_error();
  return nb::steal(o);
}

Argument toArgument(nb::handle graphObject, nb::handle o, int depth);

std::vector<Argument> toArguments(nb::handle graphObject, PyObject* seq, int depth) {
  std::vector<Argument> items;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  items.reserve(size_t(n));
  for (Py_ssize_t i = 0; i < n; ++i)
    items.push_back(toArgument(graphObject, PySequence_Fast_GET_ITEM(seq, i), depth + 1));
  return items;
}

Argument toArgument(nb::handle graphObject, nb::handle o, int depth) {
  if (depth > kMaxNesting)
    throw ValueError(strCat("graph arguments nest deeper than ", kMaxNesting, " levels"));
  PyObject* p = o.ptr();
  if (p == Py_None) return Argument();
  if (PyBool_Check(p)) return Argument(p == Py_True);
  if (PyLong_Check(p)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(p, &overflow);
    if (overflow) throw ValueError("integer constants of a graph must fit in int64");
    return Argument(int64_t(v));
  }
  if (PyFloat_Check(p)) return Argument(PyFloat_AS_DOUBLE(p));
  if (PyUnicode_Check(p)) return Argument(utf8Of(p));
  if (isDtypeObject(p)) return Argument(dtypeFromObject(p));
  if (gDeviceClass && PyObject_TypeCheck(p, reinterpret_cast<PyTypeObject*>(gDeviceClass))) {
    Device d;
    toDevice(p, d);
    return Argument(d);
  }
  if (p == Py_Ellipsis) return Argument::ellipsis();
  if (PySlice_Check(p)) {
    auto* s = reinterpret_cast<PySliceObject*>(p);
    return Argument::slice(toArgument(graphObject, s->start, depth + 1),
                           toArgument(graphObject, s->stop, depth + 1),
                           toArgument(graphObject, s->step, depth + 1));
  }
  if (nb::isinstance<NodeHandle>(o)) {
    const NodeHandle& h = nb::cast<const NodeHandle&>(o);
    Node* n = liveNode(h);
    if (!h.graphObject.is(graphObject))
      throw Error(strCat("node %", n->name(), " belongs to graph @", n->graph()->name(),
                         ", not to @", graphOf(graphObject).graph.name()));
    return Argument(n);
  }
  if (PyTuple_Check(p)) return Argument::tuple(toArguments(graphObject, p, depth));
  if (PyList_Check(p)) return Argument::list(toArguments(graphObject, p, depth));
  if (PyDict_Check(p)) {
    std::vector<std::pair<std::string, Argument>> entries;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(p, &pos, &key, &value)) {
      if (!PyUnicode_Check(key))
        throw TypeError(
            strCat("dict keys of graph arguments must be strings, not ", Py_TYPE(key)->tp_name));
      entries.emplace_back(utf8Of(key), toArgument(graphObject, value, depth + 1));
    }
    return Argument::dict(std::move(entries));
  }
  if (isTensor(p))
    throw TypeError("a tensor cannot be a graph argument: make it an attribute of the module and "
                    "read it with a get_attr node");
  throw TypeError(strCat("cannot use a '", Py_TYPE(p)->tp_name,
                         "' as a graph argument (arguments are None, bool, int, float, str, dtype, "
                         "device, Ellipsis, slice, nodes of the graph, and lists, tuples and dicts "
                         "of them)"));
}

Kwargs toKwargs(nb::handle graphObject, nb::handle kwargs) {
  Kwargs out;
  if (kwargs.is_none()) return out;
  if (!PyDict_Check(kwargs.ptr())) throw TypeError("kwargs must be a dict");
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(kwargs.ptr(), &pos, &key, &value)) {
    if (!PyUnicode_Check(key)) throw TypeError("keyword argument names must be strings");
    out.emplace_back(utf8Of(key), toArgument(graphObject, value, 1));
  }
  return out;
}

std::vector<Argument> toArgList(nb::handle graphObject, nb::handle args) {
  if (!PyTuple_Check(args.ptr()) && !PyList_Check(args.ptr()))
    throw TypeError(strCat("args must be a tuple or a list, not ", Py_TYPE(args.ptr())->tp_name));
  return toArguments(graphObject, args.ptr(), 0);
}

nb::object toPython(nb::handle graphObject, const Argument& a) {
  auto items = [&](PyObject* container, bool isList) {
    for (size_t i = 0; i < a.items().size(); ++i) {
      PyObject* item = toPython(graphObject, a.items()[i]).release().ptr();
      if (isList)
        PyList_SET_ITEM(container, Py_ssize_t(i), item);
      else
        PyTuple_SET_ITEM(container, Py_ssize_t(i), item);
    }
    return nb::steal(container);
  };
  switch (a.kind()) {
  case Argument::Kind::None:
    return nb::none();
  case Argument::Kind::Bool:
    return nb::bool_(a.toBool());
  case Argument::Kind::Int:
    return nb::steal(PyLong_FromLongLong(a.toInt()));
  case Argument::Kind::Float:
    return nb::steal(PyFloat_FromDouble(a.toFloat()));
  case Argument::Kind::String:
    return pyString(a.toString());
  case Argument::Kind::Dtype:
    return nb::borrow(dtypeObject(a.toDtype()));
  case Argument::Kind::Device:
    return nb::steal(deviceObject(a.toDevice()));
  case Argument::Kind::Ellipsis:
    return nb::borrow(Py_Ellipsis);
  case Argument::Kind::Slice: {
    nb::object start = toPython(graphObject, a.items()[0]);
    nb::object stop = toPython(graphObject, a.items()[1]);
    nb::object step = toPython(graphObject, a.items()[2]);
    return nb::steal(PySlice_New(start.ptr(), stop.ptr(), step.ptr()));
  }
  case Argument::Kind::Node:
    return wrapNode(graphObject, a.toNode());
  case Argument::Kind::List:
    return items(PyList_New(Py_ssize_t(a.items().size())), true);
  case Argument::Kind::Tuple:
    return items(PyTuple_New(Py_ssize_t(a.items().size())), false);
  case Argument::Kind::Dict: {
    nb::dict d;
    for (size_t i = 0; i < a.keys().size(); ++i)
      d[pyString(a.keys()[i])] = toPython(graphObject, a.items()[i]);
    return d;
  }
  }
  return nb::none();
}

nb::tuple argsToPython(nb::handle graphObject, const std::vector<Argument>& args) {
  return nb::tuple(toPython(graphObject, Argument::tuple(args)));
}

nb::dict kwargsToPython(nb::handle graphObject, const Kwargs& kwargs) {
  nb::dict d;
  for (const auto& [k, v] : kwargs)
    d[pyString(k)] = toPython(graphObject, v);
  return d;
}

// -- types ----------------------------------------------------------------------------------

nb::object symIntToPython(const IndexExpr& s) {
  if (auto c = s.constant()) return nb::steal(PyLong_FromLongLong(*c));
  return nb::str(s.str().c_str());
}

nb::tuple symIntsToPython(const std::vector<IndexExpr>& v) {
  nb::list out;
  for (const IndexExpr& s : v)
    out.append(symIntToPython(s));
  return nb::tuple(out);
}

const TensorType& tensorOf(const Type& t, const char* what) {
  if (!t.isTensor())
    throw TypeError(strCat("type ", t.str(), " is not a tensor type; it has no ", what));
  return t.tensor();
}

Type typeFromText(std::string_view text) {
  try {
    return parseType(text);
  } catch (const IRError& e) {
    throw ValueError(strCat("invalid type '", text, "': ", e.diagnostic().message));
  }
}

const char* typeKindName(Type::Kind k) {
  switch (k) {
  case Type::Kind::Tensor:
    return "tensor";
  case Type::Kind::Tuple:
    return "tuple";
  case Type::Kind::Int:
    return "int";
  case Type::Kind::Float:
    return "float";
  case Type::Kind::Bool:
    return "bool";
  }
  return "";
}

void registerType(nb::module_& fx) {
  nb::class_<Type>(fx, "Type",
                   "A node's value type in the text form's notation: f32[8, s0], "
                   "(f32[2], i64[2]), int, float, bool.")
      .def("__init__",
           [](Type* self, std::string_view text) { new (self) Type(typeFromText(text)); })
      .def_prop_ro("kind", [](const Type& t) { return typeKindName(t.kind()); })
      .def_prop_ro(
          "dtype",
          [](const Type& t) { return nb::borrow(dtypeObject(tensorOf(t, "dtype").dtype)); })
      .def_prop_ro("shape",
                   [](const Type& t) { return symIntsToPython(tensorOf(t, "shape").sizes); })
      .def_prop_ro("stride",
                   [](const Type& t) -> nb::object {
                     const TensorType& tt = tensorOf(t, "stride");
                     if (tt.strides) return symIntsToPython(*tt.strides);
                     // Contiguous: each stride is the product of the sizes after it.
                     std::vector<IndexExpr> strides(tt.sizes.size());
                     IndexExpr running(int64_t(1));
                     for (size_t i = tt.sizes.size(); i-- > 0;) {
                       strides[i] = running;
                       running = running * tt.sizes[i];
                     }
                     return symIntsToPython(strides);
                   })
      .def_prop_ro("has_explicit_stride",
                   [](const Type& t) { return t.isTensor() && t.tensor().strides.has_value(); })
      .def_prop_ro(
          "device",
          [](const Type& t) { return nb::steal(deviceObject(tensorOf(t, "device").device)); })
      .def_prop_ro("is_static", [](const Type& t) { return tensorOf(t, "sizes").isStatic(); })
      .def_prop_ro("elements",
                   [](const Type& t) {
                     nb::list out;
                     for (const Type& e : t.elements())
                       out.append(nb::cast(e));
                     return nb::tuple(out);
                   })
      .def("__str__", &Type::str)
      .def("__repr__", [](const Type& t) { return "kiln.fx.Type(\"" + t.str() + "\")"; })
      .def("__eq__",
           [](const Type& a, nb::handle b) {
             return nb::isinstance<Type>(b) && a == nb::cast<const Type&>(b);
           })
      .def("__hash__", [](const Type& t) { return std::hash<std::string>()(t.str()); });
}

// -- nodes ----------------------------------------------------------------------------------

// A target path prints bare when its dot-separated parts are identifiers or integers.
bool isPlainPath(const std::string& s) {
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string part = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    if (!digits && !isIdentifier(part)) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// One node as a line of the text form (placeholders as "%x = placeholder x").
std::string formatNode(const Node& n) {
  std::string target = isPlainPath(n.target()) ? n.target() : quoteString(n.target());
  std::string s = n.opcode() == Opcode::Output ? "output " : "%" + n.name() + " = ";
  if (n.opcode() == Opcode::Output) {
    s += n.args().empty() ? "None" : printArgument(n.args()[0]);
  } else {
    s += std::string(opcodeName(n.opcode())) + " " + target;
    if (n.opcode() != Opcode::Placeholder && n.opcode() != Opcode::GetAttr) {
      std::string list;
      for (const Argument& a : n.args())
        list += (list.empty() ? "" : ", ") + printArgument(a);
      for (const auto& [k, v] : n.kwargs())
        list += (list.empty() ? "" : ", ") + k + "=" + printArgument(v);
      s += "(" + list + ")";
    }
  }
  if (n.meta.type) s += " : " + n.meta.type->str();
  if (n.meta.loc)
    s += " loc(" + quoteString(n.meta.loc->file) + ":" + std::to_string(n.meta.loc->line) + ":" +
         (isIdentifier(n.meta.loc->function) ? n.meta.loc->function
                                             : quoteString(n.meta.loc->function)) +
         ")";
  return s;
}

// `node.op` as one interned str per opcode (read for every node by every Python pass).
nb::object opcodeString(Opcode op) {
  static PyObject* names[size_t(Opcode::Output) + 1] = {};
  PyObject*& name = names[size_t(op)];
  if (!name) name = PyUnicode_InternFromString(opcodeName(op)); // kept for the process
  return nb::borrow(name);
}

NodeHandle& handleOf(nb::handle o) { return nb::cast<NodeHandle&>(o); }

Node* nodeArg(nb::handle graphObject, nb::handle o, const char* what) {
  if (!nb::isinstance<NodeHandle>(o))
    throw TypeError(strCat(what, " must be a kiln.fx.Node, not ", Py_TYPE(o.ptr())->tp_name));
  NodeHandle& h = handleOf(o);
  Node* n = liveNode(h);
  if (!h.graphObject.is(graphObject))
    throw Error(strCat(what, " %", n->name(), " belongs to graph @", n->graph()->name(),
                       ", not to @", graphOf(graphObject).graph.name()));
  return n;
}

void registerNode(nb::module_& fx) {
  nb::class_<NodeHandle>(fx, "Node", "One operation of a kiln.fx.Graph.")
      .def_prop_ro("name", [](NodeHandle& h) { return liveNode(h)->name(); })
      .def_prop_ro("op", [](NodeHandle& h) { return opcodeString(liveNode(h)->opcode()); })
      .def_prop_ro("target", [](NodeHandle& h) { return liveNode(h)->target(); })
      .def_prop_ro("graph", [](NodeHandle& h) { return h.graphObject; })
      .def_prop_ro("_erased", [](NodeHandle& h) { return !isAlive(h); })
      .def_prop_ro("_handle_name", [](NodeHandle& h) { return h.name; })
      .def_prop_rw(
          "args", [](NodeHandle& h) { return argsToPython(h.graphObject, liveNode(h)->args()); },
          [](NodeHandle& h, nb::handle args) {
            liveNode(h)->setArgs(toArgList(h.graphObject, args));
          })
      .def_prop_rw(
          "kwargs",
          [](NodeHandle& h) { return kwargsToPython(h.graphObject, liveNode(h)->kwargs()); },
          [](NodeHandle& h, nb::handle kwargs) {
            liveNode(h)->setKwargs(toKwargs(h.graphObject, kwargs));
          })
      .def("update_arg",
           [](NodeHandle& h, size_t index, nb::handle value) {
             liveNode(h)->setArg(index, toArgument(h.graphObject, value, 0));
           })
      .def_prop_ro("users",
                   [](NodeHandle& h) {
                     nb::dict d;
                     for (Node* u : liveNode(h)->users())
                       d[wrapNode(h.graphObject, u)] = nb::none();
                     return d;
                   })
      .def_prop_ro("all_input_nodes",
                   [](NodeHandle& h) {
                     nb::list out;
                     for (Node* n : liveNode(h)->inputs())
                       out.append(wrapNode(h.graphObject, n));
                     return out;
                   })
      .def_prop_ro("prev",
                   [](NodeHandle& h) { return wrapNode(h.graphObject, liveNode(h)->prev()); })
      .def_prop_ro("next",
                   [](NodeHandle& h) { return wrapNode(h.graphObject, liveNode(h)->next()); })
      .def(
          "replace_all_uses_with",
          [](NodeHandle& h, nb::handle replacement) {
            Node* n = liveNode(h);
            Argument to = toArgument(h.graphObject, replacement, 0);
            nb::list changed;
            for (Node* u : n->users())
              changed.append(wrapNode(h.graphObject, u));
            n->graph()->replaceAllUsesWith(n, to);
            return changed;
          },
          "Makes every user of this node use `replacement` (a node or a constant) instead; returns "
          "the users that changed.")
      .def("replace_input_with",
           [](NodeHandle& h, nb::handle old, nb::handle replacement) {
             Node* n = liveNode(h);
             n->replaceInput(nodeArg(h.graphObject, old, "the input to replace"),
                             toArgument(h.graphObject, replacement, 0));
           })
      .def(
          "prepend",
          [](NodeHandle& h, nb::handle other) {
            Node* n = liveNode(h);
            n->graph()->moveBefore(nodeArg(h.graphObject, other, "the node to move"), n);
          },
          "Moves `other` right before this node.")
      .def(
          "append",
          [](NodeHandle& h, nb::handle other) {
            Node* n = liveNode(h);
            n->graph()->moveAfter(nodeArg(h.graphObject, other, "the node to move"), n);
          },
          "Moves `other` right after this node.")
      .def_prop_rw(
          "_type",
          [](NodeHandle& h) -> nb::object {
            Node* n = liveNode(h);
            return n->meta.type ? nb::cast(*n->meta.type) : nb::none();
          },
          [](NodeHandle& h, nb::handle t) {
            Node* n = liveNode(h);
            if (t.is_none())
              n->meta.type.reset();
            else if (PyUnicode_Check(t.ptr()))
              n->meta.type = typeFromText(utf8Of(t.ptr()));
            else if (nb::isinstance<Type>(t))
              n->meta.type = nb::cast<const Type&>(t);
            else
              throw TypeError(strCat("a node's type must be a kiln.fx.Type, its text or None, not ",
                                     Py_TYPE(t.ptr())->tp_name));
          },
          nb::arg("value").none())
      .def_prop_rw(
          "_loc",
          [](NodeHandle& h) -> nb::object {
            Node* n = liveNode(h);
            if (!n->meta.loc) return nb::none();
            return nb::make_tuple(pyString(n->meta.loc->file), n->meta.loc->line,
                                  pyString(n->meta.loc->function));
          },
          [](NodeHandle& h, std::optional<std::tuple<std::string, int, std::string>> loc) {
            Node* n = liveNode(h);
            if (!loc) {
              n->meta.loc.reset();
              return;
            }
            KILN_CHECK_VALUE(std::get<1>(*loc) >= 0, "a source line number cannot be negative");
            n->meta.loc = SourceLoc{std::get<0>(*loc), std::get<1>(*loc), std::get<2>(*loc)};
          },
          nb::arg("value").none())
      .def("format_node", [](NodeHandle& h) { return formatNode(*liveNode(h)); });
}

// -- graphs ---------------------------------------------------------------------------------

// Points the graph's insertion point where Python last asked for it.
void applyInsertionPoint(GraphHandle& g) {
  if (!g.insertBefore) {
    g.graph.setInsertionPointToEnd();
    return;
  }
  if (g.graph.findNode(g.insertBeforeName) != g.insertBefore)
    throw Error(strCat("the insertion point %", g.insertBeforeName, " is no longer in graph @",
                       g.graph.name(), "; choose another with inserting_before/inserting_after"));
  g.graph.setInsertionPointBefore(g.insertBefore);
}

Opcode opcodeArg(std::string_view name) {
  auto op = opcodeFromName(name);
  if (!op)
    throw ValueError(strCat("unknown node op '", name, "' (expected placeholder, get_attr, ",
                            "call_function, call_method, call_module or output)"));
  return *op;
}

std::string problemsMessage(const Graph& g, const std::vector<Diagnostic>& problems) {
  std::string msg = strCat("graph @", g.name(), " is not well formed:");
  for (const Diagnostic& d : problems)
    msg += "\n  " + (d.pos.known() ? strCat("line ", d.pos.line, ": ") : std::string()) + d.message;
  return msg;
}

void registerGraph(nb::module_& fx) {
  nb::class_<GraphHandle>(fx, "Graph", "A kiln.fx graph: nodes in topological order.")
      .def(
          "__init__",
          [](GraphHandle* self, std::string name) {
            new (self) GraphHandle(Graph(std::move(name)));
          },
          nb::arg("name") = "graph")
      .def_prop_rw(
          "name", [](nb::handle self) { return graphOf(self).graph.name(); },
          [](nb::handle self, std::string name) {
            KILN_CHECK_VALUE(!name.empty(), "a graph's name cannot be empty");
            graphOf(self).graph.setName(std::move(name));
          })
      .def_prop_ro("nodes",
                   [](nb::handle self) {
                     nb::list out;
                     for (Node* n : graphOf(self).graph.nodes())
                       out.append(wrapNode(self, n));
                     return out;
                   })
      .def("__len__", [](nb::handle self) { return graphOf(self).graph.size(); })
      .def("find_node",
           [](nb::handle self, std::string_view name) {
             return wrapNode(self, graphOf(self).graph.findNode(name));
           })
      .def_prop_ro("output_node",
                   [](nb::handle self) { return wrapNode(self, graphOf(self).graph.outputNode()); })
      .def(
          "_create",
          [](nb::handle self, std::string_view opcode, std::string target, nb::handle args,
             nb::handle kwargs, std::optional<std::string> name) {
            GraphHandle& g = graphOf(self);
            Opcode op = opcodeArg(opcode);
            std::vector<Argument> argList = toArgList(self, args);
            Kwargs kw = toKwargs(self, kwargs);
            applyInsertionPoint(g);
            std::string nodeName = name.value_or("");
            if (op == Opcode::Placeholder && nodeName.empty())
              nodeName = g.graph.uniqueName(target);
            Node* n =
                g.graph.create(op, std::move(target), std::move(argList), std::move(kw), nodeName);
            return wrapNode(self, n);
          },
          nb::arg("op"), nb::arg("target"), nb::arg("args"), nb::arg("kwargs").none(),
          nb::arg("name").none())
      .def("_insertion_point",
           [](nb::handle self) -> nb::object {
             GraphHandle& g = graphOf(self);
             if (!g.insertBefore || g.graph.findNode(g.insertBeforeName) != g.insertBefore)
               return nb::none();
             return wrapNode(self, g.insertBefore);
           })
      .def(
          "_set_insertion_point",
          [](nb::handle self, nb::handle before) {
            GraphHandle& g = graphOf(self);
            Node* n = before.is_none() ? nullptr : nodeArg(self, before, "the insertion point");
            g.insertBefore = n;
            g.insertBeforeName = n ? n->name() : "";
          },
          nb::arg("before").none(), "New nodes go before `before` (None: at the end).")
      .def(
          "erase_node",
          [](nb::handle self, nb::handle node) {
            GraphHandle& g = graphOf(self);
            Node* n = nodeArg(self, node, "the node to erase");
            Node* next = n->next();
            g.graph.erase(n);
            if (g.insertBefore == n) {
              g.insertBefore = next;
              g.insertBeforeName = next ? next->name() : "";
            }
          },
          "Removes a node that has no users (RuntimeError otherwise).")
      .def(
          "lint",
          [](nb::handle self, bool requireTypes) {
            const Graph& g = graphOf(self).graph;
            std::vector<Diagnostic> problems = verify(g, VerifyOptions{requireTypes});
            if (!problems.empty()) throw Error(problemsMessage(g, problems));
          },
          nb::arg("require_types") = false,
          "Runs the verifier; raises RuntimeError listing every problem.")
      .def("__str__", [](nb::handle self) { return printGraph(graphOf(self).graph); })
      .def("clone", [](nb::handle self) { return wrapGraph(graphOf(self).graph.clone()); })
      .def("structurally_equal",
           [](nb::handle self, nb::handle other) {
             return nb::isinstance<GraphHandle>(other) &&
                    structurallyEqual(graphOf(self).graph, graphOf(other).graph);
           })
      .def(
          "_run_passes",
          [](nb::handle self, std::string_view pipeline, bool printAfterAll) {
            Graph& g = graphOf(self).graph;
            std::ostringstream log;
            PipelineOptions options;
            options.printAfterAll = printAfterAll;
            options.log = &log;
            PassManager::parse(pipeline).run(g, options);
            return log.str();
          },
          nb::arg("pipeline"), nb::arg("print_after_all") = false);
}

// -- the op table ---------------------------------------------------------------------------

OpId opArg(std::string_view target) {
  OpId op = resolveOpTarget(target);
  if (op == OpId::NumOps) throw ValueError(unknownOpMessage(target));
  return op;
}

nb::dict schemaToPython(OpId op) {
  const OpSchema& s = opSchema(op);
  nb::dict d;
  d["target"] = opTarget(op);
  d["namespace"] = s.ns;
  d["name"] = s.name;
  d["overload"] = s.overload;
  d["schema"] = s.text;
  nb::list args, returns;
  for (const ArgSpec& a : s.args) {
    nb::dict arg;
    arg["name"] = a.name;
    arg["type"] = argTypeName(a.type);
    arg["optional"] = a.optional;
    arg["kwarg_only"] = a.kwargOnly;
    arg["mutated"] = a.mutated;
    arg["fixed_length"] = a.fixedLength;
    arg["has_default"] = a.hasDefault;
    args.append(arg);
  }
  for (const ReturnSpec& r : s.returns)
    returns.append(nb::make_tuple(r.name, argTypeName(r.type)));
  d["args"] = args;
  d["returns"] = returns;
  d["is_function"] = s.isFunction;
  d["is_method"] = s.isMethod;
  return d;
}

} // namespace

void registerFx(nb::module_& m) {
  nb::module_ fx = m.def_submodule("_fx", "the graph IR (used by kiln.fx)");
  gDeviceClass = m.attr("device").ptr();
  registerType(fx);
  registerNode(fx);
  registerGraph(fx);

  fx.def("_set_classes", [](nb::handle graphClass, nb::handle nodeClass) {
    Py_XINCREF(graphClass.ptr());
    Py_XINCREF(nodeClass.ptr());
    gGraphClass = graphClass.ptr();
    gNodeClass = nodeClass.ptr();
  });
  fx.def(
      "parse",
      [](std::string_view text, std::string_view fileName) {
        ParseResult r = parseGraphs(text);
        if (r.error) throw ValueError(formatDiagnostic(*r.error, fileName, text));
        nb::list out;
        for (Graph& g : r.graphs)
          out.append(wrapGraph(std::move(g)));
        return out;
      },
      nb::arg("text"), nb::arg("file_name") = "<string>",
      "Every graph of a text in the text form (ValueError with the position on malformed text).");
  fx.def("op_targets", [] {
    nb::list out;
    for (size_t i = 0; i < Dispatcher::instance().numOps(); ++i)
      out.append(opTarget(OpId(i)));
    return out;
  });
  fx.def("op_schema", [](std::string_view target) { return schemaToPython(opArg(target)); });
  fx.def(
      "op_callable",
      [](std::string_view target) {
        // One callable per overload, made on first use: it calls exactly that overload.
        static std::unordered_map<int, PyObject*> cache;
        OpId op = opArg(target);
        auto it = cache.find(int(op));
        if (it == cache.end()) {
          PyObject* f = makeOpFunction(
              std::make_unique<OverloadGroup>(opTarget(op), std::vector<OpId>{op}, false));
          if (!f) throw nb::python_error();
          it = cache.emplace(int(op), f).first;
        }
        return nb::borrow(it->second);
      },
      "The function calling one op overload of the table: op_callable(\"aten.add.Tensor\").");
  fx.def(
      "retrace",
      [](nb::handle graph, std::string_view level, bool decomposeComposites) {
        if (!nb::isinstance<GraphHandle>(graph))
          throw TypeError("retrace() expects a kiln.fx.Graph");
        compiler::DecomposeTo to;
        if (level == "aten") to = compiler::DecomposeTo::None;
        else if (level == "core_aten") to = compiler::DecomposeTo::CoreAten;
        else if (level == "prims") to = compiler::DecomposeTo::Prims;
        else
          throw ValueError(strCat("retrace(): unknown level '", level,
                                  "' (expected 'aten', 'core_aten' or 'prims')"));
        return wrapGraph(compiler::retrace(graphOf(graph).graph, to, decomposeComposites));
      },
      nb::arg("graph"), nb::arg("level"), nb::arg("decompose_composites") = false,
      "A new graph computing the same as `graph`, traced through the dispatcher on fake tensors "
      "(every node typed): 'aten' records the ops as called, 'core_aten' decomposes every op "
      "that is neither core nor a prim, 'prims' every op that is not a prim (where they have "
      "decompositions). decompose_composites: also every op without a derivative formula of "
      "its own (what the joint trace records).");
  fx.def(
      "trace_joint",
      [](nb::handle graph, std::vector<bool> requiresGrad) {
        if (!nb::isinstance<GraphHandle>(graph))
          throw TypeError("trace_joint() expects a kiln.fx.Graph");
        compiler::JointGraph joint = compiler::traceJoint(graphOf(graph).graph, requiresGrad);
        nb::list tangentFor, gradInputs;
        for (bool b : joint.tangentFor)
          tangentFor.append(b);
        for (size_t i : joint.gradInputs)
          gradInputs.append(i);
        return nb::make_tuple(wrapGraph(std::move(joint.graph)), joint.numForwardOutputs, tangentFor,
                              gradInputs);
      },
      nb::arg("graph"), nb::arg("requires_grad"),
      "AOT autograd's joint graph of `graph` (compiler/GraphTracer.h): (graph, number of forward "
      "outputs, per forward output whether it has a tangent input, the inputs whose gradients "
      "follow the forward outputs). requires_grad flags the inputs (placeholders and get_attrs, "
      "in order) that require grad.");
  fx.def("passes", [] {
    nb::list out;
    for (const PassInfo& p : registeredPasses())
      out.append(nb::make_tuple(p.name, p.description));
    return out;
  });
}

const Graph* cppGraphOf(nb::handle graph) {
  GraphHandle* h = nullptr;
  if (!nb::try_cast<GraphHandle*>(graph, h) || !h) return nullptr;
  return &h->graph;
}

} // namespace kiln::python
