"""kiln.utils.data: Dataset, TensorDataset, Subset, random_split, DataLoader, default_collate.

A single-process loader, as torch.utils.data's with num_workers=0: batches of batch_size items
collated by stacking tensors (and turning Python numbers into tensors), sequential or shuffled
with torch's draws (the iterator's base seed, then RandomSampler's seed and randperm), so after
the same manual_seed the epoch order equals PyTorch's."""
import collections.abc

from ... import _C
from ..._random import use_generator


def _seed_draw(generator=None):
    """torch's `torch.empty((), dtype=torch.int64).random_(generator=generator).item()`."""
    with use_generator(generator):
        return int(_C._ops.empty([], dtype=_C.int64).random_().item())


def _randperm(n, generator=None):
    with use_generator(generator):
        return _C._ops.randperm(n).tolist()


class Dataset:
    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")


class TensorDataset(Dataset):
    """Item i is (t[i] for each tensor); the tensors share their first dimension."""

    def __init__(self, *tensors):
        if any(t.size(0) != tensors[0].size(0) for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class Subset(Dataset):
    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Subsets of the given lengths (or fractions summing to 1) over a kiln.randperm order."""
    n = len(dataset)
    if all(0 <= f <= 1 for f in lengths) and abs(sum(lengths) - 1) < 1e-9 and sum(lengths) != n:
        sizes = [int(f * n) for f in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = _randperm(n, generator)
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, order[start:start + length]))
        start += length
    return out


def default_collate(batch):
    """A list of samples -> one batch: tensors stacked, numbers made tensors, and tuples,
    lists, dicts and namedtuples collated field by field."""
    elem = batch[0]
    if isinstance(elem, _C.TensorBase):
        return _C._ops.stack(list(batch), 0)
    if isinstance(elem, (bool, int, float)):
        return _tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return type(elem)({key: default_collate([d[key] for d in batch]) for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        collated = [default_collate(list(s)) for s in zip(*batch)]
        return tuple(collated) if isinstance(elem, tuple) else collated
    raise TypeError(f"default_collate: batch must contain tensors, numbers, dicts or lists; found {type(elem)}")


def _tensor(values):
    from ..._creation import tensor
    return tensor(values)


class DataLoader:
    """Iterates a map-style dataset in batches (num_workers must be 0)."""

    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 generator=None, **kwargs):
        if num_workers != 0:
            raise NotImplementedError("kiln.utils.data.DataLoader: num_workers > 0 is not supported")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.drop_last = drop_last
        self.generator = generator
        self.collate_fn = collate_fn if collate_fn is not None else (default_collate if batch_size is not None
                                                                     else (lambda x: x))

    def _batches(self):
        if self.batch_sampler is not None:
            yield from self.batch_sampler
            return
        if self.sampler is not None:
            order = list(self.sampler)
        elif self.shuffle:
            # torch's RandomSampler: without a generator, a fresh one seeded from the default.
            generator = self.generator
            if generator is None:
                generator = _C.Generator().manual_seed(_seed_draw())
            order = _randperm(len(self.dataset), generator)
        else:
            order = range(len(self.dataset))
        if self.batch_size is None:
            yield from order
            return
        batch = []
        for i in order:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __iter__(self):
        # torch's iterator draws its (workers') base seed when it is made, before the sampler runs.
        _seed_draw(self.generator)
        return self._iterate()

    def _iterate(self):
        for indices in self._batches():
            if self.batch_size is None and self.batch_sampler is None:
                yield self.collate_fn(self.dataset[indices])
            else:
                yield self.collate_fn([self.dataset[i] for i in indices])

    def __len__(self):
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        n = len(self.sampler) if self.sampler is not None else len(self.dataset)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
