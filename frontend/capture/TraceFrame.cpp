// kiln._C._capture.trace_frame: runs the symbolic interpreter over a frame and returns the
// graph, its guards, how to feed its inputs from the frame's arguments and how to rebuild the
// frame's return value from its outputs (see docs/capture.md).
#include <cstdint>
#include <Python.h>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "frontend/binding/FxBinding.h"
#include "frontend/binding/PythonConvert.h"
#include "frontend/capture/GuardTreeBinding.h"
#include "frontend/capture/SymbolicInterpreter.h"
#include "frontend/capture/TraceFrame.h"
#include "runtime/DefaultDtype.h"
#include "runtime/Autocast.h"
#include "runtime/Error.h"

namespace kiln::capture {

// kiln._compiling's RESTORE_GRAD_ENABLED / RESTORE_GRAD_DISABLED (Tracer.cpp): the exit of a
// grad-mode `with` block cut by a graph break, as the glue hands it to the resume function.
nb::handle gradModeRestorer(bool mode);
// kiln._compiling._RestoreAutocast(packed) (Tracer.cpp): the exit of an autocast block cut by a
// break.
nb::object autocastRestorer(uint32_t packed);

namespace {

std::string literal(nb::handle o) { return nb::cast<std::string>(nb::repr(o)); }

} // namespace

std::string Tracer::constantRef(nb::handle o) {
  constants_.append(o);
  return "__c[" + std::to_string(nb::len(constants_) - 1) + "]";
}

std::string Tracer::symbolicSizeExpr(PyObject* o) const {
  if (symbolExpr_.empty() || !PyLong_Check(o) || PyLong_CheckExact(o) || PyBool_Check(o)) return {};
  static nb::handle sizeSource =
      nb::object(nb::module_::import_("kiln.compiler.dynamic").attr("size_source")).release();
  nb::dict symbols;
  for (const auto& [id, expr] : symbolExpr_) symbols[nb::int_(id)] = nb::str(expr.c_str());
  nb::object source = sizeSource(nb::handle(o), symbols);
  return source.is_none() ? std::string() : nb::cast<std::string>(source);
}

std::string Tracer::outputExpr(VT* v, std::vector<Node*>& outputs, nb::list& constants) {
  switch (v->kind) {
  case VT::Kind::Ndarray: return ndarrayOutputExpr(static_cast<NdarrayVT*>(v), outputs, constants);
  case VT::Kind::Number: { // the argument itself, or a Python number again after the graph
    auto* n = static_cast<NumberVT*>(v);
    if (!n->inputExpr.empty()) return n->inputExpr;
    return outputExpr(make<TensorVT>(n->fake), outputs, constants) + ".item()";
  }
  case VT::Kind::Tensor: {
    auto* tv = static_cast<TensorVT*>(v);
    Node* n = recorder_.nodeOf(python::unwrapTensor(tv->fake.ptr()));
    // A tensor from outside the graph reads as an attribute (a parameter, a global tensor): the
    // object itself, as in eager code and as TorchDynamo rebuilds it from its source. A graph
    // output would be a new tensor: autograd.grad(loss, params) after a break found the
    // "parameters" unused.
    if (n && n->opcode() == Opcode::GetAttr && tv->real.is_valid()) return constantRef(tv->real);
    if (!n) throw Unsupported{"internal: a returned tensor is not part of the graph"};
    auto input = inputExprOf_.find(n);
    if (input != inputExprOf_.end()) return input->second;
    size_t i = std::find(outputs.begin(), outputs.end(), n) - outputs.begin();
    if (i == outputs.size()) outputs.push_back(n);
    return "__o[" + std::to_string(i) + "]";
  }
  case VT::Kind::Constant: {
    PyObject* o = static_cast<ConstantVT*>(v)->value.ptr();
    if (o == Py_None || PyBool_Check(o) || PyLong_CheckExact(o) || PyUnicode_CheckExact(o))
      return literal(o);
    std::string size = symbolicSizeExpr(o);
    if (!size.empty()) return size;
    if (PyTuple_Check(o) && !symbolExpr_.empty()) {
      // A shape with symbolic dims (`return x.shape`): rebuilt from the input's sizes.
      std::string items;
      bool symbolic = false;
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i) {
        PyObject* item = PyTuple_GET_ITEM(o, i);
        std::string e = symbolicSizeExpr(item);
        symbolic = symbolic || !e.empty();
        if (e.empty() && !PyLong_Check(item)) return constantRef(o);
        items += (e.empty() ? literal(nb::int_(nb::borrow(item))) : e) + ", ";
      }
      if (symbolic) {
        std::string tuple = "(" + items + ")";
        return PyTuple_CheckExact(o) ? tuple : constantRef(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(o)))) + "(" + tuple + ")";
      }
    }
    return constantRef(o);
  }
  case VT::Kind::List:
  case VT::Kind::Tuple: {
    auto* s = static_cast<SequenceVT*>(v);
    if (s->original.is_valid() && (replayed(v) || !s->mutated))
      return originalExpr(v, s->original);
    if (memo_.count(v)) return memo_[v];
    std::string body;
    for (VT* x : s->items)
      body += outputExpr(x, outputs, constants) + ", ";
    if (v->kind == VT::Kind::List) return memoized(v, "[" + body + "]");
    std::string tuple = "(" + body + ")";
    if (!s->namedType.is_valid()) return tuple;
    if (PyObject_HasAttrString(s->namedType.ptr(), "_make"))
      return constantRef(s->namedType) + "._make(" + tuple + ")";
    return constantRef(s->namedType) + "(" + tuple + ")";
  }
  case VT::Kind::Dict: {
    auto* d = static_cast<DictVT*>(v);
    if (d->original.is_valid() && (replayed(v) || !d->mutated))
      return originalExpr(v, d->original);
    if (memo_.count(v)) return memo_[v];
    std::string body;
    for (auto& [k, x] : d->entries) {
      std::string key = PyUnicode_CheckExact(k.ptr()) || PyLong_CheckExact(k.ptr()) ? literal(k) : constantRef(k);
      body += key + ": " + outputExpr(x, outputs, constants) + ", ";
    }
    if (d->madeType.is_valid()) return memoized(v, constantRef(d->madeType) + "({" + body + "})");
    return memoized(v, "{" + body + "}");
  }
  case VT::Kind::Set:
    if (static_cast<SetVT*>(v)->fromOutside) return constantRef(static_cast<SetVT*>(v)->original);
    if (memo_.count(v)) return memo_[v];
    return memoized(v, "set(" + constantRef(toPython(v)) + ")");
  case VT::Kind::Object: {
    // A generator or iterator made while tracing is consumed by whoever runs it: as a constant
    // of the glue, the next call would get it exhausted (train_step_sgd's
    // `[... for p in model.parameters()]` on 3.12 returned [] from its second call on).
    PyObject* o = toPython(v).ptr();
    if (!v->source && (PyGen_Check(o) || PyIter_Check(o)))
      throw Unsupported{std::string("a ") + Py_TYPE(o)->tp_name +
                        " made while tracing (the compiled code would reuse it, exhausted)"};
    return constantRef(o);
  }
  case VT::Kind::Function: return constantRef(toPython(v));
  case VT::Kind::Module:
    if (static_cast<ModuleVT*>(v)->madeWhileTracing)
      throw Unsupported{"an nn.Module made in the compiled code leaving it (each call makes a new one)"};
    return constantRef(toPython(v));
  case VT::Kind::Iterator: {
    // An iterator on the stack at a break (a comprehension's argument: `[f(x) for _ in
    // range(5)]` breaking inside f): a new one over the items it has left, made at each call.
    auto* it = static_cast<IteratorVT*>(v);
    // One of kiln's generators (`SGD(model.parameters())` breaking at the call): TorchDynamo
    // cannot rebuild torch's (they mutate a memo set as they run) and runs the frame eagerly;
    // as it does, rather than make more breaks than torch.compile.
    if (it->libraryGenerator)
      throw Unsupported{"a generator of kiln's library (Module.parameters() & co) live at a graph break "
                        "(as with torch.compile, which cannot rebuild one)"};
    if (memo_.count(v)) return memo_[v];
    std::string body;
    for (size_t i = it->next; i < it->items.size(); ++i)
      body += outputExpr(it->items[i], outputs, constants) + ", ";
    return memoized(v, "iter([" + body + "])");
  }
  case VT::Kind::NestedFunction: {
    // A function made while tracing (a comprehension's code on 3.11) on the stack at a break:
    // made again from its code, defaults and closure cells. Cells the trace made are not
    // rebuilt (the resumed frame would not share them).
    auto* f = static_cast<NestedFunctionVT*>(v);
    if (memo_.count(v)) return memo_[v];
    static nb::handle make =
        nb::object(nb::module_::import_("kiln._compiling").attr("make_function")).release();
    static nb::handle cellWritten =
        nb::object(nb::module_::import_("kiln._compiling").attr("cell_written")).release();
    std::string closure;
    nb::tuple freevars = nb::borrow<nb::tuple>(f->code.attr("co_freevars"));
    for (size_t i = 0; i < f->closure.size(); ++i) {
      VT* c = f->closure[i];
      if (c->kind == VT::Kind::RealCell) {
        closure += constantRef(static_cast<RealCellVT*>(c)->cell) + ", ";
        continue;
      }
      // A cell of the traced frame: a new cell holding its value. Only where nobody could tell
      // the difference: neither the function nor the rest of the frame writes the variable.
      if (c->kind != VT::Kind::Cell || nb::cast<bool>(cellWritten(f->code, code_, stopAt, freevars[i])))
        throw Unsupported{"a function defined inside the compiled one, sharing a variable the "
                          "frame or the function writes, live at a graph break"};
      VT* contents = static_cast<CellVT*>(c)->contents;
      closure += constantRef(make.attr("cell")) + "(" +
                 (contents ? outputExpr(contents, outputs, constants) : std::string()) + "), ";
    }
    std::string defaults;
    for (VT* d : f->defaults)
      defaults += outputExpr(d, outputs, constants) + ", ";
    std::string kwdefaults = f->kwdefaults ? outputExpr(f->kwdefaults, outputs, constants) : "None";
    return memoized(v, constantRef(make) + "(" + constantRef(f->code) + ", " + constantRef(f->globals) +
                           ", (" + defaults + "), " + kwdefaults + ", (" + closure + "))");
  }
  case VT::Kind::Format: { // an f-string of a tensor: formatted by the glue, after the graph
    auto* f = static_cast<FormatVT*>(v);
    if (memo_.count(v)) return memo_[v];
    std::string args;
    for (VT* a : f->args)
      args += outputExpr(a, outputs, constants) + ", ";
    for (auto& [k, a] : f->kwargs)
      args += k + "=" + outputExpr(a, outputs, constants) + ", ";
    return memoized(v, literal(nb::str(f->format.c_str(), f->format.size())) + ".format(" + args + ")");
  }
  case VT::Kind::NewObject: {
    // An instance of a user class made while tracing (a torch.distributions.Normal) live at a
    // graph break or returned: made again, as TorchDynamo does, by the class's __new__ and the
    // instance dict the trace built (named first, so an attribute may refer back to it).
    auto* o = static_cast<NewObjectVT*>(v);
    if (memo_.count(v)) return memo_[v];
    if (reinterpret_cast<PyTypeObject*>(o->cls.ptr())->tp_dictoffset == 0)
      throw Unsupported{std::string("returning a value of this kind (an object created inside the compiled one, "
                                    "of a class without an instance __dict__: ") +
                        reinterpret_cast<PyTypeObject*>(o->cls.ptr())->tp_name + ")"};
    std::string cls = constantRef(o->cls);
    std::string name = memoized(v, cls + ".__new__(" + cls + ")");
    std::string body;
    for (auto& [k, x] : o->attrs)
      body += literal(nb::str(k.c_str(), k.size())) + ": " + outputExpr(x, outputs, constants) + ", ";
    if (!body.empty()) lets_.push_back(name + ".__dict__.update({" + body + "})");
    return name;
  }
  case VT::Kind::GradModeExit: // a break inside `with no_grad():`: the block's exit, for the resume
    return constantRef(gradModeRestorer(static_cast<GradModeExitVT*>(v)->restore));
  case VT::Kind::AutocastExit: // a break inside `with autocast(...)`: the block's exit, likewise
    return constantRef(autocastRestorer(static_cast<AutocastExitVT*>(v)->restore));
  case VT::Kind::Method: { // a bound method, e.g. `t.item` on the stack at a graph break
    auto* m = static_cast<MethodVT*>(v);
    std::string self = outputExpr(m->self, outputs, constants);
    if (m->function.is_valid()) return constantRef(m->function) + ".__get__(" + self + ")";
    return "(" + self + ")." + m->name;
  }
  default:
    throw Unsupported{std::string("returning a value of this kind (") +
                      (v->kind == VT::Kind::NestedFunction ? "a function defined inside the compiled one"
                                                           : "an iterator or internal value") + ")"};
  }
}

