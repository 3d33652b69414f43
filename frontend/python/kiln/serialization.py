"""kiln.save / kiln.load in PyTorch's file format, so torch.load reads kiln's files and the
other way round.

The format (torch.save's default since 1.6) is an uncompressed zip archive:

    archive/data.pkl            the object, pickled (protocol 2); each tensor is a call
                                torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
                                requires_grad, OrderedDict()), its storage a persistent id
                                ("storage", torch.<Type>Storage, key, "cpu", numel)
    archive/data/<key>          the storage's bytes (little-endian), 64-byte aligned
    archive/byteorder           "little"
    archive/version             "3"
    archive/.format_version, archive/.storage_alignment, archive/.data/serialization_id

Tensors that view one storage share it in the file, so views stay views after loading.

Loading is safe by default (weights_only=True): the unpickler accepts only tensor and
parameter rebuilds, storages, dtypes and plain containers (dict, list, tuple, set,
OrderedDict), and never imports or calls anything else, so a malicious file cannot run code.
"""
import _compat_pickle
import io
import os
import pickle
import struct
import sys
import zipfile
from collections import OrderedDict

from . import _C, _layout
from ._tensor import Size, Tensor

__all__ = ["add_safe_globals", "clear_safe_globals", "get_safe_globals", "load", "safe_globals", "save"]

_STORAGE_NAMES = {
    _C.float32: "FloatStorage", _C.float64: "DoubleStorage", _C.float16: "HalfStorage",
    _C.bfloat16: "BFloat16Storage", _C.int64: "LongStorage", _C.int32: "IntStorage",
    _C.int16: "ShortStorage", _C.int8: "CharStorage", _C.uint8: "ByteStorage",
    _C.bool: "BoolStorage", _C.complex64: "ComplexFloatStorage", _C.complex128: "ComplexDoubleStorage",
}
_DTYPES_BY_STORAGE = {name: dtype for dtype, name in _STORAGE_NAMES.items()}
_DTYPE_NAMES = {
    "float32": _C.float32, "float": _C.float32, "float64": _C.float64, "double": _C.float64,
    "float16": _C.float16, "half": _C.float16, "bfloat16": _C.bfloat16, "int64": _C.int64,
    "long": _C.int64, "int32": _C.int32, "int": _C.int32, "int16": _C.int16, "short": _C.int16,
    "int8": _C.int8, "uint8": _C.uint8, "bool": _C.bool, "complex64": _C.complex64,
    "cfloat": _C.complex64, "complex128": _C.complex128, "cdouble": _C.complex128,
}
_STORAGE_ALIGNMENT = 64


# ---- saving -----------------------------------------------------------------------------------

class _Global:
    """A global that data.pkl names (torch._utils._rebuild_tensor_v2, torch.FloatStorage)
    without kiln importing it: the pickler writes its module and name as a GLOBAL opcode."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle requires a reduce function to be callable
        raise TypeError(f"{self.module}.{self.name} is a name in a saved file, not a function")


_REBUILD_TENSOR = _Global("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = _Global("torch._utils", "_rebuild_parameter")
_REBUILD_SPARSE = _Global("torch._utils", "_rebuild_sparse_tensor")
_GET_LAYOUT = _Global("torch.serialization", "_get_layout")
_STORAGE_GLOBALS = {dtype: _Global("torch", name) for dtype, name in _STORAGE_NAMES.items()}


class _Reduced:
    """Stands for `fn(*args)` in the pickle (fn a _Global)."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args


class _StorageRef:
    """Stands for a tensor's storage in the pickle; becomes a persistent id."""

    def __init__(self, tensor):
        self.tensor = tensor


