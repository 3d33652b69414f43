"""dropout1d/2d/3d as PyTorch reads their inputs (found with pytorch/examples' mnist_rnn, which
puts Dropout2d after an LSTM on (N, C) features): dropout2d treats every input as batched, so a
2-D (N, C) input drops single elements and a 3-D one is (N, C, L); dropout3d adds a batch
dimension to anything but 5-D inputs."""
import warnings

import pytest

import kiln

F = kiln.nn.functional


def _zero_pattern(y, dims):
    """Whether every slice over `dims` is all zero or all nonzero (a whole channel dropped or kept)."""
    z = (y == 0).to(kiln.float32)
    m = z.mean(dim=dims)
    return bool(((m == 0) | (m == 1)).all())


def test_dropout2d_mask_shapes():
    warnings.simplefilter("ignore")
    kiln.manual_seed(0)
    y = F.dropout2d(kiln.ones(8, 64), 0.5)  # (N, C): element-wise
    rows_mixed = ((y == 0).any(dim=1) & (y != 0).any(dim=1)).any()
    assert bool(rows_mixed)
    y3 = F.dropout2d(kiln.ones(4, 6, 10), 0.5)  # (N, C, L): whole (n, c) rows
    assert _zero_pattern(y3, (2,))
    y4 = F.dropout2d(kiln.ones(2, 6, 3, 3), 0.5)
    assert _zero_pattern(y4, (2, 3))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        F.dropout2d(kiln.ones(5), 0.5)


@pytest.mark.parametrize("name", ["dropout1d", "dropout2d", "dropout3d"])
def test_feature_dropout_equals_torch(name):
    torch = pytest.importorskip("torch")
    warnings.simplefilter("ignore")
    for shape in [(2, 4, 5), (4, 64), (4, 6), (3, 2, 2, 2), (2, 3, 2, 2, 2)]:
        outs = []
        for T in (kiln, torch):
            T.manual_seed(0)
            try:
                outs.append(getattr(T.nn.functional, name)(T.ones(*shape), 0.5).tolist())
            except Exception as e:  # noqa: BLE001 (both must refuse alike)
                outs.append(type(e).__name__)
        assert outs[0] == outs[1], (name, shape)
