"""Popularity: the same list for every user. The floor any personalised model must clear."""

from __future__ import annotations

import torch
from torch import Tensor

from hier_pipeline.evaluation.baselines.interactions import DAY, Interactions
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.ranking.metrics import ranking_metrics
from hier_pipeline.ranking.window import EvaluationWindow


class Popularity:
    """score(u, i) = item i's summed event weight in the last `window_days` before the cutoff (all
    history when None): what is popular now. Which stages count is the profile's (`Profiled`): the
    target stage alone is what is being predicted, while every stage at the default ratio drowns a
    rare target in its parent stage (on Complete Journey, ordinary purchases outnumber coupon
    purchases 76:1). `recommend` breaks ties by all-stage popularity.
    """

    def __init__(self, window_days: float | None = 28.0) -> None:
        self.window_days = window_days
        self.counts = torch.zeros(0)

    def fit(self, history: Interactions) -> None:
        recent = torch.ones_like(history.item, dtype=torch.bool)
        if self.window_days is not None:
            recent = history.time >= history.before - self.window_days * DAY
        self.counts = torch.zeros(history.num_items).index_add_(
            0, history.item[recent], history.weight[recent]
        )

    def score(self, users: Tensor) -> Tensor:
        return self.counts.expand(len(users), -1)


def popularity_metrics(
    graph: RelationalGraph, window: EvaluationWindow, before: int, k: int = 10
) -> dict[str, float]:
    """Rank every item by its target-stage events before `before` (all stages break ties), the
    same list for every user."""
    meta, data = graph.metadata, graph.data
    engaged = data[meta.engaged]
    past = engaged.edge_time < before
    target = past & (engaged.edge_stage == len(meta.stages) - 1)
    num_items = int(data[meta.item_type].num_nodes)
    score = torch.bincount(engaged.edge_index[1, target], minlength=num_items).double()
    score += torch.bincount(
        engaged.edge_index[1, past & (engaged.edge_stage >= 0)], minlength=num_items
    ).double() / (1 + int(past.sum()))
    ranking = score.topk(min(k, num_items)).indices
    return ranking_metrics(ranking.expand(len(window.users), -1), window.relevant, ks=(k,))