class _Pickler(pickle._Pickler):
    """The pure-Python pickler (it lets a subclass write a GLOBAL for a stand-in object):
    tensors reduce to torch's rebuild calls, their storages to persistent ids."""

    dispatch = pickle._Pickler.dispatch.copy()

    def __init__(self, file):
        super().__init__(file, protocol=2)
        self.storages = {}  # storage id -> (key, tensor whose storage it is)

    def _save_global_ref(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode("utf-8"))
        self.memoize(obj)

    dispatch[_Global] = _save_global_ref

    def persistent_id(self, obj):
        if not isinstance(obj, _StorageRef):
            return None
        t = obj.tensor
        sid = t._storage_id()
        if sid not in self.storages:
            self.storages[sid] = (str(len(self.storages)), t)
        key = self.storages[sid][0]
        numel = _C._storage_nbytes(t) // t.element_size()
        return ("storage", _STORAGE_GLOBALS[t.dtype], key, str(t.device), numel)

    def reducer_override(self, obj):
        if isinstance(obj, _Reduced):
            return (obj.fn, obj.args)
        if not isinstance(obj, Tensor):
            return NotImplemented
        from .nn.parameter import Parameter

        if obj.is_sparse:  # as torch saves one: its indices, values, size and coalesced flag
            layout = _Reduced(_GET_LAYOUT, ("torch.sparse_coo",))  # as torch writes a layout
            return (_REBUILD_SPARSE, (layout, (obj._indices(), obj._values().detach(), tuple(obj.shape),
                                               obj.is_coalesced())))
        if obj.is_meta:
            raise RuntimeError(f"kiln.save: cannot save a tensor on {obj.device} (it has no data)")
        requires_grad = bool(obj.requires_grad)
        if isinstance(obj, Parameter):
            return (_REBUILD_PARAMETER, (obj.detach(), requires_grad, OrderedDict()))
        args = (_StorageRef(obj), obj.storage_offset(), tuple(obj.size()), tuple(obj.stride()),
                requires_grad, OrderedDict())
        return (_REBUILD_TENSOR, args)


def _aligned_extra(offset, name):
    """A zip extra field ("FB", as torch writes) padding the local header so that the record's
    data starts at a multiple of _STORAGE_ALIGNMENT."""
    header = 30 + len(name.encode("utf-8"))
    start = offset + header + 4
    pad = (-start) % _STORAGE_ALIGNMENT
    return b"FB" + struct.pack("<H", pad) + b"Z" * pad


def _write_record(zf, name, data, align=False):
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    if align:
        info.extra = _aligned_extra(zf.fp.tell(), name)
    zf.writestr(info, data)


def save(obj, f, pickle_module=pickle, pickle_protocol=2):
    """Saves `obj` (tensors, nested dicts/lists/tuples/OrderedDicts of tensors and plain
    values: a module's or an optimizer's state_dict) to `f`, a path or a binary file object,
    in PyTorch's zip format (torch.load reads it)."""
    if pickle_module is not pickle or pickle_protocol != 2:
        raise ValueError("kiln.save writes pickle protocol 2 with the standard pickle module")
    data = io.BytesIO()
    pickler = _Pickler(data)
    pickler.dump(obj)
    if isinstance(f, (str, os.PathLike)):
        name = os.path.splitext(os.path.basename(os.fspath(f)))[0] or "archive"
        with open(f, "wb") as fh:
            _write_archive(fh, name, data.getvalue(), pickler.storages)
    else:
        _write_archive(f, "archive", data.getvalue(), pickler.storages)


def _write_archive(fh, prefix, pickled, storages):
    if sys.byteorder != "little":
        raise RuntimeError("kiln.save: big-endian hosts are not supported")
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as zf:
        _write_record(zf, f"{prefix}/data.pkl", pickled, align=True)
        _write_record(zf, f"{prefix}/.format_version", b"1", align=True)
        _write_record(zf, f"{prefix}/.storage_alignment", str(_STORAGE_ALIGNMENT).encode(), align=True)
        _write_record(zf, f"{prefix}/byteorder", b"little", align=True)
        for key, tensor in sorted(storages.values(), key=lambda kv: int(kv[0])):
            _write_record(zf, f"{prefix}/data/{key}", _C._storage_bytes(_host_storage(tensor)), align=True)
        _write_record(zf, f"{prefix}/version", b"3\n", align=True)
        _write_record(zf, f"{prefix}/.data/serialization_id", os.urandom(20).hex().encode(),
                      align=True)


