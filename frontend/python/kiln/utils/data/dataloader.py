"""DataLoader and default_collate (torch.utils.data.dataloader): batches from a sampler, collated."""
import collections.abc

import numpy as _np

from ... import _C, empty
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "get_worker_info"]


def get_worker_info():
    """None: kiln's loader runs in the main process (torch's answer with num_workers=0)."""
    return None


def default_collate(batch):
    """A list of samples -> one batch: tensors stacked, numbers made tensors, and tuples,
    lists, dicts and namedtuples collated field by field."""
    elem = batch[0]
    if isinstance(elem, _C.TensorBase):
        return _C._ops.stack(list(batch), 0)
    if isinstance(elem, _np.ndarray) and elem.dtype.kind not in "SUO":
        return _C._ops.stack([_from_numpy(b) for b in batch], 0)
    if isinstance(elem, _np.generic) and elem.dtype.kind not in "SUO":
        return _from_numpy(_np.array(batch))
    if isinstance(elem, float):
        return _tensor(batch, _C.float64)  # torch makes Python floats float64, not the default dtype
    if isinstance(elem, (bool, int)):
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


def _tensor(values, dtype=None):
    from ..._creation import tensor
    return tensor(values, dtype=dtype)


def _from_numpy(a):
    from ... import from_numpy
    return from_numpy(_np.ascontiguousarray(a).copy())


class DataLoader:
    """Iterates a dataset in batches (num_workers must be 0). Map-style datasets go through
    `batch_sampler` (a BatchSampler over `sampler` unless given); an IterableDataset is read in
    order and cut into batches."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 generator=None, **kwargs):
        if num_workers != 0:
            raise NotImplementedError("kiln.utils.data.DataLoader: num_workers > 0 is not supported")
        self.dataset = dataset
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, "
                                 f"but got shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler and batch_sampler")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size, drop_last = None, False
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self._auto_collation = batch_sampler is not None or (self._iterable and batch_size is not None)
        self.collate_fn = collate_fn if collate_fn is not None else (default_collate if self._auto_collation
                                                                     else (lambda x: x))

    def _iterable_batches(self):
        it = iter(self.dataset)
        if self.batch_size is None:
            yield from it
            return
        while True:
            batch = []
            for item in it:
                batch.append(item)
                if len(batch) == self.batch_size:
                    break
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield batch

    def __iter__(self):
        # torch's loader draws a base seed (for its workers) each time it starts a pass; drawn
        # here too so the generator's stream stays torch's.
        empty((), dtype=_C.int64).random_(generator=self.generator)
        if self._iterable:
            for batch in self._iterable_batches():
                yield self.collate_fn(batch)
            return
        if self.batch_sampler is None:
            for i in self.sampler:
                yield self.collate_fn(self.dataset[i])
            return
        for indices in self.batch_sampler:
            yield self.collate_fn([self.dataset[i] for i in indices])

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler) if self.batch_sampler is not None else len(self.sampler)
