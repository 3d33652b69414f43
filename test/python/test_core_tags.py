"""kiln's `core` tag follows PyTorch's Core ATen set (torch.Tag.core) for the overloads both have."""
import kiln
from oracle import need_torch

# kiln overloads PyTorch spells differently: kiln name -> PyTorch overload.
RENAMED = {"empty": "empty.memory_format"}


def _torch_overload(torch, name):
    base, _, overload = RENAMED.get(name, name).partition(".")
    packet = getattr(torch.ops.aten, base, None)
    if packet is None or (overload or "default") not in packet.overloads():
        return None
    return getattr(packet, overload or "default")


def test_core_tags_match_pytorch():
    torch = need_torch()
    differ = []
    for e in kiln._C._op_table():
        if "prims" in e["tags"]:
            continue
        op = _torch_overload(torch, e["name"])
        if op is None:
            continue
        theirs = torch.Tag.core in op.tags
        if ("core" in e["tags"]) != theirs:
            differ.append(f"{e['name']}: kiln core={not theirs}, PyTorch core={theirs}")
    assert differ == []


def test_core_ops_exist_in_pytorch():
    torch = need_torch()
    unknown = [e["name"] for e in kiln._C._op_table()
               if "core" in e["tags"] and _torch_overload(torch, e["name"]) is None]
    assert unknown == []