def _host_storage(tensor):
    """A CPU tensor whose storage holds the bytes of `tensor`'s whole storage (itself on the CPU;
    a copy of the device storage on CUDA, as torch writes a CUDA tensor's storage)."""
    if tensor.is_cpu:
        return tensor
    from .autograd import no_grad
    with no_grad():
        whole = tensor.detach().as_strided([_C._storage_nbytes(tensor) // tensor.element_size()], [1], 0)
        return whole.cpu()


# ---- loading ----------------------------------------------------------------------------------

def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    t = storage.as_strided(list(size), list(stride), storage_offset)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _get_layout(name):
    """What torch.serialization._get_layout("torch.sparse_coo") names: kiln's layout."""
    layout = {"torch.sparse_coo": _layout.sparse_coo, "torch.strided": _layout.strided}.get(name)
    if layout is None:
        raise RuntimeError(f"kiln.load: layout {name} (kiln has kiln.strided and kiln.sparse_coo)")
    return layout


def _rebuild_sparse_tensor(layout, data):
    from ._layout import sparse_coo
    from .sparse import sparse_coo_tensor

    if layout is not sparse_coo:
        raise RuntimeError(f"kiln.load: a sparse tensor of layout {layout} (kiln has kiln.sparse_coo only)")
    indices, values, size = data[:3]
    is_coalesced = data[3] if len(data) > 3 else None
    return sparse_coo_tensor(indices, values, size, is_coalesced=is_coalesced)


def _rebuild_parameter(data, requires_grad, backward_hooks=None):
    from .nn.parameter import Parameter

    return Parameter(data, requires_grad)


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    return _rebuild_parameter(data, requires_grad, backward_hooks)


class _StorageType:
    """What a torch.<Type>Storage global unpickles to: the dtype of the storage's elements."""

    def __init__(self, dtype):
        self.dtype = dtype


# The only globals a weights_only load resolves: torch's names mapped to kiln's rebuilds.
_SAFE_GLOBALS = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter_with_state,
    ("torch._utils", "_rebuild_sparse_tensor"): _rebuild_sparse_tensor,
    ("torch.serialization", "_get_layout"): _get_layout,
    ("collections", "OrderedDict"): OrderedDict,
    ("torch", "Size"): Size,
    ("torch", "device"): _C.device,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "slice"): slice,
    ("builtins", "complex"): complex,
}
_SAFE_GLOBALS.update({("torch", name): _StorageType(dtype)
                      for name, dtype in _DTYPES_BY_STORAGE.items()})
_SAFE_GLOBALS.update({("torch", name): dtype for name, dtype in _DTYPE_NAMES.items()})


# Globals the user allowed for weights_only loads ({"module.qualname": object}): add_safe_globals
# adds for the process, each `with safe_globals(...)` for its block.
_added_safe_globals = {}
_scoped_safe_globals = []


def _safe_global_entries(safe_globals):
    entries = {}
    for item in safe_globals:
        if isinstance(item, tuple):
            if len(item) != 2 or not isinstance(item[1], str):
                raise ValueError(f"Expected tuple of length 2 (global, str of callable full path), but got {item}")
            entries[item[1]] = item[0]
        else:
            entries[f"{item.__module__}.{item.__qualname__}"] = item
    return entries


def _user_safe_globals():
    merged = dict(_added_safe_globals)
    for scoped in _scoped_safe_globals:
        merged.update(scoped)
    return merged


def add_safe_globals(safe_globals):
    """Allows these classes and functions (or (object, "module.name") pairs, for a path other
    than the object's own) in weights_only loads: a file may then construct them and set their
    state, as torch.serialization.add_safe_globals."""
    _added_safe_globals.update(_safe_global_entries(safe_globals))


def get_safe_globals():
    """The globals add_safe_globals allowed (those of enclosing safe_globals blocks too)."""
    return [obj if path == f"{obj.__module__}.{obj.__qualname__}" else (obj, path)
            for path, obj in _user_safe_globals().items()]


def clear_safe_globals():
    _added_safe_globals.clear()


class safe_globals:
    """`with kiln.serialization.safe_globals([Net, nn.ReLU, ...]): kiln.load(path)` allows those
    globals in weights_only loads inside the block only."""

    def __init__(self, safe_globals):
        self._entries = _safe_global_entries(safe_globals)

    def __enter__(self):
        _scoped_safe_globals.append(self._entries)

    def __exit__(self, *exc):
        _scoped_safe_globals.remove(self._entries)


