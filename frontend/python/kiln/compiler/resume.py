"""Graph breaks that keep compiling (docs/capture.md, "Graph breaks").

When the tracer cannot run an instruction of the top frame, the frame callback traces again up
to that instruction and gets the graph so far plus expressions rebuilding the frame's live
locals and value stack (`break_state`). The frame's glue then

    calls the graph,
    rebuilds the locals and the stack,
    runs the breaking instruction in Python:
        'call'    the call, its result pushed;
        'subscr'  the item read (pushed) or stored;
        'jump'    the branch on the condition's real value;
        'generic' nothing: the rest of the frame runs eagerly from that instruction,
    and returns what a *resume function* returns: a new code object running the rest of the
    frame from the next instruction, with the locals and stack values as arguments. The frame
    hook captures it like any other function ('call', 'subscr' and 'jump'), so the code after the break
    compiles too; a 'generic' resume function is marked SKIP.

Resume code objects are cached per (code, target, stack layout, bound cells, mode), so that a
break does not make a new code object per call. The version-specific bytecode work is in
bytecode.py (CPython 3.11 to 3.13).
"""
import operator
import types
import weakref

from .. import _compiling
from . import bytecode
from .errors import BreakReason

# code -> {(target, stack nulls, bound cells, eager): resume code}
_resume_codes = weakref.WeakKeyDictionary()


ResumeUnsupported = bytecode.ResumeUnsupported


def reset_state():
    _resume_codes.clear()


def is_resume_code(code):
    return code.co_name.startswith("__kiln_resume_at_")


class BreakSite:
    """Where a first trace failed in the top frame: the instruction, how many times the frame
    had started it, its opcode and argument, the reason and source location."""

    def __init__(self, code, failure):
        self.code = code
        self.index = failure["instruction"]
        self.occurrence = failure["occurrence"]
        self.op = failure["op"]
        self.arg = failure["arg"]
        self.opname = bytecode.dis.opname[self.op]
        self.kind = bytecode.break_kind(self.opname)
        self.reason = BreakReason.of_failure(failure)
        start = bytecode.statement_start(code, self.index) if bytecode.supported() else None
        # The fewest ops the graph before a 'generic' break needs (else the frame runs eagerly).
        self.min_ops = 1
        retain_grad = self.reason.reason.startswith("Tensor.retain_grad()")
        if (retain_grad and start is not None and start <= self.index and
                not bytecode.in_loop(code, self.index)):
            # TorchDynamo fails at the lookup of `.retain_grad` ("does not work with
            # AOTDispatcher"), not at a call: it compiles the graph up to its last checkpoint (an
            # empty stack, here the statement's start) and runs the rest of the frame eagerly;
            # with fewer than 2 calls in the graph there is no checkpoint and it skips the frame.
            self.kind = "generic"
            self.index = start
            self.occurrence = 1
            self.min_ops = 2
        elif (self.kind == "call" and start is not None and bytecode.enters_with(code, self.index) and
                not bytecode.in_loop(code, self.index)):
            # `with make_manager():` where the manager is not traceable: resuming after the call
            # would only break again at the `with` (a second break, no graph between), so the
            # statement and the rest of the frame run eagerly.
            self.kind = "generic"
            self.index = start
            self.occurrence = 1
        elif self.kind != "generic" and bytecode.supported() and bytecode.in_try(code, self.index):
            # Run by the glue, the call (or the branch's truth test) would be outside the try
            # block and its exception would miss the handler: the instruction runs in the
            # (eager) rest of the frame, whose code keeps the exception table.
            self.kind = "generic"

    def resumable(self):
        """None when the break can keep compiling, else why the whole frame runs eagerly."""
        if not bytecode.supported():
            return "graph breaks resume only on CPython 3.11 to 3.13 bytecode"
        if self.kind != "generic" and bytecode.in_loop(self.code, self.index):
            # As TorchDynamo: a resume function inside a loop would call itself once per
            # iteration (the glue of each iteration calling the next).
            return "a graph break inside a for/while loop"
        if self.reason.reason.startswith("Tensor.retain_grad()") and self.kind != "generic":
            # As TorchDynamo, which cannot resume there (see __init__).
            return "retain_grad() runs the frame eagerly, as with torch.compile"
        return None

    def at_statement_start(self):
        """The same break moved to the first instruction of its source line, as a 'generic'
        break (the statement and the rest of the frame run eagerly): the fallback when the
        values on the stack at the instruction cannot be rebuilt (an object made while
        tracing, a context manager being entered). None when there is no earlier start."""
        start = bytecode.statement_start(self.code, self.index)
        if start is None or start >= self.index or bytecode.in_loop(self.code, self.index):
            return None
        moved = object.__new__(BreakSite)
        moved.__dict__.update(self.__dict__)
        moved.index, moved.occurrence, moved.kind = start, 1, "generic"
        return moved

    def retrace_options(self):
        return {"stop_at": self.index, "occurrence": self.occurrence,
                "live": bytecode.live_locals(self.code, self.index)}


