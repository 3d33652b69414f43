"""Dynamic shapes in kiln.compile: which input dims become size symbols, and how one graph
over those symbols is built from traces at several sizes (docs/dynamic-shapes.md).

Which dims (TorchDynamo's policy): `dynamic=True` makes every dim of every input tensor
symbolic; `dynamic=False` none; `dynamic=None` (the default) starts static and, after a
recompile caused by a size change, makes the dims that changed symbolic (automatic dynamic,
sticky per code object and input); `mark_dynamic(t, dim)` marks a dim of a tensor before the
call. Sizes 0 and 1 are never symbolic (specialized, as in PyTorch), nor dims of
non-contiguous inputs. Dims of equal size share one symbol (duck sizing).

How: kiln's tracer and decompositions run on meta tensors of concrete sizes, so the symbolic
graph is found by probing. The frame is traced again with the symbols at other values (probe
points spread over [2, max_size], the guarded range), each trace is lowered to prims by the
same pipeline, and the prims graphs must agree except for integers; each integer that differs
must be one polynomial with integer coefficients in the symbols (degree <= 2, 3 for one symbol)
at every point, fitted on some points and checked on the others. Anything else (a graph that
changes with the sizes, a float constant computed from a size, a size the user's code turned
into a Python value) makes the compile static. The probes bracket the guarded range, so a
size-dependent choice between its ends (a clamp, a branch) shows up as a misfit or a
different graph.
"""
import itertools
import re
from fractions import Fraction

from .. import _C

# A symbolic dim is guarded to lie in [MIN_SIZE, max size] (MIN_SIZE: GuardTree.h's
# kMinDynamicSize); the max size is at least MIN_MAX_SIZE, or a few times the size seen (larger
# sizes recompile with a larger range).
MIN_SIZE = 2
MIN_MAX_SIZE = 4096
MAX_SYMBOLS = 4


class DynamicUnsupported(RuntimeError):
    """The graph is not the same over the size symbols; the frame compiles statically.
    `sizes`: the symbol values of the probe points whose graph had another number of nodes (a
    probe size equal to an int constant of the program: `full([], 11)` of a roll by a size of
    11 and of `idx[:, 0] = 11` become one node), which probing again without them may avoid."""

    def __init__(self, message, sizes=()):
        super().__init__(message)
        self.sizes = frozenset(sizes)


def mark_dynamic(t, dim):
    """Marks dim(s) `dim` of tensor `t` dynamic for the compiles that see `t` as an input (as
    torch._dynamo.mark_dynamic): they become size symbols unless their size is 0 or 1. The
    mark is kept on the tensor object (`_kiln_dynamic_dims`, as torch's _dynamo_dynamic_indices)."""
    if not isinstance(t, _C.TensorBase):
        raise TypeError(f"mark_dynamic expects a kiln tensor, got {type(t).__name__}")
    dims = [dim] if isinstance(dim, int) else list(dim)
    for d in dims:
        if not isinstance(d, int) or not -t.dim() <= d < max(t.dim(), 1):
            raise IndexError(f"mark_dynamic: dim {d} out of range for a {t.dim()}-d tensor")
    marked = set(getattr(t, "_kiln_dynamic_dims", ()))
    t._kiln_dynamic_dims = marked | {d % t.dim() for d in dims}


def marked_dims(t):
    return set(getattr(t, "_kiln_dynamic_dims", ()))


# The symbols whose SizeInts were compared (or tested for truth) since begin_trace().
_compared = set()
# The range every size symbol is guarded to in the trace under way ([lo, hi], or None): a
# comparison whose result is the same at every size in it specializes nothing (`assert t <=
# block_size` with t guarded to [2, block_size]), as PyTorch's value ranges decide it.
_range = None
# Comparisons tested over more sizes than this are taken to specialize (the test is exhaustive).
_MAX_RANGE_TESTED = 1 << 16


# The symbols of sizes used as range() bounds since begin_trace() (a subset of _compared).
_loop_bounds = set()


def begin_trace(size_range=None):
    """Starts recording comparisons; `size_range` ((lo, hi)) is the guarded range of the symbols."""
    global _range
    _compared.clear()
    _loop_bounds.clear()
    _range = size_range


