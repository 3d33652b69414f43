"""weight_norm's forward pre-hook (the weight recomputed as g * v / ||v||), in its own module: it
is meant to be traced like user code (it reads the module's parameters by attribute), but that
waits on two fixes (see sweep 12's report): as kiln library code it runs on fakes and each call is
a graph break (correct results). Adding and removing the reparameterization (weight_norm.py)
stay library code."""


def _norm_except_dim(v, dim):
    """||v||_2 over all dims but `dim`, kept as size-1 dims (dim -1: the whole norm)."""
    if dim == -1:
        return v.norm()
    dims = [d for d in range(v.dim()) if d != dim]
    return v.norm(2, dim=dims, keepdim=True) if dims else v.abs()


class WeightNorm:
    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))

    def as_hook(self):
        """The pre-hook registered on the module: a plain function (kiln.compile traces calls of
        functions; a call of a callable object is a graph break), carrying this object."""
        def weight_norm_hook(module, inputs):
            setattr(module, self.name, self.compute_weight(module))
        weight_norm_hook.weight_norm = self
        return weight_norm_hook