// A container from outside the frame, where it leaves the trace: the object itself (`acts.clear()`
// at a break cleared a copy of a dict of tensors, rebuilt from its items, and missed `acts`).
// Reached other than through an argument, the glue names the object it saw while tracing:
// guard that the next call reaches the same one.
std::string Tracer::originalExpr(VT* container, nb::handle original) {
  if (container->source && container->source->isArgument()) return container->source->expr();
  if (container->source && !replayed(container) && containsTensor(container))
    container->source->guardNode(*guards_).checkId(original.ptr());
  return constantRef(original);
}

std::string Tracer::memoized(VT* v, const std::string& expr) {
  std::string name = "__v" + std::to_string(lets_.size());
  lets_.push_back(name + " = " + expr);
  memo_[v] = name;
  return name;
}

void Tracer::recordContainer(VT* container) {
  if (replayed(container)) return;
  // The glue replays into the argument it names, or else into this very object: guard that the
  // next call reaches the same one.
  if (container->source && !container->source->isArgument()) {
    nb::handle original = container->kind == VT::Kind::Dict ? static_cast<DictVT*>(container)->original
                                                            : static_cast<SequenceVT*>(container)->original;
    container->source->guardNode(*guards_).checkId(original.ptr());
  }
  sideEffects.push_back({SideEffect::Kind::Container, container, {}, {}, nullptr});
}

