"""A MobileNetV3-style inverted residual: 1x1 expand, depthwise 3x3 conv (groups=channels,
stride 2 and 1), squeeze-and-excitation with adaptive_avg_pool2d and hardsigmoid, hardswish,
BatchNorm2d in eval mode, a 1x1 projection and the residual; channels_last input."""
from cutil import init_module, randn, rng

TAGS = ["nn", "conv", "tier2"]
RTOL, ATOL = 1e-4, 1e-4


def build(T):
    nn, F = T.nn, T.nn.functional

    class SE(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.fc1, self.fc2 = nn.Conv2d(c, c // 4, 1), nn.Conv2d(c // 4, c, 1)

        def forward(self, x):
            s = F.adaptive_avg_pool2d(x, 1)
            return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cexp, cout, stride):
            super().__init__()
            self.use_res = stride == 1 and cin == cout
            self.block = nn.Sequential(
                nn.Conv2d(cin, cexp, 1, bias=False), nn.BatchNorm2d(cexp), nn.Hardswish(),
                nn.Conv2d(cexp, cexp, 3, stride=stride, padding=1, groups=cexp, bias=False),
                nn.BatchNorm2d(cexp), nn.Hardswish(), SE(cexp),
                nn.Conv2d(cexp, cout, 1, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.block(x)
            return x + y if self.use_res else y

    net = init_module(T, nn.Sequential(InvertedResidual(4, 16, 8, 2), InvertedResidual(8, 24, 8, 1),
                                       nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(8, 3)))
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.fill_(0.1)
            m.running_var.fill_(1.5)
    net.eval()

    def fn(x):
        return net(x.contiguous(memory_format=T.channels_last))

    r = rng(121)
    return fn, [(randn(T, r, 2, 4, 12, 12),), (randn(T, r, 2, 4, 12, 12),)]
