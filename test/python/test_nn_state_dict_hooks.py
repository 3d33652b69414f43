"""Module.state_dict / load_state_dict hooks and per-module steps, as torch's (checkpoint
conversion code such as gpt-fast's wq/wk/wv -> wqkv pre-hook runs unchanged)."""
import numpy as np
import pytest

import kiln
from oracle import need_torch


def fused_attention(T):
    """gpt-fast's pattern: a load pre-hook merges separate q/k/v weights into one wqkv."""
    class Attention(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.wqkv = T.nn.Linear(4, 12, bias=False)
            self._register_load_state_dict_pre_hook(self.load_hook)

        def load_hook(self, state_dict, prefix, *args):
            if prefix + "wq.weight" in state_dict:
                parts = [state_dict.pop(prefix + n + ".weight") for n in ("wq", "wk", "wv")]
                state_dict[prefix + "wqkv.weight"] = T.cat(parts)

    class Block(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attention()
            self.norm = T.nn.LayerNorm(4)

    return Block()


@pytest.mark.parametrize("lib", ["kiln", "torch"])
def test_load_pre_hook_rewrites_keys_of_its_prefix(lib):
    T = kiln if lib == "kiln" else need_torch()
    T.manual_seed(0)
    m = fused_attention(T)
    q, k, v = (T.randn(4, 4) for _ in range(3))
    sd = {"attention.wq.weight": q, "attention.wk.weight": k, "attention.wv.weight": v,
          "norm.weight": T.ones(4) * 2, "norm.bias": T.zeros(4)}
    result = m.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(m.attention.wqkv.weight.detach().numpy(), T.cat([q, k, v]).numpy())
    assert "attention.wq.weight" in sd  # the caller's dict is not rewritten


def load_errors(T):
    m = T.nn.Sequential(T.nn.Linear(2, 3), T.nn.ReLU(), T.nn.Linear(3, 1))
    sd = m.state_dict()
    del sd["2.bias"]
    sd["0.extra"] = T.zeros(1)
    sd["5.weight"] = T.zeros(1)
    sd["0.weight"] = T.zeros(4, 4)
    with pytest.raises(RuntimeError) as e:
        m.load_state_dict(sd)
    keys = m.load_state_dict({k: v for k, v in sd.items() if k != "0.weight"}, strict=False)
    return str(e.value).replace("torch.Size", "Size").replace("kiln.Size", "Size"), keys


def test_strict_errors_and_non_strict_keys_equal_torch():
    torch = need_torch()
    (k_msg, k_keys), (t_msg, t_keys) = load_errors(kiln), load_errors(torch)
    assert k_msg.replace("kiln", "torch") == t_msg
    assert (k_keys.missing_keys, k_keys.unexpected_keys) == (t_keys.missing_keys, t_keys.unexpected_keys)


def test_post_hook_may_forgive_missing_keys_and_must_return_none():
    m = kiln.nn.Linear(2, 2)
    seen = []

    def forgive(module, keys):
        seen.append((module, list(keys.missing_keys)))
        keys.missing_keys.clear()

    h = m.register_load_state_dict_post_hook(forgive)
    m.load_state_dict({"weight": kiln.ones(2, 2)})
    assert seen == [(m, ["bias"])] and m.weight.detach().numpy().tolist() == [[1, 1], [1, 1]]
    h.remove()
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "bias"'):
        m.load_state_dict({"weight": kiln.ones(2, 2)})
    m.register_load_state_dict_post_hook(lambda module, keys: 1)
    with pytest.raises(RuntimeError, match="post-hook must return None"):
        m.load_state_dict(m.state_dict())


def test_public_pre_hook_gets_the_module_and_state_dict_hooks_run_in_order():
    m = kiln.nn.Sequential(kiln.nn.Linear(2, 2))
    calls = []
    m[0].register_load_state_dict_pre_hook(lambda mod, sd, prefix, *rest: calls.append(("load", mod, prefix)))
    m[0].register_state_dict_pre_hook(lambda mod, prefix, keep_vars: calls.append(("pre", prefix, keep_vars)))
    m[0].register_state_dict_post_hook(lambda mod, sd, prefix, meta: calls.append(("post", sorted(sd), meta)))
    sd = m.state_dict(keep_vars=True)
    m.load_state_dict(sd)
    assert calls == [("pre", "0.", True), ("post", ["0.bias", "0.weight"], {"version": 1}), ("load", m[0], "0.")]
    meta_seen = []
    m[0].register_load_state_dict_pre_hook(lambda mod, sd, prefix, meta, *rest: meta_seen.append(meta))
    sd._metadata = {"0": {"version": 3}}  # as torch's checkpoints carry it
    m.load_state_dict(sd)
    assert meta_seen == [{"version": 3}]
    m[0]._register_state_dict_hook(lambda mod, sd, prefix, meta: {"replaced": 1})
    assert m[0].state_dict() == {"replaced": 1}
    m[0].register_state_dict_post_hook(lambda mod, sd, prefix, meta: sd)
    with pytest.raises(RuntimeError, match="post-hook must return None"):
        m.state_dict()


def test_extra_state_round_trips():
    class Counter(kiln.nn.Module):
        def __init__(self):
            super().__init__()
            self.count = 0

        def get_extra_state(self):
            return {"count": self.count}

        def set_extra_state(self, state):
            self.count = state["count"]

    a, b = Counter(), Counter()
    a.count = 7
    sd = a.state_dict()
    assert sd == {"_extra_state": {"count": 7}}
    b.load_state_dict(sd)
    assert b.count == 7
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "_extra_state"'):
        b.load_state_dict({})


def test_state_dict_with_metadata_saves_for_torch(tmp_path):
    torch = need_torch()
    m = kiln.nn.Linear(3, 2)
    path = str(tmp_path / "m.pt")
    kiln.save(m.state_dict(), path)
    back = kiln.load(path)
    t = torch.nn.Linear(3, 2)
    t.load_state_dict(torch.load(path))
    np.testing.assert_array_equal(t.weight.detach().numpy(), back["weight"].numpy())
    np.testing.assert_array_equal(t.weight.detach().numpy(), m.weight.detach().numpy())
