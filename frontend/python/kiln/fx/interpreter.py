"""kiln.fx.Interpreter: runs a graph node by node, with torch.fx.Interpreter's overridable steps.

    run()
      +-- run_node(n)            fetches n's argument values, then calls by opcode:
            +-- placeholder()    the next positional argument of run()
            +-- get_attr()       the attribute at the target path of the module
            +-- call_function()  the resolved target (kiln.fx.resolve_target; aten.* targets call
            |                    that overload of the op table)
            +-- call_method()    getattr(args[0], target)(*args[1:], **kwargs)
            +-- call_module()    the submodule at the target path
            +-- output()         the output's value

Targets are passed as they are stored: call_function targets are qualified names (str).
"""
from . import targets
from .graph import map_arg


class Interpreter:
    def __init__(self, module, garbage_collect_values=True, graph=None):
        self.module = module
        self.graph = graph if graph is not None else module.graph
        self.garbage_collect_values = garbage_collect_values
        self.env = {}
        # Values are dropped after their last use unless garbage_collect_values is False.
        self.user_to_last_uses = {}
        if garbage_collect_values:
            seen = set()
            for node in reversed(self.graph.nodes):
                for used in node.all_input_nodes:
                    if used not in seen:
                        seen.add(used)
                        self.user_to_last_uses.setdefault(node, []).append(used)

    def run(self, *args, initial_env=None):
        """Runs the graph on args (one per placeholder) and returns the output's value."""
        self.env = dict(initial_env) if initial_env else {}
        self.args_iter = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue
            try:
                self.env[node] = self.run_node(node)
            except Exception as e:
                e.add_note(f"While executing {node.format_node()}")
                raise
            for used in self.user_to_last_uses.get(node, ()):
                self.env.pop(used, None)
            if node.op == "output":
                leftover = list(self.args_iter)
                if leftover:
                    raise TypeError(f"the graph takes {len(args) - len(leftover)} arguments, {len(args)} were given")
                return self.env[node]
        raise RuntimeError(f"graph @{self.graph.name} has no output node")

    def run_node(self, n):
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        return getattr(self, n.op)(n.target, args, kwargs)

    # -- one method per opcode ------------------------------------------------------------
    def placeholder(self, target, args, kwargs):
        try:
            return next(self.args_iter)
        except StopIteration:
            raise RuntimeError(f"expected a positional argument for parameter {target}, but none was passed") from None

    def get_attr(self, target, args, kwargs):
        return self.fetch_attr(target)

    def call_function(self, target, args, kwargs):
        return targets.resolve(target)(*args, **kwargs)

    def call_method(self, target, args, kwargs):
        self_obj, *rest = args
        return getattr(self_obj, target)(*rest, **kwargs)

    def call_module(self, target, args, kwargs):
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target, args, kwargs):
        return args[0]

    # -- helpers --------------------------------------------------------------------------
    def fetch_attr(self, target):
        obj = self.module
        atoms = target.split(".")
        for i, atom in enumerate(atoms):
            if not hasattr(obj, atom):
                raise RuntimeError(f"node referenced nonexistent target {'.'.join(atoms[:i + 1])}")
            obj = getattr(obj, atom)
        return obj

    def fetch_args_kwargs_from_env(self, n):
        return self.map_nodes_to_values(n.args, n), self.map_nodes_to_values(n.kwargs, n)

    def map_nodes_to_values(self, args, n):
        def load(node):
            if node not in self.env:
                raise RuntimeError(f"node %{n.name} uses %{node.name}, which has no value at this point")
            return self.env[node]

        return map_arg(args, load)
