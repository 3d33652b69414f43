"""nn tier 2 under kiln.compile: the composites (losses, attention, activations, RMS norm,
padding) captured and compiled by the inductor backend give what eager kiln gives."""
import numpy as np
import pytest

import kiln
from conftest import needs_cxx
from kiln import nn
from oracle import assert_match, sample

F = nn.functional


def block(x, w, g):
    h = F.rms_norm(x, [x.shape[-1]], g)
    q = k = v = (h @ w).view(2, 6, 2, 4).transpose(1, 2)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 6, 8)
    a = F.leaky_relu(a, 0.1) + F.hardswish(a) + F.elu(a) + F.softplus(a) + F.mish(a) + F.hardtanh(a)
    a = F.pad(a, (0, 1, 1, -1))
    return a, F.mse_loss(a, a * 0.5), F.smooth_l1_loss(a, a * 0.5, beta=0.5)


def loss(logits, labels, probs):
    return (F.cross_entropy(logits, labels, ignore_index=-1, label_smoothing=0.1),
            F.cross_entropy(logits, probs), F.binary_cross_entropy_with_logits(logits, probs))


@needs_cxx
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_nn_block_compiles_to_eager_values(backend, strict_inductor):
    x, w, g = (kiln.from_numpy(sample(s, "float32", seed=i)) for i, s in enumerate([(2, 6, 8), (8, 8), (8,)]))
    expected = block(x, w, g)
    got = kiln.compile(block, backend=backend)(x, w, g)
    assert_match(got, expected, rtol=1e-5, atol=1e-5)


# The inductor does not lower gather yet (class-index targets); the captured graph runs eagerly.
def test_losses_capture_into_one_graph(strict_inductor):
    logits = kiln.from_numpy(sample((12, 9), "float32", seed=1))
    labels = kiln.from_numpy(np.array([1, 2, -1, 3, 4, 5, 6, 7, 8, 0, 1, -1], dtype=np.int64))
    probs = kiln.from_numpy(sample((12, 9), "float32", seed=2, low=0, high=1))
    compiled = kiln.compile(loss, backend="eager", fullgraph=True)
    assert_match(compiled(logits, labels, probs), loss(logits, labels, probs))
