"""ChannelShuffle (ShuffleNet): nn.functional.channel_shuffle."""
from .. import functional as F
from .module import Module


class ChannelShuffle(Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
