"""Baselines scored on the same window and candidates as the model."""

from __future__ import annotations

import torch

from hier_pipeline.evaluation.metrics import ranking_metrics
from hier_pipeline.evaluation.window import EvaluationWindow
from hier_pipeline.graph.build import RelationalGraph


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
