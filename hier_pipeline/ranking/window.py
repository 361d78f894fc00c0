"""What a model is judged on, and what the ranker fits on: the target-stage events of a time
window, per user (for a fit, the deeper stages' where the target alone holds too few)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.ranking.metrics import UserItems


@dataclass(frozen=True)
class EvaluationWindow:
    """Shapes: users [U] (graph node ids); relevant: U rows over all items."""

    users: Tensor
    relevant: UserItems
    start: int
    end: int


def target_window(
    graph: RelationalGraph, start: int, end: int, max_users: int, seed: int = 0
) -> EvaluationWindow:
    """Users with a target-stage event in [start, end) (a fixed random subset when there are more
    than `max_users`) and, for each, the items of those events."""
    return stage_window(graph, start, end, max_users, seed, len(graph.metadata.stages) - 1)


def stage_window(
    graph: RelationalGraph, start: int, end: int, max_users: int, seed: int, from_stage: int
) -> EvaluationWindow:
    """`target_window` over the funnel stages `from_stage` and deeper (negative feedback never)."""
    meta, data = graph.metadata, graph.data
    engaged = data[meta.engaged]
    chosen = (
        (engaged.edge_time >= start)
        & (engaged.edge_time < end)
        & (engaged.edge_stage >= from_stage)
        & (engaged.edge_stage < len(meta.stages))
    )
    users = torch.unique(engaged.edge_index[0, chosen])
    if len(users) > max_users:
        generator = torch.Generator().manual_seed(seed)
        users = users[torch.randperm(len(users), generator=generator)[:max_users]].sort().values
    position = torch.full((int(data[meta.user_type].num_nodes),), -1, dtype=torch.long)
    position[users] = torch.arange(len(users))
    pairs = chosen & (position[engaged.edge_index[0]] >= 0)
    num_items = int(data[meta.item_type].num_nodes)
    relevant = UserItems.from_pairs(
        position[engaged.edge_index[0, pairs]], engaged.edge_index[1, pairs], len(users), num_items
    )
    return EvaluationWindow(users, relevant, start, end)


def label_window(
    graph: RelationalGraph, start: int, end: int, max_users: int, seed: int, min_pairs: int
) -> tuple[EvaluationWindow, int]:
    """The window a learner fits on, and its shallowest stage: the target stage's where it holds
    `min_pairs` (user, item) pairs, else the target's and the stages above it, one stage more
    at a time until they do (all stages where none does).

    Why. On a small database the target stage of one window can hold a few dozen purchases,
    too few to fit on, while the clicks and carts of the same users say what they want next:
    a synthetic world of 200 users had 19 purchase pairs and 210 click-or-deeper pairs in the
    window (docs/evaluation.md). Fitting on the deeper stages first keeps the target's meaning
    wherever the data allows it."""
    for stage in range(len(graph.metadata.stages) - 1, -1, -1):
        window = stage_window(graph, start, end, max_users, seed, stage)
        if int(window.relevant.counts().sum()) >= min_pairs:
            break
    return window, stage
