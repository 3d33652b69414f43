// Matches Python call arguments against an op's overloads (schemas from the op table) and
// builds the dispatcher stack, with PyTorch's conventions: `input` for self in functions,
// varargs for a leading int list (x.view(2, 3)), one int for int[N], numbers as tensors.
#pragma once
#include <Python.h>

#include <string>
#include <vector>

#include "generated/OpId.h"
#include "runtime/Value.h"

namespace kiln::python {

constexpr size_t kMaxOpArgs = 32;

struct ParsedCall {
  OpId op;
  Stack stack;
  PyObject* argObjects[kMaxOpArgs]; // the Python object bound to each schema argument (borrowed)
  bool requiresGrad = false;          // factory kwarg requires_grad=True
};

class OverloadGroup {
public:
  OverloadGroup(std::string pythonName, std::vector<OpId> ops, bool isMethod);

  // self: the tensor for method calls (nullptr for functions). Throws kiln::TypeError.
  ParsedCall parse(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) const;
  const std::string& name() const { return name_; }
  bool isMethod() const { return isMethod_; }
  // "add(Tensor input, Tensor other, *, Scalar alpha=1)" per overload, for errors and docs.
  std::string signatures() const;

private:
  bool tryParse(OpId op, PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                PyObject* kwnames, bool tensorAsScalar, ParsedCall& out, std::string* why) const;

  std::string name_;
  std::vector<OpId> ops_;
  bool isMethod_;
};

} // namespace kiln::python
