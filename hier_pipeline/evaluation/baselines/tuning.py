"""Equal-effort tuning: every baseline tries its grid (every profile of `profiles.py` times its own
axes) on the same validation window before t1, and keeps the setting with the best MAP@10 there.
Trained baselines try theirs by successive halving (`tune_trained`): short fits first, longer
ones only for the settings that lead."""

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
    # MAP@k of every setting tried, in the order tried: the grid's order, and for a trained grid
    # (`tune_trained`) rung after rung, each setting with the `STEPS` it was fitted for
    scores: list[tuple[Setting, float]]


# A trained baseline's setting names its fit's length: tuning picks it with the rest, and the
# final refit runs as many steps as the fit that won on the tuning window.
STEPS = "steps"


@dataclass(frozen=True)
class Halving:
    """Successive halving (Jamieson & Talwalkar, AISTATS 2016; Hyperband's inner loop): every fit
    of a trained grid first runs budget / keep**(rungs - 1) steps, the best 1/keep of them
    (rounded up, at least one) run keep times longer, and so on up to the budget. A full grid of
    nine 1000-step fits took 28-49 minutes per trained baseline on Complete Journey, and most of
    its settings were clearly behind after a ninth of the steps. A longer fit continues the
    shorter one of its setting (`Fits`): nine fits to 1000 steps cost 9 x 111 + 3 x 222 + 667 =
    2,332 steps, against 9,000 for the full grid."""

    keep: int = 3
    rungs: int = 3

    def steps(self, budget: int) -> list[int]:
        """The steps of each rung, shortest first, the last the full budget."""
        return [
            max(1, budget // self.keep ** (self.rungs - 1 - rung)) for rung in range(self.rungs)
        ]


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
    scores = [
        (setting, window_map(build(setting), history, window, exclude_seen, k)) for setting in grid
    ]
    return TuningResult(max(scores, key=lambda pair: _ranked(pair[1]))[0], scores)


def tune_trained(
    build: Callable[[Setting], Recommender],
    grid: Sequence[Setting],
    history: Interactions,
    window: EvaluationWindow,
    exclude_seen: bool,
    budget: int,
    shared: Sequence[str] = (),
    halving: Halving | None = None,
    k: int = 10,
) -> TuningResult:
    """`tune` for a trained grid, by successive halving up to `budget` steps (`halving`, default
    `Halving()`): each rung fits `build({**setting, STEPS: the rung's steps})` for the settings
    still in and keeps the best 1/keep of them. Settings that differ only in `shared` axes are
    scored from one fit (a buy-again weight over one embedding) and stay or go together, by
    their best score. The best (setting, steps) over every rung wins (the first of equals), so
    a setting that peaks early is refitted as short as it was when it won: on Complete Journey
    a target-only LightGCN validated better after 333 steps than any setting after 1000."""
    halving = halving or Halving()
    fits: dict[tuple[Any, ...], list[Setting]] = {}  # the settings one fit serves
    for setting in grid:
        fits.setdefault(tuple(i for i in setting.items() if i[0] not in shared), []).append(setting)
    scores: list[tuple[Setting, float]] = []
    alive = list(fits.values())
    for steps in halving.steps(budget):
        fit_scores = []
        for settings in alive:
            tried = [{**setting, STEPS: steps} for setting in settings]
            rung = [(s, window_map(build(s), history, window, exclude_seen, k)) for s in tried]
            scores.extend(rung)
            fit_scores.append(max(_ranked(score) for _, score in rung))
        leading = sorted(range(len(alive)), key=lambda fit: -fit_scores[fit])
        # grid order again: fits on one profiled history stay in a row (`Memo`)
        alive = [alive[fit] for fit in sorted(leading[: math.ceil(len(alive) / halving.keep)])]
    return TuningResult(max(scores, key=lambda pair: _ranked(pair[1]))[0], scores)


def window_map(
    recommender: Recommender,
    history: Interactions,
    window: EvaluationWindow,
    exclude_seen: bool,
    k: int,
) -> float:
    """MAP@k on `window` of `recommender` fit on `history`."""
    topk = fit_and_rank(recommender, history, window, k, exclude_seen)
    return ranking_metrics(topk, window.relevant, (k,))[f"map@{k}"]


def _ranked(score: float) -> float:
    """A score to rank by: NaN below every number."""
    return -math.inf if math.isnan(score) else score
