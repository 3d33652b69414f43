"""AdamW: Adam with decoupled weight decay (torch.optim.AdamW)."""
from .adam import Adam

__all__ = ["AdamW"]


class AdamW(Adam):
    """Adam whose weight decay shrinks the parameters directly (param *= 1 - lr * weight_decay)
    instead of adding to the gradient; default weight_decay 1e-2. See Adam for the update."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable, differentiable=differentiable,
                         fused=fused, decoupled_weight_decay=True)

    # A state saved by AdamW always loads with decoupled weight decay.
    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
