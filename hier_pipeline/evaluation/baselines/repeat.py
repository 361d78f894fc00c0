"""Personal repeat ("buy again"): the user's own past items, recent and deep events first.

In grocery most purchases are re-purchases, which makes this the strongest simple baseline there.
"""

from __future__ import annotations

from torch import Tensor

from hier_pipeline.evaluation.baselines.interactions import Interactions, PairMatrix


class Repeat:
    """score(u, i) = sum over u's events on i of stage weight x 2^(-age / half_life_days), less
    the profile's weight per "not interested" event; items the user never touched score 0 and fall
    back to popularity through `recommend`'s tie-break."""

    def __init__(self, half_life_days: float = 30.0) -> None:
        self.half_life_days = half_life_days
        self.pairs: PairMatrix | None = None

    def fit(self, history: Interactions) -> None:
        self.pairs = history.pair_weights(self.half_life_days)

    def score(self, users: Tensor) -> Tensor:
        assert self.pairs is not None, "fit first"
        return self.pairs.dense(users)
