"""kiln.compile(mode="reduce-overhead") on CUDA: the compiled program captured once as a CUDA graph
and replayed, on the fake driver (test/fake_cuda: a capture records the copies, fills, kernel
launches and cuBLAS GEMMs queued on its stream, a graph launch runs them on the CPU emulator, and
allocating, freeing or synchronizing while capturing fails as on a GPU). Results are compared with
the same functions eager on the CPU; kiln_fake_cuda_counts() tells graph launches apart."""
import pytest

import kiln
from test_cuda_fake_driver import run_script


def test_unknown_mode_raises_as_torch():
    with pytest.raises(RuntimeError, match="Unrecognized mode=fast, should be one of: default, reduce-overhead"):
        kiln.compile(lambda x: x + 1, mode="fast")


def test_reduce_overhead_on_the_cpu_changes_nothing():
    f = kiln.compile(lambda x: (x * 2).sum(), mode="reduce-overhead")
    x = kiln.arange(6.0)
    for _ in range(3):
        assert f(x).item() == 30.0


PRELUDE = """
    import ctypes, os
    import kiln
    fake = ctypes.CDLL(os.environ["KILN_CUDA_DRIVER"])
    def counts():  # (kernels run, graphs launched)
        out = (ctypes.c_longlong * 2)()
        fake.kiln_fake_cuda_counts(out)
        return out[0], out[1]
    def close(a, b):
        return bool(kiln.allclose(a.cpu(), b, rtol=1e-5, atol=1e-5))
"""


def test_replays_a_graph_from_the_second_call():
    run_script(PRELUDE + """
    def f(x, w, b):
        return ((x @ w + b).relu() * 2).sum(-1), (x - 1).exp()
    g = kiln.compile(f, mode="reduce-overhead")
    w, b = kiln.randn(8, 5), kiln.randn(5)
    xs = [kiln.randn(4, 8) for _ in range(4)]
    args = lambda x: (x.cuda(), w.cuda(), b.cuda())
    launches = []
    for x in xs:
        out = g(*args(x))
        want = f(x, w, b)
        assert all(close(o, e) for o, e in zip(out, want)), (out, want)
        launches.append(counts()[1])
    # the first call warms up (runs as usual), the second captures and launches, then replays
    assert launches == [0, 1, 2, 3], launches

    # without the mode, no graph
    h = kiln.compile(lambda x: x * 3 + 1)
    for x in xs:
        assert close(h(x.cuda()), x * 3 + 1)
    assert counts()[1] == 3
    print("ok")
    """)


def test_outputs_alias_the_graph_buffers_until_the_next_call():
    # The rule (docs/cuda.md), as PyTorch's CUDA graphs: the next call overwrites an output;
    # clone() keeps it.
    run_script(PRELUDE + """
    g = kiln.compile(lambda x: x * 2, mode="reduce-overhead")
    g(kiln.ones(3, device="cuda"))          # warm-up
    a = g(kiln.ones(3, device="cuda"))      # captured, launched
    kept = a.clone()
    b = g(kiln.full((3,), 5.0, device="cuda"))
    assert b.cpu().tolist() == [10.0] * 3
    assert a.cpu().tolist() == [10.0] * 3, a   # overwritten by the replay
    assert kept.cpu().tolist() == [2.0] * 3
    # an output fed back as the next input: copied in before the replay overwrites it
    y = g(b)
    assert y.cpu().tolist() == [20.0] * 3
    print("ok")
    """)


def test_new_sizes_capture_another_graph():
    run_script(PRELUDE + """
    g = kiln.compile(lambda x: (x * x).sum(0), mode="reduce-overhead", dynamic=True)
    before = counts()[1]
    for n in (3, 3, 3, 7, 7, 7, 3):
        x = kiln.randn(n, 4)
        assert close(g(x.cuda()), (x * x).sum(0))
    # at n=3: warm-up, capture + launch, replay; n=7 the same; n=3 again replays its graph
    assert counts()[1] - before == 5, counts()
    print("ok")
    """)


def test_inputs_written_in_place_are_written_back():
    run_script(PRELUDE + """
    def f(x):
        x.add_(1)
        return x * 2
    g = kiln.compile(f, mode="reduce-overhead")
    x = kiln.zeros(4, device="cuda")
    for i in range(1, 5):
        out = g(x)
        assert x.cpu().tolist() == [float(i)] * 4, (i, x)
        assert out.cpu().tolist() == [2.0 * i] * 4, (i, out)
    assert counts()[1] == 3
    print("ok")
    """)


def test_index_errors_are_raised_after_a_replay():
    run_script(PRELUDE + """
    g = kiln.compile(lambda x, i: x[i] * 2, mode="reduce-overhead")
    x = kiln.arange(5.0, device="cuda")
    for _ in range(3):
        assert g(x, kiln.tensor([0, 4], device="cuda")).cpu().tolist() == [0.0, 8.0]
    try:
        g(x, kiln.tensor([0, 9], device="cuda"))
    except IndexError as e:
        assert "out of bounds" in str(e), e
    else:
        raise AssertionError("no IndexError")
    assert counts()[1] == 3
    print("ok")
    """)
