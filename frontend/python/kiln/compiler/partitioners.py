"""Partitioners: a joint forward + backward graph (aot.py) cut into a forward and a backward graph.

Both take the joint graph and what aot.py knows about it (a JointInfo) and return a Partition:

- default: the forward saves every forward value the backward reads (views of inputs aside: a
  transposed weight is recomputed from the weight).
- min_cut (the inductor's default, as PyTorch's min_cut_rematerialization_partition): the values
  to save are a minimum cut, in bytes, between what the forward must compute and what the
  backward reads, over a flow network of the forward's nodes. Cheap ops (pointwise, views,
  factories) may be recomputed in the backward from what is saved; everything else (matmuls,
  reductions, random draws, ops without a lowering) is computed once, in the forward. A GELU's
  input is saved instead of its output and its derivative's intermediates; chains of pointwise
  ops between a matmul and its gradient recompute from one saved tensor.

Maximum flow: Dinic's algorithm on the network below (ours: graphs have thousands of nodes at most,
and the network lives only while partitioning; no library is needed for that).
"""
from collections import deque

from ..fx import Graph
from ..fx.graph import tensor_type

_INF = float("inf")
_BYTES = {"b8": 1, "u8": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8,
          "c64": 8, "c128": 16}


class JointInfo:
    """What the partitioners need to know about a joint graph: the number of forward outputs and
    tangents, the backward side (tangent-dependent nodes, aot._tangent_dependent), the writes
    the forward must keep (into inputs), and helpers: ops() (target -> (tags, written argument
    positions)), is_view(node), storage_root(node), written_arguments(node)."""

    def __init__(self, joint, num_forward_outputs, num_tangents, backward, writes, ops, is_view,
                 storage_root, written_arguments, weights=None):
        self.joint, self.num_forward_outputs, self.num_tangents = joint, num_forward_outputs, num_tangents
        # The cost of saving each node (node -> bytes) when not its own bytes: a graph traced at
        # several sizes (dynamic shapes) is cut by the bytes at the call's sizes at every one,
        # so that each probe saves the same values (aot.compile_training_dynamic).
        self.weights = weights
        self.backward, self.writes = backward, writes
        self.ops, self.is_view = ops, is_view
        self.storage_root, self.written_arguments = storage_root, written_arguments


class Partition:
    """forward: graph (primals -> forward outputs, saved intermediates); backward: graph (saved
    inputs, saved intermediates, tangents -> the gradients that are not None); saved_inputs: the
    primals' indices the backward takes; num_saved: the saved intermediates; saved_bytes: the
    bytes the backward receives from the forward (inputs and intermediates)."""

    def __init__(self, forward, backward, saved_inputs, num_saved, saved_bytes):
        self.forward, self.backward = forward, backward
        self.saved_inputs, self.num_saved, self.saved_bytes = saved_inputs, num_saved, saved_bytes


def nbytes(node):
    """The bytes of a node's tensor value (0 for anything else)."""
    t = node.type
    if t is None or t.kind != "tensor":
        return 0
    n = 1
    for s in t.shape:
        n *= int(s)
    return n * _BYTES.get(str(t).split("[", 1)[0], 4)


