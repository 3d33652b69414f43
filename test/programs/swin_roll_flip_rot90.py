"""Shifted-window attention's tensor plumbing (Swin): torch.roll by a negative window shift over
(H, W), window partition with view/permute, an attention mask from region ids, reverse roll;
test-time augmentation with flip and rot90 (k = 1, 2, -1) averaged after undoing each; gradients."""
from cutil import init_module, randn, rng

TAGS = ["attention", "views", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    ws, shift = 2, 1
    qkv = init_module(T, T.nn.Linear(4, 12), seed=15)

    def partition(x):
        B, H, W, C = x.shape
        x = x.view(B, H // ws, ws, W // ws, ws, C).permute(0, 1, 3, 2, 4, 5)
        return x.reshape(-1, ws * ws, C)

    def unpartition(w, B, H, W):
        C = w.shape[-1]
        x = w.view(B, H // ws, W // ws, ws, ws, C).permute(0, 1, 3, 2, 4, 5)
        return x.reshape(B, H, W, C)

    def fn(x, img):
        B, H, W, C = x.shape
        shifted = T.roll(x, shifts=(-shift, -shift), dims=(1, 2))
        region = T.zeros(1, H, W, 1)
        cnt = 0
        for hs in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
            for wsl in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                region[:, hs, wsl, :] = cnt
                cnt += 1
        ids = partition(region).squeeze(-1)
        mask = (ids.unsqueeze(1) - ids.unsqueeze(2)).ne(0).float() * -100.0
        win = partition(shifted)
        q, k, v = qkv(win).chunk(3, dim=-1)
        nw = mask.shape[0]
        att = (q @ k.transpose(-2, -1)) / 2.0
        att = att.view(B, nw, ws * ws, ws * ws) + mask.unsqueeze(0)
        out = att.softmax(-1).view(-1, ws * ws, ws * ws) @ v
        y = T.roll(unpartition(out, B, H, W), shifts=(shift, shift), dims=(1, 2))
        tta = (img + T.flip(T.flip(img, [3]), [3]) + T.rot90(T.rot90(img, 1, [2, 3]), -1, [2, 3])
               + T.rot90(img, 2, (2, 3)).rot90(2, (2, 3)) + img.flip(-2).flip(-2)) / 5
        r1 = T.roll(img, 3)
        r2 = img.roll(-1, 0)
        gx, = T.autograd.grad(y.square().sum(), [x])
        return y.detach(), mask, tta, r1, r2, T.rot90(img, 1, [2, 3]), T.fliplr(img[0, 0]), T.flipud(img[0, 0]), gx

    r = rng(172)
    return fn, [(randn(T, r, 2, 4, 4, 4, requires_grad=True), randn(T, r, 2, 3, 4, 5))]
