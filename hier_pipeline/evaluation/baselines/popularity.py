"""Popularity: the same list for every user. The floor any personalised model must clear."""

from __future__ import annotations

import torch
from torch import Tensor

from hier_pipeline.evaluation.baselines.interactions import DAY, Interactions
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.ranking.metrics import ranking_metrics
from hier_pipeline.ranking.window import EvaluationWindow


class Popularity:
    """score(u, i) = item i's target-stage events in the last `window_days` before the cutoff (all
    history when None): what is popular now, for the behaviour being predicted. `recommend` breaks
    ties by all-stage popularity. Counting every stage instead, weighted, drowns a rare target in
    its parent stage: on Complete Journey, ordinary purchases outnumber coupon purchases 76:1.
    """

    def __init__(self, window_days: float | None = 28.0) -> None:
        self.window_days = window_days
        self.counts = torch.zeros(0)

    def fit(self, history: Interactions) -> None:
        recent = history.stage == history.num_stages - 1
        if self.window_days is not None:
            recent &= history.time >= history.before - self.window_days * DAY
        self.counts = torch.bincount(history.item[recent], minlength=history.num_items).float()

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
