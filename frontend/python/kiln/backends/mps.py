"""kiln.backends.mps (torch.backends.mps): kiln has no Metal back end."""


def is_available():
    return False


def is_built():
    return False
