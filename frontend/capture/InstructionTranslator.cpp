// The bytecode loop of the symbolic interpreter: CPython 3.11 to 3.13 instructions over variable
// trackers. Jumps on values known while tracing are taken (specialized); anything whose
// outcome depends on tensor data, or that has effects the graph cannot replay, is Unsupported.
// Instructions are kiln's names for CPython's (Bytecode.h); where one name means different
// things in different versions, the facts are in PythonVersion.h.
#include <Python.h>

#include <limits>

#include "frontend/capture/PythonVersion.h"
#include "frontend/capture/SymbolicInterpreter.h"
#include "runtime/Autocast.h"

#include <algorithm>

namespace kiln::capture {

namespace {

const char* kBinaryNames[] = {"add",  "and_", "floordiv", "lshift",  "matmul", "mul",  "mod",
                              "or_",  "pow",  "rshift",   "sub",     "truediv", "xor"};
const char* kInplaceNames[] = {"iadd", "iand", "ifloordiv", "ilshift", "imatmul", "imul", "imod",
                               "ior",  "ipow", "irshift",   "isub",    "itruediv", "ixor"};
const char* kCompareNames[] = {"lt", "le", "eq", "ne", "gt", "ge"};

// Whether `cls` is a user class whose __enter__ and __exit__ are Python functions of user code
// (not kiln's or a library's): a `with` over one of its instances inlines both, as TorchDynamo.
bool isUserContextManagerClass(nb::handle cls) {
  static nb::handle skipped =
      nb::object(nb::module_::import_("kiln.compiler.skip_policy").attr("is_skipped_file")).release();
  if (!PyType_Check(cls.ptr())) return false;
  for (const char* name : {"__enter__", "__exit__"}) {
    PyObject* f = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(cls.ptr()), nb::str(name).ptr());
    if (!f || !PyFunction_Check(f)) return false;
    nb::object filename = nb::borrow(PyFunction_GET_CODE(f)).attr("co_filename");
    if (nb::cast<bool>(skipped(filename))) return false;
  }
  return true;
}

} // namespace

InstructionTranslator::InstructionTranslator(Tracer& t, nb::handle code, nb::handle globals,
                                             GlobalSourceFn globalSource, int depth)
    : t_(t), code_(nb::borrow(code)), globals_(nb::borrow(globals)),
      globalSource_(std::move(globalSource)), depth_(depth) {
  if (depth_ > t_.maxInlineDepth)
    throw Unsupported{"calls nest deeper than " + std::to_string(t_.maxInlineDepth) +
                      " levels (recursion?)"};
  bc_ = decodeCode(code);
  auto* co = reinterpret_cast<PyCodeObject*>(code.ptr());
  isGenerator_ = co->co_flags & CO_GENERATOR;
  if (co->co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE))
    throw Unsupported{"coroutines and async generators are not captured"};
}

VT* InstructionTranslator::pop() {
  if (stack_.empty()) throw Unsupported{"internal: the symbolic stack underflowed"};
  VT* v = stack_.back();
  stack_.pop_back();
  return v;
}

VTs InstructionTranslator::popN(int n) {
  VTs out(stack_.end() - n, stack_.end());
  stack_.resize(stack_.size() - size_t(n));
  return out;
}

VT* InstructionTranslator::run(VTs locals, const VTs& closure) {
  locals_ = std::move(locals);
  closure_ = closure;
  runLoop();
  if (t_.stopped && depth_ == 0) return nullptr;
  if (suspended_) return yielded_.back();
  if (isGenerator_ && !suspendAtYield_) {
    auto* it = t_.make<IteratorVT>(yielded_);
    nb::object module = nb::borrow<nb::dict>(globals_).get("__name__", nb::none());
    it->libraryGenerator = nb::isinstance<nb::str>(module) &&
                           nb::cast<std::string>(module).rfind("kiln.", 0) == 0;
    return it;
  }
  return result_;
}

void InstructionTranslator::resumeToEnd() {
  suspended_ = false;
  runLoop();
  if (suspended_) throw Unsupported{"a @contextmanager generator that yields more than once"};
}

void InstructionTranslator::runLoop() {
  while (!returned_ && !suspended_) {
    if (--t_.instructionBudget < 0)
      throw Unsupported{"the frame runs too many instructions while tracing (a long loop?)"};
    size_t here = pc_++;
    t_.setPosition(code_, int(here));
    if (depth_ > 0) {
      stepCatching(here);
      continue;
    }
    if (t_.visitRoot(int(here), bc_.raw[here], bc_.args[here])) {
      t_.stopped = std::make_unique<Tracer::StopState>(Tracer::StopState{locals_, stack_, kwNames_});
      return;
    }
    stepCatching(here);
  }
}

void InstructionTranslator::stepCatching(size_t here) {
  try {
    step(here);
  } catch (const TraceError& e) {
    // The traced code raised (`o.attr` missing, a KeyError, a `raise`) where a handler of this
    // frame may catch it (`try: s = o.scale except AttributeError: ...`): as CPython, the stack
    // is cut to the handler's depth and the exception pushed for its `except` clauses
    // (PUSH_EXC_INFO, CHECK_EXC_MATCH); one they do not match is raised again (RERAISE). An
    // exception of a class the trace cannot name is a graph break here, once.
    static nb::handle handlerOf =
        nb::object(nb::module_::import_("kiln.compiler.bytecode").attr("exception_handler")).release();
    nb::object handler = handlerOf(code_, nb::int_(here));
    if (handler.is_none()) throw;
    VT* exc = e.catchable ? exceptionOf(e) : nullptr;
    if (!exc) throw Unsupported{e.reason + ", raised inside a try block (exception handling is not traced for it)"};
    nb::tuple h = nb::borrow<nb::tuple>(handler);
    int target = nb::cast<int>(h[0]), depth = nb::cast<int>(h[1]);
    bool lasti = nb::cast<bool>(h[2]);
    if (depth < 0 || size_t(depth) > stack_.size()) throw Unsupported{"internal: an exception handler's stack depth"};
    stack_.resize(size_t(depth));
    if (lasti) push(t_.constant(nb::int_(here)));
    push(exc);
    jumpTo(size_t(target));
  }
}

VT* InstructionTranslator::exceptionOf(const TraceError& e) {
  if (e.exception.is_valid()) {
    bool isClass = PyType_Check(e.exception.ptr());
    nb::object type = isClass ? e.exception : nb::borrow(reinterpret_cast<PyObject*>(Py_TYPE(e.exception.ptr())));
    return t_.make<ExceptionVT>(type, isClass ? nb::object() : e.exception, e.reason);
  }
  // "KeyError: 'shift'": a builtin exception class named first.
  std::string name = e.reason.substr(0, e.reason.find(':'));
  nb::object builtins = nb::module_::import_("builtins");
  if (name.empty() || !nb::hasattr(builtins, name.c_str())) return nullptr;
  nb::object type = builtins.attr(name.c_str());
  if (!PyType_Check(type.ptr()) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(type.ptr()),
                                                     reinterpret_cast<PyTypeObject*>(PyExc_BaseException)))
    return nullptr;
  return t_.make<ExceptionVT>(type, nb::object(), e.reason);
}

