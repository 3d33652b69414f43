"""Containers: Sequential, ModuleList, ModuleDict."""
from collections import OrderedDict
from itertools import islice

from .module import Module


class Sequential(Module):
    """Runs its modules in order, each on the previous one's output."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def _get_item_by_idx(self, iterator, idx):
        size = len(self)
        idx = idx.__index__()
        if not -size <= idx < size:
            raise IndexError(f"index {idx} is out of range")
        idx %= size
        return next(islice(iterator, idx, None))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__(OrderedDict(list(self._modules.items())[idx]))
        return self._get_item_by_idx(self._modules.values(), idx)

    def __setitem__(self, idx, module):
        key = self._get_item_by_idx(self._modules.keys(), idx)
        setattr(self, key, module)

    def __delitem__(self, idx):
        keys = list(self._modules.keys())
        for key in keys[idx] if isinstance(idx, slice) else [self._get_item_by_idx(iter(keys), idx)]:
            delattr(self, key)
        items = list(self._modules.items())
        self._modules.clear()
        for i, (_, m) in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m
        return self

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


def _list_index(container, idx):
    """idx (an int, negative from the end) as a position in the list-like container."""
    idx = idx.__index__()
    if not -len(container) <= idx < len(container):
        raise IndexError(f"index {idx} is out of range")
    return idx % len(container)


class ModuleList(Module):
    """A list of modules, registered so their parameters are found."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    _abs = _list_index

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__(list(self._modules.values())[idx])
        return self._modules[str(self._abs(idx))]

    def __setitem__(self, idx, module):
        setattr(self, str(self._abs(idx)), module)

    def __delitem__(self, idx):
        items = list(self._modules.values())
        del items[idx if isinstance(idx, slice) else self._abs(idx)]
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)


class ModuleDict(Module):
    """A dict of modules (insertion-ordered), registered so their parameters are found."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for key, module in items:
            self[key] = module


def _parameter(value):
    """A tensor stored in a ParameterList/ParameterDict becomes a Parameter (torch's rule)."""
    from ..._tensor import Tensor
    from ..parameter import Parameter

    return Parameter(value) if isinstance(value, Tensor) and not isinstance(value, Parameter) else value


def _parameter_line(key, p, legacy_type_name):
    from ..._tensor import Tensor
    from ..parameter import Parameter

    if not isinstance(p, Tensor):
        return f"  ({key}): Object of type: {type(p).__name__}"
    kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
    size = "x".join(str(s) for s in p.shape)
    device = "" if p.device.type == "cpu" else f" ({p.device})"
    if legacy_type_name:  # ParameterDict writes the dtype's legacy tensor type name, as torch's
        dtype = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
                 "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                 "bool": "Bool"}.get(str(p.dtype).split(".")[-1], str(p.dtype).split(".")[-1])
        return f"  ({key}): {kind} containing: [kiln.{dtype}Tensor of size {size}{device}]"
    return f"  ({key}): {kind} containing: [{p.dtype} of size {size}{device}]"


class ParameterList(Module):
    """A list of parameters, registered under "0", "1", ... so the module finds them."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    _abs = _list_index

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(self._abs(idx)))

    def __setitem__(self, idx, param):
        setattr(self, str(self._abs(idx)), _parameter(param))

    def __len__(self):
        return self._size

    def __iter__(self):
        return iter(self[i] for i in range(len(self)))

    def __iadd__(self, parameters):
        return self.extend(parameters)

    def __dir__(self):
        return [key for key in super().__dir__() if not key.isdigit()]

    def append(self, value):
        self._size += 1
        setattr(self, str(self._size - 1), _parameter(value))
        return self

    def extend(self, values):
        for value in values:
            self.append(value)
        return self

    def extra_repr(self):
        return "\n".join(_parameter_line(i, p, False) for i, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """A dict of parameters keyed by strings, registered under their keys."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        return getattr(self, key)

    def __setitem__(self, key, value):
        self._keys[key] = None
        setattr(self, key, _parameter(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(list(self._keys))

    def __contains__(self, key):
        return key in self._keys

    def copy(self):
        return ParameterDict({k: self[k] for k in self._keys})

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for k in list(self._keys):
            del self[k]

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def popitem(self):
        key = list(self._keys)[-1]
        return key, self.pop(key)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None):
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def update(self, parameters):
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for j, item in enumerate(items):
            if not hasattr(parameters, "items") and len(item) != 2:
                raise ValueError(f"ParameterDict update sequence element #{j} has length {len(item)}; 2 is required")
            self[item[0]] = item[1]

    def extra_repr(self):
        return "\n".join(_parameter_line(k, p, True) for k, p in self.items())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")
