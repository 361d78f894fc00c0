"""Unit vectors with a planted tree: tiny real tensors for the hierarchy and token tests."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def planted_vectors(
    branching: tuple[int, ...] = (3, 2, 2), per_leaf: int = 8, dim: int = 16, seed: int = 0
) -> tuple[Tensor, Tensor]:
    """(vectors [N, dim] unit norm, labels [N, L]): each level's centres scatter around their
    parent's with a shrinking spread, points around their leaf's, so every level is recoverable.
    """
    generator = torch.Generator().manual_seed(seed)
    centres = torch.zeros(1, dim)
    labels = torch.zeros(1, 0, dtype=torch.long)
    spread = 4.0
    for children in branching:
        parent = torch.arange(len(centres)).repeat_interleave(children)
        centres = centres[parent] + spread * torch.randn(len(parent), dim, generator=generator)
        labels = torch.cat([labels[parent], torch.arange(len(parent))[:, None]], dim=1)
        spread /= 3
    point = torch.arange(len(centres)).repeat_interleave(per_leaf)
    vectors = centres[point] + spread * torch.randn(len(point), dim, generator=generator)
    return F.normalize(vectors, dim=1), labels[point]
