"""Logging inside a compiled step: print with f-strings of tensors, set_printoptions, a logger
call and a tensor's repr, the output captured in a buffer."""
import io
import logging

from cutil import randn, rng

TAGS = ["graph-break"]


def build(T):
    r = rng(67)
    sink = io.StringIO()
    log = logging.getLogger("kiln_conformance_print_log")
    log.addHandler(logging.NullHandler())
    log.propagate = False

    def fn(x, w):
        h = T.tanh(x @ w)
        T.set_printoptions(precision=3)
        print(f"mean={h.mean():.4f}", file=sink)
        loss = (h ** 2).mean()
        log.info("loss %s", loss)
        print("h", h[0, :3], file=sink)
        T.set_printoptions(profile="default")
        return loss + h.sum() * 0.01

    return fn, [(randn(T, r, 4, 6), randn(T, r, 6, 3)) for _ in range(2)]
