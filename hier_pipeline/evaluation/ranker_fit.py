"""Fitting a model's ranker on the window before serving: on the target stage's own events or,
where they are too few (a small database), on the stages above it too, judged by the target's.

Whether a shallower stage says what the target will be is a property of the data (on a grocery
sample, ordinary purchases teach staples, not coupon purchases), so the window's users' own
target events judge such a ranker: ranked by the fits that held each user out
(`InterestRanker.cross_fitted`) and by the model's own score; the better mean AP@k serves. A
margin in standard errors was tried first, for the ranker (the own score early-stopped on this
window, so its figure here is optimistic): on a 10% household sample of Complete Journey it kept
a ranker at a sixth of the own score's figure, which lost on the test window
(docs/evaluation.md, small databases).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.ranker.counts import Counts
from hier_pipeline.ranker.paths import PREFIX as PATH_PREFIX
from hier_pipeline.ranker.ranker import CHUNK, InterestRanker, RankerConfig, Signal, TooFewLabels
from hier_pipeline.ranker.selection import candidate_ap
from hier_pipeline.ranking.window import target_window, window_items

_NOT_BETTER = (
    "a ranker on shallower stages' labels ranks the held-out target events no better than the "
    "model's own score (held_out_target_map)"
)

Setting = dict[str, object]


@dataclass(frozen=True)
class FitWindow:
    """[start, end), its users with an event of the labelling stages (at most `max_users`, a
    subset drawn by `seed`)."""

    graph: RelationalGraph
    start: int
    end: int
    max_users: int
    seed: int


def fit_ranker(
    window: FitWindow,
    config: RankerConfig,
    counts: Counts,
    signals_of: Callable[[Tensor], Mapping[str, Signal]],
    own_of: Callable[[Tensor], Signal],
    behavioural: Collection[str] = (),
) -> tuple[InterestRanker | None, Setting]:
    """The ranker fitted on `window` and its setting (module doc); None where the model's own
    score ranks instead. `signals_of(users)` and `own_of(users)` score those users as of the
    window's start, the counts are as of it too."""
    graph = window.graph
    stages = graph.metadata.stages
    too_few = ""
    for depth in range(1, len(stages) + 1):
        users = target_window(graph, window.start, window.end, window.max_users, window.seed, depth)
        judged = window_items(graph, users.users, window.start, window.end)
        ranker = InterestRanker(config)
        signals = signals_of(users.users)
        # an item listed after the window could not be engaged with in it: no negative example
        candidates = ranker.candidates(counts, users.users, signals, behavioural, window.end)
        try:
            ranker.fit(candidates, users.relevant, judged)
        except TooFewLabels as error:
            too_few = too_few or str(error)
            continue
        setting: Setting = {
            "ranker": "fitted",
            "labels": stages[-depth:],
            "relevant": ranker.fit_relevant,
            "leaves": ranker.leaves,
            "held_out_map": ranker.held_out_map,
            "paths": [name for name in signals if name.startswith(PATH_PREFIX)],
        }
        if depth == 1:
            return ranker, setting
        if ranker.held_out_folds:  # else nothing to judge it on: one tree size, no folds
            rows, items = candidates.rows, candidates.items
            own = _pair_scores(own_of(users.users), rows, items)
            every, k = np.arange(len(users.users)), config.selection_k
            ranked_ap, own_ap = (
                candidate_ap(rows.numpy(), items.numpy(), scores, judged, every, k)
                for scores in (ranker.cross_fitted(candidates), own)
            )
            setting["held_out_target_map"] = {
                "ranker": float(ranked_ap.mean()),
                "own_score": float(own_ap.mean()),
                "users": len(own_ap),
            }
            if ranked_ap.mean() > own_ap.mean():
                return ranker, setting
        return None, {**setting, "ranker": f"none, own score: {too_few}; " + _NOT_BETTER}
    return None, {"ranker": f"none, own score: {too_few}"}


def _pair_scores(signal: Signal, rows: Tensor, items: Tensor) -> np.ndarray:
    """`signal`'s score of each (row, item), `CHUNK` rows at a time. Shapes: rows (ascending),
    items [P] -> [P]."""
    scores = torch.zeros(len(rows))
    last = int(rows[-1]) + 1 if len(rows) else 0
    for begin in range(0, last, CHUNK):
        lo, hi = torch.searchsorted(rows, torch.tensor([begin, begin + CHUNK])).tolist()
        block = torch.arange(begin, min(begin + CHUNK, last))
        scores[lo:hi] = signal(block)[rows[lo:hi] - begin, items[lo:hi]]
    return scores.numpy()