def compared_symbols():
    return set(_compared)


def loop_bound_symbols():
    return set(_loop_bounds)


class SizeInt(int):
    """A size read from a tensor while the frame is traced over size symbols (`b, s, d =
    x.shape`): an int that remembers the symbols it was computed from. Arithmetic keeps them;
    a comparison or a truth test records them (kiln.compiler.dynamic._compared), because the
    traced code may branch on it, so the frame specializes those symbols (as PyTorch guards
    on a SymInt's comparisons). Passed to an op (a reshape's sizes), it is a plain int: the
    probes fit what the op makes of it.

    It also keeps how it was computed (`source`: Python source over `{s0}`-style symbol
    fields, `({s0} * 2)`), so that a size leaving the graph as a Python value (returned, handed
    to a resume function) is computed from the inputs' sizes at each call (size_source), as
    PyTorch returns a SymInt's expression: `return y, x.shape[0] * 2` compiles once."""

    def __new__(cls, value, symbols, source=None):
        self = super().__new__(cls, value)
        self.symbols = frozenset(symbols)
        self.source = source
        return self

    def _record(self, other):
        _compared.update(self.symbols)
        if isinstance(other, SizeInt):
            _compared.update(other.symbols)

    def _same_over_range(self, test, other, result):
        """Whether `test(self, other)` (other None: the truth of self) is `result` at every size
        of the guarded range, for a size of one symbol whose source is known."""
        if _range is None or self.source is None or _range[1] - _range[0] > _MAX_RANGE_TESTED:
            return False
        symbols = self.symbols | (other.symbols if isinstance(other, SizeInt) else frozenset())
        other_source = "0" if other is None else _operand_source(other)
        if len(symbols) != 1 or other_source is None:
            return False
        try:
            at = _evaluator(self.source, other_source, f"s{next(iter(symbols))}")
            return all(bool(test(*at(v))) == result for v in range(_range[0], _range[1] + 1))
        except (ArithmeticError, KeyError, IndexError, ValueError):
            return False

    def _wrap(self, result, other=None, op=None):
        if not isinstance(result, int) or isinstance(result, bool):
            return result
        syms = self.symbols | (other.symbols if isinstance(other, SizeInt) else frozenset())
        return SizeInt(result, syms, _combined_source(op, self, other))

    def __bool__(self):
        result = int(self) != 0
        if not self._same_over_range(lambda a, _: a != 0, None, result):
            self._record(None)
        return result

    def __hash__(self):
        return int.__hash__(self)

    def __reduce__(self):
        return (int, (int(self),))


# Python source of each arithmetic method: binary ones with the operand order of the method
# (`__r*__`: the other operand first), unary ones.
_OPERATOR = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%", "pow": "**"}
_UNARY = {"__neg__": "-({})", "__pos__": "+({})", "__abs__": "abs({})"}


def _operand_source(v):
    if isinstance(v, SizeInt):
        return v.source
    if isinstance(v, int) and not isinstance(v, bool):
        return repr(int(v))
    return None


def _combined_source(op, a, b):
    """The source of `op` (a method name of int) applied to SizeInt `a` and `b` (None: unary),
    or None when an operand's is unknown."""
    if op is None:
        return None
    sa = _operand_source(a)
    if op in _UNARY:
        return None if sa is None else _UNARY[op].format(sa)
    sb = _operand_source(b)
    if sa is None or sb is None:
        return None
    name = op.strip("_")
    if name.startswith("r") and name[1:] in _OPERATOR:
        return f"({sb} {_OPERATOR[name[1:]]} {sa})"
    return f"({sa} {_OPERATOR[name]} {sb})"


def size_source(value, symbols):
    """The Python source computing size `value` (a SizeInt) from the inputs' sizes at each call,
    `symbols` giving each symbol id's source (`{0: "x.shape[0]"}`); None when it is not known."""
    if not isinstance(value, SizeInt) or value.source is None:
        return None
    try:
        return value.source.format(**{f"s{i}": src for i, src in symbols.items()})
    except (KeyError, IndexError):
        return None


