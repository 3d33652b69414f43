"""kiln's random ops give PyTorch's values for the same seed (torch as the oracle): the mt19937
stream, each op's algorithm, the state carried between ops, generator objects, the state bytes,
module initialization, a DataLoader's shuffle and a few training steps from a seeded init.

All bit-exact: normal_ of >= 16 float elements reproduces the rounding of torch's AVX2 kernel
(the one the x86 wheel runs; RandomKernels.cpp)."""
import numpy as np
import pytest

import kiln
from oracle import need_torch

SIZES = [1, 7, 15, 16, 17, 100, 1000]
SEEDS = [0, 1, 12345]


def run_both(op, seed):
    """op(T) after T.manual_seed(seed) for T = kiln, torch: the two results as numpy arrays."""
    torch = need_torch()
    out = []
    for T in (kiln, torch):
        T.manual_seed(seed)
        r = op(T)
        rs = r if isinstance(r, (list, tuple)) else [r]
        out.append([(x.float() if str(x.dtype).endswith("bfloat16") else x).numpy() for x in rs])
    return out


def assert_same(op, seed, rtol=0.0, atol=0.0):
    got, want = run_both(op, seed)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if rtol == 0 and atol == 0:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def dt(T, name):
    return getattr(T, name)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_rand_and_uniform(n, dtype):
    for seed in SEEDS:
        assert_same(lambda T: [T.rand(n, dtype=dt(T, dtype)),
                               T.empty(n, dtype=dt(T, dtype)).uniform_(-0.37, 2.5)], seed)


@pytest.mark.parametrize("n", SIZES)
def test_randn_and_normal(n):
    for seed in SEEDS:
        assert_same(lambda T: [T.randn(n, dtype=T.float64), T.randn(n), T.empty(n).normal_(0.5, 2.0),
                               T.empty(n, dtype=T.float64).normal_(-1.0, 0.3)], seed)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_randn_16_bit(dtype):
    for n in (5, 16, 40):
        assert_same(lambda T: [T.randn(n, dtype=dt(T, dtype)), T.empty(n, dtype=dt(T, dtype)).normal_(2, 3)], 3)


def test_small_normal_caches_the_second_value_between_ops():
    # normal_ of < 16 elements keeps the sine of a Box-Muller pair in the generator: odd sizes
    # in a row use it; manual_seed drops it.
    assert_same(lambda T: [T.randn(3, dtype=T.float64), T.randn(5, dtype=T.float64),
                           T.randn(1, dtype=T.float64), T.rand(2, dtype=T.float64), T.randn(2)], 4)


def test_noncontiguous_fills_in_memory_order():
    assert_same(lambda T: [T.empty(6, 5).t().uniform_(), T.empty(4, 8)[:, ::2].normal_(),
                           T.empty(5, 7).t().random_(0, 100), T.empty(3, 9).t().normal_()], 2)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "uint8", "float32", "float64", "float16", "bfloat16"])
def test_randint_and_random(dtype):
    for seed in SEEDS:
        assert_same(lambda T: [T.randint(0, 10, (17,), dtype=dt(T, dtype)),
                               T.randint(3, 100, (100,), dtype=dt(T, dtype)),
                               T.empty(50, dtype=dt(T, dtype)).random_(),
                               T.empty(20, dtype=dt(T, dtype)).random_(1, 50)], seed)


def test_random_wide_ranges_take_64_bits():
    assert_same(lambda T: [T.randint(0, 2 ** 28, (9,)), T.randint(-(2 ** 40), 2 ** 40, (9,)),
                           T.randint(0, 2 ** 28 - 1, (9,)), T.empty(9, dtype=T.int64).random_(-5, None),
                           T.empty(4, dtype=T.bool).random_()], 8)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 100, 1000])
def test_randperm(n):
    for seed in SEEDS:
        assert_same(lambda T: [T.randperm(n), T.randperm(n, dtype=T.int32)], seed)


def test_bernoulli_and_dropout():
    torch = need_torch()
    x = np.linspace(0, 1, 300).astype(np.float32)
    for seed in SEEDS:
        assert_same(lambda T: [T.empty(100).bernoulli_(0.3), T.bernoulli(T.full((50,), 0.7), 0.2),
                               T.bernoulli(T.tensor(x)), T.bernoulli(T.tensor(x.astype(np.float64))),
                               T.empty(30, dtype=T.int64).bernoulli_(0.5)], seed)
    for p in (0.1, 0.5):
        got, want = run_both(lambda T: [T.nn.functional.dropout(T.ones(64, 33), p),
                                        T.nn.Dropout(p)(T.tensor(x))], 6)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    del torch


