"""kiln.save / kiln.load: round trips, PyTorch's format both ways (torch.load reads kiln's files,
kiln.load reads torch's), views sharing storage, dtypes, and the safe (weights_only) loader."""
import io
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import kiln
from oracle import need_torch

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]


def _values(lib, dtype):
    data = [[1.5, -2.25, 3.0], [0.0, 7.0, -0.5]]
    if dtype == "bool":
        data = [[True, False, True], [False, False, True]]
    elif dtype == "uint8" or dtype.startswith("int"):
        data = [[1, -2, 3], [0, 7, 100]] if dtype != "uint8" else [[1, 2, 3], [0, 7, 200]]
    return lib.tensor(data, dtype=getattr(lib, dtype))


def _as_lists(t):
    return t.float().tolist() if str(t.dtype).endswith("bfloat16") else t.tolist()


def _roundtrip(obj, path=None):
    f = path or io.BytesIO()
    kiln.save(obj, f)
    if path is None:
        f.seek(0)
    return kiln.load(f)


def test_state_dict_round_trip(tmp_path):
    lin = kiln.nn.Linear(3, 2)
    sd = lin.state_dict()
    opt = kiln.optim.Adam(lin.parameters(), lr=0.01)
    for p in lin.parameters():
        p.grad = kiln.ones_like(p)
    opt.step()
    obj = {"model": sd, "optim": opt.state_dict(), "epoch": 3, "names": ["a", "b"],
           "pair": (1.5, None, True), "od": OrderedDict(x=kiln.arange(3))}
    for target in (None, str(tmp_path / "ckpt.pt")):
        back = _roundtrip(obj, target)
        assert isinstance(back["model"], OrderedDict) and list(back["model"]) == list(sd)
        for k in sd:
            assert back["model"][k].tolist() == sd[k].tolist()
        assert back["optim"]["param_groups"] == opt.state_dict()["param_groups"]
        state0 = back["optim"]["state"][0]
        assert state0["step"].dtype == kiln.float32 and state0["step"].item() == 1.0
        assert back["epoch"] == 3 and back["names"] == ["a", "b"] and back["pair"] == (1.5, None, True)
        assert back["od"]["x"].tolist() == [0, 1, 2]
    fresh = kiln.optim.Adam(lin.parameters(), lr=0.01)
    fresh.load_state_dict(back["optim"])
    assert fresh.state_dict()["param_groups"] == opt.state_dict()["param_groups"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes_round_trip(dtype):
    t = _values(kiln, dtype)
    back = _roundtrip({"t": t, "v": t[:, 1:]})
    assert back["t"].dtype == t.dtype and _as_lists(back["t"]) == _as_lists(t)
    assert back["v"].stride() == (3, 1) and _as_lists(back["v"]) == _as_lists(t[:, 1:])


def test_views_share_storage_after_load():
    base = kiln.arange(12.0).reshape(3, 4)
    obj = {"base": base, "row": base[1], "col": base[:, 2], "t": base.t(), "other": kiln.zeros(2)}
    back = _roundtrip(obj)
    assert back["row"].storage_offset() == 4 and back["col"].stride() == (4,)
    assert back["t"].stride() == (1, 4) and back["t"].tolist() == base.t().tolist()
    back["base"][1, 2] = 100.0
    assert back["row"][2].item() == back["col"][1].item() == back["t"][2, 1].item() == 100.0
    assert back["other"].tolist() == [0.0, 0.0]


def test_same_tensor_twice_is_one_object():
    t = kiln.ones(2)
    back = _roundtrip([t, t])
    assert back[0] is back[1]


def test_parameter_round_trip():
    p = kiln.nn.Parameter(kiln.ones(2))
    back = _roundtrip({"p": p})
    assert isinstance(back["p"], kiln.nn.Parameter) and back["p"].requires_grad
    assert back["p"].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_loads_kiln_files(dtype):
    torch = need_torch()
    t = _values(kiln, dtype)
    f = io.BytesIO()
    kiln.save({"t": t, "view": t[1, ::2], "n": 5}, f)
    f.seek(0)
    back = torch.load(f, weights_only=True)
    assert back["t"].dtype == getattr(torch, dtype) and _as_lists(back["t"]) == _as_lists(t)
    assert _as_lists(back["view"]) == _as_lists(t[1, ::2]) and back["n"] == 5
    assert back["view"].untyped_storage().data_ptr() == back["t"].untyped_storage().data_ptr()


def test_torch_loads_kiln_optimizer_and_module_state(tmp_path):
    torch = need_torch()
    lin = kiln.nn.Linear(4, 3)
    opt = kiln.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
    for p in lin.parameters():
        p.grad = kiln.ones_like(p)
    opt.step()
    path = tmp_path / "kiln.pt"
    kiln.save({"model": lin.state_dict(), "optim": opt.state_dict()}, str(path))
    back = torch.load(str(path), weights_only=True)
    tlin = torch.nn.Linear(4, 3)
    tlin.load_state_dict(back["model"])
    assert tlin.weight.tolist() == lin.weight.tolist()
    topt = torch.optim.SGD(tlin.parameters(), lr=0.1, momentum=0.9)
    topt.load_state_dict(back["optim"])
    buf = topt.state[tlin.weight]["momentum_buffer"]
    assert buf.tolist() == opt.state[lin.weight]["momentum_buffer"].tolist()
    # torch's own reader checks the archive's records (alignment, version, byteorder).
    assert zipfile.ZipFile(str(path)).namelist()[0] == "kiln/data.pkl"


@pytest.mark.parametrize("dtype", DTYPES)
def test_kiln_loads_torch_files(dtype):
    torch = need_torch()
    t = _values(torch, dtype)
    f = io.BytesIO()
    torch.save({"t": t, "view": t[:, 1], "p": torch.nn.Parameter(torch.ones(2)), "s": torch.Size([2, 3]),
                "dt": torch.float16}, f)
    f.seek(0)
    back = kiln.load(f)
    assert back["t"].dtype == getattr(kiln, dtype) and _as_lists(back["t"]) == _as_lists(t)
    assert _as_lists(back["view"]) == _as_lists(t[:, 1]) and back["view"].stride() == (3,)
    assert isinstance(back["p"], kiln.nn.Parameter) and back["p"].requires_grad
    assert back["s"] == (2, 3) and back["dt"] == kiln.float16
    back["t"][1, 1] = back["t"][0, 0]
    assert _as_lists(back["view"])[1] == _as_lists(back["t"])[0][0]


def test_kiln_loads_torch_optimizer_state(tmp_path):
    torch = need_torch()
    tlin = torch.nn.Linear(3, 2)
    topt = torch.optim.AdamW(tlin.parameters(), lr=0.01)
    tlin(torch.ones(1, 3)).sum().backward()
    topt.step()
    path = str(tmp_path / "t.pt")
    torch.save({"model": tlin.state_dict(), "optim": topt.state_dict()}, path)
    back = kiln.load(path)
    lin = kiln.nn.Linear(3, 2)
    lin.load_state_dict(back["model"])
    opt = kiln.optim.AdamW(lin.parameters(), lr=0.01)
    opt.load_state_dict(back["optim"])
    assert opt.state[lin.weight]["exp_avg"].tolist() == topt.state[tlin.weight]["exp_avg"].tolist()
    assert opt.state_dict()["param_groups"] == topt.state_dict()["param_groups"]


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def _torch_style_archive(obj):
    """A zip archive like torch.save's whose data.pkl pickles `obj` with the standard pickler."""
    f = io.BytesIO()
    with zipfile.ZipFile(f, "w") as zf:
        zf.writestr("archive/data.pkl", pickle.dumps(obj, protocol=2))
        zf.writestr("archive/byteorder", b"little")
        zf.writestr("archive/version", b"3\n")
    f.seek(0)
    return f


def test_weights_only_refuses_code():
    with pytest.raises(pickle.UnpicklingError, match="unsupported global posix.system"):
        kiln.load(_torch_style_archive({"x": _Evil()}))
    # Full pickle only when asked for: the global resolves (and would run).
    calls = []
    f = _torch_style_archive({"x": _Evil()})
    import kiln.serialization as ser

    orig = ser._Unpickler.find_class

    def spy(self, module, name):
        calls.append((module, name))
        return (lambda *a: "ran") if (module, name) == ("posix", "system") else orig(self, module, name)

    ser._Unpickler.find_class = spy
    try:
        assert kiln.load(f, weights_only=False) == {"x": "ran"}
    finally:
        ser._Unpickler.find_class = orig
    assert calls == [("posix", "system")]


def test_load_errors():
    with pytest.raises(RuntimeError, match="not in PyTorch's zip format"):
        kiln.load(io.BytesIO(b"not a zip file"))
    with pytest.raises(RuntimeError, match="cannot save a tensor on meta"):
        kiln.save(kiln.empty(2, device="meta"), io.BytesIO())


def test_save_writes_aligned_storages():
    f = io.BytesIO()
    kiln.save([kiln.ones(3), kiln.zeros(5, dtype=kiln.float64)], f)
    zf = zipfile.ZipFile(io.BytesIO(f.getvalue()))
    raw = f.getvalue()
    for info in zf.infolist():
        if "/data/" in info.filename:
            name_len, extra_len = np.frombuffer(raw[info.header_offset + 26:info.header_offset + 30], "<u2")
            assert (info.header_offset + 30 + name_len + extra_len) % 64 == 0
    assert zf.read("archive/byteorder") == b"little" and zf.read("archive/version") == b"3\n"


def test_map_location():
    f = io.BytesIO()
    kiln.save({"a": kiln.arange(4.0), "b": kiln.ones(2)}, f)
    seen = []

    def relocate(storage, location):
        seen.append((storage.numel(), location))
        return storage

    for where in ("cpu", kiln.device("cpu"), {"cpu": "cpu"}, relocate):
        f.seek(0)
        back = kiln.load(f, map_location=where)
        assert back["a"].tolist() == [0.0, 1.0, 2.0, 3.0] and back["b"].device.type == "cpu"
    assert seen == [(4, "cpu"), (2, "cpu")]
    f.seek(0)
    meta = kiln.load(f, map_location="meta")
    assert meta["a"].is_meta and tuple(meta["a"].shape) == (4,)
    with pytest.raises(TypeError, match="map_location must be"):
        f.seek(0)
        kiln.load(f, map_location=3)
