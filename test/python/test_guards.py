"""GuardTree (kiln._C._capture.GuardTree): each accessor and check passes and fails with a
failure text naming the value path, the expected and the actual value; no user code runs."""
import collections
import gc
import math
import sys

import pytest

import kiln
from kiln._C import _capture as cap

K = 3  # read through G['K'] and fn.__globals__['K']


def f1(x):
    return x


def f2(x, y):
    return x, y


def check(g, fn, *args):
    return g.check_frame(fn, args)


def tensor_tree(example):
    g = cap.GuardTree()
    g.local(0, "L['x']").check_tensor(example)
    return g


def test_tensor_pass():
    x = kiln.ones(8, 4)
    g = tensor_tree(x)
    assert check(g, f1, x) is None
    assert check(g, f1, kiln.zeros(8, 4)) is None


@pytest.mark.parametrize(
    "make, failure",
    [
        (lambda: kiln.ones(16, 4), "L['x'].size()[0] == 8 (got 16)"),
        (lambda: kiln.ones(8, 5), "L['x'].size()[1] == 4 (got 5)"),
        (lambda: kiln.ones(8, 4, dtype=kiln.float64), "L['x'].dtype == float32 (got float64)"),
        (lambda: kiln.ones(8), "L['x'].dim() == 2 (got 1)"),
        (lambda: kiln.ones(4, 8).t(), "L['x'].stride()[0] == 4 (got 1)"),
        (lambda: kiln.ones(8, 4).requires_grad_(), "L['x'].requires_grad == False (got True)"),
        (lambda: kiln.ones(8, 4, device="meta"), "L['x'].device == cpu (got meta)"),
        (lambda: kiln.nn.Parameter(kiln.ones(8, 4)), "type(L['x']) is Tensor (got Parameter)"),
        (lambda: 3, "type(L['x']) is Tensor (got int)"),
    ],
)
def test_tensor_fail(make, failure):
    g = tensor_tree(kiln.ones(8, 4))
    assert check(g, f1, make()) == failure


def test_tensor_str_and_errors():
    g = tensor_tree(kiln.ones(2, 3))
    assert str(g) == (
        "check_tensor(L['x'], Tensor, float32, device=cpu, size=[2, 3], stride=[3, 1], requires_grad=False)"
    )
    with pytest.raises(TypeError):
        cap.GuardTree().local(0, "L['x']").check_tensor(3)


@pytest.mark.parametrize(
    "expected, ok, bad, failure",
    [
        (3, 3, 4, "L['x'] == 3 (got 4)"),
        (True, True, 1, "L['x'] == True (got 1)"),
        (1, 1, True, "L['x'] == 1 (got True)"),
        (1.0, 1.0, 1, "L['x'] == 1.0 (got 1)"),
        (float("nan"), float("nan"), 0.0, "L['x'] == nan (got 0.0)"),
        (0.0, 0.0, -0.0, "L['x'] == 0.0 (got -0.0)"),
        (None, None, 0, "L['x'] == None (got 0)"),
        ("a", "a", "b", "L['x'] == 'a' (got 'b')"),
        (b"a", b"a", "a", "L['x'] == b'a' (got 'a')"),
        ((1, "a", (2.5,)), (1, "a", (2.5,)), (1, "a", (2,)),
         "L['x'] == (1, 'a', (2.5,)) (got (1, 'a', (2,)))"),
    ],
)
def test_const(expected, ok, bad, failure):
    g = cap.GuardTree()
    g.local(0, "L['x']").check_const(expected)
    assert check(g, f1, ok) is None
    assert check(g, f1, bad) == failure


def test_const_rejects_non_constants_and_runs_no_user_eq():
    with pytest.raises(TypeError):
        cap.GuardTree().local(0, "L['x']").check_const([1])

    class Sneaky(int):
        def __eq__(self, other):
            raise AssertionError("__eq__ ran")

        __hash__ = int.__hash__

    g = cap.GuardTree()
    g.local(0, "L['x']").check_const(3)
    assert check(g, f1, Sneaky(3)).startswith("L['x'] == 3 (got <Sneaky object at 0x")


