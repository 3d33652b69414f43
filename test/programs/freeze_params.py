"""Fine-tuning with a frozen backbone (requires_grad_(False)), an optimizer over the head only,
then unfreezing the last backbone layer; gradients stay None where frozen."""
from cutil import init_module, randint, randn, rng

TAGS = ["training", "nn", "autograd", "tier2"]
RTOL, ATOL = 1e-3, 1e-4


def build(T):
    nn, F = T.nn, T.nn.functional
    backbone = init_module(T, nn.Sequential(nn.Linear(6, 10), nn.ReLU(), nn.Linear(10, 10), nn.ReLU()))
    head = init_module(T, nn.Linear(10, 3), seed=5)
    for p in backbone.parameters():
        p.requires_grad_(False)
    opt = T.optim.SGD(list(head.parameters()) + list(backbone[2].parameters()), lr=0.1)

    def step(x, y, unfreeze):
        if unfreeze:
            backbone[2].weight.requires_grad_(True)
        opt.zero_grad()
        loss = F.cross_entropy(head(backbone(x)), y)
        loss.backward()
        opt.step()
        return (loss.detach(), backbone[0].weight.grad is None, backbone[2].weight.grad is None,
                backbone[2].weight.detach().clone(), head.weight.detach().clone())

    r = rng(44)
    x, y = randn(T, r, 8, 6), randint(T, r, 0, 3, 8)
    return step, [(x, y, False), (x, y, False), (x, y, True), (x, y, True)]
