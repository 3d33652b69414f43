"""Frame capture, one program per bytecode instruction family: compiled results equal eager
results, and each program is captured whole (one graph, no graph break).

Every program is `build(T) -> (fn, calls)` for a tensor library `T`; the `lib` fixture runs
it with torch (torch.compile, the reference) and with kiln (kiln.compile).
"""
import math

import pytest

from capture_lib import Call, assert_plain_equal, check_compiles, has_autograd, lib, to_plain  # noqa: F401  (lib: fixture)

PROGRAMS = {}


def program(build):
    PROGRAMS[build.__name__] = build
    return build


# Module-level names read through LOAD_GLOBAL.
SCALE = 1.5
OFFSETS = (1.0, 2.0, 3.0)


def global_helper(t, k):
    return t * k + SCALE


class Config:
    """An object whose attributes the programs read (LOAD_ATTR on a user object)."""

    def __init__(self):
        self.alpha = 0.25
        self.depth = 3
        self.names = ("a", "b")


class Box:
    """A plain object created inside compiled frames (STORE_ATTR / LOAD_ATTR on it)."""

    def __init__(self, value):
        self.value = value


def rand(T, *shape, seed=0, dtype="float32", requires_grad=False):
    import numpy as np

    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    t = T.from_numpy(a)
    return t.requires_grad_() if requires_grad else t


def ints(T, *shape, seed=0, low=0, high=16):
    import numpy as np

    return T.from_numpy(np.random.default_rng(seed).integers(low, high, size=shape).astype("int64"))


# --- loads and stores ----------------------------------------------------------------------

@program
def fast_locals(T):
    def fn(x, y):
        a = x + y
        b = a * 2
        a = b - x  # rebinding a fast local
        c = a
        del b
        return c / 3

    return fn, [(rand(T, 4, 5), rand(T, 4, 5, seed=1))]


@program
def global_names(T):
    def fn(x):
        y = global_helper(x, OFFSETS[1])
        return y * SCALE + math.pi

    return fn, [(rand(T, 6),)]


@program
def deref_closure_cells(T):
    scale = 0.5
    shift = rand(T, 3, seed=7)  # a closure tensor

    def fn(x):
        return T.relu(x * scale + shift)

    return fn, [(rand(T, 2, 3),)]


@program
def deref_cells_of_the_frame(T):
    def fn(x):
        count = 0
        acc = x

        def step(t):
            nonlocal count  # STORE_DEREF into a cell of the compiled frame
            count += 1
            return t * 2 + count

        acc = step(acc)
        acc = step(acc)
        return acc, count

    return fn, [(rand(T, 5),)]


@program
def attribute_loads(T):
    cfg = Config()

    def fn(x):
        y = x * cfg.alpha
        for _ in range(cfg.depth):
            y = y.tanh()
        return y.sum(dim=0), len(cfg.names)

    return fn, [(rand(T, 3, 4),)]


@program
def attribute_stores(T):
    def fn(x):
        box = Box(x + 1)
        box.value = box.value * 2  # STORE_ATTR on an object made in the frame
        box.extra = 3
        return box.value + box.extra

    return fn, [(rand(T, 4),)]


# --- calls ---------------------------------------------------------------------------------

@program
def call_keywords(T):
    def weighted(t, *, w=1.0, b=0.0):
        return t * w + b

    def fn(x):
        s = T.sum(x, dim=1, keepdim=True)
        m = x.mean(dim=0)
        y = weighted(x, b=1.0, w=2.0)
        z = T.softmax(input=x, dim=-1)
        return s, m, y, z

    return fn, [(rand(T, 3, 4),)]


@program
def call_star_args_kwargs(T):
    def combine(*ts, scale=1.0, **opts):
        out = ts[0]
        for t in ts[1:]:
            out = out + t
        if opts.get("negate", False):
            out = -out
        return out * scale

    def fn(x, y):
        parts = [x, y, x * y]
        kw = {"scale": 0.5, "negate": True}
        a = combine(*parts, **kw)  # CALL_FUNCTION_EX with both
        b = combine(x, *parts[1:])
        c = combine(*(x, y), scale=2.0)
        return a, b, c

    return fn, [(rand(T, 4), rand(T, 4, seed=1))]