void InstructionTranslator::jumpTo(size_t target) { pc_ = target; }

void InstructionTranslator::step(size_t here) {
  namespace pv = pyversion;
  auto* co = reinterpret_cast<PyCodeObject*>(code_.ptr());
  auto name = [&](int i) { return nb::cast<std::string>(nb::handle(PyTuple_GET_ITEM(co->co_names, i))); };
  auto constAt = [&](int i) { return nb::borrow(PyTuple_GET_ITEM(co->co_consts, i)); };
  auto null = [&] { return t_.make<VT>(VT::Kind::Null); };
  const Op op = bc_.ops[here];
  const int arg = bc_.args[here];
  const size_t target = size_t(bc_.target[here]);
  switch (op) {
  case Op::CACHE:
  case Op::NOP:
  case Op::RESUME:
  case Op::EXTENDED_ARG:
  case Op::PRECALL:
    return;
  case Op::POP_TOP:
    pop();
    return;
  case Op::PUSH_NULL:
    push(null());
    return;
  case Op::COPY:
    push(top(arg));
    return;
  case Op::SWAP:
    std::swap(stack_.back(), stack_[stack_.size() - size_t(arg)]);
    return;
  case Op::LOAD_CONST:
    push(t_.constant(constAt(arg)));
    return;
  case Op::RETURN_CONST:
    result_ = t_.constant(constAt(arg));
    returned_ = true;
    return;
  case Op::LOAD_FAST:
  case Op::LOAD_FAST_CHECK:
    push(loadFast(arg));
    return;
  case Op::LOAD_FAST_LOAD_FAST:
    push(loadFast(arg >> 4));
    push(loadFast(arg & 15));
    return;
  case Op::LOAD_FAST_AND_CLEAR: {
    // PEP 709: an inlined comprehension saves the variable it shadows (NULL when unbound) and
    // puts it back with STORE_FAST afterwards.
    VT* v = locals_[size_t(arg)];
    push(v ? v : null());
    locals_[size_t(arg)] = nullptr;
    return;
  }
  case Op::STORE_FAST:
    storeFast(arg, pop());
    return;
  case Op::STORE_FAST_STORE_FAST:
    storeFast(arg >> 4, pop());
    storeFast(arg & 15, pop());
    return;
  case Op::STORE_FAST_LOAD_FAST:
    storeFast(arg >> 4, pop());
    push(loadFast(arg & 15));
    return;
  case Op::DELETE_FAST:
    locals_[size_t(arg)] = nullptr;
    return;
  case Op::MAKE_CELL: {
    auto* cell = t_.make<CellVT>();
    cell->contents = locals_[size_t(arg)];
    locals_[size_t(arg)] = cell;
    return;
  }
  case Op::COPY_FREE_VARS:
    for (int j = 0; j < arg; ++j)
      locals_[size_t(co->co_nlocalsplus - arg + j)] = closure_.at(size_t(j));
    return;
  case Op::LOAD_CLOSURE:
    push(locals_[size_t(arg)]);
    return;
  case Op::LOAD_DEREF:
    push(loadCell(locals_[size_t(arg)], arg));
    return;
  case Op::STORE_DEREF: {
    VT* cell = locals_[size_t(arg)];
    VT* value = pop();
    if (cell && cell->kind == VT::Kind::Cell) {
      static_cast<CellVT*>(cell)->contents = value;
      return;
    }
    if (cell && cell->kind == VT::Kind::RealCell) { // a nonlocal of an enclosing, outside function
      auto* real = static_cast<RealCellVT*>(cell);
      real->contents = value;
      t_.recordStore(Tracer::SideEffect::Kind::Cell, real->cell, "", value);
      return;
    }
    throw Unsupported{"assigning the nonlocal variable '" + localName(arg) +
                      "' of a function outside the compiled one"};
  }
  case Op::LOAD_GLOBAL:
    pushCallable(loadGlobal(name(arg >> 1)), arg & 1);
    return;
  case Op::STORE_GLOBAL:
    t_.recordStore(Tracer::SideEffect::Kind::Global, globals_, name(arg), pop());
    return;
  case Op::DELETE_GLOBAL:
    throw Unsupported{"deleting the global variable '" + name(arg) + "'"};
  case Op::LOAD_ATTR:
    if (!pv::kLoadAttrMethodBit) push(loadAttr(pop(), name(arg)));
    else pushCallable(loadAttr(pop(), name(arg >> 1)), arg & 1);
    return;
  case Op::LOAD_METHOD: // 3.11; the bound method stands for (method, self)
    pushCallable(loadAttr(pop(), name(arg)), true);
    return;
  case Op::LOAD_SUPER_ATTR: {
    // super().name: the global `super`, the class (the __class__ cell or super's first
    // argument) and self are on the stack; `arg >> 2` names the attribute.
    VT* self = pop();
    VT* cls = pop();
    VT* superFn = pop();
    if (identityOf(superFn).ptr() != reinterpret_cast<PyObject*>(&PySuper_Type))
      throw Unsupported{"super() where `super` is not the builtin"};
    nb::handle type = identityOf(cls);
    if (!type.is_valid() || !PyType_Check(type.ptr())) throw Unsupported{"super() in this context"};
    if (self->kind == VT::Kind::Cell) self = static_cast<CellVT*>(self)->contents;
    pushCallable(loadAttr(t_.make<SuperVT>(self, nb::borrow(type)), name(arg >> 2)), arg & 1);
    return;
  }
  case Op::STORE_ATTR: {
    VT* obj = pop();
    VT* value = pop();
    storeAttr(obj, name(arg), value);
    return;
  }
  case Op::KW_NAMES:
    kwNames_ = constAt(arg);
    return;
  case Op::CALL: {
    nb::object kw = std::move(kwNames_);
    kwNames_.reset();
    callWithStack(arg, std::move(kw));
    return;
  }
  case Op::CALL_KW: { // 3.13: the keyword names are a tuple on the stack
    VT* names = pop();
    callWithStack(arg, constantValue(names, "keyword names"));
    return;
  }
  case Op::CALL_FUNCTION_EX: {
    Kwargs kwargs;
    if (arg & 1) {
      VT* d = pop();
      if (d->kind != VT::Kind::Dict) throw Unsupported{"**kwargs of a value that is not a dict"};
      for (auto& [k, v] : static_cast<DictVT*>(d)->entries) {
        if (!PyUnicode_Check(k.ptr())) throw TraceError{"TypeError: keywords must be strings"};
        kwargs.emplace_back(nb::cast<std::string>(k), v);
      }
    }
    VTs args = unpack(pop());
    VT* a = pop(); // the callable up to 3.12, the NULL above it from 3.13
    VT* b = pop();
    VT* fn = a->kind == VT::Kind::Null ? b : a;
    push(call(fn, std::move(args), std::move(kwargs)));
    return;
  }
  case Op::MAKE_FUNCTION: // 3.13 passes 0 and sets the parts with SET_FUNCTION_ATTRIBUTE
    push(makeFunction(arg));
    return;
  case Op::SET_FUNCTION_ATTRIBUTE: {
    VT* fn = pop();
    VT* value = pop();
    if (fn->kind != VT::Kind::NestedFunction) throw Unsupported{"internal: SET_FUNCTION_ATTRIBUTE on a non-function"};
    setFunctionAttribute(static_cast<NestedFunctionVT*>(fn), arg, value);
    push(fn);
    return;
  }
  case Op::RETURN_VALUE:
    result_ = pop();
    returned_ = true;
    return;
  case Op::RETURN_GENERATOR:
    push(t_.none()); // the value the first send() passes in; POP_TOP drops it
    return;
  case Op::YIELD_VALUE:
    yielded_.push_back(pop());
    push(t_.none());
    suspended_ = suspendAtYield_;
    return;
  // `yield from it` in a generator being unrolled: each item of `it` is yielded in turn (SEND
  // pushes the next one for YIELD_VALUE, which loops back to SEND); at the end SEND leaves the
  // sub-generator's return value (None: unrolled generators return their items only).
  case Op::GET_YIELD_FROM_ITER:
    push(getIter(pop()));
    return;
  case Op::SEND: {
    pop(); // the value sent in: None while unrolling
    VT* it = top();
    if (it->kind != VT::Kind::Iterator) throw Unsupported{"yield from a value that is not an iterator"};
    auto* iter = static_cast<IteratorVT*>(it);
    if (iter->next < iter->items.size()) {
      push(iter->items[iter->next++]);
    } else if (pv::kSendKeepsReceiver) {
      push(t_.none()); // 3.12+: END_SEND at the target drops the iterator below it
      jumpTo(target);
    } else {
      stack_.back() = t_.none();
      jumpTo(target);
    }
    return;
  }
  case Op::END_SEND: {
    VT* value = pop();
    pop();
    push(value);
    return;
  }
  case Op::BINARY_OP: {
    VT* b = pop();
    VT* a = pop();
    push(binaryOp(arg, a, b));
    return;
  }
  case Op::UNARY_NEGATIVE:
  case Op::UNARY_POSITIVE:
  case Op::UNARY_INVERT:
  case Op::UNARY_NOT: {
    VT* a = pop();
    if (op == Op::UNARY_NOT && a->kind != VT::Kind::Tensor) {
      push(t_.constant(nb::bool_(!truthy(a))));
      return;
    }
    const char* fn = op == Op::UNARY_NEGATIVE ? "neg" : op == Op::UNARY_POSITIVE ? "pos" : op == Op::UNARY_INVERT ? "invert" : "not_";
    push(applyOperator(fn, {a}));
    return;
  }
  case Op::TO_BOOL: {
    // 3.13 converts before every test. Constants convert here; other values go on unchanged to
    // the jump or `not` that consumes them, which decides (a tensor's truth is data-dependent:
    // the jump is then a graph break that branches in Python).
    VT* v = pop();
    push(v->kind == VT::Kind::Constant ? t_.constant(nb::bool_(truthy(v))) : v);
    return;
  }
  case Op::CALL_INTRINSIC_1:
    callIntrinsic1(arg);
    return;
  case Op::COMPARE_OP: {
    VT* b = pop();
    VT* a = pop();
    push(compareOp(arg >> pv::kCompareShift, a, b));
    return;
  }
  case Op::IS_OP: {
    VT* b = pop();
    VT* a = pop();
    push(t_.constant(nb::bool_(isSame(a, b) != (arg == 1))));
    return;
  }
  case Op::CONTAINS_OP: {
    VT* container = pop();
    VT* item = pop();
    push(t_.constant(nb::bool_(contains(container, item) != (arg == 1))));
    return;
  }
  case Op::BINARY_SUBSCR: {
    VT* key = pop();
    VT* obj = pop();
    push(getItem(obj, key));
    return;
  }
  case Op::BINARY_SLICE: { // 3.12: container[start:stop]
    VT* stop = pop();
    VT* start = pop();
    VT* obj = pop();
    push(getItem(obj, makeSlice({start, stop})));
    return;
  }
  case Op::STORE_SUBSCR: {
    VT* key = pop();
    VT* obj = pop();
    VT* value = pop();
    setItem(obj, key, value);
    return;
  }
  case Op::STORE_SLICE: { // 3.12: container[start:stop] = value
    VT* stop = pop();
    VT* start = pop();
    VT* obj = pop();
    VT* value = pop();
    setItem(obj, makeSlice({start, stop}), value);
    return;
  }
  case Op::DELETE_SUBSCR: {
    VT* key = pop();
    VT* obj = pop();
    deleteItem(obj, key);
    return;
  }
  case Op::BUILD_TUPLE:
    push(t_.make<SequenceVT>(VT::Kind::Tuple, popN(arg)));
    return;
  case Op::BUILD_LIST:
    push(t_.make<SequenceVT>(VT::Kind::List, popN(arg)));
    return;
  case Op::LIST_TO_TUPLE:
    push(t_.make<SequenceVT>(VT::Kind::Tuple, unpack(pop())));
    return;
  case Op::BUILD_MAP: {
    VTs kv = popN(2 * arg);
    auto* d = t_.make<DictVT>();
    for (int i = 0; i < arg; ++i)
      dictSet(d, kv[size_t(2 * i)], kv[size_t(2 * i + 1)]);
    push(d);
    return;
  }
  case Op::BUILD_CONST_KEY_MAP: {
    VT* keys = pop();
    VTs values = popN(arg);
    VTs ks = unpack(keys);
    auto* d = t_.make<DictVT>();
    for (int i = 0; i < arg; ++i)
      dictSet(d, ks[size_t(i)], values[size_t(i)]);
    push(d);
    return;
  }
  case Op::BUILD_SET: {
    VTs items = popN(arg);
    nb::object set = nb::steal(PySet_New(nullptr));
    for (VT* v : items)
      if (PySet_Add(set.ptr(), constantValue(v, "a set element").ptr()) < 0) throw nb::python_error();
    push(t_.make<SetVT>(set));
    return;
  }
  case Op::SET_ADD: {
    VT* v = pop();
    if (PySet_Add(setOf(top(arg))->set.ptr(), constantValue(v, "a set element").ptr()) < 0)
      throw nb::python_error();
    return;
  }
  case Op::SET_UPDATE: {
    VTs items = unpack(pop());
    for (VT* v : items)
      if (PySet_Add(setOf(top(arg))->set.ptr(), constantValue(v, "a set element").ptr()) < 0)
        throw nb::python_error();
    return;
  }
  case Op::BUILD_SLICE:
    push(makeSlice(popN(arg)));
    return;
  case Op::BUILD_STRING:
    push(buildString(popN(arg)));
    return;
  case Op::FORMAT_VALUE: { // up to 3.12: conversion and "has a spec" in one argument
    VT* spec = (arg & 0x04) ? pop() : nullptr;
    VT* value = pop();
    push(formatValue(value, arg & 0x03, spec));
    return;
  }
  case Op::CONVERT_VALUE: // 3.13: str(), repr() or ascii() before formatting
    push(formatValue(pop(), arg, nullptr));
    return;
  case Op::FORMAT_SIMPLE:
    push(formatValue(pop(), 0, nullptr));
    return;
  case Op::FORMAT_WITH_SPEC: {
    VT* spec = pop();
    VT* value = pop();
    push(formatValue(value, 0, spec));
    return;
  }
  case Op::LIST_APPEND: {
    VT* v = pop();
    listOf(top(arg))->items.push_back(v);
    return;
  }
  case Op::LIST_EXTEND: {
    VTs items = unpack(pop());
    auto* l = listOf(top(arg));
    l->items.insert(l->items.end(), items.begin(), items.end());
    return;
  }
  case Op::MAP_ADD: {
    VT* v = pop();
    VT* k = pop();
    dictSet(dictOf(top(arg)), k, v);
    return;
  }
  case Op::DICT_UPDATE:
  case Op::DICT_MERGE: {
    VT* src = pop();
    if (src->kind != VT::Kind::Dict) throw Unsupported{"merging a value that is not a dict"};
    for (auto& [k, v] : static_cast<DictVT*>(src)->entries)
      dictSet(dictOf(top(arg)), t_.constant(k), v);
    return;
  }
  case Op::UNPACK_SEQUENCE: {
    VTs items = unpack(pop());
    if (int(items.size()) != arg)
      throw TraceError{"ValueError: expected " + std::to_string(arg) + " values to unpack, got " +
                       std::to_string(items.size())};
    for (auto it = items.rbegin(); it != items.rend(); ++it)
      push(*it);
    return;
  }
  case Op::UNPACK_EX: {
    VTs items = unpack(pop());
    int before = arg & 0xFF, after = arg >> 8;
    if (int(items.size()) < before + after)
      throw TraceError{"ValueError: not enough values to unpack"};
    VTs middle(items.begin() + before, items.end() - after);
    for (int i = int(items.size()) - 1; i >= int(items.size()) - after; --i)
      push(items[size_t(i)]);
    push(t_.make<SequenceVT>(VT::Kind::List, middle));
    for (int i = before - 1; i >= 0; --i)
      push(items[size_t(i)]);
    return;
  }
  case Op::GET_ITER:
    push(getIter(pop()));
    return;
  case Op::FOR_ITER: {
    VT* it = top();
    if (it->kind != VT::Kind::Iterator) throw Unsupported{"iterating a value that is not an iterator"};
    auto* iter = static_cast<IteratorVT*>(it);
    if (iter->next < iter->items.size()) {
      push(iter->items[iter->next++]);
    } else {
      pop();
      jumpTo(target + size_t(pv::kForIterSkip));
    }
    return;
  }
  case Op::END_FOR: // reached only if a FOR_ITER did not skip it
    for (int i = 0; i < pv::kEndForPops; ++i)
      pop();
    return;
  case Op::JUMP_FORWARD:
  case Op::JUMP_BACKWARD:
  case Op::JUMP_BACKWARD_NO_INTERRUPT:
    jumpTo(target);
    return;
  case Op::POP_JUMP_IF_TRUE:
  case Op::POP_JUMP_IF_FALSE:
  case Op::POP_JUMP_FORWARD_IF_TRUE:
  case Op::POP_JUMP_FORWARD_IF_FALSE:
  case Op::POP_JUMP_BACKWARD_IF_TRUE:
  case Op::POP_JUMP_BACKWARD_IF_FALSE: {
    bool want = op == Op::POP_JUMP_IF_TRUE || op == Op::POP_JUMP_FORWARD_IF_TRUE ||
                op == Op::POP_JUMP_BACKWARD_IF_TRUE;
    if (truthy(pop()) == want) jumpTo(target);
    return;
  }
  case Op::POP_JUMP_IF_NONE:
  case Op::POP_JUMP_IF_NOT_NONE:
  case Op::POP_JUMP_FORWARD_IF_NONE:
  case Op::POP_JUMP_FORWARD_IF_NOT_NONE:
  case Op::POP_JUMP_BACKWARD_IF_NONE:
  case Op::POP_JUMP_BACKWARD_IF_NOT_NONE: {
    bool wantNone = op == Op::POP_JUMP_IF_NONE || op == Op::POP_JUMP_FORWARD_IF_NONE ||
                    op == Op::POP_JUMP_BACKWARD_IF_NONE;
    if (isNone(pop()) == wantNone) jumpTo(target);
    return;
  }
  case Op::JUMP_IF_TRUE_OR_POP:
  case Op::JUMP_IF_FALSE_OR_POP: {
    bool want = op == Op::JUMP_IF_TRUE_OR_POP;
    if (truthy(top()) == want) jumpTo(target);
    else pop();
    return;
  }
  case Op::BEFORE_WITH: {
    VT* mgr = pop();
    if (mgr->kind == VT::Kind::Autocast) {
      auto* a = static_cast<AutocastVT*>(mgr);
      push(t_.make<AutocastExitVT>(autocast::packedState()));
      autocast::setEnabled(a->device, a->enabled);
      autocast::setDtype(a->device, a->dtype);
      autocast::setCacheEnabled(a->cacheEnabled);
      push(t_.none());
      return;
    }
    nb::handle cls;
    if (mgr->kind == VT::Kind::NewObject) cls = static_cast<NewObjectVT*>(mgr)->cls;
    else if (mgr->kind == VT::Kind::Object) cls = nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(static_cast<ObjectVT*>(mgr)->object.ptr())));
    // A user context manager (TorchDynamo traces them too): its exit stays on the stack for the
    // block's end (called with three Nones; the exception path is not traced: an exception
    // inside is a break or the user's error).
    if (cls.is_valid() && isUserContextManagerClass(cls)) {
      if (depth_ == 0) t_.userWiths.push_back(t_.rootPosition);
      VT* exit = loadAttr(mgr, "__exit__");
      VT* entered = call(loadAttr(mgr, "__enter__"), {}, {});
      push(t_.make<UserContextExitVT>(nullptr, exit, depth_ == 0));
      push(entered);
      return;
    }
    if (mgr->kind == VT::Kind::GeneratorContext) {
      if (depth_ == 0) t_.userWiths.push_back(t_.rootPosition);
      auto* g = static_cast<GeneratorContextVT*>(mgr);
      std::shared_ptr<InstructionTranslator> generator;
      struct Clear {
        std::shared_ptr<InstructionTranslator>*& slot;
        ~Clear() { slot = nullptr; }
      } clear{suspendInline_};
      suspendInline_ = &generator; // inlineCall runs the generator frame to its yield only
      VT* entered = call(g->func, g->args, g->kwargs);
      if (!generator) throw Unsupported{"a @contextmanager generator that does not yield"};
      push(t_.make<UserContextExitVT>(std::move(generator), nullptr, depth_ == 0));
      push(entered);
      return;
    }
    if (mgr->kind != VT::Kind::GradMode)
      throw Unsupported{"a `with` block over a context manager other than kiln's grad modes, autocast and "
                        "user classes with __enter__ and __exit__"};
    auto* g = static_cast<GradModeVT*>(mgr);
    bool prev = g->previous ? *g->previous : t_.gradMode();
    t_.setGradMode(g->enabled);
    push(t_.make<GradModeExitVT>(prev));
    push(t_.none());
    return;
  }
  case Op::PUSH_EXC_INFO: {
    VT* exc = pop();
    push(handledException_ ? handledException_ : t_.none());
    push(exc);
    handledException_ = exc;
    return;
  }
  case Op::POP_EXCEPT: {
    VT* previous = pop();
    handledException_ = previous->kind == VT::Kind::Exception ? previous : nullptr;
    return;
  }
  case Op::CHECK_EXC_MATCH: {
    VT* classes = pop();
    if (top()->kind != VT::Kind::Exception) throw Unsupported{"internal: CHECK_EXC_MATCH without an exception"};
    nb::object match = exceptionClasses(classes);
    int is = PyObject_IsSubclass(static_cast<ExceptionVT*>(top())->type.ptr(), match.ptr());
    if (is < 0) throw nb::python_error();
    push(t_.constant(nb::bool_(is == 1)));
    return;
  }
  case Op::RERAISE: {
    VT* exc = pop();
    if (exc->kind != VT::Kind::Exception) throw Unsupported{"re-raising an exception the trace does not know"};
    auto* x = static_cast<ExceptionVT*>(exc);
    throw TraceError{x->reason, x->instance.is_valid() ? x->instance : x->type};
  }
  case Op::RAISE_VARARGS: {
    if (arg == 0) { // a bare `raise` inside an `except` clause
      if (!handledException_) throw Unsupported{"a bare `raise` outside an except clause"};
      auto* x = static_cast<ExceptionVT*>(handledException_);
      throw TraceError{x->reason, x->instance.is_valid() ? x->instance : x->type};
    }
    if (arg != 1) throw Unsupported{"`raise ... from ...`"};
    VT* v = pop();
    if (v->kind == VT::Kind::Exception) {
      auto* x = static_cast<ExceptionVT*>(v);
      throw TraceError{x->reason, x->instance.is_valid() ? x->instance : x->type};
    }
    if (v->kind == VT::Kind::Object && PyType_Check(static_cast<ObjectVT*>(v)->object.ptr()) &&
        PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(static_cast<ObjectVT*>(v)->object.ptr()),
                         reinterpret_cast<PyTypeObject*>(PyExc_BaseException))) {
      nb::object cls = static_cast<ObjectVT*>(v)->object;
      throw TraceError{std::string(reinterpret_cast<PyTypeObject*>(cls.ptr())->tp_name), cls};
    }
    throw Unsupported{std::string("raising a ") + kindName(v)};
  }
  case Op::LOAD_ASSERTION_ERROR:
    throw Unsupported{"a failing `assert`"};
  case Op::Unknown:
    break;
  }
  throw Unsupported{unsupportedReason(bc_.raw[here])};
}