def _resume_function(frame_info, target, stack_nulls, bound_cells, eager, skip_code):
    code = frame_info.code
    key = (target, tuple(stack_nulls), tuple(bound_cells), eager)
    per_code = _resume_codes.setdefault(code, {})
    rcode = per_code.get(key)
    if rcode is None:
        name = f"__kiln_{'eager' if eager else 'resume'}_at_{target}"
        rcode = per_code[key] = bytecode.make_resume_code(code, target, stack_nulls, bound_cells, name)
        if eager:
            skip_code(rcode)
    closure = getattr(frame_info.func, "__closure__", None) if code.co_freevars else None
    if code.co_freevars and closure is None:
        raise ResumeUnsupported("the frame's closure is not known")
    return types.FunctionType(rcode, frame_info.globals, rcode.co_name, None, closure)


def guard_closure(guards, frame_info):
    """The glue's resume functions are made once, with this call's closure: the entry holds
    only for frames over the same cells. Another function object of the same code (a closure
    made again by its factory, over another model) traces again rather than resume in the
    first one's variables."""
    code = frame_info.code
    closure = getattr(frame_info.func, "__closure__", None) if code.co_freevars else None
    for i, cell in enumerate(closure or ()):
        guards.closure_cell_object(i, f"C['{code.co_freevars[i]}'] (cell)").check_id(cell)


def _split_locals(code, local_exprs):
    """The resume function's local arguments (None where not live) and the bound cells'."""
    names = bytecode.localsplus_names(code)
    nvar = len(code.co_varnames)
    plain = [e if e is not None else "None" for e in local_exprs[:nvar]]
    cells, bound = [], []
    for i, name in enumerate(names):
        if name in code.co_cellvars:
            expr = local_exprs[i] if i < len(local_exprs) else None
            bound.append(expr is not None)
            if expr is not None:
                cells.append(expr)
            if i < nvar:
                plain[i] = "None"  # an argument that is a cell: its value goes in the cell's slot
    return plain, cells, bound


def glue_body(site, frame_info, state, namespace, capture, callback):
    """The lines of the glue after the graph call (indented by the caller) for a break at
    `site` with the tracer's `state`; adds the resume functions to `namespace`. The hook runs
    a glue with capture off (for the graph's own code); from the breaking instruction on it is
    back on with `callback`, so that functions the instruction calls and the resume function
    are captured."""
    lines = _break_lines(site, frame_info, state, namespace, capture.skip_code)
    namespace["__set_callback"] = capture.set_callback
    namespace["__callback"] = callback
    return (["__prev = __set_callback(__callback)", "try:"] + [f"    {line}" for line in lines] +
            ["finally:", "    __set_callback(__prev)"])


