"""What graph breaks need to know about CPython bytecode (3.11 to 3.13), in one module: which
instructions break how, where the next instruction and a jump's targets are, which locals the
rest of a frame reads, and how a resume code object is made. What differs between versions is
in the `_Facts` table below (and dis/opcode of the running interpreter); the C++ side keeps its
own in frontend/capture/PythonVersion.h.

Offsets here are instruction indices (code units of 2 bytes), as the tracer counts them.

A resume code object is the original code with a prologue in front:

    MAKE_CELL c...            the original's cells (their slots now come after the new arguments)
    COPY_FREE_VARS n          when the original has free variables (the function's closure)
    RESUME 0
    LOAD_FAST cell_k; STORE_DEREF c    each cell that held a value at the break
    PUSH_NULL | LOAD_FAST stack_k      the value stack at the break, bottom first
    JUMP_FORWARD target

Jumps are relative (3.11 to 3.13), so the original instructions need no change when they move by
the prologue's length; only absolute offsets do (the exception table), and the cell and free
variable slots, which move by the number of added arguments. Every local becomes a positional
argument (those not live at the break are passed None), then one per cell holding a value,
then one per stack value that is not NULL.
"""
import dis
import inspect
import opcode
import sys

VERSIONS = ((3, 11), (3, 12), (3, 13))


