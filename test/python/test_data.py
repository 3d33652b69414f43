"""kiln.utils.data: samplers, datasets and the DataLoader's batching, against torch.utils.data
(orders that depend on the random stream are compared as sets or for determinism here)."""
import numpy as np
import pytest

import kiln
from kiln.utils import data as kd
from oracle import need_torch


def batches(loader):
    return [b.tolist() if hasattr(b, "tolist") else b for b in loader]


@pytest.mark.parametrize("kw", [dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None),
                                dict(batch_size=4, sampler=[5, 1, 2])])
def test_sequential_batches_equal_torch(kw):
    torch = need_torch()
    x = np.arange(10, dtype=np.float32)
    k = kd.DataLoader(kd.TensorDataset(kiln.from_numpy(x)), **kw)
    t = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.from_numpy(x)), **kw)
    assert len(k) == len(t)
    assert [[v.tolist() for v in b] for b in k] == [[v.tolist() for v in b] for b in t]


def test_shuffled_epochs_are_permutations_and_follow_the_seed():
    ds = list(range(10))
    loader = kd.DataLoader(ds, batch_size=4, shuffle=True)
    kiln.manual_seed(0)
    a = [x for b in batches(loader) for x in b]
    b = [x for b in batches(loader) for x in b]
    kiln.manual_seed(0)
    assert [x for b in batches(loader) for x in b] == a
    assert sorted(a) == ds and sorted(b) == ds and a != b
    g1, g2 = kiln.Generator().manual_seed(3), kiln.Generator().manual_seed(3)
    assert batches(kd.DataLoader(ds, batch_size=4, shuffle=True, generator=g1)) == \
        batches(kd.DataLoader(ds, batch_size=4, shuffle=True, generator=g2))


def test_samplers():
    assert list(kd.SequentialSampler(range(4))) == [0, 1, 2, 3]
    assert list(kd.BatchSampler(range(7), 3, drop_last=False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(kd.BatchSampler(range(7), 3, drop_last=True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(kd.BatchSampler(range(7), 3, drop_last=False)) == 3
    s = list(kd.RandomSampler(range(5), num_samples=12))
    assert len(s) == 12 and sorted(s[:5]) == [0, 1, 2, 3, 4] and sorted(s[5:10]) == [0, 1, 2, 3, 4]
    r = list(kd.RandomSampler(range(5), replacement=True, num_samples=40))
    assert len(r) == 40 and set(r) <= set(range(5))
    assert sorted(kd.SubsetRandomSampler([7, 8, 9])) == [7, 8, 9]
    w = list(kd.WeightedRandomSampler([0.0, 1.0, 0.0], 6))
    assert w == [1] * 6
    with pytest.raises(ValueError, match="batch_size"):
        kd.BatchSampler(range(3), 0, False)
    with pytest.raises(ValueError, match="num_samples"):
        kd.RandomSampler([], num_samples=0)


def test_iterable_and_concat_datasets():
    torch = need_torch()

    def make(T):
        class Stream(T.utils.data.IterableDataset):
            def __iter__(self):
                return iter(T.arange(7))

        return Stream()

    for kw in (dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None)):
        assert batches(kd.DataLoader(make(kiln), **kw)) == batches(torch.utils.data.DataLoader(make(torch), **kw))
    with pytest.raises(ValueError, match="shuffle"):
        kd.DataLoader(make(kiln), shuffle=True)
    c = kd.ConcatDataset([[0, 1], [2, 3, 4]])
    assert len(c) == 5 and [c[i] for i in range(5)] == [0, 1, 2, 3, 4] and c[-1] == 4
    loader = kd.DataLoader(kd.ConcatDataset([kd.TensorDataset(kiln.arange(3)), kd.TensorDataset(kiln.arange(3, 5))]),
                           batch_size=2)
    assert [b[0].tolist() for b in loader] == [[0, 1], [2, 3], [4]]


def test_batch_sampler_argument():
    loader = kd.DataLoader(list(range(6)), batch_sampler=[[0, 5], [2]])
    assert batches(loader) == [[0, 5], [2]] and len(loader) == 2
    with pytest.raises(ValueError, match="mutually exclusive"):
        kd.DataLoader(list(range(6)), batch_sampler=[[0]], batch_size=2)


def test_torch_module_paths():
    # Programs import from the submodules (makemore: torch.utils.data.dataloader.DataLoader).
    from kiln.utils.data.dataloader import DataLoader, default_collate
    from kiln.utils.data.dataset import Dataset, TensorDataset
    from kiln.utils.data.distributed import DistributedSampler
    from kiln.utils.data.sampler import RandomSampler
    assert DataLoader is kd.DataLoader and Dataset is kd.Dataset and RandomSampler is kd.RandomSampler
    assert TensorDataset is kd.TensorDataset and default_collate is kd.default_collate
    assert DistributedSampler is kd.DistributedSampler


@pytest.mark.parametrize("n,replicas,rank,shuffle,drop_last", [
    (10, 3, 1, True, False), (10, 3, 2, True, True), (7, 2, 0, False, False), (2, 5, 4, True, False),
    (11, 4, 3, False, True)])
def test_distributed_sampler_equals_torch(n, replicas, rank, shuffle, drop_last):
    torch = need_torch()
    for epoch in (0, 3):
        k = kd.DistributedSampler(list(range(n)), replicas, rank, shuffle, seed=5, drop_last=drop_last)
        t = torch.utils.data.DistributedSampler(list(range(n)), replicas, rank, shuffle, seed=5,
                                                drop_last=drop_last)
        k.set_epoch(epoch)
        t.set_epoch(epoch)
        assert list(k) == list(t) and len(k) == len(t)


def test_distributed_sampler_single_process_defaults():
    # No process groups in kiln: the whole dataset, shuffled by seed + epoch, for replica 0 of 1.
    s = kd.DistributedSampler(list(range(6)))
    first = list(s)
    assert sorted(first) == list(range(6)) and first == list(s)
    s.set_epoch(1)
    assert sorted(s) == list(range(6)) and list(s) != first
    assert list(kd.DistributedSampler(list(range(5)), shuffle=False)) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="Invalid rank 2"):
        kd.DistributedSampler(list(range(5)), num_replicas=2, rank=2)