@program
def call_star_args_of_the_frame(T):
    def fn(x, *rest, scale=1.0, **named):
        out = x
        for t in rest:
            out = out + t
        for k in sorted(named):
            out = out * named[k]
        return out * scale

    x, y, z = rand(T, 3), rand(T, 3, seed=1), rand(T, 3, seed=2)
    return fn, [Call(x, y, z, scale=2.0, b=0.5, a=3.0), Call(x), Call(x, y, a=2.0)]


@program
def call_helpers_several_levels(T):
    def level3(t):
        return t.exp() - 1

    def level2(t, k):
        return level3(t * k) + k

    def level1(t):
        return level2(t, 2.0) + level2(t, 0.5)

    def fn(x):
        return level1(T.sin(x))

    return fn, [(rand(T, 8),)]


@program
def call_defaults(T):
    def fn(x, k=2, *, bias=0.5, mode="add"):
        y = x * k
        return y + bias if mode == "add" else y - bias

    x = rand(T, 3)
    return fn, [(x,), (x, 3), Call(x, bias=1.0, mode="sub"), Call(x=x, k=4)]


# --- operators -----------------------------------------------------------------------------

@program
def binary_ops_float(T):
    def fn(x, y, w):
        return (x + y, x - y, x * y, x / (y.abs() + 1), x // 2, x % 3, x ** 2, x @ w,
                2 - x, 3 / (x.abs() + 1), 2 ** x)

    return fn, [(rand(T, 4, 5), rand(T, 4, 5, seed=1), rand(T, 5, 2, seed=2))]


@program
def binary_ops_int(T):
    def fn(a, b):
        return a & b, a | b, a ^ b, a << 1, a >> 1, a // 3, a % 5, -a, ~a

    return fn, [(ints(T, 6), ints(T, 6, seed=1))]


@program
def binary_ops_python_numbers(T):
    def fn(x, n, f):
        m = n * 3 + 1 - n // 2 + n % 3 + (n << 1) + (n ^ 1)
        g = f * 2.0 - f / 4 + f ** 2
        return x * m + g, m, g

    return fn, [(rand(T, 3), 5, 0.75)]


@program
def unary_ops(T):
    def fn(x, b, flag):
        return -x, +x, ~b, abs(x), (not flag), x.neg()

    x = rand(T, 5)
    return fn, [(x, x > 0, False)]


@program
def compare_ops(T):
    def fn(x, y, n):
        masks = (x < y, x <= y, x == y, x != y, x > y, x >= y, x > 0.5)
        if n < 3 and n != 0 and n >= 1:  # comparisons of constants decide the branch
            out = x + y
        else:
            out = x - y
        return masks, out, n == 2, n > 1

    return fn, [(rand(T, 6), rand(T, 6, seed=1), 2)]


@program
def is_and_contains(T):
    def fn(x, bias=None, mode="relu"):
        y = x if bias is None else x + bias
        if bias is not None:
            y = y * 2
        if mode in ("relu", "gelu"):
            y = T.relu(y)
        if "sig" not in mode:
            y = y + 1
        keys = {"a": 1, "b": 2}
        return y, "a" in keys, 3 in [1, 2, 3]

    x = rand(T, 4)
    return fn, [(x,), (x, rand(T, 4, seed=2))]


@program
def inplace_operators(T):
    def fn(x, y):
        z = x * 1
        z += y  # in-place on a tensor made in the frame
        z *= 2
        z -= x
        z /= 4
        n = 1
        n += 2  # in-place operators on ints and lists
        n *= 3
        parts = [z]
        parts += [z + 1]
        t = (x,)
        t += (y,)
        return z, n, parts, t

    return fn, [(rand(T, 3, 3), rand(T, 3, 3, seed=1))]


@program
def tensor_inplace_methods(T):
    def fn(x):
        y = x.clone()
        y.mul_(2).add_(1)
        y.relu_()
        y.clamp_(max=2.0)
        return y

    return fn, [(rand(T, 10),)]


# --- containers ----------------------------------------------------------------------------

@program
def container_literals(T):
    def fn(x, y):
        t = (x, y, 1)
        lst = [x, y]
        lst.append(x + y)
        lst.extend([x * 2])
        lst.insert(0, y * 3)
        popped = lst.pop()
        d = {"x": x, "y": y}
        d["sum"] = x + y
        d.update({"prod": x * y})
        s = {1, 2, 3}
        s.add(4)
        return t, lst, popped, d, len(s), sorted(s)

    return fn, [(rand(T, 2), rand(T, 2, seed=1))]