class _Joint:
    """The joint graph taken apart: primals, tangents, forward outputs, gradients, and the writes
    into each storage (reading a value needs the writes into its storage before it)."""

    def __init__(self, info):
        self.info = info
        self.nodes = list(info.joint.nodes)
        placeholders = [n for n in self.nodes if n.op == "placeholder"]
        cut = len(placeholders) - info.num_tangents
        self.primals, self.tangents = placeholders[:cut], placeholders[cut:]
        outputs = list(info.joint.output_node.args[0])
        self.forward_outputs = outputs[:info.num_forward_outputs]
        self.grads = outputs[info.num_forward_outputs:]
        self.writers = {}
        for node in self.nodes:
            for arg in info.written_arguments(node):
                self.writers.setdefault(info.storage_root(arg), []).append(node)

    def inputs_of(self, node):
        return list(node.all_input_nodes) + self.writers.get(self.info.storage_root(node), [])

    def closure(self, roots, stop=lambda n: False):
        """`roots` and every node they read (through inputs_of), not going past `stop` nodes."""
        seen, stack = set(), list(roots)
        while stack:
            node = stack.pop()
            if node in seen or not hasattr(node, "op"):
                continue
            seen.add(node)
            if not stop(node):
                stack.extend(self.inputs_of(node))
        return seen

    def build(self, backward_nodes, saved):
        """The Partition saving `saved` (forward nodes, primals included), the backward computing
        `backward_nodes` (in joint order) from them and the tangents."""
        saved_inputs = [n for n in self.nodes if n in saved and n.op == "placeholder"]
        saved_values = [n for n in self.nodes if n in saved and n.op != "placeholder"]
        forward = Graph()
        env = {p: forward.placeholder(p.name, type_expr=p.type) for p in self.primals}
        in_forward = self.closure(list(self.forward_outputs) + saved_values + list(self.info.writes))
        for node in self.nodes:
            if node in in_forward and node.op == "call_function":
                env[node] = forward.node_copy(node, lambda a: env[a])
        forward.output(tuple(env[n] for n in list(self.forward_outputs) + saved_values))

        backward = Graph()
        env = {}
        contiguous = set(saved_values)  # the forward hands them over contiguous (aot.py)
        for n in saved_inputs + saved_values + self.tangents:
            t = n.type
            if n in contiguous and t is not None and t.kind == "tensor":
                t = tensor_type(t.dtype, t.shape, device=t.device)
            env[n] = backward.placeholder(n.name, type_expr=t)
        for node in self.nodes:
            if node in backward_nodes and node not in env and node.op == "call_function":
                env[node] = backward.node_copy(node, lambda a: env[a])
        backward.output(tuple(env[g] for g in self.grads if g is not None))
        return Partition(forward, backward, [self.primals.index(p) for p in saved_inputs],
                         len(saved_values), sum(nbytes(n) for n in saved_inputs + saved_values))


def _views_of_inputs(j, backward):
    """Forward nodes that are chains of views of a primal read by the backward: recomputed there."""
    out = set()
    for node in j.nodes:
        if node.op != "call_function" or node in backward or not any(u in backward for u in node.users):
            continue
        chain, root = [], node
        while j.info.is_view(root):
            chain.append(root)
            root = root.args[0]
        if root.op == "placeholder" and chain and not j.writers.get(root):
            out.update(chain)
    return out


def default_partition(info):
    j = _Joint(info)
    backward = set(info.backward) | _views_of_inputs(j, info.backward)
    needed = j.closure([g for g in j.grads if g is not None], stop=lambda n: n not in backward)
    saved = {n for n in needed if n not in backward}
    return j.build({n for n in needed if n in backward}, saved)


def _recomputable(node, info):
    """Cheap to compute again in the backward: pointwise ops, views and factories of the table
    that draw no random numbers (prims-level names are not in the joint graph)."""
    if node.op != "call_function":
        return False
    tags = info.ops().get(str(node.target), (None, ()))[0]
    if tags is None or "random" in tags or "nondeterministic" in tags:
        return False
    if info.written_arguments(node):
        return False
    return bool(tags & {"pointwise", "view", "creation"})


def _fusible_reader(user, info):
    """Whether `user` reads its input inside a fused loop (pointwise ops, views, reductions,
    factories), so that the input need not exist in memory as a whole."""
    if user.op != "call_function":
        return False
    tags = info.ops().get(str(user.target), (None, ()))[0]
    return tags is not None and bool(tags & {"pointwise", "view", "reduction", "creation"})


def _materialized(node, info):
    """Whether some reader of `node` needs it in memory as a whole (a matmul, an op without a
    lowering, a graph output): then the kernel that computes it writes it anyway, and saving it
    for the backward costs nothing more. A node whose readers are all fusible lives only in
    registers when it is not saved: saving it costs a write and a read that recomputing would not.
    As PyTorch's min-cut (get_node_weight), such a node costs twice its bytes. This breaks ties
    between equal cuts the right way: an MLP saves relu(x @ W.T + b), which the next matmul
    reads anyway, rather than the pre-activation, which the forward would write only to be
    saved and the backward would turn into relu again (written out for the weight gradient's
    matmul)."""
    return not all(_fusible_reader(u, info) for u in node.users)


