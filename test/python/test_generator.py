"""kiln.Generator objects and the generator= argument of random ops: a generator seeded like the
default one yields the same numbers, and leaves the default stream untouched."""
import numpy as np
import pytest

import kiln


def _draws(generator=None):
    return [kiln.randint(0, 1000, (6,), generator=generator).numpy(),
            kiln.randn(3, 4, generator=generator).numpy(),
            kiln.empty(5).uniform_(-2, 2, generator=generator).numpy(),
            kiln.empty(5).normal_(generator=generator).numpy(),
            kiln.randperm(7, generator=generator).numpy(),
            kiln.multinomial(kiln.ones(8), 3, generator=generator).numpy(),
            kiln.bernoulli(kiln.full((6,), 0.5), generator=generator).numpy()]


def test_a_generator_yields_the_default_generators_stream_for_its_seed():
    g = kiln.Generator().manual_seed(123)
    got = _draws(g)
    kiln.manual_seed(123)
    want = _draws()
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    # and it keeps going where it stopped
    kiln.manual_seed(123)
    _draws()
    np.testing.assert_array_equal(kiln.randn(4, generator=g).numpy(), kiln.randn(4).numpy())


def test_the_default_stream_is_untouched_by_other_generators():
    kiln.manual_seed(5)
    first = kiln.rand(3).numpy()
    g = kiln.Generator()
    g.manual_seed(9)
    kiln.rand(100, generator=g)
    second = kiln.rand(3).numpy()
    kiln.manual_seed(5)
    np.testing.assert_array_equal(kiln.rand(3).numpy(), first)
    np.testing.assert_array_equal(kiln.rand(3).numpy(), second)


def test_generator_state_and_errors():
    g = kiln.Generator(device="cpu")
    assert g.device == kiln.device("cpu") and g.initial_seed() == kiln.Generator().initial_seed()
    state = g.get_state()
    a = kiln.rand(4, generator=g).numpy()
    g.set_state(state)
    np.testing.assert_array_equal(kiln.rand(4, generator=g).numpy(), a)
    with pytest.raises(TypeError, match="must be a kiln.Generator"):
        kiln.rand(2, generator=3)
    with pytest.raises(RuntimeError, match="only CPU generators"):
        kiln.Generator(device="cuda")
    # a failing op still restores the default generator and the user's
    kiln.manual_seed(1)
    before = kiln.default_generator.get_state().numpy()
    with pytest.raises(Exception):
        kiln.randint(5, 1, (2,), generator=g)
    np.testing.assert_array_equal(kiln.default_generator.get_state().numpy(), before)
