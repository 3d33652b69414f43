"""Puts every op function of the table into the kiln namespace."""
from . import _C


def _export_ops(namespace):
    for name in dir(_C._ops):
        if not name.startswith("__"):
            namespace.setdefault(name, getattr(_C._ops, name))