@program
def container_unpacking(T):
    def fn(xs):
        a, b, c = xs
        first, *rest = xs
        *init, last = xs
        (p, q), r = (a, b), c
        d = {"k": a}
        (key, val), = d.items()
        merged = [*rest, *init]
        kw = {**d, "z": c}
        return a + b + c, first, rest, init, last, p * q + r, key, val, merged, kw

    return fn, [((rand(T, 3), rand(T, 3, seed=1), rand(T, 3, seed=2)),)]


@program
def list_slicing(T):
    def fn(xs):
        ys = xs[1:]
        zs = xs[::-1]
        ws = xs[:-1]
        mid = xs[1:3]
        head = xs[0]
        cp = xs[:]
        cp[0] = head * 10  # STORE_SUBSCR into a list made in the frame
        return ys, zs, ws, mid, cp, T.stack(xs[::2])

    return fn, [([rand(T, 2, seed=i) for i in range(4)],)]


@program
def tensor_subscripts(T):
    def fn(x):
        return x[0], x[1:, ::2], x[..., -1], x[:, None], x[1][2]

    return fn, [(rand(T, 4, 6),)]


# --- loops ---------------------------------------------------------------------------------

@program
def loops_range_list_tuple(T):
    def fn(x, ws, bs):
        y = x
        for i in range(3):
            y = y + i
        for w in ws:
            y = y * w
        for b in bs:
            y = y - b
        for i in range(len(ws) - 1, -1, -1):
            y = y + ws[i]
        n = 0
        while n < 3:
            y = y.sin()
            n += 1
        return y

    return fn, [(rand(T, 3), [rand(T, 3, seed=1), rand(T, 3, seed=2)], (0.5, 1.5))]


@program
def loops_dict(T):
    def fn(d):
        total = None
        for k in d:
            total = d[k] if total is None else total + d[k]
        names = []
        for k, v in d.items():
            names.append(k)
            total = total + v.sum()
        for k in d.keys():
            total = total * 1.5
        vals = [v for v in d.values()]
        return total, names, len(vals)

    return fn, [({"a": rand(T, 2), "b": rand(T, 2, seed=1), "c": rand(T, 2, seed=2)},)]


@program
def loops_enumerate_zip(T):
    def fn(xs, ws):
        out = []
        for i, x in enumerate(xs):
            out.append(x * i)
        for i, x in enumerate(xs, start=1):
            out.append(x + i)
        for x, w in zip(xs, ws):
            out.append(x * w)
        for i, (x, w) in enumerate(zip(xs, ws)):
            out.append(x - w + i)
        return out

    return fn, [([rand(T, 2, seed=i) for i in range(3)], [0.5, 1.0, 2.0])]


@program
def loops_break_continue(T):
    def fn(x):
        y = x
        for i in range(10):
            if i % 2 == 0:
                continue
            if i > 6:
                break
            y = y + i
        else:
            y = y * 100  # not reached: the loop breaks
        return y

    return fn, [(rand(T, 4),)]


# --- jumps ---------------------------------------------------------------------------------

@program
def constant_condition_jumps(T):
    def fn(x, flag, n, mode):
        y = x * 2 if flag else x / 2  # ternary
        if flag and n > 2:
            y = y + 1
        if not flag or n == 0:
            y = y - 1
        a = n > 1 and mode  # and/or return an operand
        b = (n < 0) or mode
        c = None or 3
        if mode == "double":
            y = y * 2
        elif mode == "half":
            y = y * 0.5
        else:
            y = -y
        return y, a, b, c

    x = rand(T, 3)
    return fn, [(x, True, 3, "double"), (x, False, 0, "half"), (x, True, 1, "other")]


@program
def tensor_attribute_branches(T):
    def fn(x):
        if x.ndim == 2 and x.shape[0] > 2:
            y = x.sum(dim=0)
        else:
            y = x.flatten()
        if x.dtype == T.float32:
            y = y * 2
        if x.is_floating_point():
            y = y + 1
        if x.device.type == "cpu":
            y = y - 3
        if x.numel() > 100:
            y = y * 0
        return y, x.size(1), x.dim()

    return fn, [(rand(T, 3, 4),)]


# --- grad modes ----------------------------------------------------------------------------

