"""call_function targets: qualified names <-> Python callables.

A graph stores a call_function target as text (`kiln.add`, `kiln.nn.functional.relu`,
`operator.add`, `math.sqrt`, `aten.add.Tensor`, `prims.add`), so that graphs print, parse and
compare as text.
This registry turns callables into those names and back:

- `qualified_name(fn)`: the registered name, else `fn.__module__ + "." + fn.__qualname__` when
  that path leads back to `fn` (`_operator` is spelled `operator`);
- `resolve(name)`: `aten.<op>.<overload>` (and `prims.<op>` for the Prims IR) is the op table's
  callable for exactly that overload;
  a registered name is its callable; anything else is imported and looked up attribute by
  attribute, as pickle finds globals;
- `register(name, fn)` names callables that have no importable path (closures, lambdas).

kiln's op functions (`kiln.add`), `kiln.nn.functional`, `operator`, `math` and `builtins.getattr`
are registered on first use, before any tracer patches those modules, so names always resolve to
the original functions.
"""
import builtins
import importlib
import inspect
import math
import operator
import threading

from .. import _C

# The op table's namespaces: `aten.*` and `prims.*` targets name its ops.
OP_NAMESPACES = ("aten", "prims")
_lock = threading.RLock()
_by_id = {}  # id(fn) -> (fn, name); fn is kept so its id stays unique
_by_name = {}  # name -> fn
_scanned = False


def _is_dotted_path(name):
    return isinstance(name, str) and all(part.isidentifier() for part in name.split("."))


def register(name, fn):
    """Names `fn` as call_function target `name` (a dotted path) in both directions."""
    if not _is_dotted_path(name):
        raise ValueError(f"a target name is a dotted path of identifiers, got {name!r}")
    if not callable(fn):
        raise TypeError(f"target {name!r} must be callable, got {type(fn).__name__}")
    with _lock:
        _by_name[name] = fn
        _by_id.setdefault(id(fn), (fn, name))


def _scan_defaults():
    global _scanned
    with _lock:
        if _scanned:
            return
        _scanned = True
        import kiln
        import kiln.nn.functional as F

        for name in sorted(dir(kiln)):
            obj = getattr(kiln, name)
            if name.startswith("_"):
                continue
            if isinstance(obj, _C._OpFunction) or (inspect.isfunction(obj) and obj.__module__.startswith("kiln")):
                register(f"kiln.{name}", obj)
        for name in sorted(dir(F)):
            obj = getattr(F, name)
            if not name.startswith("_") and inspect.isfunction(obj) and obj.__module__ == F.__name__:
                register(f"kiln.nn.functional.{name}", obj)
        for module in (operator, math):
            for name in sorted(dir(module)):
                obj = getattr(module, name)
                if not name.startswith("_") and inspect.isbuiltin(obj):
                    register(f"{module.__name__}.{name}", obj)
        register("builtins.getattr", builtins.getattr)


def _derived_name(fn):
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    module = {"_operator": "operator"}.get(module, module)
    name = f"{module}.{qualname}"
    try:
        return name if _lookup(name) is fn else None
    except (ImportError, AttributeError, ValueError):
        return None


def qualified_name(fn):
    """The call_function target naming `fn`; ValueError when it has no name that resolves back."""
    if isinstance(fn, str):
        return fn
    _scan_defaults()
    target = getattr(fn, "__kiln_fx_target__", None)  # a tracer's wrapper of a registered function
    if isinstance(target, str):
        return target
    entry = _by_id.get(id(fn))
    if entry is not None and entry[0] is fn:
        return entry[1]
    name = _derived_name(fn)
    if name is None:
        raise ValueError(f"cannot name {fn!r} as a graph target: it has no importable path; "
                         "give it one with kiln.fx.register_target(name, fn)")
    register(name, fn)
    return name


def _lookup(name):
    parts = name.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(".".join(parts[: i + 1]))
    return obj


def resolve(name):
    """The callable a call_function target names (ValueError when there is none)."""
    if not _is_dotted_path(name):
        raise ValueError(f"cannot resolve call_function target {name!r}: not a dotted path")
    _scan_defaults()
    fn = _by_name.get(name)
    if fn is not None:
        return fn
    if name.split(".", 1)[0] in OP_NAMESPACES:
        fn = _C._fx.op_callable(name)  # ValueError naming the overloads for unknown ops
        register(_C._fx.op_schema(name)["target"], fn)
        with _lock:
            _by_name[name] = fn
        return fn
    try:
        fn = _lookup(name)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"cannot resolve call_function target {name!r}: {e}") from None
    if not callable(fn):
        raise ValueError(f"call_function target {name!r} is a {type(fn).__name__}, not a callable")
    register(name, fn)
    return fn


class _OpPacket:
    """`aten.add`: its overloads as attributes (`aten.add.Tensor`); callable when the op has a
    default overload (`aten.clone(x)`, `prims.add(x, y)`)."""

    def __init__(self, namespace, name):
        self._namespace = namespace
        self._name = name

    def __getattr__(self, overload):
        if overload.startswith("__"):
            raise AttributeError(overload)
        return resolve(f"{self._namespace}.{self._name}.{overload}")

    def __call__(self, *args, **kwargs):
        return resolve(f"{self._namespace}.{self._name}")(*args, **kwargs)

    def __repr__(self):
        return f"{self._namespace}.{self._name}"


class _OpNamespace:
    """`aten.<op>.<overload>` (or `prims.<op>`): the op table's overloads of one namespace as
    callables, spelled as graph targets."""

    def __init__(self, namespace):
        self._namespace = namespace

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _OpPacket(self._namespace, name)

    def __repr__(self):
        return f"kiln.fx.{self._namespace}"


aten = _OpNamespace("aten")
# The Prims IR: kiln's lowest op level, reached only from graph code (not kiln.* or methods).
prims = _OpNamespace("prims")
