"""The per-edge inputs of the bias-aware attention, kept together so that they travel as one value."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor


@dataclass(frozen=True)
class EdgeFeatures:
    """Shapes: ``index`` [2, E] (row 0 source, row 1 destination); every other field [E].

    ``stage`` is the funnel stage (``-1`` none), ``age`` the seconds between the edge and its root
    seed's time, ``hop`` the sampling hop, ``source_log_degree`` log1p of the source's degree.
    """

    index: Tensor
    relation: Tensor
    stage: Tensor
    age: Tensor
    hop: Tensor
    source_log_degree: Tensor

    @staticmethod
    def empty() -> EdgeFeatures:
        none, long = torch.zeros(0), torch.zeros(0, dtype=torch.long)
        return EdgeFeatures(torch.zeros(2, 0, dtype=torch.long), long, long, none, long, none)

    @property
    def source(self) -> Tensor:
        return self.index[0]

    @property
    def destination(self) -> Tensor:
        return self.index[1]

    def __len__(self) -> int:
        return int(self.index.size(1))

    def to(self, device: torch.device) -> EdgeFeatures:
        return EdgeFeatures(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    def select(self, mask: Tensor) -> EdgeFeatures:
        """The edges where ``mask`` [E] (bool or indices) holds, every field alike."""
        return EdgeFeatures(**{f.name: getattr(self, f.name)[..., mask] for f in fields(self)})