VT* InstructionTranslator::loadFast(int slot) {
  VT* v = locals_[size_t(slot)];
  if (!v)
    throw TraceError{"UnboundLocalError: local variable '" + localName(slot) +
                     "' referenced before assignment"};
  return v;
}

void InstructionTranslator::storeFast(int slot, VT* v) {
  // A NULL that LOAD_FAST_AND_CLEAR saved puts the slot back to unbound.
  locals_[size_t(slot)] = v->kind == VT::Kind::Null ? nullptr : v;
}

void InstructionTranslator::pushCallable(VT* v, bool withNull) {
  // The NULL of a call's [NULL, callable] pair goes below the callable up to 3.12, above from 3.13.
  if (withNull && !pyversion::kNullAboveCallable) push(t_.make<VT>(VT::Kind::Null));
  push(v);
  if (withNull && pyversion::kNullAboveCallable) push(t_.make<VT>(VT::Kind::Null));
}

void InstructionTranslator::callWithStack(int argc, nb::object kwNames) {
  VTs args = popN(argc);
  VT* second = pop();
  VT* first = pop();
  // [NULL, callable] (3.11, 3.12), [callable, NULL] (3.13) or [method, self] (all).
  VT* fn = first;
  if (first->kind == VT::Kind::Null) fn = second;
  else if (second->kind != VT::Kind::Null) args.insert(args.begin(), second);
  Kwargs kwargs;
  if (kwNames.is_valid()) {
    size_t nk = size_t(PyTuple_GET_SIZE(kwNames.ptr()));
    for (size_t k = 0; k < nk; ++k)
      kwargs.emplace_back(nb::cast<std::string>(nb::handle(PyTuple_GET_ITEM(kwNames.ptr(), k))),
                          args[args.size() - nk + k]);
    args.resize(args.size() - nk);
  }
  push(call(fn, std::move(args), std::move(kwargs)));
}

