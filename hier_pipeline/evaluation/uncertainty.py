"""Intervals for the report's headline figures, from the final rankings of every model over the
same users: each model's 95% interval, and ours minus each baseline with its paired interval."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from torch import Tensor

from hier_pipeline.ranking.bootstrap import Difference, mean_interval, paired_difference
from hier_pipeline.ranking.metrics import UserItems, per_user_metrics

# The figures that carry an interval: the report's headline pair.
UNCERTAIN = ("map@10", "recall@50")


def intervals(
    rankings: Mapping[str, Tensor], relevant: UserItems, seed: int
) -> dict[str, dict[str, tuple[float, float]]]:
    """model -> metric -> 95% interval of its mean over users. Shapes: rankings [U, >= 50]."""
    return {
        name: {metric: mean_interval(values[metric], seed=seed) for metric in UNCERTAIN}
        for name, values in _per_user(rankings, relevant).items()
    }


def versus(
    rankings: Mapping[str, Tensor],
    relevant: UserItems,
    ours: str,
    baselines: Sequence[str],
    seed: int,
) -> dict[str, dict[str, Difference]]:
    """baseline -> metric -> `ours` minus that baseline, with its paired 95% interval."""
    per_user = _per_user({name: rankings[name] for name in (ours, *baselines)}, relevant)
    return {
        baseline: {
            metric: paired_difference(per_user[ours][metric], per_user[baseline][metric], seed=seed)
            for metric in UNCERTAIN
        }
        for baseline in baselines
    }


def _per_user(rankings: Mapping[str, Tensor], relevant: UserItems) -> dict[str, dict[str, Tensor]]:
    return {name: per_user_metrics(topk, relevant, (10, 50)) for name, topk in rankings.items()}
