"""A ResNet basic block (conv-BN-ReLU-conv-BN + downsampling shortcut): a training step in
train mode (batch statistics, running stats updated), then inference in eval mode."""
from cutil import init_module, randn, rng

TAGS = ["nn", "conv", "training", "tier2"]
RTOL, ATOL = 1e-3, 1e-4


def build(T):
    nn, F = T.nn, T.nn.functional

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            h = F.relu(self.b1(self.c1(x)))
            return F.relu(self.b2(self.c2(h)) + self.short(x))

    model = init_module(T, nn.Sequential(Block(3, 8, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3)))
    opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

    def fn(x, y, train):
        model.train(train)
        if train:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss.detach(), model[0].b1.running_mean.clone(), model[0].b2.running_var.clone()
        with T.no_grad():
            return model(x), model[0].b1.num_batches_tracked.clone()

    r = rng(31)
    x = randn(T, r, 4, 3, 8, 8)
    y = T.tensor([0, 2, 1, 2])
    return fn, [(x, y, True), (x, y, True), (x, y, False)]