def _arith(name):
    base = getattr(int, name)

    def op(self, other=None):
        if other is None:
            return self._wrap(base(self), None, name)
        return self._wrap(base(self, other), other, name)

    op.__name__ = name
    return op


_evaluators = {}


def _evaluator(source, other_source, symbol):
    """A function of a symbol's size returning (source, other_source) evaluated there."""
    key = (source, other_source, symbol)
    if key not in _evaluators:
        fields = {symbol: "v"}
        text = f"lambda v: ({source.format(**fields)}, {other_source.format(**fields)})"
        _evaluators[key] = eval(text, {"abs": abs})  # noqa: S307 - text built from int arithmetic
    return _evaluators[key]


def _compare(name):
    base = getattr(int, name)

    def op(self, other):
        result = base(self, other)
        if result is NotImplemented or not self._same_over_range(base, other, result):
            self._record(other)
        return result

    op.__name__ = name
    return op


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__",
              "__rfloordiv__", "__mod__", "__rmod__", "__neg__", "__pos__", "__abs__", "__pow__"):
    setattr(SizeInt, _name, _arith(_name))
for _name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(SizeInt, _name, _compare(_name))


def record_loop_bound(value):
    """`value` is a bound of a traced range(): a loop over a size unrolls to as many steps as the
    size, so its symbols specialize (PyTorch guards a SymInt range bound's value)."""
    if isinstance(value, SizeInt):
        value._record(None)
        _loop_bounds.update(value.symbols)


def _symbol(value, table):
    return SizeInt(value, [table[value]], "{s%d}" % table[value])


def tag_sizes(value, table):
    """`value` (a Size, tuple or int read from a tensor) with each int that is a symbol's
    value in this trace (`table`: value -> symbol id) a SizeInt of that symbol."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _symbol(value, table) if value in table else value
    if isinstance(value, tuple):
        items = [_symbol(v, table) if isinstance(v, int) and v in table else v for v in value]
        try:
            return type(value)(items)
        except Exception:  # noqa: BLE001 - a tuple type that cannot be rebuilt from a list
            return tuple(items)
    return value


class Signature:
    """The symbolic signature of a compile: per input expression, the symbol id of each dim
    (-1: static), the symbols' sizes in the traced call (hints) and the guarded maximum."""

    def __init__(self, dims, hints, max_size, dtypes=None, shapes=None):
        self.dims = dims          # expr -> [symbol id or -1]
        self.hints = hints        # [size] per symbol id
        self.max_size = max_size
        # Per expr, its dtype's short name ("f32") and the traced sizes (for describe()).
        self.dtypes, self.shapes = dtypes or {}, shapes or {}

    def with_max_size(self, max_size):
        return Signature(self.dims, self.hints, max_size, self.dtypes, self.shapes)

    def __bool__(self):
        return bool(self.hints)

    def restrict(self, keep):
        """The signature with only the symbols in `keep` (the others' dims static), renumbered."""
        keep = sorted(keep)
        new_id = {old: new for new, old in enumerate(keep)}
        dims = {}
        for expr, ids in self.dims.items():
            mapped = [new_id.get(i, -1) for i in ids]
            if any(i >= 0 for i in mapped):
                dims[expr] = mapped
        return Signature(dims, [self.hints[i] for i in keep], self.max_size, self.dtypes, self.shapes)

    def symbol_names(self):
        return [f"s{i}" for i in range(len(self.hints))]

    def describe(self):
        """"x: f32[s0, 32]" per input with a symbolic dim (its type over the symbols, as graph
        text prints it); "x: [s0, _]" when the input's dtype and sizes are not known."""
        parts = []
        for expr, ids in self.dims.items():
            shape, dtype = self.shapes.get(expr), self.dtypes.get(expr)
            if shape is None or dtype is None or len(shape) != len(ids):
                parts.append(f"{expr}: [" + ", ".join(f"s{i}" if i >= 0 else "_" for i in ids) + "]")
            else:
                parts.append(f"{expr}: {dtype}[" + ", ".join(f"s{i}" if i >= 0 else str(n)
                                                             for i, n in zip(ids, shape)) + "]")
        return "; ".join(parts)

    def sizes_at(self, point, examples_by_expr):
        """Per input expression with symbolic dims, its sizes with symbol i at point[i]."""
        out = {}
        for expr, ids in self.dims.items():
            sizes = list(examples_by_expr[expr].shape)
            out[expr] = [point[i] if i >= 0 else s for i, s in zip(ids, sizes)]
        return out


