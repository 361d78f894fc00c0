"""Item-level priors as ranker signals: a score per item, the same for every user.

Why. The counts say how popular an item is only once it has events; a new item has none, so the
ranker sees it as unpopular. A prior computed from other items (here: what its nearest items by
content sell, `neighbours_mean`) is defined for a new item as for an old one, so the ranker can
learn its weight on old items and carry it over (issue 18, item 3). As a signal its top list is
one more candidate list, the same for every user.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class ItemPrior:
    """A `Signal` scoring every item alike for every user. Shapes: values [I]; rows [R] -> [R, I]
    (a view: no copy per user)."""

    values: Tensor

    def __call__(self, rows: Tensor) -> Tensor:
        return self.values.expand(len(rows), -1)


def neighbours_mean(similarity: Tensor, values: Tensor) -> Tensor:
    """Per item, the similarity-weighted mean of `values` over its neighbours, itself left out (so
    an item's own events never predict it); 0 for an item without a neighbour.

    Shapes: similarity [I, I] sparse (row i: item i's neighbours), values [I] -> [I]."""
    entries = similarity.to_sparse_coo().coalesce()
    row, column = entries.indices()
    weight = entries.values().float() * (row != column)
    num_items = len(values)
    total = torch.zeros(num_items).index_add_(0, row, weight * values[column].float())
    mass = torch.zeros(num_items).index_add_(0, row, weight)
    return torch.where(mass > 0, total / mass.clamp_min(torch.finfo(torch.float32).tiny), 0.0)
