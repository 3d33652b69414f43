"""kiln.utils.data: datasets, samplers, DataLoader and default_collate (torch.utils.data).

The loader yields batches of batch_size items from a BatchSampler over a SequentialSampler or
(shuffle=True) a RandomSampler, collated by stacking tensors (and turning Python numbers into
tensors), fetched in the main process or (num_workers > 0) in worker processes seeded as torch
seeds its workers. Each pass draws from the generator as torch's loader does (a base seed, then
the sampler's seed), so the orders follow kiln.manual_seed the way torch's follow
torch.manual_seed."""
from .dataloader import DataLoader, default_collate  # noqa: F401
from .dataset import (  # noqa: F401
    ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split,
)
from .distributed import DistributedSampler  # noqa: F401
from .worker import WorkerInfo, get_worker_info  # noqa: F401
from .sampler import (  # noqa: F401
    BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler, WeightedRandomSampler,
)
