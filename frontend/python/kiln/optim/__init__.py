"""kiln.optim: optimizers (SGD, Adam, AdamW) and learning-rate schedulers, with torch.optim's API."""
from . import lr_scheduler  # noqa: F401
from .adam import Adam  # noqa: F401
from .adamw import AdamW  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401

__all__ = ["Adam", "AdamW", "Optimizer", "SGD", "lr_scheduler"]
