"""Profiles: which funnel stages build a user's profile, how much each weighs, and whether explicit
"not interested" feedback subtracts. The one place that defines them; every baseline tunes over them.

Why a grid axis and not a constant: the right mix depends on the funnel. On Complete Journey
ordinary purchases outnumber coupon purchases 76:1, so the fixed 0.3 ratio made 96% of a profile
ordinary purchases, and target-stage-only profiles lifted ItemKNN's validation MAP@10 from 0.001 to
0.033; on a funnel whose target is dense the shallow stages may help instead. The tuning window
decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from hier_pipeline.model.losses import default_stage_weights


@dataclass(frozen=True)
class Profile:
    """Stage s weighs ``stage_ratio ** (S - 1 - s)`` (`default_stage_weights`; 0: the target stage
    alone); each "not interested" event adds ``-negative`` to its (user, item) pair (0: ignored)."""

    stage_ratio: float
    negative: float = 0.0

    def stage_weights(self, num_stages: int) -> Tensor:
        """Shapes: -> [num_stages] float32, the target (deepest) stage 1.0."""
        return default_stage_weights(num_stages, self.stage_ratio)


# name -> stage ratio: the target stage only; the target with a little of the stage above it;
# every stage at the model's default ratio (what every baseline used before issue 17).
STAGE_RATIOS: dict[str, float] = {"target": 0.0, "target_heavy": 0.03, "all": 0.3}
# Weights of explicit negative feedback, for the baselines that can subtract it (0 first: a
# history without negatives makes the others identical, and `grid` drops them there).
NEGATIVE_WEIGHTS: tuple[float, ...] = (0.0, 1.0)

PROFILE_KEYS = ("profile", "negative")


def profile_of(setting: Mapping[str, Any]) -> Profile:
    """The profile a grid setting names (`profile`, and `negative` where the baseline uses it)."""
    return Profile(STAGE_RATIOS[setting["profile"]], float(setting.get("negative", 0.0)))


def profiled_grid(
    own: dict[str, tuple[object, ...]], negatives: bool = False
) -> tuple[dict[str, object], ...]:
    """Every profile (outermost: settings sharing a profiled history run in a row, so what depends
    on it alone is computed once, `Memo`) times the product of a baseline's own axes; with
    `negatives`, each profile also with every `NEGATIVE_WEIGHTS`."""
    settings: list[dict[str, object]] = [{}]
    for name, values in own.items():
        settings = [{**setting, name: value} for setting in settings for value in values]
    negative_weights = NEGATIVE_WEIGHTS if negatives else (None,)
    return tuple(
        {"profile": profile, **({} if negative is None else {"negative": negative}), **setting}
        for profile in STAGE_RATIOS
        for negative in negative_weights
        for setting in settings
    )
