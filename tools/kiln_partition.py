#!/usr/bin/env python3
"""kiln-partition: AOT autograd's partitioners on text, the kiln-opt of joint graphs.

    kiln_partition.py [FILE|-] [--partitioner=min_cut|default] [--split-input-file]

Reads joint forward + backward graphs (the text form, docs/ir-text.md) and prints, for each,
the forward and the backward graph that kiln.compile's AOT autograd would compile
(kiln/compiler/aot.py partition_joint, kiln/compiler/partitioners.py):

    // <name>: saved <k> inputs (%w, ...), <n> intermediates (%a, ...), <bytes> bytes
    graph @<name>_forward(primals) { ... output (forward outputs..., saved intermediates...) }
    graph @<name>_backward(saved inputs, saved intermediates, tangents) { ... output (grads) }

A joint graph's placeholders are the primals, then the tangents (named tangents_*, one per
forward output that requires grad); its output is ((forward outputs...), (the gradient of each
primal, or None...)): a primal with a gradient requires grad. This is the shape of PyTorch's
joint graphs; KILN_DEBUG_DIR's joint.txt (trace_joint) is the same graph with the two tuples
flattened into one.

The partitioners are Python because aot.py drives them with what only the runtime knows (which
inputs require grad, what the frame callback compiles) and they run once per compiled graph in
well under the compile's other costs; this driver gives them text in and text out for lit tests.
"""
import argparse
import sys

import kiln
from kiln.compiler import aot
from kiln.fx.graph import parse_all

SPLIT_MARKER = "// -----"


def _split(text, split):
    """The chunks between "// -----" lines, each padded with the blank lines before it so that
    error positions count lines of the whole file."""
    if not split:
        return [text]
    chunks, current, line = [], [], 0
    for source_line in text.splitlines(keepends=True):
        line += 1
        if source_line.startswith(SPLIT_MARKER):
            chunks.append("".join(current))
            current = ["\n"] * line
        else:
            current.append(source_line)
    chunks.append("".join(current))
    return chunks


def _flatten_output(joint):
    """(number of forward outputs, requires_grad per primal); the joint's output made flat."""
    out = joint.output_node
    result = out.args[0]
    if not (isinstance(result, tuple) and len(result) == 2 and all(isinstance(r, tuple) for r in result)):
        raise ValueError(f"graph @{joint.name}: the output must be ((forward outputs...), "
                         "(gradient or None per primal...))")
    forward, grads = result
    primals = [n for n in joint.nodes if n.op == "placeholder" and not n.name.startswith("tangents_")]
    if len(grads) != len(primals):
        raise ValueError(f"graph @{joint.name}: {len(primals)} primals but {len(grads)} gradients")
    flagged = [g for g in grads if g is not None]
    out.args = (tuple(forward) + tuple(flagged),)
    return len(forward), [g is not None for g in grads]


def partition_text(joint, partitioner):
    num_outputs, requires_grad = _flatten_output(joint)
    num_tangents = sum(1 for n in joint.nodes if n.op == "placeholder" and n.name.startswith("tangents_"))
    part = aot.partition_joint(joint, num_outputs, num_tangents, requires_grad, partitioner)
    part.forward.name = joint.name + "_forward"
    part.backward.name = joint.name + "_backward"
    saved_inputs = [n.name for n in part.backward.nodes if n.op == "placeholder"][:len(part.saved_inputs)]
    saved = [n.name for n in part.backward.nodes
             if n.op == "placeholder"][len(part.saved_inputs):len(part.saved_inputs) + part.num_saved]
    summary = (f"// {joint.name}: saved {len(saved_inputs)} inputs ({', '.join('%' + s for s in saved_inputs)}), "
               f"{len(saved)} intermediates ({', '.join('%' + s for s in saved)}), {part.saved_bytes} bytes")
    return f"{summary}\n{part.forward}\n{part.backward}"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="kiln_partition.py", description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", default="-")
    parser.add_argument("--partitioner", default="min_cut", choices=sorted(aot.partitioners.PARTITIONERS))
    parser.add_argument("--split-input-file", action="store_true")
    args = parser.parse_args(argv)
    text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
    name = "<stdin>" if args.file == "-" else args.file
    ok = True
    for i, chunk in enumerate(_split(text, args.split_input_file)):
        if i:
            print(SPLIT_MARKER)
        try:
            for joint in parse_all(chunk, name):
                print(partition_text(joint, args.partitioner), end="")
        except (ValueError, RuntimeError) as e:
            print(f"{name}: error: {e}", file=sys.stderr)
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    kiln.config.strict = True
    sys.exit(main())