bool Tracer::replayed(VT* container) const {
  for (const SideEffect& e : sideEffects)
    if (e.container == container) return true;
  return false;
}

void Tracer::recordStore(SideEffect::Kind kind, nb::handle object, const std::string& name, VT* value) {
  sideEffects.push_back({kind, nullptr, nb::borrow(object), name, value});
}

VT* Tracer::storedValue(SideEffect::Kind kind, PyObject* object, const std::string& name) const {
  for (auto it = sideEffects.rbegin(); it != sideEffects.rend(); ++it)
    if (it->kind == kind && it->object.ptr() == object && it->name == name) return it->value;
  return nullptr;
}

bool Tracer::madeFormat() const {
  for (auto& v : arena_)
    if (v->kind == VT::Kind::Format) return true;
  return false;
}

bool Tracer::hasStoredAttr(PyObject* object) const {
  for (auto& e : sideEffects)
    if (e.kind == SideEffect::Kind::Attr && e.object.ptr() == object) return true;
  return false;
}

// The statements replaying the trace's side effects (after the graph, before the return or the
// graph break's instruction), in program order.
nb::list Tracer::sideEffectLines(std::vector<Node*>& outputs, nb::list& constants) {
  auto ref = [&](nb::handle o) { return constantRef(o); };
  auto target = [&](VT* c, nb::handle original) {
    return c->source && c->source->isArgument() ? c->source->expr() : ref(original);
  };
  nb::list lines;
  for (const SideEffect& e : sideEffects) {
    std::string line;
    switch (e.kind) {
    case SideEffect::Kind::Container: {
      VT* c = e.container;
      if (c->kind == VT::Kind::List) {
        auto* s = static_cast<SequenceVT*>(c);
        std::string items;
        for (VT* x : s->items)
          items += outputExpr(x, outputs, constants) + ", ";
        line = target(c, s->original) + "[:] = [" + items + "]";
      } else {
        auto* d = static_cast<DictVT*>(c);
        std::string body;
        for (auto& [k, x] : d->entries)
          body += ref(k) + ": " + outputExpr(x, outputs, constants) + ", ";
        std::string t = target(c, d->original);
        // The new contents are evaluated before the clear: a value the dict kept may be read
        // through it (`out['a']`, when `out['b'] = ...` was stored beside it).
        line = "(lambda __v: (" + t + ".clear(), " + t + ".update(__v)))({" + body + "})";
      }
      break;
    }
    case SideEffect::Kind::Attr:
      line = "setattr(" + ref(e.object) + ", " + nb::cast<std::string>(nb::repr(nb::str(e.name.c_str()))) +
             ", " + outputExpr(e.value, outputs, constants) + ")";
      break;
    case SideEffect::Kind::Global:
      line = ref(e.object) + "[" + nb::cast<std::string>(nb::repr(nb::str(e.name.c_str()))) + "] = " +
             outputExpr(e.value, outputs, constants);
      break;
    case SideEffect::Kind::Cell:
      line = ref(e.object) + ".cell_contents = " + outputExpr(e.value, outputs, constants);
      break;
    case SideEffect::Kind::Call: // callLines()
      continue;
    }
    lines.append(nb::str(line.c_str()));
  }
  return lines;
}