VT* InstructionTranslator::makeSlice(const VTs& parts) {
  nb::object objs[3] = {nb::none(), nb::none(), nb::none()};
  for (size_t i = 0; i < parts.size(); ++i)
    objs[i] = constantValue(parts[i], "a slice bound");
  return t_.constant(nb::steal(
      PySlice_New(objs[0].ptr(), objs[1].ptr(), parts.size() == 3 ? objs[2].ptr() : nullptr)));
}

void InstructionTranslator::callIntrinsic1(int which) {
  // Python/intrinsics.c: 5 is unary `+`, 6 list -> tuple (for *args); the others are imports,
  // generators' StopIteration handling, async generators and type parameters.
  if (which == 5) {
    push(applyOperator("pos", {pop()}));
    return;
  }
  if (which == 6) {
    push(t_.make<SequenceVT>(VT::Kind::Tuple, unpack(pop())));
    return;
  }
  nb::object descs = nb::getattr(nb::module_::import_("dis"), "_intrinsic_1_descs", nb::none());
  std::string what = descs.is_none() || which >= int(nb::len(descs))
                         ? std::to_string(which)
                         : nb::cast<std::string>(descs[which]);
  throw Unsupported{"the intrinsic " + what + " (CALL_INTRINSIC_1)"};
}

