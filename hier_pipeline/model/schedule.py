"""The learning rate and the teacher's EMA momentum along a training run's step budget.

Why. At one constant rate the validation figure of a longer run wanders at the level it reached
in a few hundred steps, and early stopping ends it on a lucky epoch (measured: 12 epochs of 60
steps stopped at epoch 5-6, no better than 4 of 30). A short linear warm-up keeps AdamW's first,
poorly estimated steps small; a cosine decay to `min_lr_ratio` of the rate lets the last epochs
settle instead of wander (SGDR, Loshchilov & Hutter 2017). The teacher's momentum rises by the same
cosine from its start to its end value (BYOL, Grill et al. 2020): it follows the student quickly
while the student moves most, and averages over more steps once it moves little.

Both are pure functions of the step index, so a run resumed from a checkpoint continues the
same curve from the index it stopped at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Schedule:
    """`total_steps`: the run's budget (epochs x steps per epoch), where the cosine ends; early
    stopping may end the run before it. With `cosine` off the rate stays constant (after the
    warm-up) and the momentum stays at `ema_start`."""

    total_steps: int
    warmup_steps: int = 0
    cosine: bool = True
    min_lr_ratio: float = 0.1
    ema_start: float = 0.99
    ema_end: float = 0.99

    def __post_init__(self) -> None:
        if self.total_steps < 1 or not 0 <= self.warmup_steps <= self.total_steps:
            raise ValueError(
                f"need 0 <= warmup_steps <= total_steps and total_steps >= 1, got "
                f"{self.warmup_steps} and {self.total_steps}"
            )
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")

    def lr_factor(self, step: int) -> float:
        """The share of the configured learning rate at `step` (0-based)."""
        if step < self.warmup_steps:
            return (step + 1) / (self.warmup_steps + 1)
        if not self.cosine:
            return 1.0
        return self.min_lr_ratio + (1.0 - self.min_lr_ratio) * self._fall(step)

    def ema_momentum(self, step: int) -> float:
        """The teacher's momentum after `step`."""
        if not self.cosine:
            return self.ema_start
        return self.ema_end - (self.ema_end - self.ema_start) * self._fall(step)

    def _fall(self, step: int) -> float:
        """1 at the end of the warm-up, falling by a half cosine to 0 at the last step."""
        span = max(1, self.total_steps - 1 - self.warmup_steps)
        done = min(1.0, max(0.0, (step - self.warmup_steps) / span))
        return 0.5 * (1.0 + math.cos(math.pi * done))
