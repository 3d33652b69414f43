// The default generator's Python face. Its state travels as a uint8 tensor of 5056 bytes in
// PyTorch's layout (Generator::saveState), so torch.get_rng_state() and kiln's are interchangeable.
#include "frontend/binding/GeneratorBinding.h"

#include <cstdint>
#include <cstring>
#include <memory>

#include "frontend/binding/PythonConvert.h"
#include "generated/Ops.h"
#include "runtime/Generator.h"

namespace kiln::python {

namespace {

// A handle on the default generator (owned by the runtime) or on one made by kiln.Generator().
struct GeneratorHandle {
  Generator* generator;
  std::shared_ptr<Generator> owned = {};
};

// Any Python integer in [-2^63, 2^64): negative seeds wrap, as in PyTorch.
uint64_t seedFromPython(nb::handle seed) {
  nb::object index = nb::steal(PyNumber_Index(seed.ptr()));
  if (!index.is_valid()) {
    PyErr_Clear();
    // PyTorch's manual_seed takes int(seed): floats and 0-d tensors are accepted too.
    index = nb::steal(PyNumber_Long(seed.ptr()));
    if (!index.is_valid()) throw nb::python_error();
  }
  unsigned long long u = PyLong_AsUnsignedLongLong(index.ptr());
  if (!PyErr_Occurred()) return u;
  PyErr_Clear();
  long long s = PyLong_AsLongLong(index.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    throw ValueError("Overflow when unpacking long long");
  }
  return uint64_t(s);
}

nb::object stateTensor(const Generator& g) {
  Tensor t = Tensor::empty({int64_t(Generator::kStateBytes)}, ScalarType::UInt8);
  g.saveState(reinterpret_cast<uint8_t*>(t.rawData()));
  return nb::steal(wrapTensor(t));
}

void setStateFrom(Generator& g, nb::handle state) {
  KILN_CHECK_TYPE(isTensor(state.ptr()) && unwrapTensor(state.ptr()).dtype() == ScalarType::UInt8 &&
                      unwrapTensor(state.ptr()).device().isCpu(),
                  "RNG state must be a kiln.ByteTensor");
  Tensor t = ops::contiguous(unwrapTensor(state.ptr()));
  KILN_CHECK(t.numel() == int64_t(Generator::kStateBytes), "Expected a CPUGeneratorImplState of size ",
             Generator::kStateBytes, " but found the input RNG state size to be ", t.numel());
  g.loadState(reinterpret_cast<const uint8_t*>(t.rawData()));
}

} // namespace

void registerGenerator(nb::module_& m) {
  nb::class_<GeneratorHandle>(m, "Generator")
      // kiln.Generator(device="cpu"): a generator of its own, seeded as a fresh process's default
      // one (PyTorch's default seed), for the generator= argument of random ops.
      .def("__init__",
           [](GeneratorHandle* self, nb::handle device) {
             Device d;
             if (!device.is_none())
               KILN_CHECK_TYPE(toDevice(device.ptr(), d), "Generator(): device must be a string or kiln.device");
             KILN_CHECK(d.isCpu(), "Generator(): only CPU generators are supported, not ", d.str());
             auto g = std::make_shared<Generator>();
             new (self) GeneratorHandle{g.get(), g};
           },
           nb::arg("device") = nb::none())
      .def("manual_seed",
           [](nb::handle self, nb::handle seed) {
             nb::cast<GeneratorHandle&>(self).generator->manualSeed(seedFromPython(seed));
             return nb::borrow(self);
           })
      .def("seed", [](GeneratorHandle& h) { return h.generator->seedNondeterministic(); })
      .def("initial_seed", [](GeneratorHandle& h) { return h.generator->initialSeed(); })
      .def("get_state", [](GeneratorHandle& h) { return stateTensor(*h.generator); })
      .def("set_state",
           [](nb::handle self, nb::handle state) {
             setStateFrom(*nb::cast<GeneratorHandle&>(self).generator, state);
             return nb::borrow(self);
           })
      .def_prop_ro("device", [](GeneratorHandle&) { return nb::steal(deviceObject(Device())); });
  nb::object defaultHandle = nb::cast(GeneratorHandle{&defaultGenerator()});
  m.attr("default_generator") = defaultHandle;
  m.def("manual_seed", [defaultHandle](nb::handle seed) {
    defaultGenerator().manualSeed(seedFromPython(seed));
    return defaultHandle;
  });
  m.def("seed", [] { return defaultGenerator().seedNondeterministic(); });
  m.def("initial_seed", [] { return defaultGenerator().initialSeed(); });
  m.def("get_rng_state", [] { return stateTensor(defaultGenerator()); });
  m.def("set_rng_state", [](nb::handle state) { setStateFrom(defaultGenerator(), state); });
}

} // namespace kiln::python
