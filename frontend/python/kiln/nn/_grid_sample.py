"""affine_grid and grid_sample (spatial transformer networks, flow warping), as compositions of
ops: sampling is a gather of the four neighbouring pixels of each grid point, weighted
bilinearly (or the nearest one), so the input's gradient is the gather's scatter and the grid's
gradient comes through the weights, as torch's formulas give. 4-D inputs; bicubic and 5-D
(volumetric) sampling raise NotImplementedError."""
from .. import _C

_ops = _C._ops

__all__ = ["affine_grid", "grid_sample"]


def _base_coords(n, align_corners, device, dtype):
    """The normalized coordinates of n pixel centres (align_corners False) or edges (True)."""
    if n <= 1:
        return _ops.zeros([max(n, 1)], dtype=dtype, device=device)
    steps = _ops.arange(n, dtype=dtype, device=device)
    if align_corners:
        return steps * (2.0 / (n - 1)) - 1.0
    return (steps * 2.0 + 1.0) / n - 1.0


def affine_grid(theta, size, align_corners=None):
    """The (N, H, W, 2) sampling grid of the affine maps theta (N, 2, 3) for an output of
    size (N, C, H, W): each output pixel's normalized (x, y), transformed."""
    if align_corners is None:
        align_corners = False
    if not theta.dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = list(size)
    if len(size) == 5:
        raise NotImplementedError("affine_grid: 3-D (5-D size) grids are not implemented in kiln")
    if len(size) != 4:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if theta.dim() != 3 or tuple(theta.shape[1:]) != (2, 3):
        raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. Got "
                         f"{list(theta.shape)}.")
    n, _, h, w = size
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    xs = _base_coords(w, align_corners, theta.device, theta.dtype)
    ys = _base_coords(h, align_corners, theta.device, theta.dtype)
    base = _ops.stack([xs.reshape([1, w]).expand([h, w]), ys.reshape([h, 1]).expand([h, w]),
                       _ops.ones([h, w], dtype=theta.dtype, device=theta.device)], 2)  # h, w, 3
    grid = base.reshape([1, h * w, 3]).matmul(theta.transpose(1, 2))  # n, h*w, 2
    return grid.reshape([n, h, w, 2])


def _unnormalize(coord, size, align_corners):
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _reflect(coord, twice_low, twice_high):
    """Reflects coordinates into [twice_low / 2, twice_high / 2] (torch's reflect_coordinates)."""
    if twice_low == twice_high:
        return _ops.zeros_like(coord)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    x = (coord - low).abs()
    extra = x.fmod(span)
    flips = (x / span).floor()
    return _ops.where(flips.fmod(2) == 0, extra + low, span - extra + low)


def _source_coord(coord, size, padding_mode, align_corners):
    x = _unnormalize(coord, size, align_corners)
    if padding_mode == "border":
        return x.clamp(0, size - 1)
    if padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
        return x.clamp(0, size - 1)
    return x


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """input (N, C, H, W) sampled at grid (N, Ho, Wo, 2) of normalized (x, y) in [-1, 1]:
    (N, C, Ho, Wo). padding_mode says what lies outside: zeros, the border pixel, or the
    reflection."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        align_corners = False
    if input.dim() == 5:
        raise NotImplementedError("grid_sample: 5-D (volumetric) inputs are not implemented in kiln")
    if mode == "bicubic":
        raise NotImplementedError("grid_sample: mode='bicubic' is not implemented in kiln")
    if input.dim() != 4 or grid.dim() != 4 or grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected 4D input and grid with same batch size and grid of shape "
                           f"(N, H, W, 2), but got input with sizes {list(input.shape)} and grid with sizes "
                           f"{list(grid.shape)}")
    n, c, h, w = input.shape
    ho, wo = grid.shape[1], grid.shape[2]
    x = _source_coord(grid[..., 0], w, padding_mode, align_corners)  # n, ho, wo
    y = _source_coord(grid[..., 1], h, padding_mode, align_corners)
    flat = input.reshape([n, c, h * w])

    def tap(xi, yi):
        """input at integer (xi, yi) (n, ho, wo), 0 where outside: (n, c, ho, wo)."""
        inside = (xi >= 0) & (xi <= w - 1) & (yi >= 0) & (yi <= h - 1)
        index = (yi.clamp(0, h - 1) * w + xi.clamp(0, w - 1)).to(_C.int64).reshape([n, 1, ho * wo])
        values = flat.gather(2, index.expand([n, c, ho * wo])).reshape([n, c, ho, wo])
        return values * inside.to(input.dtype).unsqueeze(1)

    if mode == "nearest":
        return tap(x.round(), y.round())
    x0, y0 = x.floor(), y.floor()
    wx1, wy1 = x - x0, y - y0
    wx0, wy0 = 1 - wx1, 1 - wy1
    return (tap(x0, y0) * (wx0 * wy0).unsqueeze(1) + tap(x0 + 1, y0) * (wx1 * wy0).unsqueeze(1)
            + tap(x0, y0 + 1) * (wx0 * wy1).unsqueeze(1) + tap(x0 + 1, y0 + 1) * (wx1 * wy1).unsqueeze(1))
