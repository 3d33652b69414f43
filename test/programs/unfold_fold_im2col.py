"""im2col with nn.Unfold / F.unfold (padding, stride, dilation) turned into a convolution by a
matmul and checked against conv2d; nn.Fold / F.fold as overlap-add, normalised by folding ones
(the patch-averaging used to rebuild images from overlapping patches); gradients."""
from cutil import randn, rng

TAGS = ["nn", "conv", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    F = T.nn.functional
    unfold = T.nn.Unfold(kernel_size=3, padding=1, stride=1)
    fold = T.nn.Fold(output_size=(6, 7), kernel_size=(2, 3), stride=(2, 1))

    def fn(x, w, patches):
        N, C, H, W = x.shape
        cols = unfold(x)                                            # (N, C*9, H*W)
        out = (w.view(w.shape[0], -1) @ cols).view(N, -1, H, W)
        ref = F.conv2d(x, w, padding=1)
        cols2 = F.unfold(x, kernel_size=(2, 3), dilation=(1, 2), stride=2, padding=(1, 0))
        img = fold(patches)
        norm = fold(T.ones_like(patches))
        avg = img / norm
        back = F.fold(cols2, output_size=(H, W), kernel_size=(2, 3), dilation=(1, 2), stride=2, padding=(1, 0))
        loss = out.square().mean() + avg.sum() + back.pow(2).sum()
        gx, gw, gp = T.autograd.grad(loss, [x, w, patches])
        return out, (out - ref).abs().max(), cols2, img, norm, avg, back, gx, gw, gp

    r = rng(161)
    L = 3 * 5  # output rows (6-2)/2+1=3, cols (7-3)/1+1=5
    return fn, [(randn(T, r, 2, 3, 5, 6, requires_grad=True), randn(T, r, 4, 3, 3, 3, requires_grad=True),
                 randn(T, r, 2, 4 * 6, L, requires_grad=True))]
