"""torch.func.functional_call: a module run once with some of its parameters and buffers replaced.

A kiln library function (not kiln.func's traced transforms): under kiln.compile it runs for real
on the fake tensors, swapping the replacements into the real module for the call and back, so
the module's ops are recorded on the replacements' graph values."""


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """torch.func.functional_call: `module(*args, **kwargs)` with the named tensors replaced."""
    if isinstance(parameter_and_buffer_dicts, dict):
        replacements = dict(parameter_and_buffer_dicts)
    else:
        replacements = {}
        for d in parameter_and_buffer_dicts:
            for k, v in d.items():
                if k in replacements:
                    raise ValueError(f"{k} appeared in multiple dictionaries; behavior of functional call is ambiguous")
                replacements[k] = v
    named = list(module.named_parameters(remove_duplicate=False)) + list(module.named_buffers(remove_duplicate=False))
    if strict:
        names = {n for n, _ in named}
        missing = sorted(names - set(replacements))
        unexpected = sorted(set(replacements) - names)
        if missing or unexpected:
            msgs = []
            if unexpected:
                msgs.append("Unexpected key(s): " + ", ".join(repr(k) for k in unexpected) + ".")
            if missing:
                msgs.append("Missing key(s): " + ", ".join(repr(k) for k in missing) + ".")
            raise RuntimeError("Error(s) in reparametrizing for functional_call:\n\t" + "\n\t".join(msgs))
    if tie_weights:  # a replaced tensor also replaces every other name of the same tensor
        by_tensor = {}
        for name, t in named:
            by_tensor.setdefault(id(t), []).append(name)
        for name, t in named:
            if name in replacements:
                for other in by_tensor[id(t)]:
                    if other not in replacements:
                        replacements[other] = replacements[name]
    saved = []
    try:
        for name, value in replacements.items():
            owner, _, attr = name.rpartition(".")
            sub = module.get_submodule(owner) if owner else module
            for store in ("_parameters", "_buffers"):
                table = sub.__dict__.get(store)
                if table is not None and attr in table:
                    saved.append((table, attr, table[attr]))
                    table[attr] = value
                    break
            else:
                saved.append((sub, attr, sub.__dict__.get(attr, _MISSING)))
                object.__setattr__(sub, attr, value)
        if args is None:
            args = ()
        elif not isinstance(args, tuple):
            args = (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for owner, attr, old in reversed(saved):
            if isinstance(owner, dict):
                owner[attr] = old
            elif old is _MISSING:
                object.__delattr__(owner, attr)
            else:
                object.__setattr__(owner, attr, old)


_MISSING = object()

