"""Regressions found running pytorch/examples' model code with `import torch` changed to
`import kiln as torch` (the files are not vendored: each test keeps the few lines that failed)."""
import pytest

import kiln


def test_spmm_of_strided_matrices():
    # gcn/main.py: torch.spmm(adj_mat, support) (kiln has no sparse layout: both are strided).
    a, b = kiln.randn(5, 4), kiln.randn(4, 3)
    assert kiln.allclose(kiln.spmm(a, b), a @ b)
    with pytest.raises(RuntimeError, match="mm"):
        kiln.spmm(kiln.randn(5, 4), kiln.randn(3, 3))
