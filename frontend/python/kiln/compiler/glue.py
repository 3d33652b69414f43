"""Glue (protocol 3 of the capture design): the Python function a cache entry runs instead of
the frame's bytecode. It takes the frame's arguments, calls the compiled graph on the values
the tracer named with input expressions, and rebuilds the frame's return value.

    def __kiln_glue(<the frame's argument names>):
        __o = __graph(<input expressions>)
        return <output expression over __o and __c>
"""
import inspect
import itertools
import linecache

from .skip_policy import GLUE_FILENAME_PREFIX

# The glue's own names; a frame argument spelled like one would shadow it.
GLUE_NAMES = ("__graph", "__c", "__o", "__r", "__t", "__resume", "__resume_jump", "__resume_next",
              "__resume_eager", "__prev", "__set_callback", "__callback", "__iter_item", "__setitem",
              "__at_break")

_glue_ids = itertools.count()


def argument_names(code):
    """The names of the frame slots the hook passes: positional, keyword-only, *args, **kwargs
    (the first slots of co_varnames, in that order), as the glue spells them: a comprehension's
    `.0` (3.11) is `__dot0`, as the tracer's input expressions name it (Source.cpp)."""
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return tuple(n if n.isidentifier() else "__dot" + n[1:] for n in code.co_varnames[:count])


def _helpers():
    # The glue's accessor for a comprehension's iterator argument (input expressions).
    from .. import _C
    return {"__iter_item": _C._capture.iter_item}


def _define(source, filename, namespace):
    # Registered so that tracebacks through the glue show its lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - generated code


def _filename(code, suffix=""):
    return f"{GLUE_FILENAME_PREFIX}{code.co_qualname} #{next(_glue_ids)}{suffix}>"


def glue_source(names, inputs, output, body=None, prelude=()):
    """The glue's source for argument `names`, input expressions and output expression.
    `prelude` (lines) runs after the graph: the tracer's `lets` and replayed side effects. At a
    graph break, `body` (lines) replaces the return (resume.glue_body), and inputs of None (no
    graph before the break) mean no graph call."""
    source = f"def __kiln_glue({', '.join(names)}):\n"
    if inputs is not None:
        source += f"    __o = __graph({', '.join(inputs)})\n"
    source += "".join(f"    {line}\n" for line in prelude)
    if body is None:
        return source + f"    return {output}\n"
    return source + "".join(f"    {line}\n" for line in body)


def make_glue(code, compiled_graph, inputs, output, constants, body=None, namespace=None, prelude=()):
    """The glue function of a traced frame of `code` calling `compiled_graph` (None: no graph)."""
    namespace = dict(namespace or {})
    namespace.update({"__graph": compiled_graph, "__c": constants, **_helpers()})
    source = glue_source(argument_names(code), None if compiled_graph is None else inputs, output, body,
                         prelude)
    _define(source, _filename(code), namespace)
    return namespace["__kiln_glue"]


def example_inputs(code, args, inputs, constants=()):
    """The values of the input expressions for the frame arguments `args`: the graph's inputs
    in the call being traced, evaluated exactly as the glue will evaluate them (an expression
    may read through an object the tracer named in `constants`: `__c[3].grad`)."""
    names = argument_names(code)
    source = f"def __kiln_inputs({', '.join(names)}):\n    return [{', '.join(inputs)}]\n"
    namespace = {"__c": constants, **_helpers()}
    _define(source, _filename(code, " inputs"), namespace)
    return namespace["__kiln_inputs"](*args)