def test_multinomial():
    w = np.array([[0.1, 0.2, 0.3, 0.4, 0.0], [5, 1, 1, 0.5, 2]], dtype=np.float32)
    for seed in SEEDS:
        assert_same(lambda T: [T.multinomial(T.tensor(w), 1), T.multinomial(T.tensor(w), 3),
                               T.multinomial(T.tensor(w), 9, replacement=True),
                               T.multinomial(T.tensor(w[1].astype(np.float64)), 2),
                               T.multinomial(T.tensor(w[0]), 40, True)], seed)


def test_a_sequence_of_ops_carries_the_state():
    assert_same(lambda T: [T.randn(5), T.randn(20), T.randint(0, 7, (4,)), T.rand(3, dtype=T.float64),
                           T.randperm(10), T.randn(3), T.empty(17).uniform_(), T.randn(2, 3, dtype=T.float64)], 0)


def test_generator_objects_and_state_bytes():
    torch = need_torch()
    k = kiln.Generator().manual_seed(77)
    t = torch.Generator().manual_seed(77)
    for _ in range(2):
        np.testing.assert_array_equal(kiln.randn(20, generator=k).numpy(), torch.randn(20, generator=t).numpy())
        np.testing.assert_array_equal(kiln.randperm(9, generator=k).numpy(), torch.randperm(9, generator=t).numpy())
    # A fresh generator has torch's default seed; states are byte-compatible both ways.
    assert kiln.Generator().initial_seed() == torch.Generator().initial_seed()
    np.testing.assert_array_equal(kiln.Generator().get_state().numpy(), torch.Generator().get_state().numpy())
    torch.manual_seed(5)
    torch.randn(3, dtype=torch.float64)  # leaves a cached normal in the state
    kiln.set_rng_state(kiln.from_numpy(torch.get_rng_state().numpy()))
    np.testing.assert_array_equal(kiln.randn(5, dtype=kiln.float64).numpy(), torch.randn(5, dtype=torch.float64).numpy())
    np.testing.assert_array_equal(kiln.get_rng_state().numpy(), torch.get_rng_state().numpy())
    with pytest.raises(RuntimeError, match="Invalid mt19937 state"):
        kiln.set_rng_state(kiln.zeros(5056, dtype=kiln.uint8))


def test_module_initialization_matches():
    torch = need_torch()

    def build(T):
        T.manual_seed(0)
        nn = T.nn
        m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Linear(10, 7), nn.Embedding(11, 4), nn.LayerNorm(4),
                          nn.LSTM(4, 6), nn.MultiheadAttention(8, 2), nn.ConvTranspose1d(2, 3, 3))
        extra = [T.empty(6, 5), T.empty(4, 9), T.empty(20), T.empty(30, 7), T.empty(40), T.empty(5, 3)]
        nn.init.xavier_uniform_(extra[0])
        nn.init.kaiming_normal_(extra[1])
        nn.init.normal_(extra[2], 0.0, 0.02)
        nn.init.trunc_normal_(extra[3], std=0.02)  # torch 2.13: normal draws, redrawn outside [a, b]
        nn.init.trunc_normal_(extra[4], mean=0.0, std=1.0, a=1.0, b=3.0)  # rejection from uniforms
        nn.init.trunc_normal_(extra[5], std=1.0, a=-0.5, b=0.5)  # redraws happen
        return [p.detach().numpy() for p in m.parameters()] + [e.numpy() for e in extra]

    for g, w in zip(build(kiln), build(torch)):
        np.testing.assert_array_equal(g, w)
    del torch


def test_dataloader_shuffle_order_matches():
    torch = need_torch()
    data = np.arange(23, dtype=np.float32)
    orders = []
    for T in (kiln, torch):
        T.manual_seed(3)
        loader = T.utils.data.DataLoader(T.utils.data.TensorDataset(T.tensor(data)), batch_size=5, shuffle=True)
        epochs = [[b[0].tolist() for b in loader] for _ in range(2)]
        split = [list(s.indices) for s in T.utils.data.random_split(range(10), [6, 4])]
        orders.append((epochs, split, T.rand(2).tolist()))
    assert orders[0] == orders[1]