bool Tracer::visitRoot(int here, int op, int arg) {
  int visits = ++rootVisits[here];
  rootPosition = {here, visits, op, arg};
  return here == stopAt && visits == stopOccurrence;
}

// What the glue needs to go on where the top frame stopped (docs/capture.md, "Graph breaks"):
// an expression per live local slot (None: not passed) and per stack value (None: the NULL a
// call pushes below its callable), over the graph's outputs `__o`, the constants `__c`, the
// frame's arguments and the `lets` names.
nb::dict Tracer::breakState(std::vector<Node*>& outputs, nb::list& constants) {
  nb::dict d;
  nb::list locals, stack;
  for (size_t i = 0; i < stopped->locals.size(); ++i) {
    VT* v = stopped->locals[i];
    if (v && (v->kind == VT::Kind::Cell)) v = static_cast<CellVT*>(v)->contents;
    bool passed = v && v->kind != VT::Kind::RealCell && (i >= live.size() || live[i]);
    if (passed) locals.append(nb::str(outputExpr(v, outputs, constants).c_str()));
    else locals.append(nb::none());
  }
  for (VT* v : stopped->stack) {
    if (v->kind == VT::Kind::Null) stack.append(nb::none());
    else stack.append(nb::str(outputExpr(v, outputs, constants).c_str()));
  }
  d["locals"] = locals;
  d["stack"] = stack;
  d["kw_names"] = stopped->kwNames.is_valid() ? stopped->kwNames : nb::none();
  return d;
}

