"""Context managers in forward: no_grad around a target computation, enable_grad inside it, a
custom contextlib manager that records entries, and autocast off on CPU."""
import contextlib

from cutil import init_module, randn, rng

TAGS = ["graph-break"]


def build(T):
    r = rng(26)
    lin = init_module(T, T.nn.Linear(5, 5))
    events = []

    @contextlib.contextmanager
    def section(name):
        events.append(name)
        yield
        events.append("/" + name)

    class Timer:
        def __enter__(self):
            self.n = len(events)
            return self

        def __exit__(self, *exc):
            events.append("timer")
            return False

    def fn(x):
        with section("fwd"):
            h = lin(x).relu()
        with T.no_grad():
            target = (h * 0.5).detach()
            with T.enable_grad():
                extra = lin(x).sum()
        with Timer():
            loss = ((h - target) ** 2).mean() + extra * 0
        return loss, len(events)

    return fn, [(randn(T, r, 3, 5),) for _ in range(2)]
