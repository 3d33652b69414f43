// The bytecode loop of the symbolic interpreter: CPython 3.11 instructions over variable
// trackers. Jumps on values known while tracing are taken (specialized); anything whose
// outcome depends on tensor data, or that has effects the graph cannot replay, is Unsupported.
#include <Python.h>
#include <opcode.h>

#include "frontend/capture/SymbolicInterpreter.h"

namespace kiln::capture {

namespace {

nb::object codeAttr(nb::handle code, const char* name) { return code.attr(name); }

const char* kBinaryNames[] = {"add",  "and_", "floordiv", "lshift",  "matmul", "mul",  "mod",
                              "or_",  "pow",  "rshift",   "sub",     "truediv", "xor"};
const char* kInplaceNames[] = {"iadd", "iand", "ifloordiv", "ilshift", "imatmul", "imul", "imod",
                               "ior",  "ipow", "irshift",   "isub",    "itruediv", "ixor"};
const char* kCompareNames[] = {"lt", "le", "eq", "ne", "gt", "ge"};

} // namespace

InstructionTranslator::InstructionTranslator(Tracer& t, nb::handle code, nb::handle globals,
                                             GlobalSourceFn globalSource, int depth)
    : t_(t), code_(nb::borrow(code)), globals_(nb::borrow(globals)),
      globalSource_(std::move(globalSource)), depth_(depth) {
  if (depth_ > t_.maxInlineDepth)
    throw Unsupported{"calls nest deeper than " + std::to_string(t_.maxInlineDepth) +
                      " levels (recursion?)"};
  nb::bytes raw = nb::cast<nb::bytes>(codeAttr(code, "co_code"));
  const auto* bytes = reinterpret_cast<const uint8_t*>(raw.c_str());
  size_t n = raw.size() / 2;
  ops_.resize(n);
  args_.resize(n);
  int ext = 0;
  for (size_t i = 0; i < n; ++i) {
    ops_[i] = bytes[2 * i];
    args_[i] = (ext << 8) | bytes[2 * i + 1];
    ext = ops_[i] == EXTENDED_ARG ? args_[i] : 0;
  }
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
  while (!returned_) {
    if (--t_.instructionBudget < 0)
      throw Unsupported{"the frame runs too many instructions while tracing (a long loop?)"};
    size_t here = pc_++;
    t_.setPosition(code_, int(here));
    if (depth_ > 0) {
      step(ops_[here], args_[here]);
      continue;
    }
    if (t_.visitRoot(int(here), ops_[here], args_[here])) {
      t_.stopped = std::make_unique<Tracer::StopState>(Tracer::StopState{locals_, stack_, kwNames_});
      return nullptr;
    }
    step(ops_[here], args_[here]);
  }
  if (isGenerator_) return t_.make<IteratorVT>(yielded_);
  return result_;
}

void InstructionTranslator::jumpTo(size_t target) { pc_ = target; }

void InstructionTranslator::step(int op, int arg) {
  auto* co = reinterpret_cast<PyCodeObject*>(code_.ptr());
  auto name = [&](int i) { return nb::cast<std::string>(nb::handle(PyTuple_GET_ITEM(co->co_names, i))); };
  const size_t next = pc_;
  switch (op) {
  case CACHE:
  case NOP:
  case RESUME:
  case EXTENDED_ARG:
  case PRECALL:
    return;
  case POP_TOP:
    pop();
    return;
  case PUSH_NULL:
    push(t_.make<VT>(VT::Kind::Null));
    return;
  case COPY:
    push(top(arg));
    return;
  case SWAP:
    std::swap(stack_.back(), stack_[stack_.size() - size_t(arg)]);
    return;
  case LOAD_CONST:
    push(t_.constant(nb::borrow(PyTuple_GET_ITEM(co->co_consts, arg))));
    return;
  case LOAD_FAST: {
    VT* v = locals_[size_t(arg)];
    if (!v)
      throw TraceError{"UnboundLocalError: local variable '" + localName(arg) +
                       "' referenced before assignment"};
    push(v);
    return;
  }
  case STORE_FAST:
    locals_[size_t(arg)] = pop();
    return;
  case DELETE_FAST:
    locals_[size_t(arg)] = nullptr;
    return;
  case MAKE_CELL: {
    auto* cell = t_.make<CellVT>();
    cell->contents = locals_[size_t(arg)];
    locals_[size_t(arg)] = cell;
    return;
  }
  case COPY_FREE_VARS:
    for (int j = 0; j < arg; ++j)
      locals_[size_t(co->co_nlocalsplus - arg + j)] = closure_.at(size_t(j));
    return;
  case LOAD_CLOSURE:
    push(locals_[size_t(arg)]);
    return;
  case LOAD_DEREF:
    push(loadCell(locals_[size_t(arg)], arg));
    return;
  case STORE_DEREF: {
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
  case LOAD_GLOBAL:
    if (arg & 1) push(t_.make<VT>(VT::Kind::Null));
    push(loadGlobal(name(arg >> 1)));
    return;
  case STORE_GLOBAL:
    t_.recordStore(Tracer::SideEffect::Kind::Global, globals_, name(arg), pop());
    return;
  case DELETE_GLOBAL:
    throw Unsupported{"deleting the global variable '" + name(arg) + "'"};
  case LOAD_ATTR:
    push(loadAttr(pop(), name(arg)));
    return;
  case LOAD_METHOD: {
    VT* obj = pop();
    push(t_.make<VT>(VT::Kind::Null));
    push(loadAttr(obj, name(arg)));
    return;
  }
  case STORE_ATTR: {
    VT* obj = pop();
    VT* value = pop();
    storeAttr(obj, name(arg), value);
    return;
  }
  case KW_NAMES:
    kwNames_ = nb::borrow(PyTuple_GET_ITEM(co->co_consts, arg));
    return;
  case CALL: {
    VTs args = popN(arg);
    VT* second = pop();
    VT* first = pop();
    VT* fn = second;
    if (first->kind != VT::Kind::Null) {
      fn = first;
      args.insert(args.begin(), second);
    }
    Kwargs kwargs;
    if (kwNames_.is_valid()) {
      size_t nk = size_t(PyTuple_GET_SIZE(kwNames_.ptr()));
      for (size_t k = 0; k < nk; ++k)
        kwargs.emplace_back(nb::cast<std::string>(nb::handle(PyTuple_GET_ITEM(kwNames_.ptr(), k))),
                            args[args.size() - nk + k]);
      args.resize(args.size() - nk);
      kwNames_.reset();
    }
    push(call(fn, std::move(args), std::move(kwargs)));
    return;
  }
  case CALL_FUNCTION_EX: {
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
    VT* fn = pop();
    pop(); // the NULL pushed below the callable
    push(call(fn, std::move(args), std::move(kwargs)));
    return;
  }
  case MAKE_FUNCTION:
    push(makeFunction(arg));
    return;
  case RETURN_VALUE:
    result_ = pop();
    returned_ = true;
    return;
  case RETURN_GENERATOR:
    push(t_.none()); // the value the first send() passes in; POP_TOP drops it
    return;
  case YIELD_VALUE:
    yielded_.push_back(pop());
    push(t_.none());
    return;
  // `yield from it` in a generator being unrolled: each item of `it` is yielded in turn (SEND
  // pushes the next one for YIELD_VALUE, which loops back to SEND); at the end SEND leaves the
  // sub-generator's return value (None: unrolled generators return their items only).
  case GET_YIELD_FROM_ITER:
    push(getIter(pop()));
    return;
  case SEND: {
    pop(); // the value sent in: None while unrolling
    VT* it = top();
    if (it->kind != VT::Kind::Iterator) throw Unsupported{"yield from a value that is not an iterator"};
    auto* iter = static_cast<IteratorVT*>(it);
    if (iter->next < iter->items.size()) {
      push(iter->items[iter->next++]);
    } else {
      stack_.back() = t_.none();
      jumpTo(next + size_t(arg));
    }
    return;
  }
  case BINARY_OP: {
    VT* b = pop();
    VT* a = pop();
    push(binaryOp(arg, a, b));
    return;
  }
  case UNARY_NEGATIVE:
  case UNARY_POSITIVE:
  case UNARY_INVERT:
  case UNARY_NOT: {
    VT* a = pop();
    if (op == UNARY_NOT && a->kind != VT::Kind::Tensor) {
      push(t_.constant(nb::bool_(!truthy(a))));
      return;
    }
    const char* fn = op == UNARY_NEGATIVE ? "neg" : op == UNARY_POSITIVE ? "pos" : op == UNARY_INVERT ? "invert" : "not_";
    push(applyOperator(fn, {a}));
    return;
  }
  case COMPARE_OP: {
    VT* b = pop();
    VT* a = pop();
    push(compareOp(arg, a, b));
    return;
  }
  case IS_OP: {
    VT* b = pop();
    VT* a = pop();
    push(t_.constant(nb::bool_(isSame(a, b) != (arg == 1))));
    return;
  }
  case CONTAINS_OP: {
    VT* container = pop();
    VT* item = pop();
    push(t_.constant(nb::bool_(contains(container, item) != (arg == 1))));
    return;
  }
  case BINARY_SUBSCR: {
    VT* key = pop();
    VT* obj = pop();
    push(getItem(obj, key));
    return;
  }
  case STORE_SUBSCR: {
    VT* key = pop();
    VT* obj = pop();
    VT* value = pop();
    setItem(obj, key, value);
    return;
  }
  case DELETE_SUBSCR: {
    VT* key = pop();
    VT* obj = pop();
    deleteItem(obj, key);
    return;
  }
  case BUILD_TUPLE:
    push(t_.make<SequenceVT>(VT::Kind::Tuple, popN(arg)));
    return;
  case BUILD_LIST:
    push(t_.make<SequenceVT>(VT::Kind::List, popN(arg)));
    return;
  case LIST_TO_TUPLE:
    push(t_.make<SequenceVT>(VT::Kind::Tuple, unpack(pop())));
    return;
  case BUILD_MAP: {
    VTs kv = popN(2 * arg);
    auto* d = t_.make<DictVT>();
    for (int i = 0; i < arg; ++i)
      dictSet(d, kv[size_t(2 * i)], kv[size_t(2 * i + 1)]);
    push(d);
    return;
  }
  case BUILD_CONST_KEY_MAP: {
    VT* keys = pop();
    VTs values = popN(arg);
    VTs ks = unpack(keys);
    auto* d = t_.make<DictVT>();
    for (int i = 0; i < arg; ++i)
      dictSet(d, ks[size_t(i)], values[size_t(i)]);
    push(d);
    return;
  }
  case BUILD_SET: {
    VTs items = popN(arg);
    nb::object set = nb::steal(PySet_New(nullptr));
    for (VT* v : items)
      if (PySet_Add(set.ptr(), constantValue(v, "a set element").ptr()) < 0) throw nb::python_error();
    push(t_.make<SetVT>(set));
    return;
  }
  case SET_ADD: {
    VT* v = pop();
    if (PySet_Add(setOf(top(arg))->set.ptr(), constantValue(v, "a set element").ptr()) < 0)
      throw nb::python_error();
    return;
  }
  case SET_UPDATE: {
    VTs items = unpack(pop());
    for (VT* v : items)
      if (PySet_Add(setOf(top(arg))->set.ptr(), constantValue(v, "a set element").ptr()) < 0)
        throw nb::python_error();
    return;
  }
  case BUILD_SLICE: {
    VTs parts = popN(arg);
    nb::object objs[3] = {nb::none(), nb::none(), nb::none()};
    for (int i = 0; i < arg; ++i)
      objs[i] = constantValue(parts[size_t(i)], "a slice bound");
    push(t_.constant(nb::steal(PySlice_New(objs[0].ptr(), objs[1].ptr(), arg == 3 ? objs[2].ptr() : nullptr))));
    return;
  }
  case BUILD_STRING: {
    VTs parts = popN(arg);
    std::string s;
    for (VT* p : parts)
      s += nb::cast<std::string>(constantValue(p, "an f-string part"));
    push(t_.constant(nb::str(s.c_str(), s.size())));
    return;
  }
  case FORMAT_VALUE: {
    VT* spec = (arg & 0x04) ? pop() : nullptr;
    VT* value = pop();
    push(formatValue(value, arg & 0x03, spec));
    return;
  }
  case LIST_APPEND: {
    VT* v = pop();
    listOf(top(arg))->items.push_back(v);
    return;
  }
  case LIST_EXTEND: {
    VTs items = unpack(pop());
    auto* l = listOf(top(arg));
    l->items.insert(l->items.end(), items.begin(), items.end());
    return;
  }
  case MAP_ADD: {
    VT* v = pop();
    VT* k = pop();
    dictSet(dictOf(top(arg)), k, v);
    return;
  }
  case DICT_UPDATE:
  case DICT_MERGE: {
    VT* src = pop();
    if (src->kind != VT::Kind::Dict) throw Unsupported{"merging a value that is not a dict"};
    for (auto& [k, v] : static_cast<DictVT*>(src)->entries)
      dictSet(dictOf(top(arg)), t_.constant(k), v);
    return;
  }
  case UNPACK_SEQUENCE: {
    VTs items = unpack(pop());
    if (int(items.size()) != arg)
      throw TraceError{"ValueError: expected " + std::to_string(arg) + " values to unpack, got " +
                       std::to_string(items.size())};
    for (auto it = items.rbegin(); it != items.rend(); ++it)
      push(*it);
    return;
  }
  case UNPACK_EX: {
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
  case GET_ITER:
    push(getIter(pop()));
    return;
  case FOR_ITER: {
    VT* it = top();
    if (it->kind != VT::Kind::Iterator) throw Unsupported{"iterating a value that is not an iterator"};
    auto* iter = static_cast<IteratorVT*>(it);
    if (iter->next < iter->items.size()) {
      push(iter->items[iter->next++]);
    } else {
      pop();
      jumpTo(next + size_t(arg));
    }
    return;
  }
  case JUMP_FORWARD:
    jumpTo(next + size_t(arg));
    return;
  case JUMP_BACKWARD:
  case JUMP_BACKWARD_NO_INTERRUPT:
    jumpTo(next - size_t(arg));
    return;
  case POP_JUMP_FORWARD_IF_TRUE:
  case POP_JUMP_FORWARD_IF_FALSE:
  case POP_JUMP_BACKWARD_IF_TRUE:
  case POP_JUMP_BACKWARD_IF_FALSE: {
    bool want = op == POP_JUMP_FORWARD_IF_TRUE || op == POP_JUMP_BACKWARD_IF_TRUE;
    bool forward = op == POP_JUMP_FORWARD_IF_TRUE || op == POP_JUMP_FORWARD_IF_FALSE;
    if (truthy(pop()) == want) jumpTo(forward ? next + size_t(arg) : next - size_t(arg));
    return;
  }
  case POP_JUMP_FORWARD_IF_NONE:
  case POP_JUMP_FORWARD_IF_NOT_NONE:
  case POP_JUMP_BACKWARD_IF_NONE:
  case POP_JUMP_BACKWARD_IF_NOT_NONE: {
    bool wantNone = op == POP_JUMP_FORWARD_IF_NONE || op == POP_JUMP_BACKWARD_IF_NONE;
    bool forward = op == POP_JUMP_FORWARD_IF_NONE || op == POP_JUMP_FORWARD_IF_NOT_NONE;
    if (isNone(pop()) == wantNone) jumpTo(forward ? next + size_t(arg) : next - size_t(arg));
    return;
  }
  case JUMP_IF_TRUE_OR_POP:
  case JUMP_IF_FALSE_OR_POP: {
    bool want = op == JUMP_IF_TRUE_OR_POP;
    if (truthy(top()) == want) jumpTo(next + size_t(arg));
    else pop();
    return;
  }
  case BEFORE_WITH: {
    VT* mgr = pop();
    if (mgr->kind != VT::Kind::GradMode)
      throw Unsupported{"a `with` block over a context manager other than kiln's grad modes"};
    auto* g = static_cast<GradModeVT*>(mgr);
    bool prev = g->previous ? *g->previous : t_.gradMode();
    t_.setGradMode(g->enabled);
    push(t_.make<GradModeExitVT>(prev));
    push(t_.none());
    return;
  }
  case RAISE_VARARGS:
    throw Unsupported{"a `raise` statement"};
  case LOAD_ASSERTION_ERROR:
    throw Unsupported{"a failing `assert`"};
  default:
    break;
  }
  throw Unsupported{std::string("the bytecode instruction ") + opName(op)};
}

std::string InstructionTranslator::localName(int index) const {
  auto* co = reinterpret_cast<PyCodeObject*>(code_.ptr());
  return nb::cast<std::string>(nb::handle(PyTuple_GET_ITEM(co->co_localsplusnames, index)));
}

const char* InstructionTranslator::opName(int op) {
  static nb::handle names = nb::object(nb::module_::import_("opcode").attr("opname")).release();
  static std::vector<std::string> cache;
  if (cache.empty())
    for (nb::handle h : names)
      cache.push_back(nb::cast<std::string>(h));
  return op < int(cache.size()) ? cache[size_t(op)].c_str() : "<unknown>";
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
  bool inplace = nbOp >= NB_INPLACE_ADD;
  int base = inplace ? nbOp - NB_INPLACE_ADD : nbOp;
  if (a->kind == VT::Kind::Tensor || b->kind == VT::Kind::Tensor || allConstant({a, b}))
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
  if (seqA && base == NB_ADD && b->kind == a->kind) {
    auto* x = static_cast<SequenceVT*>(a);
    VTs items = x->items;
    VTs more = static_cast<SequenceVT*>(b)->items;
    if (inplace && a->kind == VT::Kind::List) {
      mutateList(x);
      x->items.insert(x->items.end(), more.begin(), more.end());
      return x;
    }
    items.insert(items.end(), more.begin(), more.end());
    return t_.make<SequenceVT>(a->kind, items);
  }
  if (seqA && inplace && base == NB_ADD && a->kind == VT::Kind::List) {
    auto* x = static_cast<SequenceVT*>(a);
    VTs more = unpack(b);
    mutateList(x);
    x->items.insert(x->items.end(), more.begin(), more.end());
    return x;
  }
  if (seqA && base == NB_MULTIPLY && b->kind == VT::Kind::Constant) {
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

VT* InstructionTranslator::compareOp(int cmp, VT* a, VT* b) {
  if (a->kind == VT::Kind::Tensor || b->kind == VT::Kind::Tensor || allConstant({a, b}))
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
    if (t->real.is_valid() && t->identityGuarded) return t->real;
    throw Unsupported{"a tensor used as a dict key (only tensors from outside the frame whose "
                      "identity is guarded, such as parameters, can key a dict)"};
  }
  return constantValue(key, "a dict key");
}

VT* InstructionTranslator::makeFunction(int flags) {
  VT* code = pop();
  auto* f = t_.make<NestedFunctionVT>();
  f->code = constantValue(code, "a function's code");
  f->globals = globals_;
  f->globalSourceFor = globalSource_;
  if (flags & 0x08) f->closure = unpack(pop());
  if (flags & 0x04) pop(); // annotations
  if (flags & 0x02) f->kwdefaults = pop();
  if (flags & 0x01) f->defaults = unpack(pop());
  return f;
}

VT* InstructionTranslator::formatValue(VT* v, int conversion, VT* spec) {
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
