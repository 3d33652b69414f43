"""kiln.utils: the data loading helpers of torch.utils that training scripts import."""
from . import data  # noqa: F401
