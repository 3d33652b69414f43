"""kiln.backends.openmp (torch.backends.openmp): kiln's CPU kernels are OpenMP programs."""


def is_available():
    return True
