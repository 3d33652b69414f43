"""kiln.nn.parallel (torch.nn.parallel): DataParallel and data_parallel on one device."""
from .data_parallel import DataParallel, data_parallel  # noqa: F401