def test_mlp_trains_with_torchs_losses_from_a_seeded_init():
    torch = need_torch()

    def losses(T):
        T.manual_seed(0)
        model = T.nn.Sequential(T.nn.Linear(8, 16), T.nn.ReLU(), T.nn.Dropout(0.2), T.nn.Linear(16, 3))
        opt = T.optim.SGD(model.parameters(), lr=0.1)
        x, y = T.randn(32, 8), T.randint(0, 3, (32,))
        out = []
        for _ in range(5):
            opt.zero_grad()
            loss = T.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out

    np.testing.assert_allclose(losses(kiln), losses(torch), rtol=1e-5)
    del torch


def test_compiled_dropout_draws_the_eager_mask_and_backward_reuses_it():
    # Random ops run eagerly inside compiled graphs: the same seed gives the eager outputs, the
    # gradients through the saved mask (a redrawn mask would change them), and the same
    # generator position afterwards.
    def step(compiled):
        kiln.manual_seed(0)
        m = kiln.nn.Sequential(kiln.nn.Linear(8, 16), kiln.nn.ReLU(), kiln.nn.Dropout(0.3), kiln.nn.Linear(16, 3))
        x, y = kiln.randn(32, 8), kiln.randint(0, 3, (32,))
        f = kiln.compile(lambda a: m(a)) if compiled else m
        out = f(x)
        kiln.nn.functional.cross_entropy(out, y).backward()
        return out.detach().numpy(), m[0].weight.grad.numpy(), kiln.rand(3).numpy()

    (out_e, grad_e, after_e), (out_c, grad_c, after_c) = step(False), step(True)
    np.testing.assert_array_equal(out_e, out_c)
    np.testing.assert_array_equal(after_e, after_c)
    # The compiled backward's kernels may round differently from eager's (1 ulp on AVX2-only
    # CPUs); a redrawn mask would change the gradient at O(1).
    np.testing.assert_allclose(grad_e, grad_c, rtol=1e-5, atol=1e-8)


def test_normal_function():
    assert_same(lambda T: [T.normal(T.zeros(20), 2.0), T.normal(1.0, T.ones(5) * 3), T.normal(2.0, 3.0, (17,)),
                           T.normal(T.arange(4.0), T.ones(4)), T.normal(T.zeros(3, 1), T.ones(1, 4))], 1)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        kiln.normal(kiln.zeros(3), -1.0)
    with pytest.raises(RuntimeError, match="do not broadcast"):
        kiln.normal(kiln.zeros(3), kiln.ones(4))
    g = kiln.Generator().manual_seed(3)
    np.testing.assert_array_equal(kiln.normal(kiln.zeros(20), 2.0, generator=g).numpy(),
                                  need_torch().normal(need_torch().zeros(20), 2.0,
                                                      generator=need_torch().Generator().manual_seed(3)).numpy())


def test_compiled_random_ops_with_tensor_inputs_draw_in_program_order():
    # multinomial and random_ have no prims decomposition; left in the compiled program they drew
    # after every hoisted draw (rand, randperm), so from the multinomial on every value differed.
    def f(T, w, x):
        T.manual_seed(1234)
        a = T.rand(3)
        m = T.multinomial(T.softmax(w * 2, -1), 3)
        z = T.zeros(4, dtype=T.int64)
        z.random_(0, 10)
        x.random_(0, 5)
        return a, m, T.randperm(5), z, x + 1, (w * 3).random_(0, 7), T.rand(2)

    w = np.random.default_rng(0).random((2, 6)).astype(np.float32)
    want = [t.numpy() for t in f(need_torch(), need_torch().from_numpy(w), need_torch().zeros(3))]
    got = kiln.compile(lambda w, x: f(kiln, w, x))(kiln.from_numpy(w), kiln.zeros(3))
    for g, e in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), e)



def test_compiled_in_place_draws_into_views_reach_their_buffer():
    # A hoisted in-place draw filled the draw graph's own copy: the buffer it was a view of kept
    # its zeros in the compiled program (sweep13 random_distributions).
    def f(T, x):
        T.manual_seed(5)
        buf = T.zeros(4, 6)
        buf[:, ::2].exponential_(2.0)
        buf[1:3, 1::2].log_normal_(0.0, 0.25)
        t = T.zeros(3, 5).t()
        t.random_(0, 9)
        x.cauchy_()
        return buf, t, x * 1, T.rand(2)

    torch = need_torch()
    want = [t.numpy() for t in f(torch, torch.zeros(3))]
    got = kiln.compile(lambda x: f(kiln, x))(kiln.zeros(3))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w)

