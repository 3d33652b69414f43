"""The DataLoader's worker processes (torch.utils.data's with num_workers > 0): what runs in each
worker, how it is seeded, and how its errors travel back to the main process.

A worker reads (task index, sampler index) pairs from its own queue, fetches and collates that
batch, and puts (task index, batch) on the queue shared by all workers; the main process
(dataloader._MultiProcessIter) hands the tasks out round-robin and puts the batches back in
order. Batches cross the process boundary pickled (Tensor.__reduce_ex__)."""
import os
import queue
import random
import sys
import traceback

import numpy as _np

__all__ = ["WorkerInfo", "get_worker_info"]

# How often a waiting worker checks that its parent is alive, and a waiting main process that
# its workers are (seconds), as torch's MP_STATUS_CHECK_INTERVAL.
STATUS_CHECK_INTERVAL = 5.0


class WorkerInfo:
    """What get_worker_info() returns inside a worker: id, num_workers, seed and this worker's
    copy of the dataset (an IterableDataset uses id and num_workers to split its stream)."""

    __initialized = False

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)
        self.__keys = tuple(kwargs.keys())
        self.__initialized = True

    def __setattr__(self, key, val):
        if self.__initialized:
            raise RuntimeError(f"Cannot assign attributes to {self.__class__.__name__} objects")
        super().__setattr__(key, val)

    def __repr__(self):
        items = ", ".join(f"{k}={getattr(self, k)}" for k in self.__keys)
        return f"{self.__class__.__name__}({items})"


_worker_info = None


def get_worker_info():
    """Inside a DataLoader worker process, its WorkerInfo; in the main process, None."""
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process as its type and formatted
    traceback, and raised there again (the same type, the worker's traceback in the message)."""

    def __init__(self, where):
        exc_type, exc, _ = sys.exc_info()
        self.exc_type = exc_type
        self.exc_msg = "".join(traceback.format_exception(exc_type, exc, exc.__traceback__))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)  # KeyError would repr() its message and lose the newlines
        try:
            exception = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        raise exception


class _KeyErrorMessage(str):
    def __repr__(self):
        return self


class IterableEnd:
    """A worker's answer once its copy of an IterableDataset is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class ResumeIteration:
    """Sent to persistent workers at the start of each later pass: restart the dataset's iterator."""


class MapFetcher:
    """Fetches one batch of a map-style dataset: items by index (or all of a batch's indices at
    once through dataset.__getitems__, as torch), then collated."""

    def __init__(self, dataset, auto_collation, collate_fn):
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn

    def fetch(self, index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        getitems = getattr(self.dataset, "__getitems__", None)
        data = getitems(index) if getitems else [self.dataset[i] for i in index]
        return self.collate_fn(data)


class IterableFetcher:
    """Fetches the next batch of an IterableDataset's stream; `index` is the batch size (None
    without batching). Raises StopIteration at the end (a short last batch unless drop_last)."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.it = iter(dataset)
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.it))
        data = []
        for _ in range(index):
            try:
                data.append(next(self.it))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < index):
            raise StopIteration
        return self.collate_fn(data)


def make_fetcher(dataset, iterable, auto_collation, collate_fn, drop_last):
    if iterable:
        return IterableFetcher(dataset, auto_collation, collate_fn, drop_last)
    return MapFetcher(dataset, auto_collation, collate_fn)


def numpy_seed(base_seed, worker_id):
    """The seed torch's workers give numpy.random: four 32-bit words mixed from the worker id and
    the base seed (a SeedSequence-style hash), so numpy draws in a dataset match torch's."""
    mask = 0xFFFFFFFF
    shift = 16
    state = {"a": 0x43B0D7E5, "b": 0x8B51F9DD}

    def hash_a(value):
        value = (value ^ state["a"]) & mask
        state["a"] = (state["a"] * 0x931E8875) & mask
        value = (value * state["a"]) & mask
        return (value ^ (value >> shift)) & mask

    def hash_b(value):
        value = (value ^ state["b"]) & mask
        state["b"] = (state["b"] * 0x58F38DED) & mask
        value = (value * state["b"]) & mask
        return (value ^ (value >> shift)) & mask

    def mix(x, y):
        result = ((0xCA01F9DD * x) & mask) - ((0x4973F715 * y) & mask)
        result &= mask
        return (result ^ (result >> shift)) & mask

    pool = [hash_a(v) for v in (worker_id, base_seed & mask, base_seed >> 32, 0)]
    for src in range(4):
        for dst in range(4):
            if src != dst:
                pool[dst] = mix(pool[dst], hash_a(pool[src]))
    return [hash_b(v) for v in pool]


def worker_loop(dataset, iterable, auto_collation, collate_fn, drop_last, index_queue, result_queue,
                base_seed, init_fn, worker_id, num_workers, parent_pid):
    """A worker process's body: seed (kiln, random and numpy.random, as torch seeds its workers),
    run worker_init_fn, then answer fetch requests until told to stop (None) or the parent dies."""
    global _worker_info
    from ... import manual_seed, set_num_threads

    try:
        set_num_threads(1)  # as torch: many workers each running an OpenMP team oversubscribe the cores
        seed = base_seed + worker_id
        random.seed(seed)
        manual_seed(seed)
        _np.random.seed(numpy_seed(base_seed, worker_id))
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        where = f"in DataLoader worker process {worker_id}"
        init_error = None
        fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = make_fetcher(dataset, iterable, auto_collation, collate_fn, drop_last)
        except Exception:
            init_error = ExceptionWrapper(where)
        iteration_end = False
        while True:
            try:
                request = index_queue.get(timeout=STATUS_CHECK_INTERVAL)
            except queue.Empty:
                if os.getppid() != parent_pid:
                    break
                continue
            if request is None:
                break
            if isinstance(request, ResumeIteration):
                result_queue.put((request, None))
                iteration_end = False
                if init_error is None:
                    fetcher = make_fetcher(dataset, iterable, auto_collation, collate_fn, drop_last)
                continue
            if iteration_end:
                continue  # an exhausted IterableDataset: the main process skips these tasks
            task, index = request
            if init_error is not None:
                data, init_error = init_error, None
            else:
                try:
                    data = fetcher.fetch(index)
                except StopIteration:
                    if not iterable:
                        data = ExceptionWrapper(where)
                    else:
                        data = IterableEnd(worker_id)
                        iteration_end = True
                except Exception:
                    data = ExceptionWrapper(where)
            result_queue.put((task, data))
            del data, request
    except KeyboardInterrupt:
        pass
    result_queue.cancel_join_thread()
