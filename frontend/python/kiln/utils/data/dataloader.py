"""DataLoader and default_collate (torch.utils.data.dataloader): batches from a sampler, collated,
in the main process (num_workers=0) or in worker processes (worker.py)."""
import collections.abc
import itertools
import multiprocessing
import os
import queue
import time
import warnings
from typing import Generic, TypeVar

import numpy as _np

from ... import _C, empty
from . import worker as _worker
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler
from .worker import get_worker_info

__all__ = ["DataLoader", "default_collate", "get_worker_info"]


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


_T_co = TypeVar("_T_co", covariant=True)


class DataLoader(Generic[_T_co]):
    """Iterates a dataset in batches. Map-style datasets go through `batch_sampler` (a
    BatchSampler over `sampler` unless given); an IterableDataset is read in order and cut into
    batches. With num_workers > 0 the batches are fetched and collated in that many worker
    processes (each with its own copy of the dataset) and come back in the sampler's order."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None,
                 persistent_workers=False, pin_memory_device="", in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers "
                             "> 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if isinstance(multiprocessing_context, str):
            multiprocessing_context = multiprocessing.get_context(multiprocessing_context)
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.in_order = in_order
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
                                                                     else _identity)
        self._workers_iter = None  # the persistent workers' iterator

    def _index_iter(self):
        """What each fetch is told: a batch's indices, an index, or (IterableDataset) the batch size."""
        if self._iterable:
            return itertools.repeat(self.batch_size)
        return iter(self.batch_sampler if self._auto_collation else self.sampler)

    def __iter__(self):
        if self.num_workers > 0:
            if not self.persistent_workers:
                return _MultiProcessIter(self)
            if self._workers_iter is None:
                self._workers_iter = _MultiProcessIter(self)
            else:
                self._workers_iter.reset()
            return self._workers_iter
        return self._single_process_iter()

    def _single_process_iter(self):
        # torch's loader draws a base seed (for its workers) each time it starts a pass; drawn
        # here too so the generator's stream stays torch's.
        empty((), dtype=_C.int64).random_(generator=self.generator)
        fetcher = _worker.make_fetcher(self.dataset, self._iterable, self._auto_collation, self.collate_fn,
                                       self.drop_last)
        for index in self._index_iter():
            try:
                batch = fetcher.fetch(index)
            except StopIteration:
                if self._iterable:
                    return
                raise
            yield batch

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler) if self.batch_sampler is not None else len(self.sampler)


def _identity(x):
    return x