def choose(examples_by_expr, wanted):
    """The Signature making dims `wanted` (expr -> set of dims) symbolic, with duck sizing;
    dims of size 0 or 1 and non-contiguous inputs stay static."""
    dims, hints, by_size = {}, [], {}
    for expr, want in wanted.items():
        t = examples_by_expr.get(expr)
        if t is None or not want or not t.is_contiguous():
            continue
        ids = []
        for d, size in enumerate(t.shape):
            if d in want and size >= 2:
                if size not in by_size:
                    by_size[size] = len(hints)
                    hints.append(size)
                ids.append(by_size[size])
            else:
                ids.append(-1)
        if any(i >= 0 for i in ids):
            dims[expr] = ids
    max_size = max([MIN_MAX_SIZE] + [4 * h for h in hints])
    from ..fx.graph import type_of

    dtypes = {e: str(type_of(examples_by_expr[e])).split("[", 1)[0] for e in dims}
    shapes = {e: tuple(examples_by_expr[e].shape) for e in dims}
    return Signature(dims, hints, max_size, dtypes, shapes)


def _monomials(k):
    """Exponent tuples of the monomials fitted over k symbols: degree <= 2 (<= 3 for one)."""
    degree = 3 if k == 1 else 2
    out = []
    for total in range(degree + 1):
        for combo in itertools.combinations_with_replacement(range(k), total):
            out.append(tuple(combo.count(i) for i in range(k)))
    return out


def probe_points(sig, avoid=()):
    """Points (a size per symbol) at which the frame is traced again: enough to fit every
    monomial plus two to check, spread over [2, max_size] (both ends included), avoiding the
    static sizes of the program (`avoid`: at a symbol equal to one, decompositions take their
    special cases, a slice of a whole dim vanishes, and the graph text differs)."""
    k, top = len(sig.hints), sig.max_size
    values = [2, top, 3, top - 1, 5, top // 3 + 1, 7, top // 2 - 1, 11, 97, 13, 251, 17, 509, 19, 1021,
              23, 2039, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89]
    if top <= 64:  # a small range (a short block_size): any size of it may be needed
        values += list(range(4, top))
    values = [v for v in dict.fromkeys(values) if 2 <= v <= top and v not in set(avoid)]
    if len(values) < k + 1:
        raise DynamicUnsupported(f"too few probe sizes in [2, {top}]")
    need = len(_monomials(k)) + 2
    points = []
    for j in range(len(values) ** 2):
        point = tuple(values[(j + 5 * i) % len(values)] for i in range(k))
        if point != tuple(sig.hints) and point not in points and len(set(point)) == k:
            points.append(point)
        if len(points) >= need:
            return _with_both_ends(points, values, top, tuple(sig.hints))
    raise DynamicUnsupported(f"too few probe points in [2, {top}]")


def _with_both_ends(points, values, top, hints):
    """`points` plus, for each symbol that takes neither end of the range (2, `top`) at any of
    them, a point where it does: with several symbols the spread leaves a symbol inside the
    range (s1 >= 7), and a clamp below that (`x[:, 1:4]` has min(s1, 4) - 1 elements) would
    fit a constant."""
    points = list(points)
    for i in range(len(points[0])):
        for end in (v for v in (2, top) if v in values):
            if any(p[i] == end for p in points):
                continue
            point = list(points[0])
            point[i] = end
            for j in range(len(point)):  # distinct values (equal ones would share a symbol)
                if j != i and point[j] == end:
                    point[j] = next(v for v in values if v not in point)
            if tuple(point) != hints and tuple(point) not in points:
                points.append(tuple(point))
    return points