nb::dict Tracer::run() {
  auto* co = reinterpret_cast<PyCodeObject*>(code_.ptr());
  int nargs = co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) ? 1 : 0) +
              ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
  VTs locals(size_t(co->co_nlocalsplus), nullptr);
  auto localName = [&](int i) {
    return nb::cast<std::string>(nb::handle(PyTuple_GET_ITEM(co->co_localsplusnames, i)));
  };
  if (nb::len(args_) != size_t(nargs))
    throw Unsupported{"internal: the frame's argument count does not match its code"};
  for (int i = 0; i < nargs; ++i)
    locals[size_t(i)] = wrap(args_[size_t(i)], localSource(i, localName(i)));
  VTs closure;
  PyObject* cells = PyFunction_Check(func_.ptr())
                        ? reinterpret_cast<PyFunctionObject*>(func_.ptr())->func_closure
                        : nullptr;
  if (cells) {
    int firstFree = co->co_nlocalsplus - co->co_nfreevars;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(cells); ++j) {
      auto* cell = make<RealCellVT>(nb::borrow(PyTuple_GET_ITEM(cells, j)));
      cell->source = closureSource(int(j), localName(firstFree + int(j)));
      closure.push_back(cell);
    }
  }
  guards_->checkGradMode(gradMode_);
  guards_->checkAutocast(initialAutocast_);
  guards_->checkDefaultDtype(defaultFloatType());
  guards_->checkDefaultDevice();
  InstructionTranslator top(*this, code_, globals_, [](const std::string& name) { return globalSource(name); }, 0);
  VT* result = top.run(std::move(locals), closure);

  std::vector<Node*> outputs;
  nb::list& constants = constants_;
  nb::dict brk;
  std::string output;
  nb::list effects = sideEffectLines(outputs, constants);
  if (stopped) brk = breakState(outputs, constants);
  else output = outputExpr(result, outputs, constants);
  // Replayed calls (set_printoptions) run first, before the lets format the f-strings of
  // tensors (none of which was made before such a call: replaysPrintOptions).
  nb::list lets;
  for (const SideEffect& e : sideEffects)
    if (e.kind == SideEffect::Kind::Call) lets.append(nb::str((constantRef(e.object) + "()").c_str()));
  for (const std::string& l : lets_)
    lets.append(nb::str(l.c_str()));
  std::vector<Argument> outs;
  for (Node* n : outputs)
    outs.emplace_back(n);
  graph_.output(Argument::tuple(std::move(outs)));
  recorder_.eraseUnreadProvisional();

  nb::dict d;
  d["ok"] = true;
  nb::list inputs;
  for (const std::string& e : inputExprs_)
    inputs.append(nb::str(e.c_str()));
  d["inputs"] = inputs;
  d["output"] = nb::str(output.c_str());
  d["lets"] = lets;
  d["side_effects"] = effects;
  if (stopped) d["break_state"] = brk;
  d["constants"] = constants;
  d["floats"] = floatsRead;
  d["ints"] = intsRead;
  d["attrs"] = attrs_;
  d["op_count"] = recorder_.numRecorded();
  // The autocast state the frame was entered with and the one it leaves (a break inside an
  // autocast block): the glue switches to the latter after the graph (whose casts are ops).
  d["entry_autocast_state"] = initialAutocast_;
  d["autocast_state"] = autocast::packedState();
  d["graph"] = python::wrapGraph(std::move(graph_));
  d["guards"] = wrapGuardTree(guards_);
  return d;
}

