// The built-in iterators a traced frame may take as an argument: a comprehension's `.0` (3.11
// compiles `[f(x) for x in xs]` to a function called with iter(xs)), read by the tracer and by
// guards without running Python code. TorchDynamo wraps the same (builder.py: tuple_iterator,
// range_iterator; list_iterator as a list).
//
// list_iterator and tuple_iterator share one layout in CPython 3.11 to 3.13 (listobject.c's
// listiterobject, 3.12's _PyListIterObject; tupleobject.c's tupleiterobject, 3.12's
// _PyTupleIterObject): the index of the next item, then the sequence (null once exhausted).
// range_iterator's layout differs between versions, so its state is read through its C
// __reduce__ (range(start, stop, step), index), which runs no user code.
#pragma once
#include <Python.h>

namespace kiln::capture::iterators {

struct SeqIterLayout {
  PyObject_HEAD
  Py_ssize_t index;
  PyObject* seq; // the list or tuple; null once exhausted
};

inline bool isSeqIter(PyObject* o) {
  return Py_IS_TYPE(o, &PyListIter_Type) || Py_IS_TYPE(o, &PyTupleIter_Type);
}
inline bool isRangeIter(PyObject* o) { return Py_IS_TYPE(o, &PyRangeIter_Type); }

// Items a list/tuple iterator has left (a list may have shrunk below the index: none).
inline Py_ssize_t seqIterRemaining(PyObject* it) {
  auto* s = reinterpret_cast<SeqIterLayout*>(it);
  if (!s->seq) return 0;
  Py_ssize_t n = PyList_Check(s->seq) ? PyList_GET_SIZE(s->seq) : PyTuple_GET_SIZE(s->seq);
  return n > s->index ? n - s->index : 0;
}

// The i-th item a list/tuple iterator has left (borrowed), or null when it has fewer.
inline PyObject* seqIterItem(PyObject* it, Py_ssize_t i) {
  if (i < 0 || i >= seqIterRemaining(it)) return nullptr;
  auto* s = reinterpret_cast<SeqIterLayout*>(it);
  Py_ssize_t k = s->index + i;
  return PyList_Check(s->seq) ? PyList_GET_ITEM(s->seq, k) : PyTuple_GET_ITEM(s->seq, k);
}

// A range iterator's next value, step and remaining count; false (no error set) when they do
// not fit a C long (then it is not traced).
inline bool rangeIterState(PyObject* it, long* next, long* step, long* remaining) {
  PyObject* r = PyObject_CallMethod(it, "__reduce__", nullptr);
  bool ok = false;
  if (r && PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 3) {
    PyObject* args = PyTuple_GET_ITEM(r, 1);
    PyObject* range = PyTuple_Check(args) && PyTuple_GET_SIZE(args) == 1 ? PyTuple_GET_ITEM(args, 0) : nullptr;
    if (range && PyRange_Check(range)) {
      PyObject* start = PyObject_GetAttrString(range, "start");
      PyObject* st = PyObject_GetAttrString(range, "step");
      Py_ssize_t len = PyObject_Length(range);
      Py_ssize_t index = PyLong_AsSsize_t(PyTuple_GET_ITEM(r, 2));
      if (start && st && len >= 0 && index >= 0) {
        long s0 = PyLong_AsLong(start), s = PyLong_AsLong(st);
        if (!PyErr_Occurred()) {
          *step = s;
          *remaining = long(len > index ? len - index : 0);
          *next = s0 + long(index) * s;
          ok = true;
        }
      }
      Py_XDECREF(start);
      Py_XDECREF(st);
    }
  }
  Py_XDECREF(r);
  if (PyErr_Occurred()) PyErr_Clear();
  return ok;
}

} // namespace kiln::capture::iterators
