"""A CTC training step: a linear frame classifier over (T, N, F) features, log_softmax, and
nn.CTCLoss over padded targets with tensor lengths (mean), then F.ctc_loss over concatenated
targets with list lengths (sum, zero_infinity on, one target too long for its input), with the
gradients of the weights. torch.compile breaks at _ctc_loss.Tensor (its meta kernel reads the
lengths: 2 graphs); kiln sizes log_alpha from the padded targets and compiles one graph, the CTC
kernels running eagerly inside it."""
import numpy as np

from cutil import randn, rng, tensor

TAGS = ["loss", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    r = rng(61)
    steps, n, feats, classes, longest = 12, 4, 6, 7, 4
    F = T.nn.functional
    crit = T.nn.CTCLoss(blank=0)

    def fn(x, w, targets, input_lengths, target_lengths, flat_targets):
        logp = (x @ w).log_softmax(2)                                   # (T, N, C)
        a = crit(logp, targets, input_lengths, target_lengths)
        b = F.ctc_loss(logp, flat_targets, [12, 3, 10, 8], [3, 3, 2, 4], reduction="sum", zero_infinity=True)
        gw, = T.autograd.grad(a + 0.1 * b, [w])
        return a, b, gw

    targets = r.integers(1, classes, size=(n, longest)).astype(np.int64)
    flat = np.concatenate([targets[0, :3], targets[1, :3], targets[2, :2], targets[3, :4]])
    flat[3:5] = flat[5]                                                 # sample 1: three equal labels, 3 frames
    calls = []
    for lengths in ([12, 9, 12, 5], [7, 12, 10, 12]):
        calls.append((randn(T, r, steps, n, feats), randn(T, r, feats, classes, requires_grad=True),
                      tensor(T, targets), tensor(T, np.array(lengths, dtype=np.int64)),
                      tensor(T, np.array([4, 3, 2, 1], dtype=np.int64)), tensor(T, flat)))
    return fn, calls
