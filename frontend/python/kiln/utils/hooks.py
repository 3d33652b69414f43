"""kiln.utils.hooks (torch.utils.hooks): the handle that hook registrations return."""

__all__ = ["RemovableHandle"]


class RemovableHandle:
    """Returned by hook registration; .remove() unregisters the hook (also as a context manager)."""

    _next_id = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1
        self._dicts = [hooks_dict] + (list(extra_dict) if isinstance(extra_dict, (list, tuple)) else
                                      [] if extra_dict is None else [extra_dict])

    def remove(self):
        for d in self._dicts:
            d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
