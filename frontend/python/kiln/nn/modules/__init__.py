"""The layers of kiln.nn."""
from .activation import GELU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh  # noqa: F401
from .container import ModuleDict, ModuleList, Sequential  # noqa: F401
from .dropout import Dropout  # noqa: F401
from .linear import Flatten, Identity, Linear, Unflatten  # noqa: F401
from .module import Module  # noqa: F401
from .normalization import LayerNorm  # noqa: F401
from .batchnorm import BatchNorm1d, BatchNorm2d  # noqa: F401
from .conv import Conv1d, Conv2d  # noqa: F401
from .normalization import GroupNorm  # noqa: F401
from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d  # noqa: F401
from .sparse import Embedding  # noqa: F401