def _solve(rows, values):
    """Exact solution of the square system rows * x = values (Fractions), or None if singular."""
    n = len(rows)
    a = [[Fraction(x) for x in row] + [Fraction(v)] for row, v in zip(rows, values)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if a[r][col] != 0), None)
        if pivot is None:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col and a[r][col] != 0:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col])]
    return [a[i][n] / a[i][i] for i in range(n)]


def _value(mono, point):
    v = 1
    for e, x in zip(mono, point):
        v *= x ** e
    return v


def _basis(points, monos):
    """Indices of len(monos) points whose monomial matrix is nonsingular."""
    chosen, rows = [], []
    for i, p in enumerate(points):
        trial = rows + [[_value(m, p) for m in monos]]
        # Rank check by solving with a dummy right-hand side once square.
        if len(trial) < len(monos):
            chosen.append(i)
            rows = trial
            continue
        if _solve(trial, [0] * len(trial)) is not None:
            chosen.append(i)
            return chosen
    return None


def _expr_text(coeffs, monos, names):
    """IndexExpr text of sum(c * monomial), e.g. '3*s0*s1 + 2*s0 - 1'."""
    terms = []
    for c, mono in zip(coeffs, monos):
        if c == 0:
            continue
        factors = [n for n, e in zip(names, mono) for _ in range(e)]
        if not factors:
            terms.append(str(c))
        elif c == 1:
            terms.append("*".join(factors))
        else:
            terms.append(f"{c}*" + "*".join(factors))
    if not terms:
        return "0"
    text = terms[0]
    for t in terms[1:]:
        text += f" - {t[1:]}" if t.startswith("-") else f" + {t}"
    return text


class Fitter:
    """Fits integers seen at several points as polynomials in the size symbols."""

    def __init__(self, points, names):
        self.points, self.names = points, names
        self.monos = _monomials(len(names))
        self.basis = _basis(points, self.monos)
        if self.basis is None:
            raise DynamicUnsupported("the probe points do not determine the size polynomials")
        self.rows = [[_value(m, points[i]) for m in self.monos] for i in self.basis]
        self.cache = {}

    def fit(self, values):
        """The expression text taking values[j] at points[j], or None when no polynomial does."""
        key = tuple(values)
        if key in self.cache:
            return self.cache[key]
        coeffs = _solve(self.rows, [values[i] for i in self.basis])
        text = None
        if coeffs is not None and all(c.denominator == 1 for c in coeffs):
            coeffs = [int(c) for c in coeffs]
            if all(sum(c * _value(m, p) for c, m in zip(coeffs, self.monos)) == v
                   for p, v in zip(self.points, values)):
                text = _expr_text(coeffs, self.monos, self.names)
        self.cache[key] = text
        return text


# An integer token of the graph text: not part of a name, a float or a dtype.
_INT = re.compile(r"(?<![\w.%@\"])-?\d+(?![\w.])")
# The arguments (by position and by keyword) whose integers may differ between the probes:
# sizes that lowering reads from the node's (symbolic) type, not from the argument. Any other
# integer argument that depends on the sizes (a slice's start, a fill value) is not fitted.
_SIZE_ARGUMENTS = {
    "prims.broadcast_in_dim": {1, "shape"},
    "prims.reshape": {1, "shape"},
    "prims.full": {0, "shape"},
    "prims.iota": {0, "length"},
    "prims.empty_strided": {0, 1, "shape", "strides"},
    "prims.slice": {2, "limit_indices"},
    # Random draws run eagerly at each call with their shape evaluated at the call's sizes
    # (inductor._symbolic_draws fits it over the probes).
    "prims.uniform": {0, "shape"},
    "prims.normal": {0, "shape"},
}
_CALL = re.compile(r"= call_function ([\w.]+)\(")


