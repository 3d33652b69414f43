// What kiln's capture knows about the CPython it is built for, in one place (issue 17): which
// versions capture supports, and the few facts about their bytecode that the symbolic
// interpreter cannot read from `dis` at run time. The interpreter frame's layout is in
// FrameLayout.h beside this. No other capture file tests PY_VERSION_HEX.
//
// On a Python newer than the last one listed here kiln still builds: the frame hook is never
// installed (EvalFrame.cpp), `kiln.compile` warns once and runs functions eagerly.
#pragma once
#include <Python.h>

// -DKILN_NO_CAPTURE builds the unknown-Python path on a known one (to test that it compiles).
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000 && !defined(KILN_NO_CAPTURE)
#define KILN_CAPTURE_SUPPORTED 1
#else
#define KILN_CAPTURE_SUPPORTED 0
#endif

namespace kiln::capture::pyversion {

constexpr bool kCaptureSupported = KILN_CAPTURE_SUPPORTED;
constexpr int kMinor = PY_MINOR_VERSION;

// COMPARE_OP's argument: the comparison is `arg >> kCompareShift` (3.12 keeps a cache mask in
// the low 4 bits; 3.13 also a "convert to bool" bit, which changes nothing for kiln's values).
constexpr int kCompareShift = kMinor >= 13 ? 5 : kMinor == 12 ? 4 : 0;
// LOAD_ATTR's argument: 3.12 folded LOAD_METHOD in (`arg >> 1` names the attribute, the low bit
// asks for the method form, which pushes two values).
constexpr bool kLoadAttrMethodBit = kMinor >= 12;
// The NULL a method-style call pushes next to its callable: below it up to 3.12
// ([NULL, callable, args...] or [method, self, args...]), above it from 3.13
// ([callable, NULL, args...] or [method, self, args...]).
constexpr bool kNullAboveCallable = kMinor >= 13;
// An exhausted FOR_ITER pops the iterator and jumps past its target by this many code units:
// 3.12 skips END_FOR, 3.13 END_FOR and the POP_TOP after it (Python/bytecodes.c).
constexpr int kForIterSkip = kMinor >= 13 ? 2 : kMinor == 12 ? 1 : 0;
// An exhausted SEND (`yield from`) replaces the iterator with the return value up to 3.11; from
// 3.12 it pushes the value above it and END_SEND at its target drops the iterator.
constexpr bool kSendKeepsReceiver = kMinor >= 12;
// Values END_FOR pops when it runs (3.12: the iterator and its value; 3.13: the value only).
constexpr int kEndForPops = kMinor >= 13 ? 1 : 2;

// A type's own attribute dict (a new reference). From 3.12 static builtin types (`object`) keep
// theirs per interpreter and their tp_dict is NULL.
inline PyObject* typeDict(PyTypeObject* type) {
#if PY_VERSION_HEX >= 0x030C0000
  return PyType_GetDict(type);
#else
  Py_XINCREF(type->tp_dict);
  return type->tp_dict;
#endif
}

} // namespace kiln::capture::pyversion
