"""kiln._dynamo.config: torch._dynamo.config's settings that kiln has, read and written through
to kiln.config:

- cache_size_limit (and recompile_limit): kiln.config.recompile_limit (8, as torch's);
- suppress_errors: a backend failure runs the frame eagerly with a warning instead of raising;
  `not kiln.config.strict`;
- verbose: kiln.config.verbose.

Other torch._dynamo settings raise AttributeError naming the ones kiln maps: a tuning flag that
silently did nothing would look applied when it is not."""
import sys
import types

_MAPPED = {
    "cache_size_limit": ("recompile_limit", lambda v: v, lambda v: v),
    "recompile_limit": ("recompile_limit", lambda v: v, lambda v: v),
    "suppress_errors": ("strict", lambda v: not v, lambda v: not v),
    "verbose": ("verbose", lambda v: v, lambda v: v),
}


def _kiln_config():
    from .. import config
    return config


class _ConfigModule(types.ModuleType):
    def __getattr__(self, name):
        if name in _MAPPED:
            kiln_name, read, _ = _MAPPED[name]
            return read(getattr(_kiln_config(), kiln_name))
        raise AttributeError(f"kiln._dynamo.config has no setting {name!r} (kiln maps "
                             f"{', '.join(sorted(_MAPPED))} onto kiln.config)")

    def __setattr__(self, name, value):
        if name.startswith("__"):
            return super().__setattr__(name, value)
        if name not in _MAPPED:
            raise AttributeError(f"kiln._dynamo.config has no setting {name!r} (kiln maps "
                                 f"{', '.join(sorted(_MAPPED))} onto kiln.config)")
        kiln_name, _, write = _MAPPED[name]
        setattr(_kiln_config(), kiln_name, write(value))

    def __dir__(self):
        return sorted(_MAPPED)


sys.modules[__name__].__class__ = _ConfigModule