def test_type_and_id():
    class A:
        def __eq__(self, other):
            raise AssertionError("__eq__ ran")

        __hash__ = object.__hash__

    a, b = A(), A()
    g = cap.GuardTree()
    g.local(0, "L['x']").check_type(A).check_id(a)
    assert check(g, f1, a) is None
    assert check(g, f1, 1) == "type(L['x']) is A (got int)"
    failure = check(g, f1, b)
    assert failure.startswith("L['x'] is <A object at 0x") and f"(got <A object at {hex(id(b))}" in failure
    with pytest.raises(TypeError):
        cap.GuardTree().local(0, "L['x']").check_type(3)


@pytest.mark.parametrize("container", [[1, 2, 3], (1, 2, 3), {"a": 1, "b": 2, "c": 3}])
def test_length(container):
    g = cap.GuardTree()
    g.local(0, "L['flags']").check_length(3)
    assert check(g, f1, container) is None
    bigger = container + type(container)([4]) if not isinstance(container, dict) else {**container, "d": 4}
    assert check(g, f1, bigger) == "len(L['flags']) == 3 (got 4)"
    assert check(g, f1, "abc") == "len(L['flags']) == 3 (got a str)"


def test_dict_keys_in_order():
    g = cap.GuardTree()
    g.local(0, "L['d']").check_dict_keys(["a", 1])
    assert check(g, f1, {"a": 0, 1: 0}) is None
    assert check(g, f1, {1: 0, "a": 0}) == "list(L['d'].keys()) == ['a', 1] (got [1, 'a'])"
    assert check(g, f1, {"a": 0}) == "list(L['d'].keys()) == ['a', 1] (got ['a'])"
    # OrderedDict and defaultdict are dicts to this check (check_type tells them apart); an
    # OrderedDict's own order counts (move_to_end changes it, not the underlying dict's).
    od = collections.OrderedDict([("a", 0), (1, 0)])
    assert check(g, f1, od) is None
    od.move_to_end("a")
    assert check(g, f1, od) is not None
    assert check(g, f1, collections.defaultdict(int, {"a": 0, 1: 0})) is None

    class MyDict(dict):
        pass

    assert check(g, f1, MyDict({"a": 0, 1: 0})) == "list(L['d'].keys()) == ['a', 1] (got a MyDict)"
    with pytest.raises(TypeError):
        cap.GuardTree().local(0, "L['d']").check_dict_keys([1.5])


def test_item_dict_list_tuple():
    g = cap.GuardTree()
    d = g.local(0, "L['d']")
    d.item("w").check_const(1)
    d.item(2).item(-1).check_const("z")
    assert d.item("w").name == "L['d']['w']" and d.item(2).item(-1).name == "L['d'][2][-1]"
    assert check(g, f1, {"w": 1, 2: ["y", "z"]}) is None
    assert check(g, f1, {"w": 1, 2: ("z",)}) is None
    assert check(g, f1, {"w": 2, 2: ["z"]}) == "L['d']['w'] == 1 (got 2)"
    assert check(g, f1, {"w": 1}) == "L['d'][2] exists (got missing key)"
    assert check(g, f1, {"w": 1, 2: []}) == "L['d'][2][-1] exists (got index out of range)"
    assert check(g, f1, {"w": 1, 2: "z"}) == "L['d'][2][-1] exists (got item of a str)"
    # OrderedDict (nn.Module's _parameters/_modules) is read like a dict; other mappings are not.
    od = collections.OrderedDict(w=1)
    assert check(g, f1, od) == "L['d'][2] exists (got missing key)"
    with pytest.raises(TypeError):
        d.item(1.5)


def test_item_of_sequence_subclass_with_own_getitem_fails():
    class Odd(list):
        def __getitem__(self, i):
            raise AssertionError("__getitem__ ran")

    g = cap.GuardTree()
    g.local(0, "L['t']").item(0).check_const(1)
    assert check(g, f1, Odd([1])) == "L['t'][0] exists (got item of a Odd)"
    assert check(g, f1, kiln.Size([1])) is None  # a tuple subclass that keeps tuple's indexing


def test_attr_instance_module_and_no_getattr():
    calls = []

    class Obj:
        def __getattr__(self, name):
            calls.append(name)
            return 0

    o = Obj()
    o.w = 5
    g = cap.GuardTree()
    g.local(0, "L['o']").attr("w").check_const(5)
    g.local(1, "L['m']").attr("pi").check_const(math.pi)
    assert check(g, f2, o, math) is None
    o.w = 6
    assert check(g, f2, o, math) == "L['o'].w == 5 (got 6)"
    del o.w
    assert check(g, f2, o, math) == "L['o'].w exists (got no such attribute)"
    assert calls == []
    assert check(g, f2, 1, math) == "L['o'].w exists (got a int without __dict__)"


