"""DataLoader with num_workers > 0 (worker processes) against torch.utils.data's: batch order,
per-worker seeding of kiln, random and numpy.random, IterableDataset sharding, persistent
workers, and errors (a raising dataset, a dead worker, a timeout)."""
import os
import random
import time

import numpy as np
import pytest

import kiln
from oracle import need_torch

# Three workers on a two-core machine: torch and kiln both warn; the warning is not under test.
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create")


def _make_draws(T):
    class Draws(T.utils.data.Dataset):
        """Each item draws from every random stream a worker seeds."""

        def __len__(self):
            return 10

        def __getitem__(self, i):
            info = T.utils.data.get_worker_info()
            return (T.full((2,), float(i)), T.rand(1).item(), float(np.random.rand()), random.random(),
                    info.id, info.seed)

    return Draws()


def _flatten(loader):
    return [[v.tolist() if hasattr(v, "tolist") else v for v in b] for b in loader]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_shuffled_batches_and_worker_seeds_equal_torch(workers):
    torch = need_torch()
    out = {}
    for T in (torch, kiln):
        T.manual_seed(0)
        loader = T.utils.data.DataLoader(_make_draws(T), batch_size=3, shuffle=True, num_workers=workers)
        out[T.__name__] = [_flatten(loader), _flatten(loader), T.rand(1).item()]
    assert out["kiln"] == out["torch"]


def _make_shards(T, n):
    class Shards(T.utils.data.IterableDataset):
        """Each worker reads every num_workers-th item, starting at its id."""

        def __iter__(self):
            info = T.utils.data.get_worker_info()
            start, step = (info.id, info.num_workers) if info else (0, 1)
            return iter(range(start, n, step))

    return Shards()


@pytest.mark.parametrize("workers", [0, 2, 3])
@pytest.mark.parametrize("kw", [dict(batch_size=2), dict(batch_size=2, drop_last=True), dict(batch_size=None)])
def test_iterable_dataset_interleaves_workers_as_torch(workers, kw):
    torch = need_torch()
    got = {T.__name__: [b.tolist() if hasattr(b, "tolist") else b
                        for b in T.utils.data.DataLoader(_make_shards(T, 11), num_workers=workers, **kw)]
           for T in (torch, kiln)}
    assert got["kiln"] == got["torch"]


def test_persistent_workers_keep_their_processes_and_restart_the_pass():
    ds = kiln.utils.data.TensorDataset(kiln.arange(10.))
    loader = kiln.utils.data.DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True)
    first = [b[0].tolist() for b in loader]
    pids = [w.pid for w in loader._workers_iter.workers]
    assert [b[0].tolist() for b in loader] == first == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [w.pid for w in loader._workers_iter.workers] == pids


def test_worker_init_fn_and_worker_info():
    seen = kiln.utils.data.DataLoader(_make_draws(kiln), batch_size=5, num_workers=2,
                                      worker_init_fn=lambda wid: kiln.manual_seed(100 + wid))
    ids = [b[4].tolist() for b in seen]
    assert ids == [[0] * 5, [1] * 5]
    kiln.manual_seed(100)
    expected = [kiln.rand(1).item() for _ in range(5)]
    assert next(iter(seen))[1].tolist() == pytest.approx(expected)
    assert kiln.utils.data.get_worker_info() is None


def test_spawned_workers_unpickle_the_dataset():
    ds = kiln.utils.data.TensorDataset(kiln.arange(6.).reshape(3, 2), kiln.tensor([0, 1, 2]))
    loader = kiln.utils.data.DataLoader(ds, batch_size=2, num_workers=2, multiprocessing_context="spawn")
    assert _flatten(loader) == [[[[0, 1], [2, 3]], [0, 1]], [[[4, 5]], [2]]]


class _Failing(kiln.utils.data.Dataset):
    def __init__(self, mode):
        self.mode = mode

    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 2:
            if self.mode == "raise":
                raise KeyError(f"no item {i}")
            if self.mode == "exit":
                os._exit(3)
            time.sleep(3)
        return i


def test_worker_exception_reraised_with_its_traceback():
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process 0") as info:
        list(kiln.utils.data.DataLoader(_Failing("raise"), num_workers=2))
    assert "no item 2" in str(info.value)


def test_dead_worker_and_timeout_raise():
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+\) exited unexpectedly"):
        list(kiln.utils.data.DataLoader(_Failing("exit"), num_workers=2, timeout=2))
    with pytest.raises(RuntimeError, match="DataLoader timed out after 1 seconds"):
        list(kiln.utils.data.DataLoader(_Failing("sleep"), num_workers=2, timeout=1))


def test_getitems_fetches_a_whole_batch():
    class Batched(kiln.utils.data.Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            raise AssertionError("__getitems__ is used when the dataset has it")

        def __getitems__(self, indices):
            return [kiln.tensor(float(i)) for i in indices]

    for workers in (0, 2):
        assert [b.tolist() for b in kiln.utils.data.DataLoader(Batched(), batch_size=2, num_workers=workers)] == \
            [[0.0, 1.0], [2.0, 3.0], [4.0]]


@pytest.mark.parametrize("kw, message", [
    (dict(num_workers=-1), "num_workers option should be non-negative"),
    (dict(timeout=-1), "timeout option should be non-negative"),
    (dict(prefetch_factor=2), "prefetch_factor option could only be specified in multiprocessing"),
    (dict(persistent_workers=True), "persistent_workers option needs num_workers > 0"),
])
def test_bad_worker_options_raise_as_torch(kw, message):
    torch = need_torch()
    with pytest.raises(ValueError, match=message):
        torch.utils.data.DataLoader([1, 2], **kw)
    with pytest.raises(ValueError, match=message):
        kiln.utils.data.DataLoader([1, 2], **kw)