def test_compiled_random_write_into_an_input_read_before_is_refused():
    # The draws run before the compiled program: a random_ into an input that the program read
    # earlier cannot be hoisted, and the graph runs eagerly (strict: the backend error names it).
    def f(w):
        y = w * 2
        w.random_(0, 5)
        return y, w + 1

    old = kiln.config.strict
    kiln.config.strict = True
    try:
        with pytest.raises(Exception, match="random_.from draws into the graph input"):
            kiln.compile(f)(kiln.ones(3))
    finally:
        kiln.config.strict = old


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_exponential_cauchy_log_normal_geometric(dtype):
    # One double draw per element, transformed in double and cast (torch's CPU kernels); the
    # log-normal draws share the double normal cache with normal_ (odd counts carry a value over).
    def op(T):
        d = dt(T, dtype)
        return [T.empty(17, dtype=d).exponential_(), T.empty(3, 5, dtype=d).exponential_(2.5),
                T.empty(9, dtype=d).cauchy_(), T.empty(4, dtype=d).cauchy_(1.0, 0.5),
                T.empty(7, dtype=d).log_normal_(), T.empty(5, dtype=d).log_normal_(0.0, 0.25),
                T.empty(3, dtype=d).normal_(), T.empty(11, dtype=d).geometric_(0.3),
                T.zeros(4, 6, dtype=d).t().exponential_(0.5)]
    assert_same(op, 3)


def test_geometric_on_integers_and_poisson():
    assert_same(lambda T: [T.empty(20, dtype=T.int64).geometric_(0.2), T.empty(6, dtype=T.int32).geometric_(0.9),
                           T.empty(5, dtype=T.uint8).geometric_(0.5)], 1)
    # small rates multiply uniforms, rates from 10 take the transformed rejection method
    rates = np.array([[0.0, 0.5, 3.0, 9.99], [10.0, 25.0, 140.5, 1e4]], dtype=np.float32)
    assert_same(lambda T: [T.poisson(T.from_numpy(rates)), T.poisson(T.from_numpy(rates).double().t()),
                           T.poisson(T.from_numpy(rates).half()), T.rand(3)], 5)


def test_distribution_argument_errors():
    for call, message in [(lambda: kiln.empty(3).exponential_(0.0), "expects lambda > 0.0"),
                          (lambda: kiln.empty(3).geometric_(1.0), r"expects p to be in \(0, 1\)"),
                          (lambda: kiln.empty(3).cauchy_(0.0, -1.0), "expects sigma > 0.0"),
                          (lambda: kiln.empty(3).log_normal_(1.0, 0.0), "expects std > 0.0"),
                          (lambda: kiln.empty(3, dtype=kiln.int64).exponential_(), "must be a floating point"),
                          (lambda: kiln.poisson(kiln.tensor([1.0, -1.0])), "non-negative"),
                          (lambda: kiln.poisson(kiln.tensor([1, 2])), "poisson")]:
        with pytest.raises(RuntimeError, match=message):
            call()


def test_distributions_with_a_generator_and_compiled():
    torch = need_torch()
    got = kiln.empty(6).exponential_(generator=kiln.Generator().manual_seed(4))
    want = torch.empty(6).exponential_(generator=torch.Generator().manual_seed(4))
    np.testing.assert_array_equal(got.numpy(), want.numpy())

    def f(T, rates):
        T.manual_seed(9)
        return [T.rand(2), T.poisson(rates * 2), T.empty(3).exponential_(), T.zeros(4).log_normal_(), T.rand(2)]

    rates = np.array([1.0, 4.0, 30.0], dtype=np.float32)
    want = [t.numpy() for t in f(torch, torch.from_numpy(rates))]
    got = kiln.compile(lambda r: f(kiln, r))(kiln.from_numpy(rates))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w)


def test_manual_seed_inside_a_compiled_function_reseeds_at_every_call():
    # manual_seed ran once, while tracing, and was not part of the graph: the draws after a
    # second manual_seed continued the stream, and later calls did not reseed at all.
    def f():
        kiln.manual_seed(3)
        a = kiln.nn.functional.dropout(kiln.ones(16), 0.5, True)
        kiln.manual_seed(3)
        b = kiln.rand(4)
        state = kiln.get_rng_state()
        c = kiln.rand(4)
        kiln.set_rng_state(state)
        return a, b, c, kiln.rand(4)

    want = [t.numpy() for t in f()]
    kiln.compiler.reset()
    compiled = kiln.compile(f)
    for _ in range(2):
        kiln.rand(5)  # the stream moves between calls: each call starts from its own seed
        for g, w in zip(compiled(), want):
            np.testing.assert_array_equal(g.numpy(), w)
    reasons = [str(r) for r in kiln.explain(f)().break_reasons]
    assert any("manual_seed" in r for r in reasons), reasons
