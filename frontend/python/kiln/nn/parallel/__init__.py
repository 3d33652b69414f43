"""kiln.nn.parallel (torch.nn.parallel): DataParallel and data_parallel on one device."""
from .data_parallel import DataParallel, data_parallel  # noqa: F401


class DistributedDataParallel:
    """torch.nn.parallel.DistributedDataParallel needs a process group, which kiln cannot make yet
    (kiln.distributed): constructing one raises as torch does without init_process_group. Scripts
    that wrap the model only when running distributed import it and keep working."""

    def __init__(self, module, *args, **kwargs):
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
