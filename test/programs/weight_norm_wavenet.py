"""A WaveNet-style stack: dilated causal Conv1d layers with weight normalization (the old
nn.utils.weight_norm hook and the parametrizations.weight_norm parametrization), gated
tanh * sigmoid activations, residual and skip connections."""
from cutil import init_module, randn, rng

TAGS = ["tier2", "nn", "conv", "weight-norm"]
RTOL = 1e-4
ATOL = 1e-4


def build(T):
    r = rng(43)
    nn = T.nn
    F = T.nn.functional

    class Layer(nn.Module):
        def __init__(self, ch, dilation, new_style):
            super().__init__()
            self.dilation = dilation
            conv = nn.Conv1d(ch, 2 * ch, kernel_size=2, dilation=dilation)
            out = nn.Conv1d(ch, 2 * ch, kernel_size=1)
            if new_style:
                self.conv = nn.utils.parametrizations.weight_norm(conv)
                self.out = nn.utils.parametrizations.weight_norm(out, dim=0)
            else:
                self.conv = nn.utils.weight_norm(conv)
                self.out = nn.utils.weight_norm(out, name="weight", dim=0)

        def forward(self, x):
            h = self.conv(F.pad(x, (self.dilation, 0)))
            filt, gate = h.chunk(2, dim=1)
            z = T.tanh(filt) * T.sigmoid(gate)
            res, skip = self.out(z).chunk(2, dim=1)
            return (x + res) * 0.7071, skip

    class WaveNet(nn.Module):
        def __init__(self, ch=8, dilations=(1, 2, 4, 8)):
            super().__init__()
            self.inp = nn.Conv1d(1, ch, kernel_size=1)
            self.layers = nn.ModuleList(
                [Layer(ch, d, i % 2 == 0) for i, d in enumerate(dilations)])
            self.head = nn.Conv1d(ch, 4, kernel_size=1)

        def forward(self, x):
            h = self.inp(x)
            skips = 0
            for layer in self.layers:
                h, s = layer(h)
                skips = skips + s
            return self.head(F.relu(skips))

    net = init_module(T, WaveNet())

    def fn(x):
        return net(x).log_softmax(dim=1)

    return fn, [(randn(T, r, 2, 1, 32),), (randn(T, r, 2, 1, 32),)]
