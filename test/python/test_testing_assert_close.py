"""kiln.testing.assert_close against torch.testing.assert_close: which pairs pass, and the
failure messages' first lines."""
import pytest

import kiln
from oracle import need_torch

inf, nan = float("inf"), float("nan")

CASES = [
    lambda T: (T.tensor([1.0, 2.0, 3.0]), T.tensor([1.0, 2.0, 3.0 + 1e-6])),
    lambda T: (T.tensor([1.0, 2.0, 3.0]), T.tensor([1.0, 2.5, 3.0])),
    lambda T: (T.tensor([1.0, 2.0]), T.tensor([1, 2])),
    lambda T: (T.ones(2), T.ones(3)),
    lambda T: (T.tensor([1, 2]), T.tensor([1, 3])),
    lambda T: (T.tensor([True, False]), T.tensor([True, True])),
    lambda T: (T.tensor([inf, -inf]), T.tensor([inf, -inf])),
    lambda T: (T.tensor([nan]), T.tensor([nan])),
    lambda T: (T.tensor([1.0], dtype=T.float16), T.tensor([1.0005], dtype=T.float16)),
    lambda T: (T.tensor([1.0], dtype=T.bfloat16), T.tensor([1.01], dtype=T.bfloat16)),
    lambda T: ([T.ones(2), 1.0], [T.ones(2), 1.5]),
    lambda T: ({"a": T.ones(2), "b": 2}, {"a": T.ones(2), "b": 2}),
    lambda T: ({"a": T.ones(2)}, {"a": T.zeros(2)}),
    lambda T: (1, 1.0),
    lambda T: (T.ones(2), [1.0, 1.0]),
]


def outcome(T, make, **kw):
    """"passed", or the first line of the AssertionError, or the TypeError's type."""
    actual, expected = make(T)
    try:
        T.testing.assert_close(actual, expected, **kw)
        return "passed"
    except AssertionError as e:
        return str(e).replace("torch.", "").replace("kiln.", "").split("\n")[0]
    except TypeError:
        return "TypeError"


@pytest.mark.parametrize("i", range(len(CASES)))
def test_outcomes_match_torch(i):
    torch = need_torch()
    assert outcome(kiln, CASES[i]) == outcome(torch, CASES[i])


def test_options():
    torch = need_torch()
    for kw in (dict(equal_nan=True), dict(rtol=0.3, atol=0.0), dict(check_dtype=False)):
        for make in CASES[:9]:
            assert outcome(kiln, make, **kw) == outcome(torch, make, **kw), (kw, make(torch))
    with pytest.raises(ValueError, match="rtol"):
        kiln.testing.assert_close(kiln.ones(1), kiln.ones(1), atol=1.0)
    with pytest.raises(AssertionError, match="custom"):
        kiln.testing.assert_close(kiln.ones(1), kiln.zeros(1), msg="custom")
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 3") as caught:
        kiln.testing.assert_close(kiln.tensor([1.0, 2.0, 3.0]), kiln.tensor([1.0, 2.5, 3.0]))
    assert "Greatest absolute difference: 0.5 at index (1,) (up to 1e-05 allowed)" in str(caught.value)