class _MultiProcessIter:
    """One pass over a DataLoader with worker processes (kept across passes with
    persistent_workers). Up to prefetch_factor tasks per worker are outstanding; tasks go to
    the workers in turn, and batches that arrive early wait in task_info until their turn."""

    def __init__(self, loader):
        self.loader = loader
        self.num_workers = loader.num_workers
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        if cores and self.num_workers > cores:
            warnings.warn(f"This DataLoader will create {self.num_workers} worker processes in total. Our "
                          f"suggested max number of worker in current system is {cores}, which is smaller than "
                          "what this DataLoader is going to create. Please be aware that excessive worker "
                          "creation might get DataLoader running slow or even freeze, lower the worker number "
                          "to avoid potential slowness/freeze if necessary.", stacklevel=3)
        ctx = loader.multiprocessing_context or multiprocessing.get_context()
        # Drawn once per set of workers, before the sampler's own seed, as torch's loader.
        self.base_seed = empty((), dtype=_C.int64).random_(generator=loader.generator).item()
        self.result_queue = ctx.Queue()
        self.index_queues, self.workers = [], []
        self.shut_down = False
        for worker_id in range(self.num_workers):
            index_queue = ctx.Queue()
            index_queue.cancel_join_thread()
            process = ctx.Process(
                target=_worker.worker_loop, daemon=True,
                args=(loader.dataset, loader._iterable, loader._auto_collation, loader.collate_fn,
                      loader.drop_last, index_queue, self.result_queue, self.base_seed,
                      loader.worker_init_fn, worker_id, self.num_workers, os.getpid()))
            process.start()
            self.index_queues.append(index_queue)
            self.workers.append(process)
        self.reset(first=True)

    def reset(self, first=False):
        self.index_iter = self.loader._index_iter()
        self.send_idx = 0  # the next task to hand out
        self.rcvd_idx = 0  # the next task to return
        self.task_info = {}  # task -> [worker_id] while outstanding, [worker_id, batch] once here early
        self.outstanding = 0
        self.worker_active = [True] * self.num_workers  # False once its IterableDataset copy ran out
        self.worker_cycle = itertools.cycle(range(self.num_workers))
        if not first:
            for q in self.index_queues:
                q.put(_worker.ResumeIteration())
            resumed = 0
            while resumed < self.num_workers:
                task, _ = self._get()
                if isinstance(task, _worker.ResumeIteration):
                    resumed += 1
        for _ in range(self.loader.prefetch_factor * self.num_workers):
            self._put_task()

    def _put_task(self):
        try:
            index = next(self.index_iter)
        except StopIteration:
            return
        for _ in range(self.num_workers):
            worker_id = next(self.worker_cycle)
            if self.worker_active[worker_id]:
                break
        else:
            return
        self.index_queues[worker_id].put((self.send_idx, index))
        self.task_info[self.send_idx] = [worker_id]
        self.send_idx += 1
        self.outstanding += 1

    def _get(self):
        """The next (task, batch) any worker sends, checking every few seconds that the workers
        live and (timeout > 0) that the wait is not over."""
        timeout = self.loader.timeout
        start = time.monotonic()
        while True:
            wait = _worker.STATUS_CHECK_INTERVAL
            if timeout > 0:
                wait = min(wait, max(timeout - (time.monotonic() - start), 0.0))
            try:
                return self.result_queue.get(timeout=wait)
            except queue.Empty:
                dead = [w.pid for w in self.workers if not w.is_alive()]
                if dead:
                    self.shutdown()
                    raise RuntimeError(f"DataLoader worker (pid(s) {', '.join(map(str, dead))}) exited "
                                       "unexpectedly") from None
                if timeout > 0 and time.monotonic() - start >= timeout:
                    raise RuntimeError(f"DataLoader timed out after {timeout} seconds") from None

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            # Skip the tasks of workers whose IterableDataset ran out before answering them.
            while self.rcvd_idx < self.send_idx:
                info = self.task_info.get(self.rcvd_idx)
                if info and (len(info) == 2 or self.worker_active[info[0]]):
                    break
                self.task_info.pop(self.rcvd_idx, None)
                self.rcvd_idx += 1
            else:
                if not self.loader.persistent_workers:
                    self.shutdown()
                raise StopIteration
            info = self.task_info[self.rcvd_idx]
            if len(info) == 2:
                del self.task_info[self.rcvd_idx]
                self.rcvd_idx += 1
                return self._process(info[1])
            if self.shut_down:
                raise RuntimeError("DataLoader: the worker processes were shut down")
            task, data = self._get()
            self.outstanding -= 1
            if isinstance(data, _worker.IterableEnd):
                self.worker_active[data.worker_id] = False
                self._put_task()
                continue
            if task == self.rcvd_idx or not self.loader.in_order:
                self.task_info.pop(task)
                if task == self.rcvd_idx:
                    self.rcvd_idx += 1
                return self._process(data)
            self.task_info[task].append(data)

    def _process(self, data):
        self._put_task()
        if isinstance(data, _worker.ExceptionWrapper):
            data.reraise()
        return data

    def __len__(self):
        return len(self.loader)

    def shutdown(self):
        if self.shut_down:
            return
        self.shut_down = True
        for q in self.index_queues:
            q.put(None)
        for w in self.workers:
            w.join(timeout=_worker.STATUS_CHECK_INTERVAL)
            if w.is_alive():
                w.terminate()
        for q in self.index_queues:
            q.close()
        self.result_queue.cancel_join_thread()
        self.result_queue.close()

    def __del__(self):
        if getattr(self, "workers", None) is not None:
            self.shutdown()