def test_attr_slots_object_has_no_dict():
    class Slotted:
        __slots__ = ("w",)

    s = Slotted()
    s.w = 1
    g = cap.GuardTree()
    g.local(0, "L['s']").attr("w").check_const(1)
    assert check(g, f1, s) == "L['s'].w exists (got a Slotted without __dict__)"


def test_globals_and_builtins():
    g = cap.GuardTree()
    g.global_("K").check_const(3)
    g.global_("len").check_id(len)
    assert check(g, f1, 0) is None
    assert str(g).splitlines()[0] == "G['K'] == 3"
    global K
    K = 4
    try:
        assert check(g, f1, 0) == "G['K'] == 3 (got 4)"
    finally:
        K = 3
    g.global_("no_such_name").check_const(1)
    assert check(g, f1, 0) == "G['no_such_name'] exists (got undefined)"


def make_closure(y):
    def inner(x):
        return x + y

    return inner


def test_closure_cell():
    g = cap.GuardTree()
    g.closure_cell(0, "L['y']").check_const(5)
    assert check(g, make_closure(5), 1) is None
    assert check(g, make_closure(6), 1) == "L['y'] == 5 (got 6)"
    assert check(g, f1, 1) == "L['y'] exists (got no such cell)"


def helper(a, b=7):
    return K + a + b


def test_function_accessors():
    g = cap.GuardTree()
    fn = g.local(0, "L['fn']")
    fn.func_global("K").check_const(3)
    fn.func_default(0).check_const(7)
    fn.func_closure_cell(0).check_const(5)
    assert check(g, f1, helper) == "L['fn'].__closure__[0].cell_contents exists (got index out of range)"
    g2 = cap.GuardTree()
    g2.local(0, "L['fn']").func_closure_cell(0).check_const(5)
    assert check(g2, f1, make_closure(5)) is None
    g3 = cap.GuardTree()
    g3.local(0, "L['fn']").func_global("K").check_const(3)
    g3.local(0, "L['fn']").func_default(0).check_const(7)
    assert check(g3, f1, helper) is None
    assert check(g3, f1, 1) == "L['fn'].__globals__['K'] exists (got a int, not a function)"

    def other(a, b=8):
        return a

    assert check(g3, f1, other) == "L['fn'].__defaults__[0] == 7 (got 8)"


def test_grad_mode():
    g = cap.GuardTree()
    g.check_grad_mode(True)
    assert check(g, f1, 0) is None
    with kiln.no_grad():
        assert check(g, f1, 0) == "grad_mode == True (got False)"
    assert str(g) == "grad_mode == True"


def test_unbound_local_and_bad_args():
    g = cap.GuardTree()
    g.local(1, "L['y']").check_const(1)
    assert check(g, f2, 0) == "L['y'] exists (got unbound)"
    with pytest.raises(ValueError):
        check(g, f1, 0, 1)
    with pytest.raises(TypeError):
        g.check_frame(len, ())


def test_str_num_checks_dedup_and_first_failure():
    g = cap.GuardTree()
    g.check_grad_mode(True)
    g.local(0, "L['x']").check_type(tuple).check_length(2)
    g.local(0, "L['x']").item(0).check_const(1)
    g.local(0, "L['x']").item(0).check_type(int)
    assert g.num_checks == 5
    assert str(g).splitlines() == [
        "grad_mode == True",
        "type(L['x']) is tuple",
        "len(L['x']) == 2",
        "L['x'][0] == 1",
        "type(L['x'][0]) is int",
    ]
    assert check(g, f1, (1, 2)) is None
    assert check(g, f1, [1, 2]) == "type(L['x']) is tuple (got list)"
    assert check(g, f1, (2, 2)) == "L['x'][0] == 1 (got 2)"


def test_nodes_keep_tree_alive():
    node = cap.GuardTree().local(0, "L['x']").item("a")
    gc.collect()
    node.check_const(1)
    assert node.name == "L['x']['a']"


def test_check_does_not_leak_references():
    x = kiln.ones(2)
    g = tensor_tree(x)
    before = sys.getrefcount(x)
    for _ in range(100):
        check(g, f1, x)
    assert sys.getrefcount(x) == before
