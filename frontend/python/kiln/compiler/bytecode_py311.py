"""What graph breaks need to know about CPython 3.11 bytecode, in one module so that other
versions (issue 17: 3.12, 3.13) add theirs beside it: which instructions break how, where the
next instruction and a jump's targets are, which locals the rest of a frame reads, and how a
resume code object is made.

Offsets here are instruction indices (code units of 2 bytes), as the tracer counts them.

A resume code object is the original code with a prologue in front:

    MAKE_CELL c...            the original's cells (their slots now come after the new arguments)
    COPY_FREE_VARS n          when the original has free variables (the function's closure)
    RESUME 0
    LOAD_FAST cell_k; STORE_DEREF c    each cell that held a value at the break
    PUSH_NULL | LOAD_FAST stack_k      the value stack at the break, bottom first
    JUMP_FORWARD target

3.11's jumps are relative, so the original instructions need no change when they move by the
prologue's length; only absolute offsets do (the exception table), and the cell and free
variable slots, which move by the number of added arguments. Every local becomes a positional
argument (those not live at the break are passed None), then one per cell holding a value,
then one per stack value that is not NULL.
"""
import dis
import inspect
import opcode
import sys

VERSION = (3, 11)

_OP = opcode.opmap
_CACHES = opcode._inline_cache_entries  # noqa: SLF001 - CPython's own table of cache entries
_CALLS = {"CALL", "CALL_FUNCTION_EX"}
# Data-dependent jumps: the glue evaluates the condition in Python and resumes at either side.
_POP_JUMPS = {"POP_JUMP_FORWARD_IF_TRUE": True, "POP_JUMP_FORWARD_IF_FALSE": False,
              "POP_JUMP_BACKWARD_IF_TRUE": True, "POP_JUMP_BACKWARD_IF_FALSE": False}
_OR_POP_JUMPS = {"JUMP_IF_TRUE_OR_POP": True, "JUMP_IF_FALSE_OR_POP": False}
_NO_FALLTHROUGH = {"RETURN_VALUE", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
                   "JUMP_BACKWARD_NO_INTERRUPT"}
_BACKWARD = {"JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "POP_JUMP_BACKWARD_IF_TRUE",
             "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE"}
# Instructions whose argument is a slot of localsplus (cells and free variables included).
_DEREF_OPS = {_OP[name] for name in ("LOAD_CLOSURE", "LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF",
                                     "LOAD_CLASSDEREF", "MAKE_CELL")}


def supported():
    return sys.version_info[:2] == VERSION


def break_kind(opname):
    """How the glue goes on at an instruction the tracer could not run: 'call' (it makes the call
    in Python and resumes after it), 'jump' (it branches in Python and resumes at either target)
    or 'generic' (the rest of the frame runs eagerly from that instruction)."""
    if opname in _CALLS:
        return "call"
    if opname in _POP_JUMPS or opname in _OR_POP_JUMPS:
        return "jump"
    return "generic"


def jump_sense(opname):
    """For a 'jump' break: (the truth value that takes the jump, whether the value stays on the
    stack when jumping: the JUMP_IF_*_OR_POP forms)."""
    if opname in _POP_JUMPS:
        return _POP_JUMPS[opname], False
    return _OR_POP_JUMPS[opname], True


def _instructions(code):
    return {ins.offset // 2: ins for ins in dis.get_instructions(code)}


def next_index(code, index):
    """The instruction after the one at `index` (past its inline caches)."""
    op = code.co_code[2 * index]
    return index + 1 + _CACHES[op]


def enters_with(code, index):
    """Whether the instruction after `index` enters a `with` block on its result."""
    ins = _instructions(code).get(next_index(code, index))
    return ins is not None and ins.opname == "BEFORE_WITH"


def jump_target(code, index):
    ins = _instructions(code)[index]
    return ins.argval // 2


def _successors(ins, by_index):
    out = []
    index = ins.offset // 2
    if ins.opname not in _NO_FALLTHROUGH:
        nxt = index + 1 + _CACHES[ins.opcode]
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
    """Whether a backward jump follows `index` (TorchDynamo's test for a break inside a loop)."""
    return any(ins.opname in _BACKWARD and ins.offset // 2 >= index for ins in dis.get_instructions(code))


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
            ins = by_index[at]
            if ins.opname in ("LOAD_FAST", "DELETE_FAST") and ins.arg == slot:
                live[slot] = True
            elif not (ins.opname == "STORE_FAST" and ins.arg == slot):
                todo.extend(_successors(ins, by_index))
    return live


class ResumeUnsupported(Exception):
    """The break cannot be resumed (the frame then runs eagerly as a whole)."""


def _unit(op, arg=0):
    """One instruction (with EXTENDED_ARG prefixes when `arg` needs them) and its caches."""
    out = bytearray()
    for shift in (24, 16, 8):
        if arg >> shift:
            out += bytes([_OP["EXTENDED_ARG"], (arg >> shift) & 0xFF])
    out += bytes([op, arg & 0xFF])
    out += bytes(2 * _CACHES[op])
    return out


def _shift_slots(co_code, nvar, shift):
    """co_code with every cell/free-variable slot argument (>= nvar) moved by `shift`."""
    out = bytearray(co_code)
    ext = 0
    for i in range(0, len(out), 2):
        op, arg = out[i], out[i + 1] | ext
        ext = (arg << 8) if op == _OP["EXTENDED_ARG"] else 0
        if op in _DEREF_OPS and arg >= nvar:
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
    cell_args = [f"__kiln_cell{first + k}" for k, b in enumerate(bound_cells) if b]
    first += len(cell_args)
    stack_args = [f"__kiln_stack{first + k}" for k, null in enumerate(stack_nulls) if not null]
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
