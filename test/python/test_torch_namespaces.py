"""torch's module namespaces that training scripts and model libraries reach for around the model:
torch._dynamo (mapped onto kiln.compiler / kiln.config), torch.utils._pytree, torch.nn.attention,
torch.random.fork_rng and DistributedDataParallel without a process group."""
import collections

import pytest

import kiln


@pytest.fixture
def restore_config():
    saved = (kiln.config.recompile_limit, kiln.config.strict, kiln.config.verbose)
    yield
    kiln.config.recompile_limit, kiln.config.strict, kiln.config.verbose = saved


def test_dynamo_config_maps_onto_kiln_config(restore_config):
    kiln._dynamo.config.cache_size_limit = 16
    assert kiln.config.recompile_limit == 16 and kiln._dynamo.config.cache_size_limit == 16
    kiln._dynamo.config.suppress_errors = False
    assert kiln.config.strict is True and kiln._dynamo.config.suppress_errors is False
    with pytest.raises(AttributeError, match="no setting 'coordinate_descent_tuning'"):
        kiln._dynamo.config.coordinate_descent_tuning = True
    with pytest.raises(AttributeError, match="kiln maps cache_size_limit"):
        kiln._dynamo.config.automatic_dynamic_shapes


def test_dynamo_functions_are_kiln_compilers():
    assert kiln._dynamo.reset is kiln.compiler.reset and kiln._dynamo.disable is kiln.compiler.disable
    assert kiln._dynamo.is_compiling() is False and kiln._dynamo.explain is kiln.compiler.explain
    doubled = kiln._dynamo.optimize("inductor")(lambda x: x * 2)
    assert kiln.equal(doubled(kiln.ones(2)), kiln.full((2,), 2.0))
    with pytest.raises(kiln.compiler.Unsupported):
        kiln._dynamo.optimize("inductor", nopython=True)(lambda x: print(x) or x)(kiln.ones(1))


def test_pytree_matches_torch():
    torch_pytree = pytest.importorskip("torch.utils._pytree")
    from kiln.utils import _pytree as pytree
    Pair = collections.namedtuple("Pair", "a b")
    trees = [[1, (2, 3), {"x": 4, "y": [5, None]}], Pair(1, [2]), collections.OrderedDict(b=1, a=2), None, 7,
             {"k": ()}, collections.defaultdict(list, a=[1])]
    for tree in trees:
        leaves, spec = pytree.tree_flatten(tree)
        assert leaves == torch_pytree.tree_flatten(tree)[0] and spec.num_leaves == len(leaves)
        rebuilt = pytree.tree_unflatten(leaves, spec)
        assert rebuilt == tree and type(rebuilt) is type(tree)
        double = lambda v: v * 10 if v else v  # noqa: E731
        assert pytree.tree_map(double, tree) == torch_pytree.tree_map(double, tree)
    with pytest.raises(ValueError, match="has length 1"):
        pytree.tree_unflatten([1], pytree.tree_structure([1, 2]))
    assert pytree.tree_map(lambda a, b: a + b, [1, (2,)], [10, (20,)]) == [11, (22,)]


def test_sdpa_kernel_fork_rng_and_ddp():
    from kiln.nn.attention import SDPBackend, current_backends, sdpa_kernel
    q = kiln.randn(1, 2, 4, 8)
    plain = kiln.nn.functional.scaled_dot_product_attention(q, q, q)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]):
        assert current_backends() == (SDPBackend.FLASH_ATTENTION, SDPBackend.MATH)
        assert kiln.allclose(kiln.nn.functional.scaled_dot_product_attention(q, q, q), plain)
    with pytest.raises(AssertionError, match="SDPBackend"):
        with sdpa_kernel("flash"):
            pass
    kiln.manual_seed(1)
    with kiln.random.fork_rng():
        inside = kiln.rand(3)
    assert kiln.equal(kiln.rand(3), inside)
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        kiln.nn.parallel.DistributedDataParallel(kiln.nn.Linear(2, 2))


def test_module_constants_as_torch():
    # LLMs-from-scratch masks attention with `masked_fill_(mask, -torch.inf)`; RoPE code uses torch.pi.
    import math

    assert (kiln.inf, kiln.pi, kiln.e, kiln.newaxis) == (math.inf, math.pi, math.e, None)
    assert math.isnan(kiln.nan)
    f = kiln.compile(lambda x: x.masked_fill(x > 0, -kiln.inf)[:, kiln.newaxis] * kiln.pi, fullgraph=True)
    assert f(kiln.tensor([1.0, -1.0], dtype=kiln.float64)).tolist() == [[-math.inf], [-math.pi]]
