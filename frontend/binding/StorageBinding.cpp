// Raw storage access for serialization. A saved tensor records its storage once (all views of
// one storage share it in the file, as in PyTorch's format) plus offset, sizes and strides;
// loading rebuilds the storage with _tensor_from_bytes and views it with as_strided.
#include "frontend/binding/StorageBinding.h"

#include <cstdint>
#include <cstring>

#include "frontend/binding/PythonConvert.h"
#include "runtime/TensorImpl.h"

namespace kiln::python {

namespace {

void checkCpu(const Tensor& t, const char* what) {
  KILN_CHECK(t.device().isCpu(), what, ": cannot read the storage of a tensor on device ",
             t.device().str(), " (only cpu tensors are saved with their data)");
}

} // namespace

void registerStorage(nb::module_& m) {
  m.def("_storage_nbytes", [](const Tensor& t) { return t.storage()->nbytes(); });
  m.def("_storage_bytes", [](const Tensor& t) {
    checkCpu(t, "kiln.save");
    const Storage& s = t.storage();
    return nb::bytes(static_cast<const char*>(s->data()), s->nbytes());
  });
  m.def("_tensor_from_bytes", [](nb::bytes data, nb::handle dtypeObj) {
    ScalarType dtype = dtypeFromObject(dtypeObj.ptr());
    size_t nbytes = data.size(), itemSize = elementSize(dtype);
    KILN_CHECK_VALUE(nbytes % itemSize == 0, "kiln.load: a storage of ", nbytes,
                     " bytes does not hold whole elements of ", scalarTypeShortName(dtype),
                     " (", itemSize, " bytes each)");
    Storage storage = StorageImpl::allocate(nbytes, Device());
    if (nbytes) std::memcpy(storage->data(), data.c_str(), nbytes);
    int64_t n = int64_t(nbytes / itemSize);
    Tensor t(makeIntrusive<TensorImpl>(std::move(storage), dtype, DimVector(1, n),
                                       DimVector(1, 1), 0));
    return nb::steal(wrapTensor(std::move(t)));
  });
}

} // namespace kiln::python
