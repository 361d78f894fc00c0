"""Intervals for the report's headline figures, from the per-user figures of every model over
the same users: each model's 95% interval, and ours minus each baseline with its paired interval."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from torch import Tensor

from hier_pipeline.ranking.bootstrap import Difference, mean_interval, paired_difference
from hier_pipeline.ranking.metrics import UserItems, per_user_metrics

# The figures that carry an interval: the report's headline pair.
UNCERTAIN = ("map@10", "recall@50")

PerUser = dict[str, Tensor]  # metric -> one value per user with something relevant


def per_user_figures(rankings: Mapping[str, Tensor], relevant: UserItems) -> dict[str, PerUser]:
    """model -> `UNCERTAIN` metric -> per-user values. Shapes: rankings [U, >= 50]."""
    return {
        name: {
            m: v for m, v in per_user_metrics(topk, relevant, (10, 50)).items() if m in UNCERTAIN
        }
        for name, topk in rankings.items()
    }


def intervals(
    figures: Mapping[str, PerUser], seed: int
) -> dict[str, dict[str, tuple[float, float]]]:
    """model -> metric -> 95% interval of its mean over users."""
    return {
        name: {metric: mean_interval(values, seed=seed) for metric, values in per_user.items()}
        for name, per_user in figures.items()
    }


def versus(
    figures: Mapping[str, PerUser], ours: str, baselines: Sequence[str], seed: int
) -> dict[str, dict[str, Difference]]:
    """baseline -> metric -> `ours` minus that baseline, with its paired 95% interval."""
    return {
        baseline: {
            metric: paired_difference(figures[ours][metric], figures[baseline][metric], seed=seed)
            for metric in figures[ours]
        }
        for baseline in baselines
    }