void InstructionTranslator::setFunctionAttribute(NestedFunctionVT* f, int flag, VT* value) {
  // The flags of MAKE_FUNCTION up to 3.12 (makeFunction), one per instruction from 3.13.
  if (flag == 0x08) f->closure = unpack(value);
  else if (flag == 0x02) f->kwdefaults = value;
  else if (flag == 0x01) f->defaults = unpack(value);
  // 0x04 (annotations) and 0x10 (3.14's annotate) do not change what the function computes.
}

std::string InstructionTranslator::localName(int index) const {
  auto* co = reinterpret_cast<PyCodeObject*>(code_.ptr());
  return nb::cast<std::string>(nb::handle(PyTuple_GET_ITEM(co->co_localsplusnames, index)));
}

VT* InstructionTranslator::loadCell(VT* cell, int index) {
  if (!cell) throw Unsupported{"internal: a closure cell is missing"};
  if (cell->kind == VT::Kind::Cell) {
    VT* v = static_cast<CellVT*>(cell)->contents;
    if (!v)
      throw TraceError{"NameError: free variable '" + localName(index) +
                       "' referenced before assignment"};
    return v;
  }
  if (cell->kind == VT::Kind::RealCell) {
    auto* real = static_cast<RealCellVT*>(cell);
    if (!real->contents) {
      PyObject* v = PyCell_GET(real->cell.ptr());
      if (!v)
        throw TraceError{"NameError: free variable '" + localName(index) +
                         "' referenced before assignment"};
      real->contents = t_.wrap(v, real->source);
    }
    return real->contents;
  }
  throw Unsupported{"internal: a local used as a cell is not a cell"};
}