namespace {

std::string sourceLine(const std::string& file, int line) {
  if (file.empty()) return "";
  nb::object text = nb::module_::import_("linecache").attr("getline")(file, line);
  return nb::cast<std::string>(text.attr("strip")());
}

} // namespace

nb::list Tracer::userStack() const {
  nb::list stack;
  for (auto it = unwoundCallers_.rbegin(); it != unwoundCallers_.rend(); ++it) {
    std::string file = nb::cast<std::string>(it->first.attr("co_filename"));
    int line = PyCode_Addr2Line(reinterpret_cast<PyCodeObject*>(it->first.ptr()), it->second * 2);
    stack.append(nb::make_tuple(file, line, nb::cast<std::string>(it->first.attr("co_name")), sourceLine(file, line)));
  }
  SourceLoc loc = location();
  if (!loc.file.empty()) stack.append(nb::make_tuple(loc.file, loc.line, loc.function, sourceLine(loc.file, loc.line)));
  return stack;
}

nb::dict Tracer::failure(const char* kind, const std::string& reason) {
  nb::dict d;
  d["ok"] = false;
  d["kind"] = kind;
  d["reason"] = reason;
  SourceLoc loc = location();
  d["filename"] = loc.file;
  d["lineno"] = loc.line;
  d["line"] = sourceLine(loc.file, loc.line);
  d["user_stack"] = userStack();
  return d;
}