def _break_lines(site, frame_info, state, namespace, skip_code):
    code = site.code
    plain, cells, bound = _split_locals(code, state["locals"])
    stack = list(state["stack"])
    lines = []

    def resume(name, target, stack_exprs, eager=False):
        nulls = [e is None for e in stack_exprs]
        namespace[name] = _resume_function(frame_info, target, nulls, bound, eager, skip_code)
        args = plain + cells + [e for e in stack_exprs if e is not None]
        return f"return {name}({', '.join(args)})"

    if site.kind == "call":
        kw_names = state["kw_names"]
        if site.opname == "CALL_KW":  # 3.13: the names are a constant on the stack
            stack.pop()
            kw_names = bytecode.keyword_names(code, site.index)
        call = _call_expr(site, stack, kw_names, namespace)
        namespace["__at_break"] = _at_line(code, bytecode.line_of(code, site.index), skip_code)
        ends = [e for e in stack if e is not None and e.startswith("__c[")]
        if ends:
            # The call may be inside grad-mode `with` blocks (their exits are constants on the
            # stack): if it raises, the blocks end as they would eagerly, innermost first.
            namespace["__RestoreMode"] = (_compiling._RestoreGradMode, _compiling._RestoreAutocast)  # noqa: SLF001
            lines += ["try:", f"    __r = __at_break(lambda: {call})", "except BaseException:",
                      f"    for __e in reversed(({', '.join(ends)},)):",
                      "        if isinstance(__e, __RestoreMode):",
                      "            __e(None, None, None)",
                      "    raise"]
        else:
            lines.append(f"__r = __at_break(lambda: {call})")
        lines.append(resume("__resume", bytecode.next_index(code, site.index), stack + ["__r"]))
    elif site.kind == "subscr" and any(e is not None and e.startswith("__c[") for e in stack):
        # Inside a `with` block (its exit is a constant on the stack): the subscript and the rest
        # of the frame run eagerly (resuming there lost the block's grad mode: dqn_update's
        # `next_state_values[mask] = ...` under no_grad left the loss without grad).
        lines.append(resume("__resume_eager", site.index, stack, eager=True))
    elif site.kind == "subscr":
        namespace["__at_break"] = _at_line(code, bytecode.line_of(code, site.index), skip_code)
        if site.opname == "BINARY_SUBSCR":
            key, obj = stack.pop(), stack.pop()
            lines.append(f"__r = __at_break(lambda: {obj}[{key}])")
            stack.append("__r")
        else:  # STORE_SUBSCR: value, container, key (top)
            namespace["__setitem"] = operator.setitem
            key, obj, value = stack.pop(), stack.pop(), stack.pop()
            lines.append(f"__at_break(lambda: __setitem({obj}, {key}, {value}))")
        lines.append(resume("__resume", bytecode.next_index(code, site.index), stack))
    elif site.kind == "jump":
        taken_when, keep = bytecode.jump_sense(site.opname)
        cond = stack.pop()
        lines.append(f"__t = {cond}")
        test = "__t" if taken_when else "not __t"
        jumped = resume("__resume_jump", bytecode.jump_target(code, site.index), stack + (["__t"] if keep else []))
        lines.append(f"if {test}:")
        lines.append(f"    {jumped}")
        lines.append(resume("__resume_next", bytecode.next_index(code, site.index), stack))
    else:
        lines.append(resume("__resume_eager", site.index, stack, eager=True))
    return lines


def _at_line(code, lineno, skip_code):
    """A function calling its argument from the frame's source file and line, named as the
    frame: an exception the breaking call raises shows the user's line in its traceback (as it
    would without kiln) rather than only the glue's."""
    if not lineno or lineno < 1 or code.co_filename.startswith("<"):
        return lambda thunk: thunk()
    source = "\n" * (lineno - 1) + "def __kiln_at_break(thunk): return thunk()\n"
    namespace = {}
    exec(compile(source, code.co_filename, "exec"), namespace)  # noqa: S102 - generated code
    fn = namespace["__kiln_at_break"]
    fn.__code__ = fn.__code__.replace(co_name=code.co_name, co_qualname=code.co_qualname)
    skip_code(fn.__code__)
    return fn


def _call_expr(site, stack, kw_names, namespace):
    """The Python call the breaking instruction makes, popping its operands off `stack`."""
    if site.opname == "CALL_FUNCTION_EX":
        kwargs = stack.pop() if site.arg & 1 else None
        args = stack.pop()
        a, b = stack.pop(), stack.pop()  # the callable and its NULL (below it up to 3.12, above after)
        fn = b if a is None else a
        return f"{fn}(*{args}{', **' + kwargs if kwargs else ''})"
    n = site.arg
    operands = stack[len(stack) - n - 2:]
    del stack[len(stack) - n - 2:]
    first, second, args = operands[0], operands[1], operands[2:]
    # [NULL, callable] (3.11, 3.12), [callable, NULL] (3.13) or [method, self] (all)
    if first is None:
        fn = second
    elif second is None:
        fn = first
    else:
        fn, args = first, [second] + args
    if kw_names:
        k = len(kw_names)
        positional, keyword = args[:len(args) - k], args[len(args) - k:]
        args = positional + [f"**{{{', '.join(f'{name!r}: {v}' for name, v in zip(kw_names, keyword))}}}"]
    return f"{fn}({', '.join(args)})"