VT* InstructionTranslator::loadGlobal(const std::string& name) {
  if (VT* stored = t_.storedValue(Tracer::SideEffect::Kind::Global, globals_.ptr(), name)) return stored;
  PyObject* v = PyDict_GetItemString(globals_.ptr(), name.c_str());
  if (!v) {
    nb::object builtins = nb::module_::import_("builtins");
    if (!PyObject_HasAttrString(builtins.ptr(), name.c_str()))
      throw TraceError{"NameError: name '" + name + "' is not defined"};
    nb::object b = builtins.attr(name.c_str());
    return t_.wrap(b, globalSource_ ? globalSource_(name) : nullptr);
  }
  return t_.wrap(v, globalSource_ ? globalSource_(name) : nullptr);
}

bool InstructionTranslator::isNone(VT* v) {
  return v->kind == VT::Kind::Constant && static_cast<ConstantVT*>(v)->value.is_none();
}

bool InstructionTranslator::isSame(VT* a, VT* b) {
  if (a == b) return true;
  nb::handle x = identityOf(a), y = identityOf(b);
  return x.is_valid() && y.is_valid() && x.ptr() == y.ptr();
}

nb::handle InstructionTranslator::identityOf(VT* v) {
  switch (v->kind) {
  case VT::Kind::Constant: return static_cast<ConstantVT*>(v)->value;
  case VT::Kind::Tensor: return static_cast<TensorVT*>(v)->fake;
  case VT::Kind::Function: return static_cast<FunctionVT*>(v)->fn;
  case VT::Kind::Module: return static_cast<ModuleVT*>(v)->module;
  case VT::Kind::Object: return static_cast<ObjectVT*>(v)->object;
  default: return nb::handle();
  }
}

bool InstructionTranslator::truthy(VT* v) {
  switch (v->kind) {
  case VT::Kind::Constant: {
    int r = PyObject_IsTrue(static_cast<ConstantVT*>(v)->value.ptr());
    if (r < 0) throw nb::python_error();
    return r;
  }
  case VT::Kind::Tensor:
    throw Unsupported{"a branch on a tensor's value (data-dependent control flow)"};
  case VT::Kind::Ndarray:
    throw Unsupported{"a branch on a numpy array's value (data-dependent control flow)"};
  case VT::Kind::Number:
    throw Unsupported{"a branch on a dynamic number (its value is specialized)"};
  case VT::Kind::List:
  case VT::Kind::Tuple:
    return !static_cast<SequenceVT*>(v)->items.empty();
  case VT::Kind::Dict:
    return !static_cast<DictVT*>(v)->entries.empty();
  case VT::Kind::Set:
    return PySet_GET_SIZE(static_cast<SetVT*>(v)->set.ptr()) > 0;
  case VT::Kind::NewObject:
  case VT::Kind::Function:
  case VT::Kind::NestedFunction:
  case VT::Kind::Method:
  case VT::Kind::Partial:
    return true;
  case VT::Kind::Module: {
    nb::handle m = static_cast<ModuleVT*>(v)->module;
    if (PyObject_HasAttrString(m.ptr(), "__len__")) return nb::len(m) > 0;
    return true;
  }
  case VT::Kind::Object: {
    nb::handle o = static_cast<ObjectVT*>(v)->object;
    PyTypeObject* tp = Py_TYPE(o.ptr());
    bool custom = (tp->tp_as_number && tp->tp_as_number->nb_bool) ||
                  (tp->tp_as_mapping && tp->tp_as_mapping->mp_length) ||
                  (tp->tp_as_sequence && tp->tp_as_sequence->sq_length);
    if (custom && !PyType_Check(o.ptr()) && !PyModule_Check(o.ptr()))
      throw Unsupported{std::string("the truth value of a ") + tp->tp_name + " object"};
    return true;
  }
  default:
    throw Unsupported{"the truth value of an internal value"};
  }
}

VT* InstructionTranslator::applyOperator(const char* name, VTs args) {
  static nb::handle op = nb::object(nb::module_::import_("operator")).release();
  return t_.callReal(op.attr(name), args, {});
}

bool InstructionTranslator::allConstant(const VTs& xs) {
  for (VT* x : xs)
    if (x->kind != VT::Kind::Constant) return false;
  return true;
}

VT* InstructionTranslator::binaryOp(int nbOp, VT* a, VT* b) {
  bool inplace = nbOp >= kNbInplaceAdd;
  int base = inplace ? nbOp - kNbInplaceAdd : nbOp;
  if (a->kind == VT::Kind::Number || b->kind == VT::Kind::Number) {
    // (Numbers are immutable: `n += 1` is `n + 1`; `x += n` writes tensor x in place.)
    static nb::handle binary =
        nb::object(nb::module_::import_("kiln._traced_numbers").attr("binary")).release();
    return t_.callReal(binary, {t_.constant(nb::str(kBinaryNames[base])), a, b, t_.constant(nb::bool_(inplace))}, {});
  }
  if (a->kind == VT::Kind::Tensor || b->kind == VT::Kind::Tensor || allConstant({a, b}) ||
      a->kind == VT::Kind::Ndarray || b->kind == VT::Kind::Ndarray)
    return applyOperator(inplace ? kInplaceNames[base] : kBinaryNames[base], {a, b});
  if (a->kind == VT::Kind::Set && b->kind == VT::Kind::Set) {
    static nb::handle op = nb::object(nb::module_::import_("operator")).release();
    nb::object r = op.attr(kBinaryNames[base])(nb::steal(PySet_New(static_cast<SetVT*>(a)->set.ptr())),
                                               static_cast<SetVT*>(b)->set);
    if (inplace) {
      static_cast<SetVT*>(a)->set = r;
      return a;
    }
    return t_.make<SetVT>(r);
  }
  bool seqA = a->kind == VT::Kind::List || a->kind == VT::Kind::Tuple;
  bool seqB = b->kind == VT::Kind::List || b->kind == VT::Kind::Tuple;
  VT::Kind seqKind = seqA ? a->kind : b->kind;
  if ((seqA || seqB) && base == kNbAdd && isSequenceOf(a, seqKind) && isSequenceOf(b, seqKind)) {
    VTs more = unpack(b);
    if (inplace && seqA && a->kind == VT::Kind::List) {
      auto* x = static_cast<SequenceVT*>(a);
      mutateList(x);
      x->items.insert(x->items.end(), more.begin(), more.end());
      return x;
    }
    VTs items = unpack(a);
    items.insert(items.end(), more.begin(), more.end());
    return t_.make<SequenceVT>(seqKind, items);
  }
  if (seqA && inplace && base == kNbAdd && a->kind == VT::Kind::List) {
    auto* x = static_cast<SequenceVT*>(a);
    VTs more = unpack(b);
    mutateList(x);
    x->items.insert(x->items.end(), more.begin(), more.end());
    return x;
  }
  if (seqA && base == kNbMultiply && b->kind == VT::Kind::Constant) {
    long n = nb::cast<long>(static_cast<ConstantVT*>(b)->value);
    VTs items;
    for (long i = 0; i < n; ++i)
      for (VT* v : static_cast<SequenceVT*>(a)->items)
        items.push_back(v);
    return t_.make<SequenceVT>(a->kind, items);
  }
  throw Unsupported{std::string("the operator ") + kBinaryNames[base] + " on " + kindName(a) +
                    " and " + kindName(b)};
}