class _Facts:
    """The per-version differences graph breaks depend on (Python/bytecodes.c, Lib/dis.py)."""

    def __init__(self, minor):
        # Data-dependent jumps: the glue evaluates the condition in Python and resumes at either side.
        if minor == 11:
            self.pop_jumps = {"POP_JUMP_FORWARD_IF_TRUE": True, "POP_JUMP_FORWARD_IF_FALSE": False,
                              "POP_JUMP_BACKWARD_IF_TRUE": True, "POP_JUMP_BACKWARD_IF_FALSE": False}
            self.or_pop_jumps = {"JUMP_IF_TRUE_OR_POP": True, "JUMP_IF_FALSE_OR_POP": False}
        else:  # 3.12 dropped the backward and OR_POP forms
            self.pop_jumps = {"POP_JUMP_IF_TRUE": True, "POP_JUMP_IF_FALSE": False}
            self.or_pop_jumps = {}
        self.calls = {"CALL", "CALL_FUNCTION_EX"} | ({"CALL_KW"} if minor >= 13 else set())
        # Subscripts the glue makes in Python and resumes after, as TorchDynamo's
        # break_graph_if_unsupported on BINARY_SUBSCR / STORE_SUBSCR (`d = x[mask]`: a result
        # shape that depends on the data).
        self.subscripts = {"BINARY_SUBSCR", "STORE_SUBSCR"}
        # 3.13 pushes a call's NULL above the callable ([callable, NULL, args...]).
        self.null_above_callable = minor >= 13
        # Instructions reading (or writing) a fast local; 3.13's pairs pack two slots in 4-bit halves.
        self.loads = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "DELETE_FAST"}
        self.stores = {"STORE_FAST"}
        # Instructions whose argument is a localsplus slot that may be a cell or free variable;
        # 3.13 emits LOAD_CLOSURE as LOAD_FAST of the cell's slot.
        self.deref = {"LOAD_CLOSURE", "LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF", "MAKE_CELL",
                      "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF"} | ({"LOAD_FAST"} if minor >= 13 else set())
        self.packed = {"LOAD_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "STORE_FAST_LOAD_FAST"}


_FACTS = _Facts(sys.version_info[1]) if sys.version_info[:2] in VERSIONS else None
_OP = opcode.opmap


def _caches(op):
    """Inline cache entries after opcode `op` (a list by opcode up to 3.12, a dict by name after)."""
    table = opcode._inline_cache_entries  # noqa: SLF001 - CPython's own table
    if isinstance(table, dict):
        return table.get(opcode.opname[op], 0)
    return table[op]


_NO_FALLTHROUGH = {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD",
                   "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"}
_BACKWARD = {"JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "POP_JUMP_BACKWARD_IF_TRUE",
             "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE"}


def supported():
    """Whether graph breaks can resume on this Python (else the frame runs eagerly)."""
    return _FACTS is not None


def null_above_callable():
    return _FACTS.null_above_callable


def break_kind(opname):
    """How the glue goes on at an instruction the tracer could not run: 'call' (it makes the call
    in Python and resumes after it), 'subscr' (it reads or stores the item in Python and resumes
    after it), 'jump' (it branches in Python and resumes at either target) or 'generic' (the
    rest of the frame runs eagerly from that instruction)."""
    if opname in _FACTS.calls:
        return "call"
    if opname in _FACTS.subscripts:
        return "subscr"
    if opname in _FACTS.pop_jumps or opname in _FACTS.or_pop_jumps:
        return "jump"
    return "generic"


def jump_sense(opname):
    """For a 'jump' break: (the truth value that takes the jump, whether the value stays on the
    stack when jumping: the JUMP_IF_*_OR_POP forms)."""
    if opname in _FACTS.pop_jumps:
        return _FACTS.pop_jumps[opname], False
    return _FACTS.or_pop_jumps[opname], True


def _instructions(code):
    return {ins.offset // 2: ins for ins in dis.get_instructions(code)}


def next_index(code, index):
    """The instruction after the one at `index` (past its inline caches)."""
    op = code.co_code[2 * index]
    return index + 1 + _caches(op)


def enters_with(code, index):
    """Whether the instruction after `index` enters a `with` block on its result."""
    ins = _instructions(code).get(next_index(code, index))
    return ins is not None and ins.opname == "BEFORE_WITH"


def jump_target(code, index):
    ins = _instructions(code)[index]
    return ins.argval // 2


def keyword_names(code, index):
    """CALL_KW's keyword names (3.13): the constant its compiler loads just before it."""
    previous = max((i for i in _instructions(code) if i < index), default=None)
    ins = _instructions(code).get(previous)
    if ins is None or ins.opname != "LOAD_CONST" or not isinstance(ins.argval, tuple):
        raise ResumeUnsupported("CALL_KW whose keyword names are not a constant")
    return ins.argval


def _successors(ins, by_index):
    out = []
    index = ins.offset // 2
    if ins.opname not in _NO_FALLTHROUGH:
        nxt = index + 1 + _caches(ins.opcode)
        if nxt in by_index:
            out.append(nxt)
    if ins.opcode in opcode.hasjrel or ins.opcode in opcode.hasjabs:
        out.append(ins.argval // 2)
    return out


def line_of(code, index):
    """The source line of instruction `index` (None: unknown)."""
    ins = _instructions(code).get(index)
    return ins.positions.lineno if ins is not None and ins.positions else None


def statement_start(code, index):
    """The first instruction of the source line holding instruction `index` (None: unknown)."""
    start = None
    for offset, _line in dis.findlinestarts(code):
        if offset // 2 <= index:
            start = offset // 2
    return start


def in_loop(code, index):
    """Whether a backward jump at or after `index` lands at or before it (TorchDynamo's
    maybe_has_backedge). Only such a jump counts: 3.12 moves exception handlers and 3.12/3.13
    their cleanup to the end of the code, from where they jump back to code after `index`."""
    return any(ins.opname in _BACKWARD and ins.offset // 2 >= index and ins.argval // 2 <= index
               for ins in dis.get_instructions(code))


def exception_handler(code, index):
    """(target, stack depth, push lasti) of the handler catching an exception at instruction
    `index` (an `except` clause's PUSH_EXC_INFO, see in_try), or None."""
    table = code.co_exceptiontable
    if not table:
        return None
    by_index = _instructions(code)
    i = 0
    while i < len(table):
        start, i = _read_varint(table, i)
        length, i = _read_varint(table, i)
        target, i = _read_varint(table, i)
        depth_lasti, i = _read_varint(table, i)
        if not start <= index < start + length:
            continue
        first = by_index.get(target)
        after = by_index.get(next_index(code, target)) if first is not None else None
        if first is not None and first.opname == "PUSH_EXC_INFO" and (
                after is None or after.opname != "WITH_EXCEPT_START"):
            return target, depth_lasti >> 1, bool(depth_lasti & 1)
        return None
    return None


def in_try(code, index):
    """Whether instruction `index` is inside a try block: an exception table entry covers it
    whose handler catches (PUSH_EXC_INFO, not a `with` block's WITH_EXCEPT_START; cleanup
    entries of handlers and of inlined comprehensions re-raise and do not count). The table's
    ranges do not overlap, so this is whether exception_handler finds a handler."""
    return exception_handler(code, index) is not None
    by_index = _instructions(code)
    i = 0
    while i < len(table):
        start, i = _read_varint(table, i)
        length, i = _read_varint(table, i)
        target, i = _read_varint(table, i)
        _depth_lasti, i = _read_varint(table, i)
        if not start <= index < start + length:
            continue
        first = by_index.get(target)
        after = by_index.get(next_index(code, target)) if first is not None else None
        if first is not None and first.opname == "PUSH_EXC_INFO" and (
                after is None or after.opname != "WITH_EXCEPT_START"):
            return True
    return False


def localsplus_names(code):
    """The names of the frame's slots in order: locals (arguments first), cells that are not
    arguments, free variables."""
    varnames = code.co_varnames
    return varnames + tuple(c for c in code.co_cellvars if c not in varnames) + code.co_freevars


def live_locals(code, index):
    """Per localsplus slot, whether the code from `index` on may read it before writing it.
    Cells are always live (nested functions read them); with an exception table every slot is
    (a handler may read any)."""
    names = localsplus_names(code)
    nvar = len(code.co_varnames)
    cells = {i for i, n in enumerate(names) if n in code.co_cellvars}
    if code.co_exceptiontable:
        return [True] * len(names)
    by_index = _instructions(code)
    live = [i in cells for i in range(len(names))]
    for slot in range(nvar):
        if live[slot]:
            continue
        seen, todo = set(), [index]
        while todo and not live[slot]:
            at = todo.pop()
            if at in seen or at not in by_index:
                continue
            seen.add(at)
            reads, writes = _fast_slots(by_index[at])
            if slot in reads:
                live[slot] = True
            elif slot not in writes:
                todo.extend(_successors(by_index[at], by_index))
    return live


def _fast_slots(ins):
    """(slots read first, slots written) by one instruction, for liveness."""
    name, arg = ins.opname, ins.arg
    if name in _FACTS.loads:
        return (arg,), ()
    if name in _FACTS.stores:
        return (), (arg,)
    if name == "LOAD_FAST_LOAD_FAST":
        return (arg >> 4, arg & 15), ()
    if name == "STORE_FAST_STORE_FAST":
        return (), (arg >> 4, arg & 15)
    if name == "STORE_FAST_LOAD_FAST":  # stores first: a read of the slot it stored is not live-in
        store, load = arg >> 4, arg & 15
        return ((load,) if load != store else ()), (store,)
    return (), ()


class ResumeUnsupported(Exception):
    """The break cannot be resumed (the frame then runs eagerly as a whole)."""


def _unit(op, arg=0):
    """One instruction (with EXTENDED_ARG prefixes when `arg` needs them) and its caches."""
    out = bytearray()
    for shift in (24, 16, 8):
        if arg >> shift:
            out += bytes([_OP["EXTENDED_ARG"], (arg >> shift) & 0xFF])
    out += bytes([op, arg & 0xFF])
    out += bytes(2 * _caches(op))
    return out


def _shift_slots(co_code, nvar, shift):
    """co_code with every cell/free-variable slot argument (>= nvar) moved by `shift`."""
    deref = {_OP[name] for name in _FACTS.deref if name in _OP}
    packed = {_OP[name] for name in _FACTS.packed if name in _OP}
    out = bytearray(co_code)
    ext = 0
    for i in range(0, len(out), 2):
        op, arg = out[i], out[i + 1] | ext
        ext = (arg << 8) if op == _OP["EXTENDED_ARG"] else 0
        if op in packed and (arg >> 4 >= nvar or arg & 15 >= nvar):
            raise ResumeUnsupported("a paired local instruction reads a cell slot")
        if op in deref and arg >= nvar:
            new = arg + shift
            if new >> 8 != arg >> 8:
                raise ResumeUnsupported("a cell slot index grows past one byte")
            out[i + 1] = new & 0xFF
    return bytes(out)


def _read_varint(data, i):
    b = data[i]
    value = b & 63
    i += 1
    while b & 64:
        b = data[i]
        value = (value << 6) | (b & 63)
        i += 1
    return value, i


def _write_varint(value, start):
    chunks = [value & 63]
    value >>= 6
    while value:
        chunks.append(value & 63)
        value >>= 6
    chunks.reverse()
    out = bytearray(c | 64 for c in chunks[:-1]) + bytes([chunks[-1]])
    if start:
        out[0] |= 128
    return out


def _shift_exception_table(table, shift):
    """co_exceptiontable (Objects/exception_handling_notes.txt) with start and target moved."""
    out, i = bytearray(), 0
    while i < len(table):
        start, i = _read_varint(table, i)
        length, i = _read_varint(table, i)
        target, i = _read_varint(table, i)
        depth_lasti, i = _read_varint(table, i)
        out += _write_varint(start + shift, True) + _write_varint(length, False)
        out += _write_varint(target + shift, False) + _write_varint(depth_lasti, False)
    return bytes(out)


def _no_location(units):
    """Line table entries (Objects/locations.md, code 15: no location) for `units` code units."""
    out = bytearray()
    while units > 0:
        n = min(units, 8)
        out.append(0x80 | (15 << 3) | (n - 1))
        units -= n
    return bytes(out)


def make_resume_code(code, target, stack_nulls, bound_cells, name):
    """A code object running `code` from instruction `target`: its arguments are every local
    (co_varnames), then the value of each cell that `bound_cells` marks, then the stack values
    (`stack_nulls`: per stack slot, bottom first, True for a NULL)."""
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE |
                        inspect.CO_ASYNC_GENERATOR):
        raise ResumeUnsupported("generators and coroutines are not resumed")
    names = localsplus_names(code)
    nvar = len(code.co_varnames)
    cell_slots = [i for i, n in enumerate(names) if n in code.co_cellvars]
    # Numbered from the slot they take, so a resume function's own resume functions (a second
    # break) add names of their own.
    first = nvar
    # (Counted over the slots added, not over the cells or stack slots: with a NULL or an unbound
    # cell skipped, a name could repeat a slot of the resumed code's own arguments.)
    cell_args = [f"__kiln_cell{first + k}" for k in range(sum(map(bool, bound_cells)))]
    first += len(cell_args)
    stack_args = [f"__kiln_stack{first + k}" for k in range(sum(not null for null in stack_nulls))]
    added = cell_args + stack_args
    shift = len(added)

    def slot(i):
        return i + shift if i >= nvar else i

    prologue = bytearray()
    for i in cell_slots:
        prologue += _unit(_OP["MAKE_CELL"], slot(i))
    if code.co_freevars:
        prologue += _unit(_OP["COPY_FREE_VARS"], len(code.co_freevars))
    prologue += _unit(_OP["RESUME"], 0)
    arg = nvar
    for i, bound in zip(cell_slots, bound_cells):
        if bound:
            prologue += _unit(_OP["LOAD_FAST"], arg) + _unit(_OP["STORE_DEREF"], slot(i))
            arg += 1
    for null in stack_nulls:
        if null:
            prologue += _unit(_OP["PUSH_NULL"])
        else:
            prologue += _unit(_OP["LOAD_FAST"], arg)
            arg += 1
    # JUMP_FORWARD counts from the instruction after it, which is where the original code starts.
    prologue += _unit(_OP["JUMP_FORWARD"], target)
    units = len(prologue) // 2
    varnames = code.co_varnames + tuple(added)
    flags = code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)  # every slot is positional
    return code.replace(
        co_code=bytes(prologue) + _shift_slots(code.co_code, nvar, shift),
        co_varnames=varnames, co_argcount=len(varnames), co_posonlyargcount=0,
        co_kwonlyargcount=0, co_nlocals=len(varnames), co_flags=flags,
        co_stacksize=code.co_stacksize + len(stack_nulls),
        co_exceptiontable=_shift_exception_table(code.co_exceptiontable, units),
        co_linetable=_no_location(units) + code.co_linetable,
        co_name=name, co_qualname=f"{code.co_qualname}.<locals>.{name}")
