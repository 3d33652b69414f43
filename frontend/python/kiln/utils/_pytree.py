"""kiln.utils._pytree (torch.utils._pytree): nested Python containers flattened into their leaves
and a TreeSpec that rebuilds them. Containers: list, tuple, dict, OrderedDict, defaultdict and
namedtuples; everything else (None included, as torch 2.13's) is a leaf.
Libraries import tree_flatten / tree_unflatten / tree_map from here (x-transformers, HF)."""
import collections

__all__ = ["TreeSpec", "LeafSpec", "tree_flatten", "tree_unflatten", "tree_leaves", "tree_structure", "tree_map",
           "tree_map_only", "tree_all", "tree_any"]


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _children(node):
    """(type, context, children) of a container node; None for a leaf."""
    if _is_namedtuple(node):
        return type(node), type(node), list(node)
    if isinstance(node, (list, tuple)) and type(node) in (list, tuple):
        return type(node), None, list(node)
    if isinstance(node, collections.defaultdict):
        return collections.defaultdict, (node.default_factory, list(node.keys())), list(node.values())
    if isinstance(node, collections.OrderedDict):
        return collections.OrderedDict, list(node.keys()), list(node.values())
    if type(node) is dict:
        return dict, list(node.keys()), list(node.values())
    return None


class TreeSpec:
    """The structure of a pytree: the container type, its context (dict keys, namedtuple class)
    and the specs of its children; num_leaves counts the leaves below."""

    def __init__(self, type, context, children_specs):  # noqa: A002 - torch's name
        self.type, self.context, self.children_specs = type, context, list(children_specs)
        self.num_leaves = sum(c.num_leaves for c in self.children_specs)
        self.num_children = len(self.children_specs)

    def is_leaf(self):
        return False

    def unflatten(self, leaves):
        return tree_unflatten(leaves, self)

    def _build(self, children):
        if self.type in (list, tuple):
            return self.type(children)
        if self.type is dict:
            return dict(zip(self.context, children))
        if self.type is collections.OrderedDict:
            return collections.OrderedDict(zip(self.context, children))
        if self.type is collections.defaultdict:
            factory, keys = self.context
            return collections.defaultdict(factory, zip(keys, children))
        return self.context(*children)  # a namedtuple

    def __eq__(self, other):
        return (isinstance(other, TreeSpec) and not other.is_leaf() and self.type is other.type
                and self.context == other.context and self.children_specs == other.children_specs)

    def __repr__(self):
        inner = ", ".join(repr(c) for c in self.children_specs)
        return f"TreeSpec({self.type.__name__}, {self.context!r}, [{inner}])"


class LeafSpec(TreeSpec):
    def __init__(self):
        self.type, self.context, self.children_specs = None, None, []
        self.num_leaves, self.num_children = 1, 0

    def is_leaf(self):
        return True

    def __eq__(self, other):
        return isinstance(other, LeafSpec)

    def __repr__(self):
        return "*"


def tree_flatten(tree, is_leaf=None):
    """(leaves in order, TreeSpec)."""
    leaves = []

    def go(node):
        if is_leaf is not None and is_leaf(node):
            leaves.append(node)
            return LeafSpec()
        parts = _children(node)
        if parts is None:
            leaves.append(node)
            return LeafSpec()
        kind, context, children = parts
        return TreeSpec(kind, context, [go(c) for c in children])

    spec = go(tree)
    return leaves, spec


def tree_unflatten(leaves, treespec):
    """The tree of `treespec`'s structure with `leaves` in order."""
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec "
                         f"refers to a pytree that holds {treespec.num_leaves} items ({treespec}).")
    it = iter(leaves)

    def build(spec):
        if spec.is_leaf():
            return next(it)
        return spec._build([build(c) for c in spec.children_specs])

    return build(treespec)


def tree_leaves(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func, tree, *rests, is_leaf=None):
    """func applied to each leaf (and the matching leaves of `rests`, of the same structure)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [tree_flatten(r, is_leaf)[0] for r in rests]
    for r, other in zip(rests, others):
        if len(other) != len(leaves):
            raise ValueError(f"tree_map: the trees do not have the same structure ({spec} vs "
                             f"{tree_structure(r, is_leaf)})")
    return tree_unflatten([func(*xs) for xs in zip(leaves, *others)], spec)


def tree_map_only(type_or_types, func, tree, is_leaf=None):
    """func applied to the leaves that are instances of type_or_types; other leaves unchanged."""
    return tree_map(lambda x: func(x) if isinstance(x, type_or_types) else x, tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    return all(pred(x) for x in tree_leaves(tree, is_leaf))


def tree_any(pred, tree, is_leaf=None):
    return any(pred(x) for x in tree_leaves(tree, is_leaf))