// A traced sequence of `kind`, or a constant of exactly that Python type: a literal such as the
// (-1, 2) in `x.shape[:-1] + (-1, 2)` is a constant while the traced shape is a tuple of values.
bool InstructionTranslator::isSequenceOf(VT* v, VT::Kind kind) {
  if (v->kind == kind) return true;
  if (v->kind != VT::Kind::Constant) return false;
  PyObject* c = static_cast<ConstantVT*>(v)->value.ptr();
  return kind == VT::Kind::Tuple ? PyTuple_CheckExact(c) : PyList_CheckExact(c);
}

VT* InstructionTranslator::compareOp(int cmp, VT* a, VT* b) {
  if (a->kind == VT::Kind::Number || b->kind == VT::Kind::Number) return compareNumber(cmp, a, b);
  if (a->kind == VT::Kind::Tensor || b->kind == VT::Kind::Tensor || allConstant({a, b}) ||
      a->kind == VT::Kind::Ndarray || b->kind == VT::Kind::Ndarray)
    return applyOperator(kCompareNames[cmp], {a, b});
  bool eq = cmp == 2, ne = cmp == 3;
  if ((eq || ne) && identityOf(a).is_valid() && identityOf(b).is_valid() &&
      (a->kind != VT::Kind::Constant || b->kind != VT::Kind::Constant) &&
      a->kind != VT::Kind::Object && b->kind != VT::Kind::Object)
    return t_.constant(nb::bool_(isSame(a, b) == eq));
  if (!containsTensor(a) && !containsTensor(b)) {
    static nb::handle op = nb::object(nb::module_::import_("operator")).release();
    nb::object r = op.attr(kCompareNames[cmp])(t_.toPython(a), t_.toPython(b));
    return t_.wrapResult(r);
  }
  throw Unsupported{std::string("comparing ") + kindName(a) + " and " + kindName(b)};
}

// `n < 3` of a dynamic int argument and an int constant: answered at the value of the traced call,
// and the answer guarded by a range of n (as PyTorch guards a SymInt's comparisons), so that the
// graph serves every value on the same side. Other comparisons (of numbers computed from n, of
// floats, `n != c` holding) need the value: n stays a constant.
VT* InstructionTranslator::compareNumber(int cmp, VT* a, VT* b) {
  bool flipped = a->kind != VT::Kind::Number;
  auto* n = static_cast<NumberVT*>(flipped ? b : a);
  VT* other = flipped ? a : b;
  PyObject* c = other->kind == VT::Kind::Constant ? static_cast<ConstantVT*>(other)->value.ptr() : nullptr;
  long k = 0;
  int overflow = 0;
  if (n->isFloat || n->inputExpr.empty() || !n->source || !c || !PyLong_CheckExact(c) ||
      (k = PyLong_AsLongAndOverflow(c, &overflow), overflow) || k == std::numeric_limits<long>::min() ||
      k == std::numeric_limits<long>::max())
    throw Unsupported{"a comparison of a dynamic number (its value is specialized)"};
  static const int mirror[] = {4, 5, 2, 3, 0, 1}; // c < n is n > c, ...
  int op = flipped ? mirror[cmp] : cmp;
  long x = nb::cast<long>(n->hint);
  // n < k holds for n in [min, k - 1] and fails for [k, max]; the other orders likewise.
  long low = std::numeric_limits<long>::min(), high = std::numeric_limits<long>::max();
  bool r = false;
  switch (op) {
  case 0: // <
    r = x < k;
    if (r) high = k - 1;
    else low = k;
    break;
  case 1: // <=
    r = x <= k;
    if (r) high = k;
    else low = k + 1;
    break;
  case 4: // >
    r = x > k;
    if (r) low = k + 1;
    else high = k;
    break;
  case 5: // >=
    r = x >= k;
    if (r) low = k;
    else high = k - 1;
    break;
  default: // == and !=: only an equality that holds is one range (n == k, specialized)
    if (x != k) throw Unsupported{"a comparison of a dynamic number (its value is specialized)"};
    r = op == 2;
    low = high = k;
  }
  n->source->guardNode(t_.guards()).checkIntRange(low, high);
  return t_.constant(nb::bool_(r));
}

bool InstructionTranslator::contains(VT* container, VT* item) {
  switch (container->kind) {
  case VT::Kind::Dict:
    return static_cast<DictVT*>(container)->find(dictKey(item).ptr()) >= 0;
  case VT::Kind::List:
  case VT::Kind::Tuple:
    for (VT* x : static_cast<SequenceVT*>(container)->items) {
      if (isSame(x, item)) return true;
      if (x->kind == VT::Kind::Tensor || item->kind == VT::Kind::Tensor) continue;
      if (truthy(compareOp(2, x, item))) return true;
    }
    return false;
  case VT::Kind::Set: {
    int r = PySet_Contains(static_cast<SetVT*>(container)->set.ptr(),
                           constantValue(item, "a set element").ptr());
    if (r < 0) throw nb::python_error();
    return r;
  }
  case VT::Kind::Constant: {
    int r = PySequence_Contains(static_cast<ConstantVT*>(container)->value.ptr(),
                                constantValue(item, "the left side of `in`").ptr());
    if (r < 0) throw nb::python_error();
    return r;
  }
  default:
    throw Unsupported{std::string("`in` on ") + kindName(container)};
  }
}

nb::object InstructionTranslator::constantValue(VT* v, const char* what) {
  if (v->kind == VT::Kind::Constant) return static_cast<ConstantVT*>(v)->value;
  if (v->kind == VT::Kind::Tensor)
    throw Unsupported{std::string("a tensor used as ") + what + " (its value is data)"};
  if (!containsTensor(v) && (v->kind == VT::Kind::Tuple || v->kind == VT::Kind::Object))
    return t_.toPython(v);
  throw Unsupported{std::string(kindName(v)) + " used as " + what};
}

