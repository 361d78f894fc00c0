"""The tree's finest codes in the space the tree was grown in: how an item that arrives after
the tree grew gets its semantic ID.

The finest codes quantise the items' fused vectors (content with behaviour, `fusion.py`), so a
new product's code is the nearest finest codeword to its own fused vector: fixed mostly by its
text and image, which it has before anyone engages with it (TIGER's "a new item gets a code
from its content"), refined by its embedding. Its coarser tokens are that code's ancestors, as
they are for the tree's own items. Descending the tree by the embedding alone (`descend`) would
place it in the model's space only, where a product without events is least known.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from hier_pipeline.interests.fusion import ItemFusion

CHUNK = 4096  # items scored against the codebook at once


@dataclass(frozen=True)
class ItemCodebook:
    """Shapes: centroids [C, D] unit norm, the mean fused vector of the items of the tree's
    finest primitive `first + c` in row c."""

    fusion: ItemFusion
    centroids: Tensor
    first: int  # the tree's index of its first finest primitive

    def finest(self, behaviour: Tensor, content: Mapping[str, Tensor] | None) -> Tensor:
        """Each item's nearest finest code, as a tree index. Shapes: behaviour [N, d], content
        rows aligned with it -> [N]."""
        fused = self.fusion(behaviour, content)
        nearest = [
            (fused[start : start + CHUNK] @ self.centroids.T).argmax(dim=1)
            for start in range(0, len(fused), CHUNK)
        ]
        found = torch.cat(nearest) if nearest else torch.zeros(0, dtype=torch.long)
        return found + self.first

    def to_payload(self) -> dict[str, Any]:
        """Plain tensors and numbers, for `torch.load(weights_only=True)`."""
        return {
            "content_weight": self.fusion.content_weight,
            "means": self.fusion.means,
            "centroids": self.centroids,
            "first": self.first,
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> ItemCodebook:
        fusion = ItemFusion(float(payload["content_weight"]), dict(payload["means"]))
        return cls(fusion, payload["centroids"], int(payload["first"]))
