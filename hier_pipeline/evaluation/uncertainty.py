"""Intervals for the report's headline figures, from the per-user figures of every model over
the same users: each model's 95% interval, and ours minus each baseline with its paired interval."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from hier_pipeline.evaluation.cold_users import POPULARITY
from hier_pipeline.evaluation.report import OURS
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


def user_segments(
    metrics: Mapping[str, Mapping[str, float]],
    warm: Mapping[str, PerUser],
    cold: Mapping[str, PerUser],
    baselines: Sequence[str],
) -> dict[str, dict[str, dict[str, float]]]:
    """`warm_users`, `cold_users` and `all_users` -> model -> `UNCERTAIN` metric, for ours and
    each baseline. A baseline serves cold users the popularity list (`cold[POPULARITY]`); all
    users are the warm and the cold ones together, each counted once."""
    served = {OURS: cold[OURS], **{name: cold[POPULARITY] for name in baselines}}
    return {
        "warm_users": {n: {m: metrics[n][m] for m in UNCERTAIN} for n in served},
        "cold_users": {n: _means(figures) for n, figures in served.items()},
        "all_users": {
            n: _means({m: torch.cat([warm[n][m], served[n][m]]) for m in UNCERTAIN}) for n in served
        },
    }


def _means(figures: PerUser) -> dict[str, float]:
    return {metric: values.mean().item() for metric, values in figures.items()}
