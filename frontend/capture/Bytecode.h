// The running CPython's bytecode as the symbolic interpreter reads it (issue 17). kiln names the
// instructions it handles by CPython's own opnames (KILN_HANDLED_OPS) and maps the running
// version's opcode numbers onto them by name, from `dis`/`opcode` at first use: one table per
// version without a table per version in the source, and an instruction a new Python adds or
// renumbers shows as unhandled rather than as a wrong one. Every other opname is declared
// unsupported with the reason a graph break reports (kUnsupportedOps in Bytecode.cpp);
// test_capture_bytecode.py checks that every opname `dis` lists is one or the other.
#pragma once
#include <Python.h>
#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::capture {

namespace nb = nanobind;

// Every CPython opname the interpreter runs, over the versions kiln captures (3.11 to 3.13).
#define KILN_HANDLED_OPS(X)                                                                       \
  X(CACHE) X(NOP) X(RESUME) X(EXTENDED_ARG) X(PRECALL) X(POP_TOP) X(PUSH_NULL) X(COPY) X(SWAP)    \
  X(LOAD_CONST) X(RETURN_CONST) X(LOAD_FAST) X(LOAD_FAST_CHECK) X(LOAD_FAST_AND_CLEAR)             \
  X(LOAD_FAST_LOAD_FAST) X(STORE_FAST) X(STORE_FAST_STORE_FAST) X(STORE_FAST_LOAD_FAST)             \
  X(DELETE_FAST) X(MAKE_CELL) X(COPY_FREE_VARS) X(LOAD_CLOSURE) X(LOAD_DEREF) X(STORE_DEREF)        \
  X(LOAD_GLOBAL) X(STORE_GLOBAL) X(DELETE_GLOBAL) X(LOAD_ATTR) X(LOAD_METHOD) X(LOAD_SUPER_ATTR)    \
  X(STORE_ATTR) X(KW_NAMES) X(CALL) X(CALL_KW) X(CALL_FUNCTION_EX) X(MAKE_FUNCTION)                 \
  X(SET_FUNCTION_ATTRIBUTE) X(RETURN_VALUE) X(RETURN_GENERATOR) X(YIELD_VALUE) X(BINARY_OP)         \
  X(UNARY_NEGATIVE) X(UNARY_POSITIVE) X(UNARY_INVERT) X(UNARY_NOT) X(TO_BOOL) X(CALL_INTRINSIC_1)   \
  X(COMPARE_OP) X(IS_OP) X(CONTAINS_OP) X(BINARY_SUBSCR) X(STORE_SUBSCR) X(DELETE_SUBSCR)           \
  X(BINARY_SLICE) X(STORE_SLICE) X(BUILD_TUPLE) X(BUILD_LIST) X(LIST_TO_TUPLE) X(BUILD_MAP)         \
  X(BUILD_CONST_KEY_MAP) X(BUILD_SET) X(SET_ADD) X(SET_UPDATE) X(BUILD_SLICE) X(BUILD_STRING)       \
  X(FORMAT_VALUE) X(FORMAT_SIMPLE) X(FORMAT_WITH_SPEC) X(CONVERT_VALUE) X(LIST_APPEND)              \
  X(LIST_EXTEND) X(MAP_ADD) X(DICT_UPDATE) X(DICT_MERGE) X(UNPACK_SEQUENCE) X(UNPACK_EX)            \
  X(GET_ITER) X(FOR_ITER) X(END_FOR) X(JUMP_FORWARD) X(JUMP_BACKWARD) X(JUMP_BACKWARD_NO_INTERRUPT) \
  X(POP_JUMP_FORWARD_IF_TRUE) X(POP_JUMP_FORWARD_IF_FALSE) X(POP_JUMP_BACKWARD_IF_TRUE)             \
  X(POP_JUMP_BACKWARD_IF_FALSE) X(POP_JUMP_FORWARD_IF_NONE) X(POP_JUMP_FORWARD_IF_NOT_NONE)         \
  X(POP_JUMP_BACKWARD_IF_NONE) X(POP_JUMP_BACKWARD_IF_NOT_NONE) X(POP_JUMP_IF_TRUE)                 \
  X(POP_JUMP_IF_FALSE) X(POP_JUMP_IF_NONE) X(POP_JUMP_IF_NOT_NONE) X(JUMP_IF_TRUE_OR_POP)           \
  X(JUMP_IF_FALSE_OR_POP) X(BEFORE_WITH) X(RAISE_VARARGS) X(LOAD_ASSERTION_ERROR)               \
  X(GET_YIELD_FROM_ITER) X(SEND) X(END_SEND) X(PUSH_EXC_INFO) X(POP_EXCEPT) X(CHECK_EXC_MATCH) X(RERAISE)

enum class Op : uint8_t {
  Unknown, // an instruction kiln does not run (its reason: unsupportedReason)
#define KILN_OP_ENUM(name) name,
  KILN_HANDLED_OPS(KILN_OP_ENUM)
#undef KILN_OP_ENUM
};

// BINARY_OP's argument: 13 operators, then their in-place forms, in dis._nb_ops's order (the
// same in 3.11 to 3.13; test_capture_bytecode.py checks it).
constexpr int kNbAdd = 0, kNbMultiply = 5, kNbInplaceAdd = 13;

// A code object's instructions, one entry per code unit (inline caches read as CACHE, so an
// index is CPython's instruction offset / 2, as graph breaks count them).
struct DecodedCode {
  std::vector<Op> ops;
  std::vector<int> raw;    // the running version's opcode (for dis.opname on the Python side)
  std::vector<int> args;   // EXTENDED_ARG folded in
  std::vector<int> target; // a relative jump's destination index (-1: not a jump)
};

DecodedCode decodeCode(nb::handle code);
// The running version's name of a raw opcode.
const std::string& opcodeName(int raw);
// Why kiln does not run the instruction `raw` (a graph-break reason).
std::string unsupportedReason(int raw);
// {opname: None (handled) or the reason it is not}, over every name kiln knows of.
nb::dict opcodeSupport();

} // namespace kiln::capture
