"""kiln.nn: modules, parameters, functional and init, with torch.nn's API."""
from . import functional, init, utils  # noqa: F401
from .modules import *  # noqa: F401,F403
from .parameter import Buffer, Parameter, UninitializedBuffer, UninitializedParameter  # noqa: F401
from . import attention, parallel  # noqa: E402,F401
from .parallel import DataParallel  # noqa: E402,F401