def _argument_at(line, pos):
    """The argument (position, or keyword name) of the call on `line` that character `pos`
    is in, or None outside the call's parentheses."""
    m = _CALL.search(line)
    if not m or pos < m.end():
        return None
    depth, index, start = 0, 0, m.end()
    for i in range(m.end(), pos):
        c = line[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return None  # past the call's closing parenthesis
            depth -= 1
        elif c == "," and depth == 0:
            index, start = index + 1, i + 1
    keyword = re.match(r"\s*(\w+)=", line[start:pos + 1])
    return keyword.group(1) if keyword else index


def _split_line(line):
    """(arguments part, type part) of a node line: the type follows the last ') :' (the
    call's closing parenthesis), or the ': ' of a parameter."""
    m = re.search(r"\)\s*:\s", line)
    if m and " = call_" in line:
        return line[:m.end()], line[m.end():]
    return "", line


def _size_argument(line, offset):
    """Whether the integer at `offset` of a node line is in one of _SIZE_ARGUMENTS."""
    m = _CALL.search(line)
    allowed = _SIZE_ARGUMENTS.get(m.group(1)) if m else None
    return bool(allowed) and _argument_at(line, offset) in allowed


def _argument_span(line, which):
    """(start, end) of the text of argument number `which` (by position) of the call on `line`,
    or None."""
    m = _CALL.search(line)
    if not m:
        return None
    depth, index, start = 0, 0, m.end()
    for i in range(m.end(), len(line)):
        c = line[i]
        if c in "([{":
            depth += 1
        elif c in ")]}" and depth:
            depth -= 1
        elif (c == "," and depth == 0) or c in ")]}":
            if index == which:
                return start, i
            if c != ",":
                return None
            index, start = index + 1, i + 1
    return None


def _fit_fill_values(row, fitter):
    """The lines of `row` (one node at each probe) with a prims.full fill value that differs
    between the probes (a mean's element count, `full([], 640.0)`) replaced by its polynomial
    in the symbols as a string (`"s0*64"`, which lowering reads as a size expression), when
    the values are integers at every probe; the lines as they were otherwise."""
    m = _CALL.search(row[0])
    if not m or m.group(1) != "prims.full":
        return row
    spans = [_argument_span(line, 1) for line in row]
    if any(s is None for s in spans):
        return row
    texts = [line[a:b].strip() for line, (a, b) in zip(row, spans)]
    if len(set(texts)) == 1:
        return row
    try:
        values = [float(t) for t in texts]
    except ValueError:
        return row
    if not all(v.is_integer() and abs(v) < 2 ** 53 for v in values):
        return row
    expr = fitter.fit([int(v) for v in values])
    if expr is None:
        return row
    return [line[:a] + f' "{expr}"' + line[b:] for line, (a, b) in zip(row, spans)]


_IOTA_START = re.compile(r"\bstart=(-?\d+)")


def _fit_iota_start(row, fitter):
    """The lines of `row` with a prims.iota start that differs between the probes (torch.roll
    along a symbolic dim starts at size - shift) replaced by its polynomial in the symbols as a
    string (`start="s0 - 1"`, which lowering reads as a size expression); as they were otherwise."""
    m = _CALL.search(row[0])
    if not m or m.group(1) != "prims.iota":
        return row
    starts = [_IOTA_START.search(line) for line in row]
    if any(s is None for s in starts) or len({s.group(1) for s in starts}) == 1:
        return row
    expr = fitter.fit([int(s.group(1)) for s in starts])
    if expr is None:
        return row
    return [line[:s.start()] + f'start="{expr}"' + line[s.end():] for line, s in zip(row, starts)]


def _fit_slice_starts(row, fitter):
    """The lines of `row` with prims.slice start_indices that differ between the probes (x[:, -1]
    along a symbolic dim starts at size - 1) with those starts replaced by their polynomials in
    the symbols as strings (`[0, "-1 + s0", 0]`, read by lowering as size expressions); as they
    were otherwise."""
    m = _CALL.search(row[0])
    if not m or m.group(1) != "prims.slice":
        return row
    spans = [_argument_span(line, 1) for line in row]
    if any(s is None for s in spans):
        return row
    try:
        starts = [[int(v) for v in line[a:b].strip().strip("[]").split(",")] for line, (a, b) in zip(row, spans)]
    except ValueError:
        return row
    if len({len(s) for s in starts}) != 1 or len({tuple(s) for s in starts}) == 1:
        return row
    fitted = []
    for values in zip(*starts):
        if len(set(values)) == 1:
            fitted.append(str(values[0]))
            continue
        expr = fitter.fit(list(values))
        if expr is None:
            return row
        fitted.append(f'"{expr}"')
    text = " [" + ", ".join(fitted) + "]"
    return [line[:a] + text + line[b:] for line, (a, b) in zip(row, spans)]


def generalize(texts, points, names):
    """The graph text over the symbols `names` that is texts[j] with symbol i at points[j][i]
    (texts[0] is the traced call's graph, points[0] its sizes); DynamicUnsupported otherwise.
    Integers in types are fitted; an integer argument may differ only in _SIZE_ARGUMENTS (the
    traced call's value is kept there: lowering reads the node's type)."""
    lines = [t.splitlines() for t in texts]
    if len({len(ls) for ls in lines}) != 1:
        odd = {v for ls, point in zip(lines[1:], points[1:]) if len(ls) != len(lines[0]) for v in point}
        raise DynamicUnsupported("the graph has a different number of nodes at other sizes", odd)
    fitter = Fitter(points, names)
    out = []
    for row in zip(*lines):
        row = _fit_slice_starts(_fit_iota_start(_fit_fill_values(row, fitter), fitter), fitter)
        parts = [_split_line(line) for line in row]
        new_line = ""
        for which in (0, 1):
            segments = [_INT.split(p[which]) for p in parts]
            numbers = [_INT.findall(p[which]) for p in parts]
            if any(s != segments[0] for s in segments) or len({len(n) for n in numbers}) != 1:
                raise DynamicUnsupported(f"the graph differs at other sizes: {row[0].strip()!r} vs "
                                         f"{row[1].strip()!r}")
            text = segments[0][0]
            offsets = [m.start() for m in _INT.finditer(parts[0][which])]
            for k, values in enumerate(zip(*numbers)):
                values = [int(v) for v in values]
                if len(set(values)) == 1:
                    token = str(values[0])
                elif which == 0:
                    if not _size_argument(parts[0][0], offsets[k]):
                        raise DynamicUnsupported(f"an argument depends on the sizes: {row[0].strip()!r}")
                    token = str(values[0])
                else:
                    token = fitter.fit(values)
                    if token is None:
                        raise DynamicUnsupported(f"a size is not a polynomial of the size symbols: "
                                                 f"{row[0].strip()!r} at {values}")
                text += token + segments[0][k + 1]
            new_line += text
        out.append(new_line)
    return "\n".join(out) + "\n"


class Traces:
    """A frame traced with size symbols: the trace at the call's sizes with symbolic guards
    (`result`), the static trace it replaces if the symbolic graph fails (`static_result`),
    the points (the call's sizes first) and the graph module traced at each, and the
    positions of the inputs with symbolic dims."""

    def __init__(self, signature, result, static_result, points, graph_modules, symbolic_inputs):
        self.signature = signature
        self.result = result
        self.static_result = static_result
        self.points = points
        self.graph_modules = graph_modules
        self.symbolic_inputs = symbolic_inputs
        self.names = signature.symbol_names()

    def describe(self):
        return self.signature.describe()

    def symbol_dims(self):
        """Per symbol, the (graph input position, dim) whose size it is (its first)."""
        found = {}
        for pos, expr in enumerate(self.result["inputs"]):
            for d, i in enumerate(self.signature.dims.get(expr, ())):
                if i >= 0 and i not in found:
                    found[i] = (pos, d)
        return [found[i] for i in range(len(self.signature.hints))]


def _same_constants(a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if type(x) is not type(y):
            return False
        try:
            if not bool(x == y):
                return False
        except Exception:  # noqa: BLE001 - values that do not compare (tensors): not the same
            if x is not y:
                return False
    return True


def size_break_state(static, traces):
    """Rewrites, in `static` and every trace of `traces` (the symbolic one and the probes), the
    values a graph before a break hands on (its `break_state`: the breaking call's arguments,
    the live locals) that are sizes of the graph's outputs at every trace (`print(y.shape)`,
    `n = y.shape[0]`) into those sizes read at run time (`__o[0].shape`, `__o[0].shape[0]`),
    so the glue stays right at other sizes; the constants they were are dropped."""
    results = [static] + list(traces)
    if "break_state" not in static or any("break_state" not in r or not r["ok"] for r in results):
        return
    shapes = []  # per result, per graph output: its shape (the static call's for the symbolic one)
    for r in results:
        outs = r["graph"].output_node.args[0] if r["graph"].output_node is not None else ()
        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
        shapes.append([tuple(o.type.shape) if getattr(o, "type", None) is not None and o.type.kind == "tensor"
                       else None for o in outs])
    shapes[1] = shapes[0]  # traces[0] is the symbolic trace at the call's sizes
    candidates = []
    for i, shape in enumerate(shapes[0]):
        if shape is None or not all(len(s) > i and s[i] is not None and len(s[i]) == len(shape) for s in shapes):
            continue
        candidates.append((f"__o[{i}].shape", lambda s, i=i: s[i]))
        candidates += [(f"__o[{i}].shape[{d}]", lambda s, i=i, d=d: s[i][d]) for d in range(len(shape))]

    def value(r, expr):
        if expr is None:
            return None
        if expr.startswith("__c[") and expr.endswith("]") and expr[4:-1].isdigit():
            return r["constants"][int(expr[4:-1])]
        return int(expr) if expr.lstrip("-").isdigit() else None

    def same(v, expected):  # (a size is an int, or a SizeInt while tracing over symbols)
        if isinstance(expected, tuple):
            return isinstance(v, tuple) and tuple(v) == expected
        return isinstance(v, int) and not isinstance(v, bool) and int(v) == int(expected)

    def rewrite(entries):
        if any(len(e) != len(entries[0]) for e in entries):
            return
        for k in range(len(entries[0])):
            exprs = [e[k] for e in entries]
            values = [value(r, x) for r, x in zip(results, exprs)]
            if any(v is None or not isinstance(v, (int, tuple)) or isinstance(v, bool) for v in values):
                continue
            if all(x == exprs[0] for x in exprs) and all(same(v, values[0]) for v in values):
                continue  # the same value at every size
            for text, size in candidates:
                if all(same(v, size(sh)) for v, sh in zip(values, shapes)):
                    for e in entries:
                        e[k] = text
                    break

    for key in ("locals", "stack"):
        entries = [r["break_state"].get(key) for r in results]
        if all(isinstance(e, list) for e in entries):
            rewrite(entries)
    # Constants no longer referenced (sizes read from the outputs now) are not compared.
    for r in results:
        used = repr(r.get("break_state")) + repr(r.get("output")) + repr(r.get("lets")) + repr(r.get("side_effects"))
        constants = [c if f"__c[{k}]" in used else None for k, c in enumerate(r["constants"])]
        while constants and constants[-1] is None and f"__c[{len(constants) - 1}]" not in used:
            constants.pop()
        r["constants"] = constants


def compare_traces(traced, static, probes):
    """Why the probe traces cannot be one graph over the symbols, or None: each must succeed
    and rebuild the frame's result from the same inputs, output expression and constants (a
    size read into a Python value and computed from it, differs). The inputs are the static
    trace's; the rest is compared with the symbolic trace at the call's sizes, whose glue is the
    one used: there a size that is a symbol (`return x.sum(), x.shape[0]`) is read from the
    inputs at each call (`x.shape[0]`), where the static trace has the traced value."""
    if not traced["ok"]:
        return f"a trace at other sizes failed: {traced['reason']}"
    for r in [traced] + list(probes):
        if not r["ok"]:
            return f"a trace at other sizes failed: {r['reason']}"
        if r.get("inputs") != static.get("inputs"):
            return "the frame's inputs differ at other sizes"
        for key in ("output", "lets", "side_effects", "break_state"):
            if r.get(key) != traced.get(key):
                return f"the frame's {key} differ at other sizes"
        if not _same_constants(list(r["constants"]), list(traced["constants"])):
            return "the frame returns values computed from the sizes"
        if sorted(r["attrs"]) != sorted(static["attrs"]):
            return "the graph reads other attributes at other sizes"
    return None