// The class or tuple of classes an `except` clause names, as CPython's CHECK_EXC_MATCH reads it.
nb::object InstructionTranslator::exceptionClasses(VT* v) {
  if (v->kind == VT::Kind::Object) return static_cast<ObjectVT*>(v)->object;
  if (v->kind == VT::Kind::Constant) return static_cast<ConstantVT*>(v)->value;
  if (v->kind == VT::Kind::Tuple) {
    nb::list items;
    for (VT* item : static_cast<SequenceVT*>(v)->items)
      items.append(exceptionClasses(item));
    return nb::tuple(items);
  }
  throw Unsupported{std::string("an except clause naming a ") + kindName(v)};
}

const char* InstructionTranslator::kindName(VT* v) {
  switch (v->kind) {
  case VT::Kind::Constant: return Py_TYPE(static_cast<ConstantVT*>(v)->value.ptr())->tp_name;
  case VT::Kind::Tensor: return "Tensor";
  case VT::Kind::List: return "list";
  case VT::Kind::Tuple: return "tuple";
  case VT::Kind::Dict: return "dict";
  case VT::Kind::Iterator: return "iterator";
  case VT::Kind::Function:
  case VT::Kind::NestedFunction: return "function";
  case VT::Kind::Module: return "nn.Module";
  case VT::Kind::Object: return Py_TYPE(static_cast<ObjectVT*>(v)->object.ptr())->tp_name;
  case VT::Kind::Method: return "method";
  case VT::Kind::Set: return "set";
  case VT::Kind::NewObject: return reinterpret_cast<PyTypeObject*>(static_cast<NewObjectVT*>(v)->cls.ptr())->tp_name;
  case VT::Kind::Format: return "an f-string of a tensor";
  case VT::Kind::Ndarray: return "numpy.ndarray";
  case VT::Kind::Number: return static_cast<NumberVT*>(v)->isFloat ? "float (dynamic)" : "int (dynamic)";
  case VT::Kind::Partial: return "functools.partial";
  default: return "internal value";
  }
}

SetVT* InstructionTranslator::setOf(VT* v) {
  if (v->kind != VT::Kind::Set) throw Unsupported{"internal: expected a set on the stack"};
  return static_cast<SetVT*>(v);
}

SequenceVT* InstructionTranslator::listOf(VT* v) {
  if (v->kind != VT::Kind::List) throw Unsupported{"internal: expected a list on the stack"};
  return static_cast<SequenceVT*>(v);
}

DictVT* InstructionTranslator::dictOf(VT* v) {
  if (v->kind != VT::Kind::Dict) throw Unsupported{"internal: expected a dict on the stack"};
  return static_cast<DictVT*>(v);
}

// A list or dict from outside the frame changes in place: the glue replays its final contents.
void InstructionTranslator::mutateList(SequenceVT* l) {
  if (l->original.is_valid()) t_.recordContainer(l);
  l->mutated = true;
}

void InstructionTranslator::mutateDict(DictVT* d) {
  if (d->original.is_valid()) t_.recordContainer(d);
  d->mutated = true;
}

void InstructionTranslator::dictSet(DictVT* d, VT* key, VT* value) {
  nb::object k = dictKey(key);
  int i = d->find(k.ptr());
  // Storing the value already there (an optimizer's `state["momentum_buffer"] = buf`) changes
  // nothing: no replay, which would hand back a graph output in place of the object itself.
  if (i >= 0 && d->entries[size_t(i)].second == value) return;
  mutateDict(d);
  if (i >= 0) d->entries[size_t(i)].second = value;
  else d->entries.emplace_back(k, value);
  d->mutated = true;
}

nb::object InstructionTranslator::dictKey(VT* key) {
  if (key->kind == VT::Kind::Tensor) {
    auto* t = static_cast<TensorVT*>(key);
    if (t_.guardIdentity(t)) return t->real;
    throw Unsupported{"a tensor used as a dict key (only tensors from outside the frame whose "
                      "identity is guarded, such as parameters, can key a dict)"};
  }
  if (key->kind == VT::Kind::Module) { // `cache[module] = out`: an nn.Module keys by identity
    auto* m = static_cast<ModuleVT*>(key);
    if (!m->madeWhileTracing && isIdentityKeyed(m->module.ptr())) return m->module;
  }
  return constantValue(key, "a dict key");
}

VT* InstructionTranslator::makeFunction(int flags) {
  VT* code = pop();
  auto* f = t_.make<NestedFunctionVT>();
  f->code = constantValue(code, "a function's code");
  f->globals = globals_;
  f->globalSourceFor = globalSource_;
  for (int flag : {0x08, 0x04, 0x02, 0x01}) // the order MAKE_FUNCTION pops them in
    if (flags & flag) setFunctionAttribute(f, flag, pop());
  return f;
}

// The parts of an f-string joined: a constant, or a FormatVT when a part is one (a tensor's text,
// formatted after the graph).
VT* InstructionTranslator::buildString(const VTs& parts) {
  bool lazy = std::any_of(parts.begin(), parts.end(), [](VT* p) { return p->kind == VT::Kind::Format; });
  std::string s;
  VTs args;
  for (VT* p : parts) {
    if (p->kind == VT::Kind::Format) { // a field of its own (its template may number fields)
      s += "{}";
      args.push_back(p);
      continue;
    }
    std::string text = nb::cast<std::string>(constantValue(p, "an f-string part"));
    if (!lazy) {
      s += text;
      continue;
    }
    for (char c : text) { // literal text of a str.format template: braces doubled
      s += c;
      if (c == '{' || c == '}') s += c;
    }
  }
  if (lazy) return t_.make<FormatVT>(std::move(s), std::move(args));
  return t_.constant(nb::str(s.c_str(), s.size()));
}

VT* InstructionTranslator::formatValue(VT* v, int conversion, VT* spec) {
  if (conversion == 0 && v->kind != VT::Kind::Constant && containsTensor(v)) {
    // `f"{loss:.4f}"`: formatted after the graph, where the value leaves the trace, as
    // TorchDynamo does (a conversion first, `f"{t!r}"`, is repr() of a tensor: a break).
    std::string fmt = spec ? nb::cast<std::string>(constantValue(spec, "a format spec")) : std::string();
    if (fmt.find_first_of("{}") != std::string::npos)
      throw Unsupported{"a tensor formatted with a format spec holding braces"};
    if (fmt.empty() && v->kind == VT::Kind::Format) return v; // f"{msg}" of an f-string
    return t_.make<FormatVT>("{" + (fmt.empty() ? std::string() : ":" + fmt) + "}", VTs{v});
  }
  nb::object value = constantValue(v, "an f-string value");
  if (conversion == 1) value = nb::str(value);
  else if (conversion == 2) value = nb::repr(value);
  else if (conversion == 3) value = nb::steal(PyObject_ASCII(value.ptr()));
  nb::object fmt = spec ? constantValue(spec, "a format spec") : nb::str("");
  PyObject* r = PyObject_Format(value.ptr(), fmt.ptr());
  if (!r) throw nb::python_error();
  return t_.constant(nb::steal(r));
}

} // namespace kiln::capture
