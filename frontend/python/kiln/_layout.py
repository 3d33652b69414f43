"""Tensor layouts (torch.layout): kiln.strided (every dense tensor) and kiln.sparse_coo
(kiln.sparse's COO tensors). Compared by identity, as torch's."""

__all__ = ["layout", "strided", "sparse_coo"]


class layout:
    """One of kiln's tensor layouts."""

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return "kiln." + self._name

    def __reduce__(self):
        return self._name


strided = layout("strided")
sparse_coo = layout("sparse_coo")