def _map_location_device(map_location, location):
    if map_location is None:
        if location.startswith("cuda"):
            from . import cuda
            if not cuda.is_available():
                raise RuntimeError(
                    "Attempting to deserialize object on a CUDA device but kiln.cuda.is_available() is "
                    "False. If you are running on a CPU-only machine, please use kiln.load with "
                    "map_location=kiln.device('cpu') to map your storages to the CPU.")
        return location
    if isinstance(map_location, dict):
        return map_location.get(location, location)
    if isinstance(map_location, (str, _C.device)):
        return str(map_location)
    raise TypeError(f"kiln.load: map_location must be None, a str, a kiln.device, a dict or a "
                    f"callable, not {type(map_location).__name__}")


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, zf, prefix, map_location, weights_only, encoding="utf-8"):
        super().__init__(file, encoding=encoding)
        self.zf, self.prefix = zf, prefix
        self.map_location = map_location
        self.weights_only = weights_only
        self.loaded = {}

    def find_class(self, module, name):
        # Protocol 2 files name Python 2's modules (__builtin__.set): map them as pickle does.
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        found = _SAFE_GLOBALS.get((module, name))
        if found is None:
            found = _user_safe_globals().get(f"{module}.{name}")
        if found is not None:
            return found
        if self.weights_only:
            raise pickle.UnpicklingError(
                f"Weights only load failed: unsupported global {module}.{name} in the file. "
                "kiln.load(weights_only=True) accepts only tensors, parameters and plain "
                "containers, and the globals you allow with kiln.serialization.add_safe_globals "
                "or safe_globals; pass weights_only=False only for a file from a source you trust "
                "(it can run arbitrary code).")
        return super().find_class(module, name)

    def persistent_load(self, saved_id):
        if not (isinstance(saved_id, tuple) and len(saved_id) == 5 and saved_id[0] == "storage"):
            raise pickle.UnpicklingError(f"kiln.load: unknown persistent id {saved_id!r}")
        _, storage_type, key, location, numel = saved_id
        if key in self.loaded:
            return self.loaded[key]
        if not isinstance(storage_type, _StorageType):
            raise pickle.UnpicklingError(f"kiln.load: unsupported storage type {storage_type!r}")
        raw = self.zf.read(f"{self.prefix}data/{key}")
        storage = _C._tensor_from_bytes(raw, storage_type.dtype)
        if storage.numel() != numel:
            raise RuntimeError(f"kiln.load: storage {key} holds {storage.numel()} elements, the "
                               f"file's record says {numel}")
        if callable(self.map_location):
            result = self.map_location(storage, location)
            if result is not None:
                storage = result
        else:
            device = _map_location_device(self.map_location, location)
            if device != "cpu":
                storage = storage.to(device)
        self.loaded[key] = storage
        return storage


def _open_zip(f):
    if isinstance(f, (str, os.PathLike)):
        return zipfile.ZipFile(os.fspath(f), "r")
    return zipfile.ZipFile(f, "r")


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None,
         **pickle_load_args):
    """Loads an object saved by kiln.save or torch.save (its zip format) from `f`, a path or
    a binary file object; tensors come back as kiln tensors (views sharing a storage still do).

    map_location: None (each storage on the device it was saved from: a CUDA one needs CUDA),
    a device ("cpu", "cuda:0"), a dict {saved location: device}, or a callable(storage,
    location) returning a tensor.

    weights_only=True (the default) loads only tensors, parameters, dtypes and plain
    containers, and never runs code from the file. weights_only=False unpickles anything
    (any class the file names is imported and may run arbitrary code while loading): use it
    only for files from a source you trust.
    """
    if mmap:
        raise ValueError("kiln.load: mmap=True is not supported")
    if pickle_module is not None and pickle_module is not pickle:
        raise ValueError("kiln.load: only the standard pickle module is supported")
    if pickle_load_args.keys() - {"encoding"}:
        raise TypeError(f"kiln.load: unexpected arguments {sorted(pickle_load_args)}")
    try:
        zf = _open_zip(f)
    except zipfile.BadZipFile:
        raise RuntimeError("kiln.load: the file is not in PyTorch's zip format (files from "
                           "torch.save with _use_new_zipfile_serialization=False are not "
                           "supported)") from None
    with zf:
        names = zf.namelist()
        pkl = next((n for n in names if n.endswith("data.pkl") and n.count("/") == 1), None)
        if pkl is None:
            raise RuntimeError("kiln.load: the archive has no data.pkl")
        prefix = pkl[: -len("data.pkl")]
        if f"{prefix}byteorder" in names and zf.read(f"{prefix}byteorder") != b"little":
            raise RuntimeError("kiln.load: big-endian files are not supported")
        unpickler = _Unpickler(io.BytesIO(zf.read(pkl)), zf, prefix, map_location, weights_only,
                               **pickle_load_args)
        return unpickler.load()
