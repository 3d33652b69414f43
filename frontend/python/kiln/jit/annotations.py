"""kiln.jit.annotations: the typing names torch.jit.annotations re-exports, which model code
imports for its TorchScript annotations (timm's DenseNet: `from torch.jit.annotations import
List`). Outside scripting they are plain typing names."""
from typing import Any, Dict, List, Optional, Tuple, Union

__all__ = ["Any", "BroadcastingList1", "BroadcastingList2", "BroadcastingList3", "Dict", "List", "Optional",
           "Tuple", "Union"]


class _BroadcastingList:
    """`BroadcastingList2[int]`: TorchScript's "an int or a list of two ints"; a List annotation here."""

    def __getitem__(self, item):
        return List[item]


BroadcastingList1 = BroadcastingList2 = BroadcastingList3 = _BroadcastingList()