namespace {

nb::dict traceOnce(nb::handle frameInfo, nb::handle options, bool decomposeComposites) {
  Tracer tracer(frameInfo.attr("func"), frameInfo.attr("code"), frameInfo.attr("args"),
                frameInfo.attr("globals"), frameInfo.attr("builtins"));
  if (decomposeComposites) tracer.decomposeComposites();
  if (!options.is_none() && nb::borrow<nb::dict>(options).contains("stop_at")) {
    nb::dict o = nb::borrow<nb::dict>(options);
    nb::object stopAt = o["stop_at"], occurrence = o["occurrence"];
    tracer.stopAt = nb::cast<int>(stopAt);
    tracer.stopOccurrence = nb::cast<int>(occurrence);
    if (o.contains("live")) {
      nb::object live = o["live"];
      for (nb::handle b : live)
        tracer.live.push_back(nb::cast<bool>(b));
    }
  }
  if (!options.is_none()) {
    nb::dict o = nb::borrow<nb::dict>(options);
    if (o.contains("sizes"))
      for (auto [k, v] : nb::borrow<nb::dict>(o["sizes"]))
        tracer.probeSizes[nb::cast<std::string>(k)] = nb::cast<std::vector<int64_t>>(v);
    if (o.contains("dynamic_floats"))
      for (nb::handle e : nb::borrow<nb::object>(o["dynamic_floats"]))
        tracer.dynamicFloats.insert(nb::cast<std::string>(e));
    if (o.contains("dynamic_numbers"))
      for (nb::handle e : nb::borrow<nb::object>(o["dynamic_numbers"]))
        tracer.dynamicNumbers.insert(nb::cast<std::string>(e));
    if (o.contains("opaque_values"))
      for (nb::handle e : nb::borrow<nb::object>(o["opaque_values"]))
        tracer.opaqueValues.insert(nb::cast<std::string>(e));
    if (o.contains("dynamic")) {
      for (auto [k, v] : nb::borrow<nb::dict>(o["dynamic"]))
        tracer.dynamicDims[nb::cast<std::string>(k)] = nb::cast<std::vector<int>>(v);
      nb::object maxSize = o["max_dynamic_size"];
      tracer.maxDynamicSize = nb::cast<int64_t>(maxSize);
    }
  }
  try {
    nb::dict d = tracer.run();
    if (tracer.stopAt >= 0 && !tracer.stopped)
      return tracer.failure("error", "internal: the retrace did not reach its graph break");
    return d;
  } catch (const Unsupported& u) {
    nb::dict d = tracer.failure("unsupported", u.reason);
    // The numbers read before the break (the callback finds those that change between calls).
    d["floats"] = tracer.floatsRead;
    d["ints"] = tracer.intsRead;
    // Where the top frame was, for a graph break there (the caller decides).
    // Inside a user context manager's block: at its `with` (Tracer::userWiths).
    const Tracer::RootPosition& p = tracer.userWiths.empty() ? tracer.rootPosition : tracer.userWiths.front();
    if (p.instruction >= 0 && tracer.stopAt < 0) {
      d["instruction"] = p.instruction;
      d["occurrence"] = p.occurrence;
      d["op"] = p.op;
      d["arg"] = p.arg;
    }
    return d;
  } catch (const TraceError& e) {
    return tracer.failure("error", e.reason);
  } catch (nb::python_error& e) {
    std::string what = std::string(Py_TYPE(e.value().ptr())->tp_name) + ": " +
                       nb::cast<std::string>(nb::str(e.value()));
    return tracer.failure("error", what);
  } catch (const std::exception& e) {
    return tracer.failure("unsupported", e.what());
  }
}

} // namespace

nb::dict traceFrame(nb::handle frameInfo, nb::handle options) {
  try {
    return traceOnce(frameInfo, options, false);
  } catch (const RetraceDecomposed&) {
    return traceOnce(frameInfo, options, true);
  }
}

void registerTraceFrame(nb::module_& m) {
  nb::module_ capture = m.def_submodule("_capture", "frame capture (used by kiln.compile)");
  capture.def("trace_frame", &traceFrame, nb::arg("frame_info"), nb::arg("options") = nb::none(),
              "Traces a frame (its function, code, bound arguments, globals, builtins) into a "
              "graph; see docs/capture.md for the result.");
}

} // namespace kiln::capture
