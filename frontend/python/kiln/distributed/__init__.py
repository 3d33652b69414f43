"""kiln.distributed (torch.distributed) without a backend yet: the single-process behaviour.

Model and training code imports torch.distributed at the top and asks `dist.is_initialized()`
before any collective; here no process group can be made, so that code takes its one-process
path, and everything that needs a process group raises what PyTorch raises without one
(ValueError: "Default process group has not been initialized ..."). init_process_group raises
NotImplementedError: kiln has no NCCL/Gloo/MPI backend (scaling out is not built yet)."""
import enum

__all__ = ["is_available", "is_initialized", "is_torchelastic_launched", "init_process_group",
           "destroy_process_group", "get_rank", "get_world_size", "get_backend", "barrier", "all_reduce",
           "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "broadcast",
           "reduce", "gather", "scatter", "send", "recv", "isend", "irecv", "all_to_all",
           "all_gather_object", "broadcast_object_list", "new_group", "ReduceOp", "group", "Backend"]

_NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to call "
                    "init_process_group.")


class ReduceOp(enum.Enum):
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"
    PREMUL_SUM = "premul_sum"


class Backend(str):
    """A backend name ("gloo", "nccl", "mpi"); kiln runs none of them yet."""
    GLOO, NCCL, MPI, UNDEFINED = "gloo", "nccl", "mpi", "undefined"

    def __new__(cls, name):
        return str.__new__(cls, name.lower())


class _Group:
    WORLD = None


group = _Group()


def is_available():
    """False: kiln has no distributed backend (torch answers True on builds with one)."""
    return False


def is_initialized():
    return False


def is_torchelastic_launched():
    import os
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    raise NotImplementedError(f"kiln.distributed.init_process_group(backend={backend!r}): kiln has no "
                              "distributed backend (NCCL, Gloo or MPI) yet; run in one process")


def _needs_group(name):
    def fn(*args, **kwargs):
        raise ValueError(_NOT_INITIALIZED)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.distributed.{name}: needs a process group, which kiln cannot make yet (raises as torch does without one)."
    return fn


for _name in ("destroy_process_group", "get_rank", "get_world_size", "get_backend", "barrier", "all_reduce",
              "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "broadcast",
              "reduce", "gather", "scatter", "send", "recv", "isend", "irecv", "all_to_all",
              "all_gather_object", "broadcast_object_list", "new_group"):
    globals()[_name] = _needs_group(_name)
del _name
