"""How sure a figure is: percentile bootstrap intervals over users (Efron & Tibshirani 1993).

Every model is scored on the same users, so two models are compared by a *paired* bootstrap:
each resample draws users with replacement and both models' per-user values of those same users,
so what varies between users (some are easy for everyone) cancels in the difference. An interval
that crosses 0 is a tie at that confidence, whatever the point figures say.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

RESAMPLES = 1000
LEVEL = 0.95


@dataclass(frozen=True)
class Difference:
    """mean(a) - mean(b) over the same users, and its `LEVEL` percentile interval."""

    diff: float
    low: float
    high: float

    def to_json(self) -> dict[str, float | list[float]]:
        return {"diff": self.diff, "ci95": [self.low, self.high]}


def mean_interval(
    values: Tensor, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL
) -> tuple[float, float]:
    """The percentile interval of the mean of `values` (one per user); NaN without users.

    Shapes: values [U]."""
    if len(values) == 0:
        return math.nan, math.nan
    means = values.double()[_draws(len(values), resamples, seed)].mean(dim=1)
    return _percentiles(means, level)


def paired_difference(
    a: Tensor, b: Tensor, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL
) -> Difference:
    """mean(a - b) with its paired percentile interval. Shapes: a, b [U], row u the same user."""
    if a.shape != b.shape:
        raise ValueError(f"paired values differ in shape: {tuple(a.shape)} and {tuple(b.shape)}")
    if len(a) == 0:
        return Difference(math.nan, math.nan, math.nan)
    difference = a.double() - b.double()
    means = difference[_draws(len(a), resamples, seed)].mean(dim=1)
    return Difference(difference.mean().item(), *_percentiles(means, level))


def _draws(users: int, resamples: int, seed: int) -> Tensor:
    """Row r: the users of resample r, drawn with replacement. Shapes: -> [resamples, users]."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(users, (resamples, users), generator=generator)


def _percentiles(means: Tensor, level: float) -> tuple[float, float]:
    tail = (1.0 - level) / 2.0
    bounds = torch.quantile(means, torch.tensor([tail, 1.0 - tail], dtype=means.dtype))
    return bounds[0].item(), bounds[1].item()