class _FlowNetwork:
    """A directed graph with capacities; max_flow then min_cut_source_side (Dinic)."""

    def __init__(self):
        self.head, self.to, self.cap = [], [], []

    def vertex(self):
        self.head.append([])
        return len(self.head) - 1

    def edge(self, u, v, c):
        self.head[u].append(len(self.to))
        self.to.append(v)
        self.cap.append(c)
        self.head[v].append(len(self.to))
        self.to.append(u)
        self.cap.append(0)

    def _levels(self, s):
        level = [-1] * len(self.head)
        level[s] = 0
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for e in self.head[u]:
                if self.cap[e] > 0 and level[self.to[e]] < 0:
                    level[self.to[e]] = level[u] + 1
                    queue.append(self.to[e])
        return level

    def max_flow(self, s, t):
        flow = 0
        while True:
            level = self._levels(s)
            if level[t] < 0:
                return flow
            it = [0] * len(self.head)
            while True:
                pushed = self._push(s, t, _INF, level, it)
                if not pushed:
                    break
                if pushed == _INF:
                    return _INF  # an infinite path: no finite cut
                flow += pushed

    def _push(self, s, t, limit, level, it):
        # Iterative DFS along the level graph; returns the flow pushed along one path.
        path, u = [], s
        while True:
            if u == t:
                f = min([limit] + [self.cap[e] for e in path])
                for e in path:
                    self.cap[e] -= f
                    self.cap[e ^ 1] += f
                return f
            advanced = False
            while it[u] < len(self.head[u]):
                e = self.head[u][it[u]]
                v = self.to[e]
                if self.cap[e] > 0 and level[v] == level[u] + 1:
                    path.append(e)
                    u = v
                    advanced = True
                    break
                it[u] += 1
            if advanced:
                continue
            if not path:
                return 0
            level[u] = -1  # a dead end
            e = path.pop()
            u = self.to[e ^ 1]
            it[u] += 1

    def source_side(self, s):
        seen = [False] * len(self.head)
        seen[s] = True
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for e in self.head[u]:
                if self.cap[e] > 0 and not seen[self.to[e]]:
                    seen[self.to[e]] = True
                    queue.append(self.to[e])
        return seen


def min_cut_partition(info):
    j = _Joint(info)
    backward = set(info.backward)
    backward_needed = j.closure([g for g in j.grads if g is not None], stop=lambda n: n not in backward)
    # What the backward reads from the forward side.
    reads = set()
    for node in backward_needed:
        if node in backward:
            reads.update(a for a in j.inputs_of(node) if a not in backward)
    reads.update(g for g in j.grads if g is not None and g not in backward)
    forward_side = [n for n in j.nodes if n not in backward and n.op in ("placeholder", "call_function")]
    must_forward = j.closure(list(j.forward_outputs) + list(info.writes))

    net = _FlowNetwork()
    source, sink = net.vertex(), net.vertex()
    vin, vout = {}, {}
    for node in forward_side:
        vin[node], vout[node] = net.vertex(), net.vertex()
        # Saving a node costs its bytes; a tuple (a multi-output op) cannot be saved, its items can.
        size = info.weights[node] if info.weights is not None else nbytes(node)
        if size and node.op != "placeholder" and not _materialized(node, info):
            size *= 2  # PyTorch's tie-breaker: see _materialized
        net.edge(vin[node], vout[node], size if size or node.op == "placeholder" else _INF)
        if node.op == "placeholder" or not _recomputable(node, info) or (
                node in must_forward and not _recomputable(node, info)):
            net.edge(source, vin[node], _INF)  # computed in the forward, never in the backward
        if node in reads:
            net.edge(vout[node], sink, _INF)
    for node in forward_side:
        for a in j.inputs_of(node):
            if a in vout:
                net.edge(vout[a], vin[node], _INF)
    flow = net.max_flow(source, sink)
    if flow == _INF:
        return default_partition(info)  # cannot happen: saving every read is a finite cut
    side = net.source_side(source)
    saved = {n for n in forward_side if side[vin[n]] and not side[vout[n]]}
    # The backward recomputes what it reads and did not get, from what it got.
    recompute = j.closure(list(reads), stop=lambda n: n in saved)
    backward_nodes = {n for n in backward_needed if n in backward} | {n for n in recompute if n not in saved}
    return j.build(backward_nodes, saved)


PARTITIONERS = {"default": default_partition, "min_cut": min_cut_partition}
