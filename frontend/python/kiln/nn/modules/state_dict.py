"""Module.state_dict / load_state_dict with torch's hooks and per-module steps.

Both walk the module tree as torch's do, so checkpoint-conversion code written for torch runs:
  state_dict:      state_dict pre-hooks -> _save_to_state_dict -> children -> state_dict hooks
  load_state_dict: per module, load pre-hooks (they may rewrite the dict: gpt-fast merges
                   wq/wk/wv into wqkv) -> _load_from_state_dict -> children (each sees the keys
                   under its prefix) -> load post-hooks; then the strict check raises.
Hooks get local_metadata {"version": module._version}. Unlike torch's, the dict state_dict()
returns has no `_metadata` attribute (an attribute set on a dict would break a compiled graph);
load_state_dict reads one when a checkpoint has it (torch's files do)."""
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

from ..._tensor import Tensor
from ...utils.hooks import RemovableHandle
from ..parameter import Parameter, is_lazy

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])
_EXTRA_STATE_KEY_SUFFIX = "_extra_state"


def _hooks(module, name):
    """The module's hook dict `name`, made on first use (modules built before a hook existed)."""
    d = module.__dict__.get(name)
    if d is None:
        d = OrderedDict()
        object.__setattr__(module, name, d)
    return d


def _register(module, name, hook):
    hooks = _hooks(module, name)
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


class StateDictMixin:
    """The state-dict half of nn.Module."""

    _version = 1

    # -- saving -----------------------------------------------------------------------------
    def register_state_dict_pre_hook(self, hook):
        """hook(module, prefix, keep_vars), called before the module saves its state."""
        return _register(self, "_state_dict_pre_hooks", hook)

    def register_state_dict_post_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata) -> None, after the module and its
        children saved theirs (it may change the dict in place)."""
        def checked(module, state_dict, prefix, local_metadata):
            if hook(module, state_dict, prefix, local_metadata) is not None:
                raise RuntimeError("state_dict post-hook must return None")
        return _register(self, "_state_dict_hooks", checked)

    def _register_state_dict_hook(self, hook):
        """torch's private form: a hook may return a new dict, which replaces the one built."""
        return _register(self, "_state_dict_hooks", hook)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if type(self).get_extra_state is not StateDictMixin.get_extra_state:
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        if args:  # torch's deprecated positional form: (destination, prefix, keep_vars)
            destination, prefix, keep_vars = (list(args) + [destination, prefix, keep_vars][len(args):])[:3]
        if destination is None:
            destination = OrderedDict()
        local_metadata = dict(version=self._version)
        for hook in list(_hooks(self, "_state_dict_pre_hooks").values()):
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in list(_hooks(self, "_state_dict_hooks").values()):
            result = hook(self, destination, prefix, local_metadata)
            if result is not None:
                destination = result
        return destination

    def get_extra_state(self):
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called.")

    def set_extra_state(self, state):
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called.")

    # -- loading ----------------------------------------------------------------------------
    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs) (the module first with with_module=True), before the module loads: it may
        rename, merge or drop keys of the dict."""
        if with_module:
            return _register(self, "_load_state_dict_pre_hooks", lambda *a: hook(self, *a))
        return _register(self, "_load_state_dict_pre_hooks", hook)

    def register_load_state_dict_pre_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook):
        """hook(module, incompatible_keys) -> None, after the module and its children loaded;
        it may clear keys from incompatible_keys' lists (a strict load then accepts them)."""
        return _register(self, "_load_state_dict_post_hooks", hook)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        from ...autograd.grad_mode import no_grad

        for hook in list(_hooks(self, "_load_state_dict_pre_hooks").values()):
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        local_state = {name: v for name, v in self._parameters.items() if v is not None}
        local_state.update((name, v) for name, v in self._buffers.items()
                           if v is not None and name not in self._non_persistent_buffers_set)
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, target in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected kiln.Tensor, '
                                  f'got {type(value).__name__}.')
                continue
            if is_lazy(target) and is_lazy(value):  # both placeholders (else the pre-hook materialized it)
                continue
            # A placeholder loaded into a materialized tensor: its .shape raises torch's RuntimeError.
            if tuple(value.shape) != tuple(target.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {value.shape} from "
                                  f"checkpoint, the shape in current model is {target.shape}.")
                continue
            if assign:
                if name in self._parameters:
                    self._parameters[name] = Parameter(value, requires_grad=target.requires_grad)
                else:
                    self._buffers[name] = value
            else:
                with no_grad():
                    target.copy_(value)
        extra_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if type(self).set_extra_state is not StateDictMixin.set_extra_state:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key != extra_key:
                    head = key[len(prefix):].split(".", 1)[0]
                    if head not in self._modules and head not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)  # the hooks rewrite a copy, never the caller's dict
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module, local_state_dict, prefix=""):
            local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                local_metadata["assign_to_params_buffers"] = True
            module._load_from_state_dict(local_state_dict, prefix, local_metadata, True, missing, unexpected,
                                         errors)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    load(child, {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)},
                         child_prefix)
            keys = _IncompatibleKeys(missing, unexpected)
            for hook in list(_hooks(module, "_load_state_dict_post_hooks").values()):
                if hook(module, keys) is not None:
                    raise RuntimeError("load_state_dict post-hook must return None")

        load(self, state_dict)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)