@program
def grad_mode_blocks(T):
    def fn(x, w):
        modes = [T.is_grad_enabled()]
        a = x * w  # requires grad
        with T.no_grad():
            b = x * w  # does not
            modes.append(T.is_grad_enabled())
            with T.enable_grad():
                c = x * w  # does again
                modes.append(T.is_grad_enabled())
        with T.set_grad_enabled(False):
            d = a + 1
            modes.append(T.is_grad_enabled())
        e = b + c
        modes.append(T.is_grad_enabled())
        return a, b, c, d, e, modes

    return fn, [(rand(T, 3), rand(T, 3, seed=1, requires_grad=True))]


@program
def grad_mode_no_grad_inputs(T):
    def fn(x):
        with T.no_grad():
            y = x.exp()
        return y, y.requires_grad

    return fn, [(rand(T, 4),), (rand(T, 4, requires_grad=True),)]


# --- strings, comprehensions, closures -----------------------------------------------------

@program
def f_strings(T):
    def fn(x, n):
        out = {}
        for i in range(n):
            out[f"layer{i}"] = x * i
        name = f"{x.shape[0]}x{x.ndim}:{n:03d}"
        out[name] = x.sum()
        return out, f"{SCALE!r}-{n}"

    return fn, [(rand(T, 2), 3)]


@program
def comprehensions(T):
    def fn(xs, x):
        sq = [t * t for t in xs]
        pos = [t for t in xs if t.ndim == 1]
        by_name = {f"t{i}": t + i for i, t in enumerate(xs)}
        total = sum(t.sum() for t in xs)
        parts = tuple(T.relu(t) for t in xs)
        scaled = sum([x * k for k in range(4)])
        nested = [[x * i * j for j in range(2)] for i in range(2)]
        return sq, pos, by_name, total, parts, scaled, nested

    return fn, [([rand(T, 3, seed=i) for i in range(3)], rand(T, 3, seed=5))]


@program
def nested_functions_and_lambdas(T):
    def fn(x, k):
        def affine(t, a=2.0):
            return t * a + k  # reads k from the frame's cell

        square = lambda t: t * t  # noqa: E731
        act = (lambda t: T.relu(t)) if k > 0 else (lambda t: -t)

        def make_adder(c):
            return lambda t: t + c

        add3 = make_adder(3.0)
        return act(square(affine(x))), add3(x), list(map(square, [x, x + 1]))

    return fn, [(rand(T, 4), 1.5)]


@program
def closures_from_outside(T):
    def make(scale):
        weights = [rand(T, 3, seed=i) for i in range(2)]

        def fn(x):
            y = x
            for w in weights:
                y = y * w * scale
            return y

        return fn

    return make(0.5), [(rand(T, 3, seed=9),)]


@program
def builtins_on_constants(T):
    def fn(x, xs, vals):
        n = len(xs) + len(vals)
        big = max(vals)
        small = min(vals[0], vals[1])
        tot = sum(vals)
        order = sorted(vals, reverse=True)
        a = abs(-3)
        r = math.sqrt(16.0) + math.log(math.e) + math.floor(2.7) + math.cos(0.0)
        ok = isinstance(x, T.Tensor) and isinstance(n, int) and not isinstance(big, str)
        idx = list(range(n))
        return x * n + big + small + tot + a + r, order, ok, idx, round(2.567, 2), int(3.9), float(n)

    return fn, [(rand(T, 2), [rand(T, 2)], [3.0, 1.0, 2.0])]


# -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program(lib, name):  # noqa: F811
    fn, calls = PROGRAMS[name](lib.T)
    check_compiles(lib, fn, calls)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_eager_kiln_matches_torch(name):
    """Each program runs eagerly on kiln with torch's results: the programs themselves are
    right for both libraries, whatever the compiler does."""
    torch = pytest.importorskip("torch")
    import kiln

    fn_t, calls_t = PROGRAMS[name](torch)
    fn_k, calls_k = PROGRAMS[name](kiln)
    for i, (ct, ck) in enumerate(zip(calls_t, calls_k)):
        ct, ck = Call.of(ct), Call.of(ck)
        exp = to_plain(fn_t(*ct.args, **ct.kwargs))
        got = to_plain(fn_k(*ck.args, **ck.kwargs))
        assert_plain_equal(got, exp, where=f"call{i}", check_grad=has_autograd(kiln))
