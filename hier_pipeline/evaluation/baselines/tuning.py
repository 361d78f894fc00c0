"""Equal-effort tuning: every baseline tries its grid (every profile of `profiles.py` times its own
axes) on the same validation window before t1, and keeps the setting with the best MAP@10 there."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from hier_pipeline.evaluation.baselines.interactions import Interactions
from hier_pipeline.evaluation.baselines.recommender import Recommender, recommend
from hier_pipeline.ranking.metrics import ranking_metrics
from hier_pipeline.ranking.window import EvaluationWindow

Setting = dict[str, Any]


@dataclass(frozen=True)
class TuningResult:
    best: Setting
    scores: list[tuple[Setting, float]]  # MAP@k of every setting, in grid order


def fit_and_rank(
    recommender: Recommender,
    history: Interactions,
    window: EvaluationWindow,
    k: int,
    exclude_seen: bool,
) -> Tensor:
    """Fit on `history`, then the top k of every window user over all items; popularity in the
    history breaks ties, and with `exclude_seen` items the user bought before are no candidates.

    Shapes: -> [U, k] long.
    """
    recommender.fit(history)
    exclude = history.target_items(window.users) if exclude_seen else None
    return recommend(recommender, window.users, k, history.popularity(), exclude)


def tune(
    build: Callable[[Setting], Recommender],
    grid: Sequence[Setting],
    history: Interactions,
    window: EvaluationWindow,
    exclude_seen: bool,
    k: int = 10,
) -> TuningResult:
    """Fit `build(setting)` on `history` for every setting, score MAP@k on `window` (which must
    come after the history), keep the best (the first of equals; NaN never wins)."""
    scores = []
    for setting in grid:
        topk = fit_and_rank(build(setting), history, window, k, exclude_seen)
        scores.append((setting, ranking_metrics(topk, window.relevant, (k,))[f"map@{k}"]))
    best = max(scores, key=lambda pair: -math.inf if math.isnan(pair[1]) else pair[1])
    return TuningResult(best[0], scores)
