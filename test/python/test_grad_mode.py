"""Grad-mode context managers: state, nesting, decorators, threads."""
import threading

import kiln


def test_no_grad_nesting_and_restore():
    assert kiln.is_grad_enabled()
    with kiln.no_grad():
        assert not kiln.is_grad_enabled()
        with kiln.enable_grad():
            assert kiln.is_grad_enabled()
        assert not kiln.is_grad_enabled()
    assert kiln.is_grad_enabled()


def test_set_grad_enabled_as_call_and_context():
    kiln.set_grad_enabled(False)
    assert not kiln.is_grad_enabled()
    kiln.set_grad_enabled(True)
    with kiln.set_grad_enabled(False):
        assert not kiln.is_grad_enabled()
    assert kiln.is_grad_enabled()


def test_decorators():
    @kiln.no_grad()
    def f():
        return kiln.is_grad_enabled()

    @kiln.inference_mode()
    def g():
        return kiln.is_grad_enabled(), kiln.is_inference_mode_enabled()

    assert f() is False and g() == (False, True)
    assert kiln.is_grad_enabled() and not kiln.is_inference_mode_enabled()


def test_restored_after_exception():
    try:
        with kiln.no_grad():
            raise ValueError("boom")
    except ValueError:
        pass
    assert kiln.is_grad_enabled()


def test_grad_mode_is_thread_local():
    seen = []
    with kiln.no_grad():
        t = threading.Thread(target=lambda: seen.append(kiln.is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]


def test_requires_grad_flags():
    x = kiln.zeros(2)
    assert x.requires_grad_() is x and x.requires_grad
    x.requires_grad = False
    assert not x.requires_grad
    try:
        kiln.zeros(2, dtype=kiln.int64).requires_grad_()
    except RuntimeError as e:
        assert "floating point" in str(e)
    else:
        raise AssertionError("int tensors cannot require grad")
