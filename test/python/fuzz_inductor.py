"""Differential fuzzer for the inductor backend: random tier-1 programs written once against a
module T, run with torch (the oracle), kiln eager and kiln.compile (strict), compared on values,
dtypes, shapes and the inputs after the call.  Usage: python fuzz_inductor.py --seed S --count N

Seeds from DYNAMIC_SEEDS (2,000,000) draw symbolic sizes: the program is compiled once with
dynamic=True and called at its sizes and at two other sizes (each input dim of size >= 2 mapped
to a new size, equal sizes to equal sizes), each call compared to torch at that size.
"""
import argparse
import random
import sys
import traceback

import numpy as np

FLOAT_DTYPES = ["float32", "float32", "float32", "float64", "float16", "bfloat16"]
INT_DTYPES = ["int64", "int32", "int8", "uint8", "int16"]

# Per-dtype (rtol, atol): looser than the per-op oracle because errors compound along a chain.
TOL = {"float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2), "float32": (1e-4, 1e-4), "float64": (1e-9, 1e-9)}


class Var:
    def __init__(self, name, shape, kind):
        self.name, self.shape, self.kind = name, tuple(shape), kind


class Gen:
    """Builds one program: a list of statements over a pool of variables with known shapes and
    kinds ('f' float, 'i' integer, 'b' bool); shapes are tracked so most views are valid."""

    def __init__(self, rng, indexing=False):
        self.r = rng
        self.indexing = indexing  # also generate indexing ops (op_index)
        # The values op_index made (by number): all returned, so that an out-of-range index is
        # never dead code (which a compiler may drop with its error, as torch.compile does).
        self.index_outs = []
        self.lines = []
        self.pool = []
        self.inputs = []  # (name, shape, dtype, layout)
        self.n = 0

    def fresh(self):
        self.n += 1
        return f"v{self.n}"

    def rand_shape(self):
        r = self.r
        nd = r.choice([0, 1, 1, 2, 2, 2, 3, 3, 4])
        return tuple(r.choice([1, 2, 3, 4, 5, 7, 8, 0 if r.random() < 0.08 else 6]) for _ in range(nd))

    def add_input(self, shape=None, kind=None):
        r = self.r
        shape = self.rand_shape() if shape is None else shape
        kind = kind or r.choice("fffffib")
        dtype = {"f": r.choice(FLOAT_DTYPES), "i": r.choice(INT_DTYPES), "b": "bool"}[kind]
        layout = r.choice(["c", "c", "t", "s"]) if len(shape) >= 2 else r.choice(["c", "c", "s"]) if len(shape) == 1 else "c"
        name = f"x{len(self.inputs)}"
        self.inputs.append((name, shape, dtype, layout))
        v = Var(name, shape, kind)
        self.pool.append(v)
        return v

    def emit(self, expr, shape, kind):
        name = self.fresh()
        self.lines.append(f"{name} = {expr}")
        v = Var(name, shape, kind)
        self.pool.append(v)
        return v

    def pick(self, kind=None):
        c = [v for v in self.pool if kind is None or v.kind in kind]
        return self.r.choice(c) if c else self.add_input(kind=kind[0])

    def scalar(self, kind):
        r = self.r
        if kind == "i" or r.random() < 0.3:
            return str(r.randint(-3, 3))
        return repr(round(r.uniform(-2, 2), 2))

    def dim(self, nd):
        return self.r.randint(-nd, nd - 1) if nd else None

    # --- op families --------------------------------------------------------------------
    def op_unary(self):
        v = self.pick("f")
        if v is None:
            return
        op = self.r.choice(["abs", "neg", "exp", "sin", "cos", "tanh", "sigmoid", "floor", "ceil",
                            "round", "trunc", "sign", "square", "erf", "atan", "expm1", "relu",
                            "log1p_abs", "sqrt_abs", "rsqrt_abs", "reciprocal_safe", "isnan",
                            "nan_to_num", "clamp", "clamp_min", "exp2", "sinh", "log_abs"])
        n = v.name
        kind = "f"
        if op.endswith("_abs"):
            expr = f"T.{op[:-4]}(T.abs({n}) + 0.5)"
        elif op == "reciprocal_safe":
            expr = f"T.reciprocal(T.abs({n}) + 1)"
        elif op == "isnan":
            expr, kind = f"T.isnan({n})", "b"
        elif op == "clamp":
            expr = f"T.clamp({n}, -0.5, 0.75)"
        elif op == "clamp_min":
            expr = f"{n}.clamp(min=-0.25)"
        elif op == "relu":
            expr = f"T.nn.functional.relu({n})"
        else:
            expr = f"T.{op}({n})"
        self.emit(expr, v.shape, kind)

    def broadcast_partner(self, v, kind):
        """A variable (or new input) whose shape broadcasts with v's."""
        r = self.r
        same = [w for w in self.pool if w.shape == v.shape and w.kind in kind]
        if same and r.random() < 0.6:
            return r.choice(same)
        shape = list(v.shape)
        if shape and r.random() < 0.5:
            shape = shape[r.randint(0, len(shape) - 1):]  # a suffix broadcasts
        shape = [1 if r.random() < 0.3 else s for s in shape]
        return self.add_input(tuple(shape), r.choice(kind))

    def op_binary(self):
        r = self.r
        v = self.pick("fib")
        op = r.choice(["add", "sub", "mul", "div", "maximum", "minimum", "pow", "atan2", "eq", "lt",
                       "ge", "ne", "floor_divide", "remainder", "fmod", "logical_and",
                       "bitwise_and", "bitwise_xor", "true_divide", "div_floor", "div_trunc"])
        scalar = r.random() < 0.3
        if scalar:
            rhs, shape = self.scalar(r.choice("fi")), v.shape
        else:
            w = self.broadcast_partner(v, "fib" if v.kind == "b" else "fi")
            rhs = w.name
            shape = bshape(v.shape, w.shape)
        if op in ("floor_divide", "remainder", "fmod", "div_floor", "div_trunc", "div", "true_divide", "pow"):
            # Integer division by zero traps; float pow of negatives gives NaN everywhere.
            if v.kind != "f":
                return
            rhs = f"(T.abs({rhs}) + 1)" if not scalar else str(abs(float(rhs)) + 1)
        kind = "b" if op in ("eq", "lt", "ge", "ne", "logical_and") else v.kind if v.kind != "b" else "i"
        if op == "pow":
            expr = f"T.pow(T.abs({v.name}) + 0.1, {rhs})"
            kind = "f"
        elif op == "div_floor":
            expr, kind = f"T.div({v.name}, {rhs}, rounding_mode='floor')", "f"
        elif op == "div_trunc":
            expr, kind = f"T.div({v.name}, {rhs}, rounding_mode='trunc')", "f"
        elif op in ("bitwise_and", "bitwise_xor"):
            if v.kind == "f":
                return
            expr = f"T.{op}({v.name}, {rhs})"
        elif op == "atan2" and scalar:
            return
        else:
            expr = f"T.{op}({v.name}, {rhs})"
        if op in ("div", "true_divide"):
            kind = "f"
        if r.random() < 0.3 and op in ("add", "sub", "mul"):
            sym = {"add": "+", "sub": "-", "mul": "*"}[op]
            expr = f"({v.name} {sym} {rhs})" if r.random() < 0.5 or not scalar else f"({rhs} {sym} {v.name})"
        self.emit(expr, shape, kind)

    def op_reduce(self):
        r = self.r
        v = self.pick("fi" if r.random() < 0.8 else "fib")
        nd = len(v.shape)
        op = r.choice(["sum", "mean", "amax", "amin", "prod", "max_dim", "argmax", "var", "std",
                       "logsumexp", "norm", "all", "any", "sum_all", "mean_dims", "min_dim"])
        keep = r.random() < 0.4
        d = self.dim(nd)
        if d is None and op not in ("sum_all", "all", "any", "amax", "sum"):
            op = "sum_all"
        out = list(v.shape)
        if d is not None:
            if keep:
                out[d] = 1
            else:
                del out[d]
        kind = "f" if op in ("mean", "var", "std", "logsumexp", "norm", "mean_dims") else v.kind
        if op in ("sum", "prod") and v.kind == "b":
            kind = "i"
        n = v.name
        if op in ("var", "std", "logsumexp", "norm", "mean", "mean_dims") and v.kind != "f":
            n = f"{n}.float()"
        if op == "sum_all":
            self.emit(f"{n}.sum()", (), "i" if v.kind == "b" else v.kind)
            return
        if op in ("all", "any"):
            if d is None:
                self.emit(f"T.{op}({n})", (), "b")
            else:
                self.emit(f"T.{op}({n}, dim={d}, keepdim={keep})", out, "b")
            return
        if op == "mean_dims" and nd >= 2:
            dims = sorted(set([self.dim(nd), self.dim(nd)]), key=lambda x: x % nd)
            if len({x % nd for x in dims}) != len(dims):
                dims = dims[:1]
            out = [1 if (i in [x % nd for x in dims]) else s for i, s in enumerate(v.shape)]
            if not keep:
                out = [s for i, s in enumerate(v.shape) if i not in [x % nd for x in dims]]
            self.emit(f"{n}.mean(dim={tuple(dims)}, keepdim={keep})", out, "f")
            return
        if op == "mean_dims":
            op = "mean"
        if op in ("max_dim", "min_dim"):
            fn = op[:3]
            self.emit(f"T.{fn}({n}, dim={d}, keepdim={keep})[{r.randint(0, 1)}]", out, kind)
            return
        if op == "argmax":
            self.emit(f"T.argmax({n}, dim={d}, keepdim={keep})", out, "i")
            return
        if op in ("var", "std"):
            corr = r.choice(["", ", correction=0", ", unbiased=False", ", correction=1"])
            self.emit(f"T.{op}({n}, dim={d}{corr}, keepdim={keep})", out, "f")
            return
        if op == "norm":
            self.emit(f"T.norm({n}, dim={d}, keepdim={keep})", out, "f")
            return
        if op == "logsumexp":
            self.emit(f"T.logsumexp({n}, dim={d}, keepdim={keep})", out, "f")
            return
        if op == "prod":
            n = f"T.clamp({n}, -2, 2)" if v.kind != "b" else n
        self.emit(f"T.{op}({n}, dim={d}, keepdim={keep})", out, kind)

    def op_norm(self):
        r = self.r
        v = self.pick("f")
        if v is None or not v.shape:
            return
        d = self.dim(len(v.shape))
        op = r.choice(["softmax", "log_softmax", "layer_norm", "softmax_m", "gelu", "silu"])
        if op == "softmax":
            self.emit(f"T.softmax({v.name}, dim={d})", v.shape, "f")
        elif op == "softmax_m":
            self.emit(f"{v.name}.softmax({d})", v.shape, "f")
        elif op == "log_softmax":
            self.emit(f"T.nn.functional.log_softmax({v.name}, dim={d})", v.shape, "f")
        elif op == "gelu":
            a = r.choice(["'none'", "'tanh'"])
            self.emit(f"T.nn.functional.gelu({v.name}, approximate={a})", v.shape, "f")
        elif op == "silu":
            self.emit(f"T.nn.functional.silu({v.name})", v.shape, "f")
        else:
            last = v.shape[-1]
            if r.random() < 0.5:
                w = self.add_input((last,), "f")
                b = self.add_input((last,), "f")
                self.emit(f"T.nn.functional.layer_norm({v.name}, ({last},), {w.name}, {b.name})", v.shape, "f")
            else:
                self.emit(f"T.nn.functional.layer_norm({v.name}, ({last},))", v.shape, "f")

    def op_view(self):
        r = self.r
        v = self.pick()
        s, nd, n = list(v.shape), len(v.shape), v.name
        op = r.choice(["reshape", "flatten", "permute", "transpose", "t", "slice", "expand",
                       "squeeze", "unsqueeze", "select", "narrow", "contiguous", "getitem"])
        if op == "reshape":
            numel = int(np.prod(s)) if s else 1
            if numel == 0:
                return
            shape = rand_factor(r, numel)
            spelled = list(shape)
            if r.random() < 0.3:
                spelled[r.randrange(len(spelled))] = -1
            self.emit(f"{n}.reshape({tuple(spelled)})", shape, v.kind)
        elif op == "flatten":
            self.emit(f"{n}.flatten()", (int(np.prod(s)) if s else 1,), v.kind)
        elif op == "permute" and nd >= 2:
            p = list(range(nd))
            r.shuffle(p)
            self.emit(f"{n}.permute({tuple(p)})", [s[i] for i in p], v.kind)
        elif op in ("transpose", "t") and nd >= 2:
            a, b = r.sample(range(nd), 2)
            s[a], s[b] = s[b], s[a]
            if op == "t" and nd == 2:
                self.emit(f"{n}.t()", s, v.kind)
            else:
                self.emit(f"T.transpose({n}, {a}, {b})", s, v.kind)
        elif op == "slice" and nd >= 1:
            d = r.randrange(nd)
            start = r.randint(0, max(0, s[d] - 1))
            step = r.choice([1, 2, 3])
            stop = r.choice([None, s[d], max(s[d] - 1, 0), -1])
            idx = [":"] * d + [f"{start}:{'' if stop is None else stop}:{step}"]
            rng = range(*slice(start, stop, step).indices(s[d]))
            s[d] = len(rng)
            self.emit(f"{n}[{', '.join(idx)}]", s, v.kind)
        elif op == "expand":
            if nd and 1 in s:
                s = [r.choice([3, 4]) if x == 1 else x for x in s]
                self.emit(f"{n}.expand({tuple(s)})", s, v.kind)
            else:
                s = [r.choice([2, 3])] + s
                self.emit(f"{n}.expand({', '.join(map(str, s))})", s, v.kind)
        elif op == "squeeze":
            if r.random() < 0.5 or not nd:
                self.emit(f"{n}.squeeze()", [x for x in s if x != 1], v.kind)
            else:
                d = r.randrange(nd)
                if s[d] == 1:
                    del s[d]
                self.emit(f"{n}.squeeze({d})", s, v.kind)
        elif op == "unsqueeze":
            d = r.randint(-nd - 1, nd)
            s.insert(d % (nd + 1), 1)
            self.emit(f"T.unsqueeze({n}, {d})", s, v.kind)
        elif op == "select" and nd >= 1:
            d = r.randrange(nd)
            if s[d] == 0:
                return
            i = r.randint(-s[d], s[d] - 1)
            del s[d]
            self.emit(f"{n}.select({d}, {i})", s, v.kind)
        elif op == "narrow" and nd >= 1:
            d = r.randrange(nd)
            st = r.randint(0, s[d])
            ln = r.randint(0, s[d] - st)
            s[d] = ln
            self.emit(f"T.narrow({n}, {d}, {st}, {ln})", s, v.kind)
        elif op == "contiguous":
            self.emit(f"{n}.contiguous()", s, v.kind)
        elif op == "getitem" and nd >= 1:
            self.emit(f"{n}[None, ..., ::2]", [1] + s[:-1] + [(s[-1] + 1) // 2], v.kind)

    def op_cat(self):
        r = self.r
        v = self.pick()
        nd = len(v.shape)
        if r.random() < 0.5 and nd >= 1:
            d = r.randrange(nd)
            s2 = list(v.shape)
            s2[d] = r.choice([0, 1, 2, 3])
            w = self.add_input(tuple(s2), v.kind)
            out = list(v.shape)
            out[d] += s2[d]
            self.emit(f"T.cat([{v.name}, {w.name}], dim={d})", out, v.kind)
        else:
            same = [w for w in self.pool if w.shape == v.shape and w.kind == v.kind]
            w = r.choice(same)
            d = r.randint(0, nd)
            out = list(v.shape)
            out.insert(d, 2)
            self.emit(f"T.stack([{v.name}, {w.name}], {d})", out, v.kind)

    def op_matmul(self):
        r = self.r
        v = self.pick("f")
        if v is None or len(v.shape) not in (1, 2, 3):
            return
        s = v.shape
        k = s[-1]
        op = r.choice(["matmul", "mm", "at", "addmm", "bmm", "mv"])
        dt_match = f".to({v.name}.dtype)"
        if op in ("mm", "addmm") and len(s) == 2:
            n = r.choice([1, 3, 4, 8])
            w = self.add_input((k, n), "f")
            if op == "mm":
                self.emit(f"T.mm({v.name}, {w.name}{dt_match})", (s[0], n), "f")
            else:
                b = self.add_input((n,), "f")
                self.emit(f"T.addmm({b.name}{dt_match}, {v.name}, {w.name}{dt_match})", (s[0], n), "f")
        elif op == "bmm" and len(s) == 3:
            n = r.choice([1, 3, 5])
            w = self.add_input((s[0], k, n), "f")
            self.emit(f"T.bmm({v.name}, {w.name}{dt_match})", (s[0], s[1], n), "f")
        elif op == "mv" and len(s) == 2:
            w = self.add_input((k,), "f")
            self.emit(f"T.mv({v.name}, {w.name}{dt_match})", (s[0],), "f")
        else:
            n = r.choice([2, 3, 6])
            w = self.add_input((k, n), "f")
            sym = "@" if op == "at" else None
            out = s[:-1] + (n,)
            if sym:
                self.emit(f"({v.name} @ {w.name}{dt_match})", out, "f")
            else:
                self.emit(f"T.matmul({v.name}, {w.name}{dt_match})", out, "f")

    def op_where(self):
        r = self.r
        v = self.pick("fi")
        c = self.broadcast_partner(v, "b")
        shape = bshape(v.shape, c.shape)
        if r.random() < 0.5:
            self.emit(f"T.where({c.name}, {v.name}, {self.scalar(v.kind)})", shape, v.kind)
        else:
            self.emit(f"{v.name}.masked_fill({c.name}, {self.scalar(v.kind)})", shape, v.kind)

    def op_cast(self):
        r = self.r
        v = self.pick()
        to = r.choice(["float", "double", "half", "bfloat16", "long", "int", "bool", "to_f16", "to_i8"])
        kind = {"long": "i", "int": "i", "bool": "b", "to_i8": "i"}.get(to, "f")
        if to == "to_f16":
            self.emit(f"{v.name}.to(T.float16)", v.shape, "f")
        elif to == "to_i8":
            src = f"T.clamp({v.name}, -100, 100)" if v.kind == "f" else v.name
            self.emit(f"{src}.to(T.int8)", v.shape, "i")
        else:
            self.emit(f"{v.name}.{to}()", v.shape, kind)

    def op_inplace(self):
        r = self.r
        v = self.pick("f")
        if v is None:
            return
        target = r.choice(["clone", "input", "view", "input_view"])
        op = r.choice(["add_", "mul_", "sub_", "clamp_", "zero_", "fill_", "relu_", "copy_", "setitem"])
        if target == "clone":
            t = self.emit(f"{v.name}.clone()", v.shape, "f")
            base = t
        elif target in ("input", "input_view"):
            ins = [w for w in self.pool if w.name.startswith("x") and w.kind == "f"]
            if not ins:
                return
            base = t = r.choice(ins)
            if target == "input_view" and t.shape:
                # A strided or transposed window of an input: the write reaches the caller.
                if len(t.shape) >= 2 and r.random() < 0.5:
                    t = self.emit(f"{t.name}.t()" if len(t.shape) == 2 else f"{t.name}.transpose(0, 1)",
                                  (t.shape[1], t.shape[0]) + t.shape[2:], "f")
                else:
                    t = self.emit(f"{t.name}[1::2]", ((t.shape[0]) // 2,) + t.shape[1:], "f")
        else:
            t0 = self.emit(f"{v.name}.clone()", v.shape, "f")
            base = t0
            if not t0.shape or t0.shape[0] == 0:
                t = t0
            else:
                t = self.emit(f"{t0.name}[{r.randrange(t0.shape[0])}]", t0.shape[1:], "f")
        n = t.name
        if op in ("add_", "mul_", "sub_"):
            if r.random() < 0.5:
                self.lines.append(f"{n}.{op}({self.scalar('f')})")
            else:
                w = self.broadcast_partner(t, "f")
                # x.t().sub_(x) reads what it writes: torch's result depends on its loop order.
                if bshape(t.shape, w.shape) != t.shape or (t is not base and w.name == base.name):
                    return
                self.lines.append(f"{n}.{op}({w.name})")
        elif op == "clamp_":
            self.lines.append(f"{n}.clamp_(-1, 1)")
        elif op == "zero_":
            self.lines.append(f"{n}.zero_()")
        elif op == "fill_":
            self.lines.append(f"{n}.fill_({self.scalar('f')})")
        elif op == "relu_":
            self.lines.append(f"{n}.relu_()")
        elif op == "copy_":
            w = self.broadcast_partner(t, "fi")
            if bshape(t.shape, w.shape) != t.shape:
                return
            self.lines.append(f"{n}.copy_({w.name})")
        elif op == "setitem" and t.shape:
            self.lines.append(f"{n}[{r.randrange(max(t.shape[0], 1))}:] = {self.scalar('f')}")
        self.pool.append(Var(base.name, base.shape, "f"))

    def index_tensor(self, shape, n, mode):
        """An int64 index expression of `shape` computed from a new integer input: values in
        [0, n) ('in'), [-n, n) ('wrap': negatives count from the end where the op allows
        them) or [0, n] ('bad': n is out of range, drawn for some elements only)."""
        x = self.add_input(tuple(shape), "i")
        if mode == "wrap":
            return f"(T.remainder({x.name}, {2 * n}) - {n}).to(T.int64)"
        return f"T.remainder({x.name}, {n + 1 if mode == 'bad' else n}).to(T.int64)"

    def op_index(self):
        """Reads and writes through index tensors (gather, index_select, embedding, advanced
        indexing, scatter, scatter_add, index_put) and the index-permuting views (flip, roll,
        cumsum), with indices sometimes negative or out of range: the compiled program must
        raise exactly when eager does."""
        r = self.r
        v = self.pick("f")
        if not v.shape or 0 in v.shape:
            return
        nd = len(v.shape)
        d = r.randrange(nd)
        n = v.shape[d]
        mode = r.choices(["in", "wrap", "bad"], [6, 2, 1])[0]
        op = r.choice(["gather", "index_select", "index", "index2", "embedding", "scatter_add",
                       "scatter_value", "index_put_acc", "index_put", "flip", "roll", "cumsum"])
        name = v.name
        self.index_outs.append(self.n + 1)  # the value emitted below is returned (see build)
        if op == "gather":
            shape = [r.randint(1, 5) if k == d else r.randint(1, s) for k, s in enumerate(v.shape)]
            self.emit(f"T.gather({name}, {d - nd if r.random() < 0.3 else d}, {self.index_tensor(shape, n, mode)})",
                      tuple(shape), "f")
        elif op == "index_select":
            m = r.randint(1, 5)
            shape = list(v.shape)
            shape[d] = m
            self.emit(f"T.index_select({name}, {d}, {self.index_tensor([m], n, mode)})", tuple(shape), "f")
        elif op == "index":
            ishape = [r.randint(1, 4) for _ in range(r.randint(1, 2))]
            self.emit(f"{name}[{self.index_tensor(ishape, v.shape[0], mode)}]", tuple(ishape) + v.shape[1:], "f")
        elif op == "index2":
            if nd < 2:
                return
            m = r.randint(1, 4)
            a = self.index_tensor([m], v.shape[0], mode)
            b = self.index_tensor([1 if r.random() < 0.3 else m], v.shape[1], mode)
            self.emit(f"{name}[{a}, {b}]", (m,) + v.shape[2:], "f")
        elif op == "embedding":
            if nd != 2:
                return
            ishape = [r.randint(1, 4) for _ in range(r.randint(1, 2))]
            self.emit(f"T.nn.functional.embedding({self.index_tensor(ishape, v.shape[0], mode)}, {name})",
                      tuple(ishape) + (v.shape[1],), "f")
        elif op in ("scatter_add", "scatter_value"):
            shape = [r.randint(1, s) for s in v.shape]
            idx = self.index_tensor(shape, n, mode)
            if op == "scatter_add":
                src = self.add_input(tuple(shape), "f")
                self.emit(f"T.scatter_add({name}, {d}, {idx}, {src.name}.to({name}.dtype))", v.shape, "f")
            else:
                self.emit(f"T.scatter({name}, {d}, {idx}, {self.scalar('f')})", v.shape, "f")
        elif op in ("index_put_acc", "index_put"):
            m = r.randint(1, 5)
            idx = self.index_tensor([m], v.shape[0], mode)
            if op == "index_put_acc":
                vals = self.add_input((m,) + v.shape[1:], "f")
                self.emit(f"T.index_put({name}, ({idx},), {vals.name}.to({name}.dtype), True)", v.shape, "f")
            else:
                # One value for every element written: duplicate indices write the same thing.
                self.emit(f"T.index_put({name}, ({idx},), T.full({(m,) + v.shape[1:]}, 2.5).to({name}.dtype))",
                          v.shape, "f")
        elif op == "flip":
            self.emit(f"T.flip({name}, ({d},))", v.shape, "f")
        elif op == "roll":
            self.emit(f"T.roll({name}, {r.randint(-3, 3)}, {d})", v.shape, "f")
        else:
            self.emit(f"T.cumsum({name}, {d})", v.shape, "f")

    def build(self):
        r = self.r
        for _ in range(r.randint(1, 2)):
            self.add_input()
        fams = [self.op_unary, self.op_binary, self.op_binary, self.op_reduce, self.op_view,
                self.op_view, self.op_norm, self.op_cat, self.op_matmul, self.op_where,
                self.op_cast, self.op_inplace]
        if self.indexing:
            fams += [self.op_index] * 4
        for _ in range(r.randint(2, 12)):
            r.choice(fams)()
        outs = [v for v in self.pool if not v.name.startswith("x")] or self.pool
        k = min(len(outs), r.randint(1, 3))
        made = {v.name for v in self.pool}
        chosen = list(dict.fromkeys([f"v{i}" for i in self.index_outs if f"v{i}" in made] +
                                    [v.name for v in outs[-k:]]))
        args = ", ".join(i[0] for i in self.inputs)
        body = "\n".join("    " + line for line in self.lines)
        ret = ", ".join(chosen) + ("," if len(chosen) == 1 and r.random() < 0.3 else "")
        return f"def f({args}):\n{body}\n    return {ret}\n"


def bshape(a, b):
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    return tuple(x if y == 1 else y for x, y in zip(a, b))


def rand_factor(r, numel):
    out = []
    rest = numel
    for p in (2, 3, 5, 7):
        while rest % p == 0 and r.random() < 0.6:
            out.append(p)
            rest //= p
    out.append(rest)
    r.shuffle(out)
    return out


# Seeds from here on also generate indexing ops (Gen.op_index); the programs of smaller seeds
# stay what they were.
INDEXING_SEEDS = 1_000_000
# Seeds from here on run at several sizes through one dynamic=True compile (odd ones with
# indexing ops).
DYNAMIC_SEEDS = 2_000_000


def generate(seed):
    """(source, input specs) of program `seed`."""
    indexing = seed % 2 == 1 if seed >= DYNAMIC_SEEDS else seed >= INDEXING_SEEDS
    g = Gen(random.Random(seed), indexing=indexing)
    src = g.build()
    return src, g.inputs


def make_arrays(inputs, seed):
    rng = np.random.default_rng(seed)
    arrays = []
    for _, shape, dtype, _ in inputs:
        if dtype == "bool":
            a = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif dtype in INT_DTYPES:
            a = rng.integers(0 if dtype == "uint8" else -5, 6, size=shape).astype(dtype)
        else:
            a = rng.uniform(-2, 2, size=shape).astype(np.float32 if dtype == "bfloat16" else dtype)
        arrays.append(a)
    return arrays


def materialize(lib, arrays, inputs):
    """Fresh tensors of `lib` (torch or kiln) for the inputs, in their layouts: 't' transposed
    views of a contiguous transpose, 's' every other element of a twice-as-long buffer."""
    out = []
    for a, (_, _, dtype, layout) in zip(arrays, inputs):
        if layout == "t":
            t = lib.from_numpy(np.swapaxes(a, -1, -2).copy())
            t = cast(lib, t, dtype).transpose(-1, -2)
        elif layout == "s":
            big = np.repeat(a, 2, axis=-1)
            t = cast(lib, lib.from_numpy(big.copy()), dtype)[..., ::2]
        else:
            t = cast(lib, lib.from_numpy(np.array(a, copy=True)), dtype)
        out.append(t)
    return out


def cast(lib, t, dtype):
    return t.to(lib.bfloat16) if dtype == "bfloat16" else t


def flatten(res):
    if isinstance(res, (tuple, list)):
        return [x for r in res for x in flatten(r)]
    return [res]


def to_np(x):
    if not hasattr(x, "dtype"):
        return np.array(x)
    name = str(x.dtype).split(".")[-1]
    if name == "bfloat16":
        x = x.float()
    return np.array(x.numpy(), copy=True)


def program_tolerance(src, inputs):
    """The loosest tolerance of the floating dtypes a program computes in: a float64 result of
    a float16 softmax carries float16's rounding (torch and kiln may round differently)."""
    names = {d for _, _, d, _ in inputs}
    for text, name in ((".half()", "float16"), ("float16", "float16"), ("bfloat16", "bfloat16"),
                       (".float()", "float32"), ("T.mean", "float32"), (".mean(", "float32"),
                       ("T.var", "float32"), ("T.std", "float32"), ("T.norm", "float32"),
                       ("T.logsumexp", "float32"), ("T.div", "float32"), ("true_divide", "float32")):
        if text in src:
            names.add(name)
    tols = [TOL[n] for n in names if n in TOL]
    return (max(t[0] for t in tols), max(t[1] for t in tols)) if tols else (0.0, 0.0)


def compare(got, want, floor=(0.0, 0.0)):
    """None when `got` (kiln) matches `want` (torch); else a description of the difference.
    Floating results are compared with their dtype's tolerance, at least `floor`."""
    g, w = flatten(got), flatten(want)
    if len(g) != len(w):
        return f"{len(g)} results, expected {len(w)}"
    for i, (a, b) in enumerate(zip(g, w)):
        if not hasattr(b, "dtype"):
            if not np.allclose(a, b, equal_nan=True):
                return f"result {i}: {a} != {b}"
            continue
        da, db = str(a.dtype).split(".")[-1], str(b.dtype).split(".")[-1]
        if da != db:
            return f"result {i}: dtype {da} != {db}"
        if tuple(a.shape) != tuple(b.shape):
            return f"result {i}: shape {tuple(a.shape)} != {tuple(b.shape)}"
        x, y = to_np(a), to_np(b)
        if db in TOL:
            rt, at = max(TOL[db][0], floor[0]), max(TOL[db][1], floor[1])
            bad = ~np.isclose(x.astype(np.float64), y.astype(np.float64), rtol=rt, atol=at, equal_nan=True)
            if bad.any():
                j = np.argwhere(bad)[0]
                return f"result {i} ({db}{tuple(b.shape)}): {bad.sum()} values differ, at {tuple(j)}: {x[tuple(j)]} vs {y[tuple(j)]}"
        elif not np.array_equal(x, y):
            return f"result {i} ({db}{tuple(b.shape)}): values differ"
    return None


def resized(inputs, rng):
    """The input specs with each dim of size >= 2 mapped to a new size in [2, 9] (a size seen
    twice maps to one new size, so broadcasting programs stay valid)."""
    sizes = sorted({s for _, shape, _, _ in inputs for s in shape if s >= 2})
    new = dict(zip(sizes, rng.sample(range(2, 10), len(sizes)))) if len(sizes) <= 8 else {}
    return [(n, tuple(new.get(s, s) for s in shape), d, layout) for n, shape, d, layout in inputs]


def run_dynamic(seed, verbose=False):
    """Program `seed` compiled once with dynamic=True and called at its sizes and at two
    others: (status, detail, source) as run_one; the detail counts the calls compared and the
    graphs compiled over size symbols."""
    import torch
    import kiln
    from kiln.compiler.backends import lookup_backend

    src, inputs = generate(seed)
    rng = random.Random(seed * 7 + 1)
    variants = [inputs, resized(inputs, rng), resized(inputs, rng)]

    def fn_for(lib):
        ns = {"T": lib}
        exec(compile(src, f"<fuzz {seed}>", "exec"), ns)
        return ns["f"]

    inductor = lookup_backend("inductor")
    graphs = {"static": 0, "dynamic": 0}

    def backend(gm, example_inputs, **kwargs):
        compiled = inductor(gm, example_inputs, **kwargs)
        graphs["dynamic" if getattr(gm, "kiln_dynamic", None) is not None else "static"] += 1
        return compiled

    backend.supports_dynamic_shapes = True
    kiln.compiler.reset()
    compiled = kiln.compile(fn_for(kiln), backend=backend, dynamic=True)
    tol = program_tolerance(src, inputs)
    compared = 0
    old = kiln.config.strict
    kiln.config.strict = True
    try:
        for k, specs in enumerate(variants):
            arrays = make_arrays(specs, seed + k)
            t_in = materialize(torch, arrays, specs)
            try:
                want = fn_for(torch)(*t_in)
            except Exception:  # noqa: BLE001 - torch rejects this size (a reshape to fixed sizes): skip it
                continue
            want_in = [x.clone() for x in t_in]
            try:
                eager = fn_for(kiln)(*materialize(kiln, arrays, specs))
            except Exception:  # noqa: BLE001 - eager kiln rejects it too: not the compiler's business
                continue
            if compare(eager, want, tol) is not None:
                continue  # an eager difference (run_one reports those)
            c_in = materialize(kiln, arrays, specs)
            try:
                got = compiled(*c_in)
            except Exception as e:  # noqa: BLE001
                tb = traceback.format_exc(limit=-3) if verbose else ""
                return "compile-bug", f"sizes {[s for _, s, _, _ in specs]}: raised {type(e).__name__}: {e}\n{tb}", src
            diff = compare(got, want, tol) or compare(c_in, want_in, tol)
            if diff is not None:
                return "compile-bug", f"sizes {[s for _, s, _, _ in specs]} ({graphs}): {diff}", src
            compared += 1
    finally:
        kiln.config.strict = old
    if not compared:
        return "skip", "torch or kiln eager rejects every size", src
    return "ok", f"{compared} sizes compared, graphs {graphs}", src


def run_one(seed, verbose=False):
    """Runs program `seed`: returns (status, detail, source) with status in
    'ok', 'skip' (torch rejects), 'eager-rejects', 'eager-bug', 'compile-bug'."""
    import torch
    import kiln

    if seed >= DYNAMIC_SEEDS:
        return run_dynamic(seed, verbose)
    src, inputs = generate(seed)
    arrays = make_arrays(inputs, seed)

    def fn_for(lib):
        ns = {"T": lib}
        exec(compile(src, f"<fuzz {seed}>", "exec"), ns)
        return ns["f"]

    t_in = materialize(torch, arrays, inputs)
    try:
        want = fn_for(torch)(*t_in)
    except Exception as e:  # noqa: BLE001 - torch rejecting the program means skip it
        if seed >= INDEXING_SEEDS:
            return raises_alike(seed, src, fn_for, arrays, inputs, e)
        return "skip", f"torch: {type(e).__name__}: {e}", src
    want_in = [x.clone() for x in t_in]

    k_in = materialize(kiln, arrays, inputs)
    try:
        got = fn_for(kiln)(*k_in)
    except Exception as e:  # noqa: BLE001
        return "eager-rejects", f"{type(e).__name__}: {e}", src
    tol = program_tolerance(src, inputs)
    diff = compare(got, want, tol) or compare(k_in, want_in, tol)
    status = "ok" if diff is None else "eager-bug"

    kiln.compiler.reset()
    c_in = materialize(kiln, arrays, inputs)
    old = kiln.config.strict
    kiln.config.strict = True
    try:
        cgot = kiln.compile(fn_for(kiln))(*c_in)
    except Exception as e:  # noqa: BLE001
        tb = traceback.format_exc(limit=-3) if verbose else ""
        return "compile-bug", f"raised {type(e).__name__}: {e}\n{tb}", src
    finally:
        kiln.config.strict = old
    cdiff = compare(cgot, want, tol)
    if cdiff is None:
        cdiff = compare(c_in, want_in, tol)
        cdiff = cdiff and "inputs after the call: " + cdiff
    if cdiff is not None and diff is None:
        if same_as_torch_compile(fn_for, arrays, inputs, cgot, tol):
            # A compiler may keep a low-precision intermediate in float32 where eager rounds it
            # (a bfloat16 sum converted to int8 then lands on the other side of an integer):
            # torch.compile does, so the difference is the compiled semantics, not a bug.
            return "ok", f"differs from torch eager as torch.compile does: {cdiff}", src
        return "compile-bug", cdiff, src
    if cdiff is not None:
        # Eager differs from torch too: report eager's difference and the compiled one.
        return "eager-bug", f"eager: {diff}; compiled: {cdiff}", src
    return status, diff or "", src


def same_as_torch_compile(fn_for, arrays, inputs, got, tol):
    """Whether torch.compile's results of the program equal kiln.compile's `got` exactly in
    their integer and bool results and within `tol` in the floating ones (only asked when kiln
    compiled differs from torch eager: torch.compile takes seconds)."""
    import torch
    try:
        torch._dynamo.reset()
        want = torch.compile(fn_for(torch))(*materialize(torch, arrays, inputs))
    except Exception:  # noqa: BLE001 - torch.compile failing says nothing about kiln
        return False
    return compare(got, want, tol) is None


def _index_error(e):
    return isinstance(e, (IndexError, RuntimeError)) and ("out of bounds" in str(e) or "out of range" in str(e))


def raises_alike(seed, src, fn_for, arrays, inputs, torch_error):
    """A program torch rejects (an index out of range, or an invalid program): when kiln eager
    rejects it too, the compiled program must raise an exception of the same type ('raises');
    else 'skip' as for other programs torch rejects."""
    import kiln

    try:
        fn_for(kiln)(*materialize(kiln, arrays, inputs))
    except Exception as e:  # noqa: BLE001
        eager = e
    else:
        return "skip", f"torch: {type(torch_error).__name__}: {torch_error}", src
    kiln.compiler.reset()
    old = kiln.config.strict
    kiln.config.strict = True
    try:
        kiln.compile(fn_for(kiln))(*materialize(kiln, arrays, inputs))
    except Exception as e:  # noqa: BLE001
        # An invalid program (a dtype or shape error) fails while compiling (tracing finds it
        # before any kernel runs), in strict mode as BackendCompilerFailed. A program with
        # several out-of-range indices may report another one first: the kernels run in
        # another order than eager's ops (as with torch.compile).
        traced = type(e).__name__ == "BackendCompilerFailed" and "InductorUnsupported" not in str(e)
        if isinstance(e, type(eager)) or traced or (_index_error(e) and _index_error(eager)):
            return "raises", f"{type(e).__name__}: {e}", src
        return "compile-bug", f"eager raised {type(eager).__name__}: {eager}; compiled raised {type(e).__name__}: {e}", src
    finally:
        kiln.config.strict = old
    return "compile-bug", f"eager raised {type(eager).__name__}: {eager}; compiled did not raise", src


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)
    counts = {}
    for s in range(a.seed, a.seed + a.count):
        status, detail, src = run_one(s, a.verbose)
        counts[status] = counts.get(status, 0) + 1
        if s >= DYNAMIC_SEEDS and status == "ok":
            counts["with-dynamic-graph"] = counts.get("with-dynamic-graph", 0) + ("'dynamic': 0" not in detail)
        if status in ("compile-bug", "eager-bug") or (a.verbose and status == "eager-rejects"):
            print(f"=== seed {s}: {status}: {detail}\n{src}", flush=True)
    print(counts)
    return 1 if counts.get("compile-bug") or counts.get("eager-bug") else 0


if __name__ == "__main__":
    sys.exit(main())
