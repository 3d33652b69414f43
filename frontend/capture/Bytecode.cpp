// The running CPython's opcode table, read from its `opcode` module by name (Bytecode.h).
#include "frontend/capture/Bytecode.h"

#include <cstdint>
#include <nanobind/stl/string.h>

#include <array>
#include <cstring>
#include <unordered_map>

namespace kiln::capture {

namespace {

struct UnsupportedOp {
  const char* name;
  const char* reason;
};

// The opnames of 3.11 to 3.13 that kiln does not run, with the reason a graph break gives.
// Of exception handlers, only a `try` block's `except` clauses are traced (an exception the
// traced code raises inside the block, InstructionTranslator::stepCatching); INSTRUMENTED_* never
// appear in co_code.
constexpr UnsupportedOp kUnsupportedOps[] = {
    {"CHECK_EG_MATCH", "exception handling (an `except*` clause)"},
    {"PREP_RERAISE_STAR", "exception handling (an `except*` clause)"},
    {"WITH_EXCEPT_START", "exception handling (a `with` block's __exit__ on an exception)"},
    {"CLEANUP_THROW", "generator.throw()"},
    {"CALL_INTRINSIC_2", "`except*` or a generic type parameter"},
    {"BEFORE_ASYNC_WITH", "coroutines (`async with`)"},
    {"GET_AITER", "coroutines (`async for`)"},
    {"GET_ANEXT", "coroutines (`async for`)"},
    {"END_ASYNC_FOR", "coroutines (`async for`)"},
    {"GET_AWAITABLE", "coroutines (`await`)"},
    {"ASYNC_GEN_WRAP", "async generators"},
    {"LOAD_NAME", "name lookups of a class body or module"},
    {"STORE_NAME", "name lookups of a class body or module"},
    {"DELETE_NAME", "name lookups of a class body or module"},
    {"LOAD_LOCALS", "name lookups of a class body"},
    {"LOAD_FROM_DICT_OR_GLOBALS", "name lookups of a class body"},
    {"LOAD_FROM_DICT_OR_DEREF", "name lookups of a class body"},
    {"LOAD_CLASSDEREF", "name lookups of a class body"},
    {"SETUP_ANNOTATIONS", "annotations of a class body or module"},
    {"LOAD_BUILD_CLASS", "a `class` statement"},
    {"PRINT_EXPR", "the interactive interpreter's echo"},
    {"IMPORT_NAME", "an `import` statement"},
    {"IMPORT_FROM", "an `import` statement"},
    {"IMPORT_STAR", "an `import *` statement"},
    {"DELETE_ATTR", "deleting an attribute"},
    {"DELETE_DEREF", "deleting a closure variable"},
    {"MATCH_CLASS", "a `match` statement"},
    {"MATCH_KEYS", "a `match` statement"},
    {"MATCH_MAPPING", "a `match` statement"},
    {"MATCH_SEQUENCE", "a `match` statement"},
    {"GET_LEN", "a `match` statement"},
    {"EXIT_INIT_CHECK", "an internal instruction of specialized calls"},
    {"INTERPRETER_EXIT", "an internal instruction of the interpreter"},
    {"ENTER_EXECUTOR", "an internal instruction of the optimizer"},
    {"RESERVED", "a reserved opcode"},
};

constexpr const char* kInstrumentedReason = "an instrumented instruction (never in co_code)";

struct Table {
  std::array<Op, 256> op{};
  std::array<int, 256> caches{};
  std::array<bool, 256> relativeJump{}, backward{};
  std::array<std::string, 256> name;
};

Op handledOp(const std::string& name) {
  static const std::unordered_map<std::string, Op> byName = {
#define KILN_OP_NAME(n) {#n, Op::n},
      KILN_HANDLED_OPS(KILN_OP_NAME)
#undef KILN_OP_NAME
  };
  auto it = byName.find(name);
  return it == byName.end() ? Op::Unknown : it->second;
}

// Inline cache entries per opcode: a list by opcode up to 3.12, a dict by name from 3.13.
int cacheEntries(nb::handle table, int raw, const std::string& name) {
  if (PyDict_Check(table.ptr())) {
    PyObject* n = PyDict_GetItemString(table.ptr(), name.c_str());
    return n ? int(PyLong_AsLong(n)) : 0;
  }
  return raw < int(nb::len(table)) ? nb::cast<int>(table[raw]) : 0;
}

Table buildTable() {
  Table t;
  nb::module_ opcode = nb::module_::import_("opcode");
  nb::object opname = opcode.attr("opname"), hasjrel = opcode.attr("hasjrel");
  nb::object caches = opcode.attr("_inline_cache_entries");
  for (int raw = 0; raw < 256 && raw < int(nb::len(opname)); ++raw) {
    std::string name = nb::cast<std::string>(opname[raw]);
    t.name[size_t(raw)] = name;
    t.op[size_t(raw)] = handledOp(name);
    t.caches[size_t(raw)] = cacheEntries(caches, raw, name);
    t.relativeJump[size_t(raw)] = nb::cast<bool>(hasjrel.attr("__contains__")(raw));
    t.backward[size_t(raw)] = name.find("BACKWARD") != std::string::npos;
  }
  return t;
}

const Table& table() {
  static const Table t = buildTable();
  return t;
}

} // namespace

DecodedCode decodeCode(nb::handle code) {
  const Table& t = table();
  nb::bytes raw = nb::cast<nb::bytes>(code.attr("co_code"));
  const auto* bytes = reinterpret_cast<const uint8_t*>(raw.c_str());
  size_t n = raw.size() / 2;
  DecodedCode d;
  d.ops.resize(n);
  d.raw.resize(n);
  d.args.resize(n);
  d.target.assign(n, -1);
  int ext = 0;
  for (size_t i = 0; i < n; ++i) {
    int op = bytes[2 * i];
    int arg = (ext << 8) | bytes[2 * i + 1];
    d.raw[i] = op;
    d.ops[i] = t.op[size_t(op)];
    d.args[i] = arg;
    ext = d.ops[i] == Op::EXTENDED_ARG ? arg : 0;
    // Relative jumps count from the instruction after this one's inline caches (all versions).
    if (t.relativeJump[size_t(op)]) {
      long after = long(i) + 1 + t.caches[size_t(op)];
      d.target[i] = int(t.backward[size_t(op)] ? after - arg : after + arg);
    }
  }
  return d;
}

const std::string& opcodeName(int raw) {
  static const std::string unknown = "<unknown>";
  return raw >= 0 && raw < 256 && !table().name[size_t(raw)].empty() ? table().name[size_t(raw)] : unknown;
}

std::string unsupportedReason(int raw) {
  const std::string& name = opcodeName(raw);
  for (const UnsupportedOp& u : kUnsupportedOps)
    if (name == u.name) return std::string(u.reason) + " (" + name + ")";
  if (name.rfind("INSTRUMENTED_", 0) == 0) return std::string(kInstrumentedReason) + " (" + name + ")";
  return "the bytecode instruction " + name + ", which kiln does not know on Python " +
         std::to_string(PY_MAJOR_VERSION) + "." + std::to_string(PY_MINOR_VERSION);
}

nb::dict opcodeSupport() {
  nb::dict d;
#define KILN_OP_SUPPORT(n) d[#n] = nb::none();
  KILN_HANDLED_OPS(KILN_OP_SUPPORT)
#undef KILN_OP_SUPPORT
  for (const UnsupportedOp& u : kUnsupportedOps)
    d[u.name] = u.reason;
  for (const std::string& name : table().name)
    if (name.rfind("INSTRUMENTED_", 0) == 0) d[name.c_str()] = kInstrumentedReason;
  return d;
}

} // namespace kiln::capture
