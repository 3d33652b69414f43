"""Checkpointing as training scripts do it: torch.save of a model and optimizer state_dict into
io.BytesIO, torch.load back (weights_only), load_state_dict into fresh modules (strict, and
strict=False with the head's parameters missing), and the restored model continuing to train identically."""
import io

from cutil import init_module, randn, rng

TAGS = ["serialization", "training", "nn", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn, F = T.nn, T.nn.functional

    def make():
        return nn.Sequential(nn.Linear(5, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))

    src = init_module(T, make())
    opt = T.optim.Adam(src.parameters(), lr=0.01)
    r = rng(115)
    x0, y0 = randn(T, r, 6, 5), randn(T, r, 6, 2)
    F.mse_loss(src(x0), y0).backward()
    opt.step()

    buf = io.BytesIO()
    T.save({"model": src.state_dict(), "opt": opt.state_dict(), "step": 1}, buf)
    buf.seek(0)
    ckpt = T.load(buf, weights_only=True)
    model = make()
    missing = model.load_state_dict(ckpt["model"])
    opt2 = T.optim.Adam(model.parameters(), lr=0.5)
    opt2.load_state_dict(ckpt["opt"])
    partial = make()
    sd = {k: v for k, v in ckpt["model"].items() if not k.startswith("3.")}
    res = partial.load_state_dict(sd, strict=False)
    info = (sorted(missing.missing_keys), sorted(res.missing_keys), ckpt["step"],
            opt2.param_groups[0]["lr"])

    def step(x, y):
        opt2.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt2.step()
        return loss.detach(), model[3].weight.detach().clone(), model[1].running_mean.clone(), info

    return step, [(randn(T, r, 6, 5), randn(T, r, 6, 2)) for _ in range(2)]
